"""The ``tune`` flow: collect variants compared on one pooled, stored grading.

One Prefect task for the whole tune: its work is searches and judge calls under the gateway's
own limits, and a task per variant or per grade would cost more in Prefect's bookkeeping than
the work. Nothing is cached by Prefect: a re-run finds every grade in the judgment store (and
the memo), so a killed tune resumes without paying a grade twice.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from prefect import flow, get_run_logger, task
from prefect.cache_policies import NO_CACHE

from ragaudit.cache import hold_gateway
from ragaudit.config import RunConfig
from ragaudit.flows.evaluate import retry_on_infrastructure
from ragaudit.runfolder import TUNE, FolderRun
from ragaudit.tuning import (
    console_lines,
    judge_alone_notice,
    ranked,
    run_tune,
    summary,
    tune_dir,
    write_outputs,
)

__all__ = ["run_tuning", "tune", "tune_config"]


@task(
    name="ragaudit-tune",
    cache_policy=NO_CACHE,
    # A retry's finished grades are in the store: it pays only for what was left.
    retries=1,
    retry_delay_seconds=[5],
    retry_condition_fn=retry_on_infrastructure,
)
async def tune_task(config_json: str, yes: bool) -> dict[str, Any]:
    """Search every variant, grade the pool, decide and write the tune's folder."""
    config = RunConfig.model_validate_json(config_json)
    notice = judge_alone_notice(config)
    if notice:
        # A deployment has no console: the run's log carries the line the CLI prints.
        get_run_logger().warning(notice)
    # The tune's folder is a run of the tune kind from the first search to the last write:
    # locked (a second tune of it is refused), ``interrupted`` or ``failed`` when it stops.
    with (
        FolderRun(tune_dir(config), TUNE.name, config, option="tune.name") as run,
        hold_gateway(config) as gateway,
    ):
        out = await run_tune(config, gateway, yes=yes)
        folder = write_outputs(out)
        result = summary(out)
        run.finish("completed", grading=result.get("grading"), llm=result.get("llm"))
    return {
        **result,
        "folder": str(folder),
        "lines": console_lines(out, folder),
        "ranked": ranked(out),
    }


@flow(name="ragaudit-tune", log_prints=False, persist_result=False)
async def tune(config_json: str, yes: bool = False) -> dict[str, Any]:
    """Tune the collect section: the variants, their pooled grades, the recommendation."""
    return await tune_task(config_json, yes)


@flow(name="ragaudit-tune-config", log_prints=False, persist_result=False)
async def tune_config(config_path: str, yes: bool = False) -> dict[str, Any]:
    """Deployment entry: the tune a config file describes."""
    from ragaudit.config import load_config

    return await tune.fn(load_config(Path(config_path)).model_dump_json(), yes)


def run_tuning(config: RunConfig, *, yes: bool = False) -> dict[str, Any]:
    """Run the ``tune`` flow; returns its summary (with the console lines)."""
    return asyncio.run(tune(config.model_dump_json(), yes))


if __name__ == "__main__":
    import sys

    asyncio.run(tune_config(sys.argv[1] if len(sys.argv) > 1 else "data/demo/tune.yaml"))
