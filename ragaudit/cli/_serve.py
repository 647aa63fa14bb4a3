"""``ragaudit serve``: the scheduled re-evaluation."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ragaudit.cli._app import app
from ragaudit.config import load_config


@app.command()
def serve(
    config: Annotated[Path, typer.Option("--config", "-c", help="Config file of the evaluation.")],
    cron: Annotated[
        str, typer.Option("--cron", help="Cron schedule, e.g. '0 3 * * *'.")
    ] = "0 3 * * *",
    name: Annotated[str, typer.Option("--name", help="Deployment name.")] = "ragaudit-scheduled",
) -> None:
    """Serve the scheduled re-evaluation (needs a Prefect server: PREFECT_API_URL).

    Each run evaluates the question set again and compares it with the previous run like it
    (artifacts; a ragaudit.regression event when a metric regressed, see nightly.on_regression).
    Without a worker or work pool: this process runs the scheduled runs itself.
    """
    load_config(config)
    from ragaudit.deployment import require_api_server

    require_api_server("ragaudit serve")
    from ragaudit.flows.nightly import reevaluate

    reevaluate.serve(name=name, cron=cron, parameters={"config_path": str(config.resolve())})
