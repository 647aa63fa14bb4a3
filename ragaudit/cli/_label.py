"""``ragaudit label``: people label a blind sample of a run's items in the browser; export them."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

import typer

from ragaudit.cli._app import RootOpt, app, console, err
from ragaudit.cli._reports import _run_dir, _warn_incomplete
from ragaudit.errors import InputError

# Fixed rather than any free port: the browser keeps the annotator's name per address, so the
# same port asks the name once across sessions.
DEFAULT_PORT = 8737


@app.command("label")
def label_cmd(
    run: Annotated[str, typer.Argument(help="A run folder or a run id under --runs-root.")],
    runs_root: RootOpt = None,
    sample: Annotated[
        int,
        typer.Option(
            "--sample",
            min=1,
            help="Items of each kind to draw (grades, then each answer metric) when the run "
            "has no sample yet; a drawn sample is kept for every annotator.",
        ),
    ] = 100,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the draw and its order.")] = 0,
    annotator: Annotated[
        str | None, typer.Option("--annotator", help="Your name (else the page asks once).")
    ] = None,
    port: Annotated[
        int,
        typer.Option(
            "--port",
            min=0,
            max=65535,
            help="0: any free port (the browser then forgets the name it was given).",
        ),
    ] = DEFAULT_PORT,
    no_browser: Annotated[
        bool, typer.Option("--no-browser", help="Print the address; open no browser.")
    ] = False,
    export: Annotated[
        Literal["csv", "qrels"] | None,
        typer.Option(
            "--export", help="Write the labels instead of serving: csv, or qrels (grades)."
        ),
    ] = None,
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="The file --export writes.")
    ] = None,
) -> None:
    """Label a blind, stratified sample of a run's items in the browser (or export the labels)."""
    from ragaudit import atomic, labels

    folder = _run_dir(run, runs_root).resolve()
    if export is not None:
        if output is None:
            raise InputError("--export needs --output FILE")
        table = labels.read_labels(folder)
        if table.num_rows == 0:
            raise InputError(
                f"run {folder.name}: no labels of its items yet (people's labels are kept in "
                f"{labels.store_folder(folder)})"
            )
        text = (
            labels.labels_csv(table)
            if export == "csv"
            else labels.grade_qrels(table, annotator.strip() if annotator else None)
        )
        atomic.write_bytes(text.encode("utf-8"), output)
        console.print(str(output))
        return
    _warn_incomplete(folder)
    table, drawn = labels.ensure_sample(folder, sample, seed=seed)
    if drawn:
        console.print(f"drew {table.num_rows} items to label: {folder / labels.SAMPLE_FILE}")
    else:
        err.print(
            f"labelling the run's existing sample ({table.num_rows} items; --sample applies "
            f"only to a new one: delete {labels.SAMPLE_FILE} to draw again)",
            soft_wrap=True,
        )
    from ragaudit.viewer import run_url
    from ragaudit.viewer.server import open_in_browser, serve

    # Encoded once, here: the page reads the name back exactly as given.
    who = {"annotator": annotator.strip()} if annotator and annotator.strip() else {}
    open_path = run_url(folder.name, "label", **who)

    # The viewer's server: the same loopback host check and cross-origin refusal as `view`.
    serve(
        folder.parent,
        port=port,
        open_path=open_path,
        on_ready=None if no_browser else open_in_browser,
    )
