"""``ragaudit view``: browse the runs under a root in a local web app."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ragaudit.cli._app import app
from ragaudit.config import DEFAULT_RUNS_ROOT
from ragaudit.errors import RagauditError


@app.command()
def view(
    runs_root: Annotated[
        Path, typer.Argument(help="The folder holding the run folders.")
    ] = DEFAULT_RUNS_ROOT,
    host: Annotated[
        str,
        typer.Option(
            "--host", help="Address to bind; any other than loopback requires a printed token."
        ),
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", help="Port (0: any free port).")] = 8765,
    no_browser: Annotated[
        bool, typer.Option("--no-browser", help="Print the address, open no browser.")
    ] = False,
) -> None:
    """Browse the runs: list, report, compare two, a metric's trend, a question's drill-down."""
    if not runs_root.is_dir():
        raise RagauditError(f"view: {runs_root} is not a folder (give the runs root)")
    from ragaudit.viewer.server import open_in_browser, serve

    serve(runs_root, host=host, port=port, on_ready=None if no_browser else open_in_browser)
