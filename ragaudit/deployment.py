"""Checks an operator's setup gets before a deployment, a worker or a served flow runs.

Each one fails at once with the fix in its message, where Prefect would go on: a worker's
pull step "completes" without the project folder and the flow dies later in a temporary
directory with a traceback, and a flow served against Prefect's ephemeral API logs one
warning and then polls forever, never running a scheduled run.
"""

from __future__ import annotations

import os
from pathlib import Path

from ragaudit.errors import RagauditError

PROJECT_DIR_VARIABLE = "RAGAUDIT_PROJECT_DIR"
# What marks a ragaudit checkout: the deployments' file and the flows their entrypoints name.
_CHECKOUT_MARKERS = ("prefect.yaml", "flows")

__all__ = ["PROJECT_DIR_VARIABLE", "require_api_server", "set_project_directory"]


def set_project_directory(directory: str | None = None) -> dict[str, str]:
    """A worker's pull step: move the flow run into the ragaudit checkout, or fail saying how.

    Prefect fills ``directory`` from ``{{ $RAGAUDIT_PROJECT_DIR }}``; a worker started
    without that variable (as ``prefect deploy`` itself suggests) leaves it empty or as the
    template. Returns ``{"directory": …}`` as Prefect's own ``set_working_directory`` does.

    Raises:
        RagauditError: the variable is unset, or does not name a ragaudit checkout.
    """
    fix = (
        f"start the worker from the ragaudit checkout with {PROJECT_DIR_VARIABLE} set: "
        f"{PROJECT_DIR_VARIABLE}=/path/to/ragaudit prefect worker start --pool ragaudit"
    )
    value = (directory or "").strip()
    if not value or "{{" in value:
        raise RagauditError(
            f"the worker has no {PROJECT_DIR_VARIABLE}, so the flow run cannot find the "
            f"project's flows and config: {fix}"
        )
    path = Path(value).expanduser().resolve()
    missing = [m for m in _CHECKOUT_MARKERS if not (path / m).exists()]
    if missing:
        raise RagauditError(
            f"{PROJECT_DIR_VARIABLE}={value} is not a ragaudit checkout (no "
            f"{' or '.join(missing)} there): {fix}"
        )
    os.chdir(path)
    return {"directory": str(path)}


def require_api_server(command: str) -> str:
    """The Prefect API URL ``command`` will serve against; fail when there is none.

    Serving needs a Prefect server that outlives the process and schedules its runs: against
    the ephemeral API nothing is ever scheduled.

    Raises:
        RagauditError: ``PREFECT_API_URL`` is not set.
    """
    from prefect.settings import PREFECT_API_URL

    url = PREFECT_API_URL.value()
    if not url:
        raise RagauditError(
            f"{command} needs a Prefect server to schedule its runs, and PREFECT_API_URL is "
            "not set (without it Prefect uses a temporary API that never schedules anything). "
            "Start one with `prefect server start` and set "
            "PREFECT_API_URL=http://127.0.0.1:4200/api (or `prefect config set "
            "PREFECT_API_URL=…`), then run it again."
        )
    return str(url)
