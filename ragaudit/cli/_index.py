"""``ragaudit index``: load a corpus into a search backend."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Annotated

import typer
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from ragaudit import progress
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
    started = time.monotonic()
    with _progress(f"index: {cfg.collect.backend}") as (on_start, on_batch):
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
            on_start=on_start,
            on_batch=on_batch,
        )
    seconds = time.monotonic() - started
    chunked = f" as {report.chunks} chunks" if chunking.size else ""
    size = f", {report.size_bytes / 1e6:.1f} MB on disk" if report.size_bytes is not None else ""
    console.print(
        f"indexed {report.documents} documents{chunked} into {report.target} in {seconds:.0f} s: "
        f"{report.written} written, {report.total} in the index{size}",
        soft_wrap=True,
    )


@contextlib.contextmanager
def _progress(
    label: str,
) -> Iterator[tuple[Callable[[int], None], Callable[[int], None]]]:
    """``on_start(total)`` and ``on_batch(n)`` that show documents done, rate and time left.

    A terminal gets a live bar; a log gets a plain line every few seconds (and one while a
    batch is still embedding), since a bar prints nothing off a terminal until it ends.
    """
    if err.is_terminal:
        with Progress(
            TextColumn("{task.description:<24}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[rate]}"),
            TimeElapsedColumn(),
            TextColumn("left"),
            TimeRemainingColumn(),
            console=err,
        ) as bar:
            task = bar.add_task(label, total=1, rate="")

            def advance(n: int) -> None:
                bar.advance(task, n)
                speed = bar.tasks[task].speed
                bar.update(task, rate=f"{speed:.1f}/s" if speed else "")

            yield (lambda n: bar.update(task, total=max(n, 1))), advance
        return
    reporter = progress.LineReporter(
        lambda line: err.print(line, markup=False, highlight=False), every_s=5.0, rate=True
    )
    handle: list[int] = []
    with reporter.heartbeat():
        finished = False
        try:
            yield (
                (lambda n: handle.append(reporter.start(label, n))),
                (lambda n: reporter.advance(handle[0], n)),
            )
            finished = True
        finally:
            # An error or Ctrl-C still ends the line as stopped; the error is the boundary's.
            if handle:
                reporter.finish(handle[0], stopped=not finished)
