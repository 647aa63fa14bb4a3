"""The ``ablate`` flow: the reference RAG pipeline at every point of one-factor sweeps.

One Prefect task per index (a distinct corpus subset and chunking) and one per point; the
points run concurrently (``ablate.parallel`` at once), each as soon as its index is built, each
a full evaluation (the evaluate flow's stages, inline in the point's task) in its own run
folder. Nothing is cached by Prefect here: a re-run finds complete indexes by their
``ready.json`` and every answer and judgement in the memo, so it makes no provider call.
"""

from __future__ import annotations

import asyncio
import logging
import time
from pathlib import Path
from typing import Any

from prefect import flow, task
from prefect.cache_policies import NO_CACHE

from ragaudit.ablation import (
    AblationPoint,
    IndexInfo,
    ablation_dir,
    build_index,
    drop_index,
    index_group,
    plan,
    run_point,
    write_outputs,
)
from ragaudit.cache import hold_gateway
from ragaudit.config import RunConfig
from ragaudit.errors import RagauditError
from ragaudit.flows.evaluate import evaluate, retry_on_infrastructure
from ragaudit.runfolder import ABLATION, FolderRun
from ragaudit.secrets import redact

__all__ = ["ablate", "ablate_config", "run_ablation"]

log = logging.getLogger(__name__)


@task(name="ragaudit-ablation-index", cache_policy=NO_CACHE)
async def index_task(config_json: str, point_json: str) -> IndexInfo:
    """Build (or find complete) the index of one corpus subset and chunking."""
    config = RunConfig.model_validate_json(config_json)
    # Chunking and BM25 indexing are CPU work off the event loop, so points keep running.
    return await asyncio.to_thread(
        build_index, config, AblationPoint.model_validate_json(point_json)
    )


@task(
    name="ragaudit-ablation-point",
    cache_policy=NO_CACHE,
    # The point runs its stages inline, so it takes over their retry on infrastructure
    # trouble; a retry's finished calls are memo hits.
    retries=1,
    retry_delay_seconds=[5],
    retry_condition_fn=retry_on_infrastructure,
)
async def point_task(config_json: str, point_json: str, index_key: str) -> dict[str, Any]:
    """Answer with the pipeline and evaluate one point (the evaluate flow's stages, inline)."""
    config = RunConfig.model_validate_json(config_json)
    return await run_point(
        config, AblationPoint.model_validate_json(point_json), index_key, evaluate_point
    )


async def evaluate_point(config_json: str, run_id: str) -> dict[str, Any]:
    """Evaluate a point: the evaluate flow's stages, inline in the point's task; its manifest."""
    # The flow's body, not a nested flow run: points in parallel each opening a flow run wait
    # on the Prefect server's database for seconds (its synchronous flow-run state writes
    # queue behind the task-run recorder's). The stages run inline in the point's task, not as
    # task runs of their own: the server's CPU for recording them was half a point's CPU.
    return await evaluate.fn(config_json, run_id, stage_tasks=False)


@flow(name="ragaudit-ablate", log_prints=False, persist_result=False)
async def ablate(config_json: str) -> dict[str, Any]:
    """Evaluate every point of the configured sweeps and write the ablation's outputs.

    The points run concurrently in this flow's one event loop, at most ``ablate.parallel`` at
    once, rather than in worker threads: litellm's async clients and logging worker are bound
    to the loop that first used them, and calls from a second loop fail ("bound to a different
    event loop", "cannot reuse already awaited coroutine").

    Nor in worker processes: submitted to Prefect's process-pool task runner (workers forked
    from a preloaded server, the provider's limit split between them), a point cost more CPU
    than here: Prefect rebuilds its context, clients and settings for every task in a
    subprocess, each task gets a fresh event loop, and processes share no calls in flight (so
    more provider calls). On 2 cores that sweep took as long as running its points one after
    another; the figures are in bench/README.md (bench_ablate.py).
    """
    config = RunConfig.model_validate_json(config_json)
    # The ablation's folder is a run of the ablation kind from the first index to the report
    # (each point is a run of its own under points/).
    with FolderRun(ablation_dir(config), ABLATION.name, config, option="ablate.name") as run:
        out = await _sweep(config, config_json)
        run.finish("completed", points=out["points"], evaluated=out["evaluated"], llm=out["llm"])
    return out


async def _sweep(config: RunConfig, config_json: str) -> dict[str, Any]:
    planned = plan(config.ablate)
    builds: dict[str, asyncio.Task[IndexInfo]] = {}
    for pp in planned:
        group = index_group(pp.point)
        if group not in builds:
            builds[group] = asyncio.ensure_future(
                index_task(config_json, pp.point.model_dump_json())
            )
    slots = asyncio.Semaphore(config.ablate.parallel)

    async def one(pp: Any) -> dict[str, Any]:
        index = await builds[index_group(pp.point)]
        async with slots:
            return await point_task.with_options(task_run_name=f"point:{pp.point_id}")(
                config_json, pp.point.model_dump_json(), index.key
            )

    started = time.perf_counter()
    # The ablation holds its cache folder's gateway from the first point to the last: points
    # one after another would otherwise each open the memo and close it again.
    with hold_gateway(config):
        results = await asyncio.gather(*(one(pp) for pp in planned), return_exceptions=True)
    points_s = time.perf_counter() - started
    indexes = {g: await t for g, t in builds.items()}
    outcomes: dict[str, dict[str, Any]] = {}
    failed: dict[str, str] = {}
    for pp, res in zip(planned, results, strict=True):
        if isinstance(res, BaseException):  # one point's failure must not lose the others
            failed[pp.point_id] = redact(f"{type(res).__name__}: {res}")[:1000]
            log.error("ablation point %s failed: %s", pp.point_id, failed[pp.point_id])
        else:
            outcomes[pp.point_id] = res
    done = [pp for pp in planned if pp.point_id in outcomes]
    if not done:
        # Nothing to compare: say why each point failed instead of drawing empty charts.
        first = next(iter(failed.items()))
        raise RagauditError(
            f"every ablation point failed ({len(failed)}); the first, {first[0]}: {first[1]}"
        )
    per_point = {pp.point_id: indexes[index_group(pp.point)] for pp in planned}
    found = write_outputs(config, done, per_point, failed)
    outputs_s = time.perf_counter() - started - points_s
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
        "point_seconds": {pid: o.get("seconds", {}) for pid, o in outcomes.items()},
        # Indexes and points, then the statistics, charts and report over all points.
        "seconds": {"points": round(points_s, 3), "outputs": round(outputs_s, 3)},
        "llm": {
            k: sum(o["llm"].get(k, 0) for o in outcomes.values())
            for k in ("calls", "cache_hits", "provider_calls")
        },
    }


@flow(name="ragaudit-ablate-config", log_prints=False, persist_result=False)
async def ablate_config(config_path: str) -> dict[str, Any]:
    """Deployment entry: the ablation a config file describes."""
    from ragaudit.config import load_config

    return await ablate.fn(load_config(Path(config_path)).model_dump_json())


def run_ablation(config: RunConfig) -> dict[str, Any]:
    """Run the ``ablate`` flow (``ablate.parallel`` points at once); returns its summary."""
    return asyncio.run(ablate(config.model_dump_json()))


if __name__ == "__main__":
    import sys

    asyncio.run(ablate_config(sys.argv[1] if len(sys.argv) > 1 else "data/ablation/ablate.yaml"))
