"""The ``ablate`` flow: the reference RAG pipeline at every point of one-factor sweeps.

One Prefect task per index (a distinct corpus subset and chunking) and one per point; the
points run in parallel in the flow's task runner (``ablate.parallel`` threads), each as soon as
its index is built, each a full evaluate flow in its own run folder. Nothing is cached by
Prefect here: a re-run finds complete indexes by their ``ready.json``, the answers in the memo
and every point's stages in the evaluate flow's own task cache, so it makes no provider call.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from prefect import flow, task
from prefect.cache_policies import NO_CACHE
from prefect.task_runners import ThreadPoolTaskRunner

from ragaudit.ablation import (
    IndexInfo,
    build_index,
    drop_index,
    index_group,
    plan,
    run_point,
    write_outputs,
)
from ragaudit.config import AblationPoint, RunConfig

__all__ = ["ablate", "run_ablation"]

log = logging.getLogger(__name__)


@task(name="ragaudit-ablation-index", cache_policy=NO_CACHE)
def index_task(config_json: str, point_json: str) -> IndexInfo:
    """Build (or find complete) the index of one corpus subset and chunking."""
    config = RunConfig.model_validate_json(config_json)
    return build_index(config, AblationPoint.model_validate_json(point_json))


@task(name="ragaudit-ablation-point", cache_policy=NO_CACHE)
def point_task(config_json: str, point_json: str, index: IndexInfo) -> dict[str, Any]:
    """Answer with the pipeline and evaluate one point (its own event loop in this thread)."""
    config = RunConfig.model_validate_json(config_json)
    point = AblationPoint.model_validate_json(point_json)
    return asyncio.run(run_point(config, point, index.key))


@flow(name="ragaudit-ablate", log_prints=False, persist_result=False)
def ablate(config_json: str) -> dict[str, Any]:
    """Evaluate every point of the configured sweeps and write the ablation's outputs."""
    config = RunConfig.model_validate_json(config_json)
    planned = plan(config.ablate)
    index_futures: dict[str, Any] = {}
    for pp in planned:
        group = index_group(pp.point)
        if group not in index_futures:
            index_futures[group] = index_task.submit(config_json, pp.point.model_dump_json())
    point_futures = {
        pp.point_id: point_task.submit(
            config_json, pp.point.model_dump_json(), index_futures[index_group(pp.point)]
        )
        for pp in planned
    }
    indexes = {g: f.result() for g, f in index_futures.items()}
    outcomes: dict[str, dict[str, Any]] = {}
    failed: dict[str, str] = {}
    for pid, future in point_futures.items():
        try:
            outcomes[pid] = future.result()
        except Exception as exc:  # one point's failure must not lose the others' results
            failed[pid] = f"{type(exc).__name__}: {exc}"
            log.error("ablation point %s failed: %s", pid, failed[pid])
    done = [pp for pp in planned if pp.point_id in outcomes]
    per_point = {pp.point_id: indexes[index_group(pp.point)] for pp in planned}
    found = write_outputs(config, done, per_point, failed)
    if config.ablate.drop_indexes:
        for info in indexes.values():
            drop_index(config, info.key)
    return {
        "points": len(planned),
        "evaluated": len(done),
        "failed": failed,
        "indexes": len(indexes),
        "indexes_built": sum(1 for i in indexes.values() if i.built),
        "best": found.best,
        "llm": {
            k: sum(o["llm"].get(k, 0) for o in outcomes.values())
            for k in ("calls", "cache_hits", "provider_calls")
        },
    }


def run_ablation(config: RunConfig) -> dict[str, Any]:
    """Run the ``ablate`` flow with ``ablate.parallel`` points at once."""
    runner = ThreadPoolTaskRunner(max_workers=config.ablate.parallel)
    return ablate.with_options(task_runner=runner)(config.model_dump_json())


if __name__ == "__main__":
    import sys

    from ragaudit.config import load_config
    from pathlib import Path

    run_ablation(load_config(Path(sys.argv[1] if len(sys.argv) > 1 else "data/ablation/ablate.yaml")))
