"""The ``reevaluate`` flow: evaluate again, then compare with the previous run like this one.

Deployed as the nightly re-evaluation (``prefect.yaml``). Each run evaluates the question set
with the config file into a new run folder, finds the newest earlier completed run of the same
question set and configuration under the runs root (:func:`ragaudit.reevaluation.previous_run`),
compares with it (``ragaudit.reporting.compare_runs``), publishes the comparison as a markdown
and a table artifact, plays blind battles of the two runs' answers when ``report.battles`` is
on, and when a metric (or the battles) regressed beyond noise emits the
``ragaudit.regression`` event and, per ``nightly.on_regression``, fails the flow run or
suffixes its name.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from prefect import flow, get_run_logger
from prefect.states import Completed, Failed, State

from ragaudit.battles import battle_verdict
from ragaudit.cache import hold_gateway
from ragaudit.config import RunConfig, load_config
from ragaudit.flows.evaluate import evaluate
from ragaudit.reevaluation import (
    REGRESSED_SUFFIX,
    no_baseline_verdict,
    previous_run,
    publish_comparison,
    regression_event,
    unlike_runs,
)
from ragaudit.reporting import compare_runs, question_set_hash, regressions
from ragaudit.runfolder import RunFolder

__all__ = ["compare_with_previous", "reevaluate", "rename_flow_run"]


async def rename_flow_run(suffix: str) -> str | None:
    """Append ``suffix`` to the current flow run's name; returns the new name."""
    from prefect.client.orchestration import get_client
    from prefect.runtime import flow_run

    if not flow_run.id:
        return None
    name = f"{flow_run.name}{suffix}"
    async with get_client() as client:
        await client.update_flow_run(flow_run.id, name=name)
    return name


async def compare_with_previous(config: RunConfig, run_id: str) -> dict[str, Any]:
    """Compare run ``run_id`` with its baseline, publish, emit; returns what happened.

    The returned mapping holds ``baseline`` (a run id or None), ``verdict``, ``regressed``,
    ``artifacts`` (keys) and ``event`` (the emitted event's name or None).
    """
    import polars as pl

    run = RunFolder(config.runs_root, run_id)
    baseline = previous_run(run.path, tuple(config.nightly.baseline_statuses))
    if baseline is None:
        unlike = unlike_runs(run.path, tuple(config.nightly.baseline_statuses))
        keys = await publish_comparison(None, run_id, run.path, unlike)
        verdict = no_baseline_verdict(unlike)
        return {"baseline": None, "verdict": verdict, "regressed": [], "artifacts": keys}
    cmp = await asyncio.to_thread(compare_runs, baseline.run_dir, run.path)
    keys = await publish_comparison(cmp, run_id, run.path)
    battles = None
    if config.report.battles and cmp.comparable:
        # Blind battles of the two runs' answers (report.battles), judged as compare --battles
        # does; a lost battle is a regression like a metric's.
        with hold_gateway(config) as gateway:
            _, _, battles = await battle_verdict(
                baseline.run_dir, run.path, config, gateway, cmp.alpha
            )
    qhash = question_set_hash(pl.from_arrow(run.read("questions")))  # type: ignore[arg-type]
    event = regression_event(cmp, qhash, str(config.questions), battles)
    if event is not None:
        event.emit()
    return {
        "baseline": baseline.run_id,
        "verdict": cmp.verdict,
        "comparable": cmp.comparable,
        "regressed": regressions(cmp, battles),
        "battles": None if battles is None else battles.verdict,
        "improved": list(cmp.improved),
        "artifacts": keys,
        "event": event.event if event else None,
    }


@flow(name="ragaudit-reevaluate", log_prints=False, persist_result=False)
async def reevaluate(config_path: str, run_id: str | None = None) -> State:
    """Evaluate with a config file, then compare with the previous run like this one."""
    config = load_config(Path(config_path))
    rid = config.resolved_run_id(run_id)
    manifest = await evaluate(config.model_dump_json(), rid)
    outcome = await compare_with_previous(config, rid)
    outcome["run_id"] = rid
    outcome["status"] = manifest.get("status")
    logger = get_run_logger()
    logger.info(
        "run %s against %s: %s", rid, outcome["baseline"] or "(no baseline)", outcome["verdict"]
    )
    regressed = outcome["regressed"]
    if regressed and config.nightly.on_regression == "fail":
        return Failed(
            message=f"regression beyond noise against run {outcome['baseline']}: "
            f"{', '.join(regressed)}",
            data=outcome,
        )
    if regressed and config.nightly.on_regression == "name":
        outcome["flow_run_name"] = await rename_flow_run(REGRESSED_SUFFIX)
    return Completed(message=outcome["verdict"], data=outcome)


if __name__ == "__main__":
    import sys

    asyncio.run(reevaluate(sys.argv[1] if len(sys.argv) > 1 else "data/demo/config.yaml"))
