"""``ragaudit index``: load a corpus into a search backend."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
)

from ragaudit.cli._app import ConfigOpt, SetOpt, _overrides, app, console, err
from ragaudit.config import load_config, set_path
from ragaudit.errors import RagauditError
from ragaudit.secrets import install_log_filter


@app.command("index")
def index_cmd(
    corpus: Annotated[
        Path, typer.Argument(help="JSONL or Parquet file, or a folder of .txt/.md files.")
    ],
    config: ConfigOpt = None,
    backend: Annotated[
        str | None,
        typer.Option(
            "--backend",
            help="A backend that can be indexed into: local, elasticsearch, opensearch or a "
            "plugin's (default: collect.backend).",
        ),
    ] = None,
    index_name: Annotated[
        str | None,
        typer.Option(
            "--index", help="Index to write (the local backend's table); default from the config."
        ),
    ] = None,
    chunk_size: Annotated[
        int, typer.Option("--chunk-size", min=0, help="Units per chunk; 0 keeps documents whole.")
    ] = 0,
    chunk_overlap: Annotated[
        int, typer.Option("--chunk-overlap", min=0, help="Units shared by neighbouring chunks.")
    ] = 0,
    chunk_unit: Annotated[
        str,
        typer.Option(
            "--chunk-unit", help="chars, or tokens (a CJK character or a Latin word each)."
        ),
    ] = "chars",
    keep_context: Annotated[
        bool,
        typer.Option(
            "--keep-context/--no-keep-context", help="Start each chunk with its title and headings."
        ),
    ] = False,
    metadata: Annotated[
        list[str] | None,
        typer.Option("--metadata", "-m", help="key=value added to every document (repeatable)."),
    ] = None,
    id_field: Annotated[
        str, typer.Option("--id-field", help="Id field/column of a JSONL or Parquet corpus.")
    ] = "id",
    text_field: Annotated[
        str, typer.Option("--text-field", help="Text field/column of a JSONL or Parquet corpus.")
    ] = "text",
    recreate: Annotated[
        bool, typer.Option("--recreate", help="Drop the index first (after changing chunking).")
    ] = False,
    batch_size: Annotated[
        int, typer.Option("--batch-size", min=1, help="Documents per write.")
    ] = 500,
    sets: SetOpt = None,
) -> None:
    """Load a corpus into a search backend (chunked, with metadata); re-running it is idempotent."""
    from ragaudit.cache import gateway_for
    from ragaudit.runfolder import RunFolder
    from ragaudit.search import Chunking, capabilities, index_corpus

    install_log_filter()
    overrides = _overrides(sets=sets)
    if backend is not None:
        set_path(overrides, "collect.backend", backend)
    cfg = load_config(config, overrides)
    setting = capabilities(cfg.collect.backend).index_setting
    if index_name is not None and setting is not None:
        set_path(overrides, setting, index_name)
        cfg = load_config(config, overrides)
    extra: dict[str, str] = {}
    for item in metadata or []:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise RagauditError(
                f"--metadata {item}: expected key=value, e.g. --metadata collection=handbook"
            )
        extra[key.strip()] = value
    try:
        chunking = Chunking(
            size=chunk_size or None,
            overlap=chunk_overlap,
            unit=chunk_unit,
            keep_context=keep_context,
        )
    except ValueError as exc:
        raise RagauditError(f"--chunk-*: {exc}") from None
    with Progress(
        TextColumn("{task.description:<32}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err,
    ) as bar:
        task = bar.add_task(f"index: {cfg.collect.backend}", total=1)
        report = index_corpus(
            cfg,
            corpus,
            chunking,
            metadata=extra,
            id_field=id_field,
            text_field=text_field,
            recreate=recreate,
            batch_size=batch_size,
            make_gateway=lambda: gateway_for(cfg),
            # Embedding calls are logged beside the runs, where `cache stats` finds them.
            calls_dir=RunFolder(cfg.runs_root, "index").calls_dir,
            on_start=lambda n: bar.update(task, total=max(n, 1)),
            on_batch=lambda n: bar.advance(task, n),
        )
    chunked = f" as {report.chunks} chunks" if chunking.size else ""
    console.print(
        f"indexed {report.documents} documents{chunked} into {report.target}: "
        f"{report.written} written, {report.total} in the index",
        soft_wrap=True,
    )
