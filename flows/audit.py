"""The ``audit`` flow: one day of production traffic read, sampled, graded, scored, estimated.

One Prefect task for the day: its work is reading and judge calls under the gateway's own
limits, and a task per request or per grade would cost more in Prefect's bookkeeping than the
work. Nothing is cached by Prefect: a re-run finds every grade in the judgment store and every
answer score in the memo, so a crashed day resumes without paying a call twice.
"""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import Coroutine
from pathlib import Path
from typing import Any, cast

from prefect import flow, get_run_logger, task
from prefect.cache_policies import NO_CACHE
from prefect.states import Completed, Failed, State

from ragaudit.audit import emit_regression, previous_day, run_audit_day, summary
from ragaudit.cache import hold_gateway
from ragaudit.config import RunConfig
from ragaudit.flows.evaluate import retry_on_infrastructure
from ragaudit.flows.nightly import rename_flow_run
from ragaudit.reevaluation import REGRESSED_SUFFIX

__all__ = ["audit", "audit_config", "run_audit"]


@task(
    name="ragaudit-audit-day",
    cache_policy=NO_CACHE,
    # A retry's finished grades are in the store and its scores in the memo: it pays only for
    # what was left.
    retries=1,
    retry_delay_seconds=[5],
    retry_condition_fn=retry_on_infrastructure,
)
async def audit_task(config_json: str, day: str) -> dict[str, Any]:
    """Read, sample, grade, score and estimate one day; write its folder."""
    config = RunConfig.model_validate_json(config_json)
    with hold_gateway(config) as gateway:
        out = await run_audit_day(config, dt.date.fromisoformat(day), gateway=gateway)
    result = summary(out)
    get_run_logger().info(
        "audit %s %s: %d sampled, grades %s, calls %s",
        result["audit"],
        result["day"],
        result["sampled"],
        result["grading"],
        result["llm"],
    )
    return result


@flow(name="ragaudit-audit", log_prints=False, persist_result=False)
async def audit(config_json: str, day: str | None = None) -> State:
    """Audit one day of traffic (None: yesterday, UTC), compare it with its series, alarm.

    An alarm — a segment's move for the worse beyond noise, at least its metric's
    ``audit.min_change``, not the traffic's doing — emits ``ragaudit.audit.regression`` (one
    line per segment and cause) and, per ``audit.on_regression``, fails the flow run or appends
    "-regressed" to its name.
    """
    config = RunConfig.model_validate_json(config_json)
    result = await audit_task(config_json, day or previous_day().isoformat())
    event = result.pop("event", None)
    if event is not None:
        name, resource, payload = event
        emit_regression((name, resource, payload))
        result["event"] = name
    regressed = result.get("regressed") or []
    on_regression = config.audit.on_regression if config.audit is not None else "ignore"
    if regressed and on_regression == "fail":
        return Failed(
            message=f"audit {result['audit']} {result['day']}: "
            + "; ".join(m["text"] for m in result.get("moves") or [] if m["kind"] == "alarm"),
            data=result,
        )
    if regressed and on_regression == "name":
        result["flow_run_name"] = await rename_flow_run(REGRESSED_SUFFIX)
    return Completed(message=f"audit {result['audit']} {result['day']}", data=result)


@flow(name="ragaudit-audit-config", log_prints=False, persist_result=False)
async def audit_config(config_path: str, day: str | None = None) -> State:
    """Deployment entry: the audit a config file describes, on the previous day's partition."""
    from ragaudit.config import load_config

    return await audit.fn(load_config(Path(config_path)).model_dump_json(), day)


def run_audit(config: RunConfig, day: dt.date) -> dict[str, Any]:
    """Run the ``audit`` flow for ``day``; returns its summary.

    ``failed`` holds the flow run's message when it failed on a regression (as
    ``audit.on_regression: fail`` asks); the summary is the same either way.
    """
    # Prefect types a flow called with return_state=True as its return value; it is a State.
    call = audit(config.model_dump_json(), day.isoformat(), return_state=True)
    state = asyncio.run(cast(Coroutine[Any, Any, State[Any]], call))
    data = state.result(raise_on_failure=False)
    result = dict(data) if isinstance(data, dict) else {}
    if state.is_failed():
        result["failed"] = state.message
    return result


if __name__ == "__main__":
    import sys

    asyncio.run(audit_config(sys.argv[1] if len(sys.argv) > 1 else "audit.yaml"))
