"""``ragaudit label``: people label a blind sample of a run's items in the browser; export them."""

from __future__ import annotations

import socket
import webbrowser
from pathlib import Path
from typing import Annotated, Literal
from urllib.parse import quote

import typer

from ragaudit.cli._app import RootOpt, app, console, err
from ragaudit.cli._reports import _run_dir, _warn_incomplete
from ragaudit.errors import InputError

LOOPBACK = "127.0.0.1"
# Fixed rather than any free port: the browser keeps the annotator's name per address, so the
# same port asks the name once across sessions.
DEFAULT_PORT = 8737


def _serve(runs_root: Path, port: int, open_path: str, open_browser: bool) -> None:
    """Serve the labelling page on loopback until Ctrl-C, and open it in the browser.

    A stand-in for ``ragaudit.viewer.server.serve`` (the viewer's server, with its token and
    host checks): the same router on a bare app, bound to loopback only.
    """
    import uvicorn
    from fastapi import FastAPI

    from ragaudit.viewer.labelling import router

    server_app = FastAPI(docs_url=None, redoc_url=None, openapi_url=None)
    server_app.state.runs_root = runs_root
    server_app.include_router(router)
    # Bound before the browser is told the address: port 0 gets a free port, and the page's
    # first request waits in the backlog rather than being refused.
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((LOOPBACK, port))
    sock.listen(128)
    url = f"http://{LOOPBACK}:{sock.getsockname()[1]}{open_path}"
    console.print(f"labelling at {url} (Ctrl-C to stop)", soft_wrap=True)
    if open_browser:
        webbrowser.open(url)
    server = uvicorn.Server(uvicorn.Config(server_app, log_level="warning", access_log=False))
    server.run(sockets=[sock])


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
            raise InputError(f"run {folder.name}: no labels yet ({folder / labels.FILE})")
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
    open_path = f"/runs/{quote(folder.name)}/label"
    if annotator:
        open_path += f"?annotator={quote(annotator.strip())}"
    _serve(folder.parent, port, open_path, not no_browser)
