"""The ``evaluate`` flow: collect → sort → ground_truth → score (one task per metric) → report.

The stages are declared once in :mod:`ragaudit.flows._stages`. Each runs as one Prefect task
(a task run costs the Prefect server CPU time, so never one per LLM call); the LLM work inside a
task runs concurrently under the gateway's limit. Stage results are cached by Prefect on their
inputs: the stage's slice of the config, the source of the code that computes it, and the
content hashes of the tables it reads. Re-running a run id returns the finished stages as
``Cached`` and runs only the rest (an edited stage, and whatever its changed tables feed),
whose LLM calls then hit the memo. Running a subset of stages (the CLI's stage commands) uses
the same flow.

With the questions in several batches (``scale.batch_size``) the judged stages run one task
per batch, writing part tables that a combine step joins. By default those tasks are awaited
in the flow's own event loop (the cheap path); ``scale.task_runner`` ``dask`` or ``ray``
submits them to that engine's workers through Prefect's task runner instead. A batch task
rebuilds everything from its serialisable inputs, so it runs in any worker process, and is
cached on its own: a re-run after a lost worker redoes only the lost batches.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import functools
import os
import socket
import time
from collections.abc import Coroutine
from pathlib import Path
from typing import Any, cast

import pyarrow.parquet as pq
from prefect import flow, task
from prefect.cache_policies import INPUTS, TASK_SOURCE
from prefect.exceptions import TerminationSignal
from prefect.states import State

import ragaudit
from ragaudit.answers import answer_failure_warnings
from ragaudit.cache import canonical_hash, ensure_global_limit, hold_gateway
from ragaudit.config import RunConfig
from ragaudit.errors import is_retryable
from ragaudit.flows._stages import BY_NAME, COMMANDS, STAGES, Stage, code_digest
from ragaudit.flows._workers import use_forkserver, warm_dask, warm_ray
from ragaudit.manifest import base_manifest, failure_warnings, judge_warnings
from ragaudit.reevaluation import ordering_manifest
from ragaudit.runfolder import RunFolder, RunsRoot
from ragaudit.runlock import RunLock
from ragaudit.stopping import reclaim_sigterm
from ragaudit.tasks import (
    StageResult,
    batch_names,
    combine_parts,
    file_digest,
    make_context,
    run_stage,
    split_part,
)

__all__ = [
    "COMMANDS",
    "STAGES",
    "retry_on_infrastructure",
    "evaluate",
    "evaluate_config",
    "flow_for",
    "stage_key",
    "task_runner_for",
]


def stage_key(config: RunConfig, stage: Stage, extra: Any = None) -> str:
    """Hash of what changes ``stage``'s output besides its input tables: config slice and code."""
    data = config.model_dump(mode="json")
    picked: dict[str, Any] = {}
    for dotted in stage.sections:
        node: Any = data
        for part in dotted.split("."):
            node = node.get(part) if isinstance(node, dict) else None
        picked[dotted] = node
    return canonical_hash(
        {
            "stage": stage.name,
            "version": ragaudit.__version__,
            "code": code_digest(stage),
            "config": picked,
            "extra": extra,
        }
    )


async def retry_on_infrastructure(task: Any, task_run: Any, state: Any) -> bool:
    """Retry a stage on infrastructure trouble, never on a bad input or config (same result).

    The exception's own ``retryable`` decides (:func:`ragaudit.errors.is_retryable`).
    """
    exc = await state.aresult(raise_on_failure=False)
    return is_retryable(exc if isinstance(exc, BaseException) else None)


@task(
    name="ragaudit-stage",
    cache_policy=(INPUTS - "config_json") + TASK_SOURCE,
    persist_result=True,
    retries=1,
    retry_delay_seconds=[5],
    retry_condition_fn=retry_on_infrastructure,
)
async def stage_task(
    stage: str,
    config_json: str,
    runs_root: str,
    run_id: str,
    key: str,
    upstream: dict[str, str],
    part: str | None = None,
) -> StageResult:
    """Run one stage (or one part of a fanned-out stage) and return what it wrote."""
    started = time.perf_counter()
    ctx = make_context(config_json, runs_root, run_id, part)
    declared = BY_NAME[stage]
    run_part = declared.run_part
    if part is not None and run_part is not None:
        work: Any = lambda c: run_part(c, part)  # noqa: E731
    else:
        assert declared.run is not None
        work = declared.run
    # In a worker process nothing else holds the gateway: the task does, for its duration.
    with hold_gateway(ctx.config):
        result = await run_stage(f"{stage}:{part}" if part else stage, ctx, work)
    # The task body's whole time (context, memo, stage); where it ran, for a distributed run.
    result.seconds = time.perf_counter() - started
    result.worker = f"{socket.gethostname()}:{os.getpid()}"
    return result


def _batches(config: RunConfig, run: RunFolder) -> list[str]:
    """The run's question batches ([] when they fit one)."""
    if not run.has("questions"):
        return []
    n = pq.ParquetFile(run.table_path("questions")).metadata.num_rows
    return batch_names(n, config.scale.batch_size)


def _digests(run: RunFolder, names: tuple[str, ...]) -> dict[str, str]:
    return {n: file_digest(run.table_path(n)) for n in names if run.has(n)}


def _extra(stage: Stage, config: RunConfig, part: str | None) -> Any:
    """What else keys a stage: the collect stage's input files, a fanned-out stage's part."""
    if stage.name == "collect":
        files = [Path(config.questions)] + [
            Path(p) for p in (config.collect.corpus, config.gold.qrels) if p
        ]
        return {str(p): file_digest(p) if p.is_file() else None for p in files}
    if part is not None:
        # Which questions a batch holds depends on the batch size.
        batch = split_part(part)[1]
        return {"part": part, "batch_size": config.scale.batch_size if batch else None}
    return None


@functools.lru_cache(maxsize=512)
def _stage_call(task_run_name: str, refresh: bool) -> Any:
    """``stage_task`` with these options, built once per process.

    Prefect reads a task function's source (``inspect.getsource``) whenever a task is made,
    ``with_options`` included, which would be paid again by every stage of every run.
    """
    return stage_task.with_options(task_run_name=task_run_name, refresh_cache=refresh)


def _task_args(
    stage: Stage, config: RunConfig, run: RunFolder, config_json: str, part: str | None
) -> tuple[Any, ...]:
    """The stage task's arguments (what its cache keys on)."""
    return (
        stage.name,
        config_json,
        str(run.path.parent),
        run.run_id,
        stage_key(config, stage, _extra(stage, config, part)),
        _digests(run, stage.reads),
        part,
    )


def _task_call(
    stage: Stage, config: RunConfig, run: RunFolder, config_json: str, part: str | None
) -> tuple[Any, tuple[Any, ...]]:
    """The stage task (with this call's options) and its arguments."""
    # A cached result whose tables were deleted would point at nothing: run it again.
    refresh = not all(run.has(t) for t in stage.part_writes(part))
    call = _stage_call(f"{stage.name}{':' + part if part else ''}", refresh)
    return call, _task_args(stage, config, run, config_json, part)


async def _run_one(
    stage: Stage,
    config: RunConfig,
    run: RunFolder,
    config_json: str,
    part: str | None = None,
    *,
    as_task: bool = True,
) -> tuple[StageResult, bool]:
    if not as_task:
        # The stage's body in the caller's task: no task run, no Prefect cache.
        result = await stage_task.fn(*_task_args(stage, config, run, config_json, part))
        result.task_seconds = result.seconds
        return result, False
    call, args = _task_call(stage, config, run, config_json, part)
    outer = time.perf_counter()
    # Prefect types an async task's call with return_state=True as the State itself; it is a
    # coroutine of it.
    state = await cast(Coroutine[Any, Any, State[StageResult]], call(*args, return_state=True))
    result = await state.aresult()
    # Wall time around the task call, Prefect's bookkeeping included (the stage's own time is
    # result.seconds): the difference is what orchestration costs.
    result.task_seconds = time.perf_counter() - outer
    return result, state.name == "Cached"


async def _submit_all(
    stage: Stage, config: RunConfig, run: RunFolder, config_json: str, parts: list[str]
) -> list[tuple[StageResult, bool]]:
    """Run the parts on the flow's task runner (Dask, Ray workers); results in part order.

    Every part finishes (or fails) before the first failure is raised: the finished ones are
    cached, so a re-run redoes only what failed.
    """
    from prefect.futures import as_completed

    started = time.perf_counter()
    futures = []
    for part in parts:
        call, args = _task_call(stage, config, run, config_json, part)
        futures.append(call.submit(*args))

    def wait_all() -> dict[int, float]:
        done: dict[int, float] = {}
        for future in as_completed(futures):
            done[id(future)] = time.perf_counter()
        return done

    done = await asyncio.to_thread(wait_all)
    out = []
    for future in futures:
        result: StageResult = await asyncio.to_thread(future.result)
        # Submission to completion, Prefect's and the engine's bookkeeping included.
        result.task_seconds = done[id(future)] - started
        out.append((result, future.state.name == "Cached"))
    return out


def _ready_workers(config: RunConfig) -> dict[str, Any]:
    """Start the flow's cluster (or connect to it) and warm every worker, before any batch.

    prefect-dask starts its cluster when the first task is submitted, and Ray its worker
    processes when tasks need them, so the first batches were charged the start and waited
    behind it; a worker that had not yet done what every task needs the first time did it
    inside its first batch. Both now happen here, timed on their own (the manifest's
    ``workers``), and the batches start working at once.
    """
    from prefect.context import FlowRunContext

    ctx = FlowRunContext.get()
    runner: Any = ctx.task_runner if ctx is not None else None
    out: dict[str, Any] = {"task_runner": config.scale.task_runner}
    started = time.perf_counter()
    if config.scale.task_runner == "dask" and runner is not None:
        client = runner.client  # starts the local cluster, or connects to scale.address
        out["start_s"] = round(time.perf_counter() - started, 3)
        out["count"] = len(client.scheduler_info()["workers"])
        out["warm_s"] = round(warm_dask(client), 3)
    elif config.scale.task_runner == "ray":
        import ray

        out["count"] = int(ray.cluster_resources().get("CPU", 0))
        out["warm_s"] = round(warm_ray(), 3)
    out["ready_s"] = round(time.perf_counter() - started, 3)
    return out


def task_runner_for(config: RunConfig) -> Any:
    """The task runner ``scale.task_runner`` names, or None for the flow's default."""
    scale = config.scale
    if scale.task_runner == "dask":
        from prefect_dask import DaskTaskRunner

        if scale.address:
            return DaskTaskRunner(address=scale.address)
        if scale.dask_processes:
            use_forkserver()
        # One thread per worker: each task drives litellm in its own event loop, and two
        # loops in one process trip over litellm's shared state.
        return DaskTaskRunner(
            cluster_kwargs={
                "n_workers": scale.workers,
                "threads_per_worker": 1,
                "processes": scale.dask_processes,
                "host": "127.0.0.1",
                "dashboard_address": None,
                # Each worker does what every task needs the first time (imports, Prefect's
                # collections, token tables, litellm's routes) as it starts, not inside the
                # first batch it runs (ragaudit.flows._workers).
                "preload": ["ragaudit.flows._workers"],
            }
        )
    if scale.task_runner == "ray":
        from prefect_ray import RayTaskRunner

        if scale.address:
            return RayTaskRunner(address=scale.address)
        # Ray runs as many one-CPU tasks at once as it has CPUs: the workers are the CPUs.
        return RayTaskRunner(init_kwargs={"num_cpus": scale.workers, "include_dashboard": False})
    return None


def flow_for(config: RunConfig) -> Any:
    """The ``evaluate`` flow with the config's task runner."""
    runner = task_runner_for(config)
    return evaluate if runner is None else evaluate.with_options(task_runner=runner)


@flow(name="ragaudit-evaluate", log_prints=False, persist_result=False)
async def evaluate(
    config_json: str, run_id: str, stages: list[str] | None = None, stage_tasks: bool = True
) -> dict[str, Any]:
    """Evaluate a question set end to end (or the given stages) in the run folder ``run_id``.

    ``stage_tasks``: each stage a Prefect task, cached on its inputs and retried on
    infrastructure trouble (the default). False runs the stages inline, in the caller's own
    task: an ablation point is a task already, and the Prefect server spends CPU on every task
    run it records, and a sweep has about a hundred stage runs. Inline
    stages are not cached by Prefect: a re-run redoes them, its LLM calls answered by the memo.
    """
    # Under the CLI, a SIGTERM stops the run in order as Ctrl-C does, not through Prefect's
    # handler, which crashes the flow wherever it stands.
    reclaim_sigterm()
    config = RunConfig.model_validate_json(config_json)
    run = RunFolder(config.runs_root, run_id)
    # A tune's, a round robin's, an audit's folder or the judgment store is never a run's.
    RunsRoot(config.runs_root).claim(run_id, "run")
    selected = [s for s in STAGES if s.requested(stages) and s.enabled(config)]
    started = time.perf_counter()
    # One writer per run: a second process on this id is refused before it touches the run.
    lock = RunLock(run.path)
    lock.acquire()
    try:
        return await _evaluate_locked(config, config_json, run, selected, started, stage_tasks)
    finally:
        lock.release()


async def _evaluate_locked(
    config: RunConfig,
    config_json: str,
    run: RunFolder,
    selected: list[Stage],
    started: float,
    stage_tasks: bool,
) -> dict[str, Any]:
    run_id = run.run_id
    previous = run.read_manifest()
    # Off the loop: git runs as a subprocess, and the loop may be serving other runs (the
    # ablation's points) meanwhile.
    manifest = await asyncio.to_thread(base_manifest, config, run_id)
    manifest["stages"] = dict(previous.get("stages", {}))
    manifest["status"] = "running"
    manifest["started_at"] = dt.datetime.now(dt.UTC).isoformat()
    run.write_manifest(manifest)
    # A writer killed mid-write leaves its temp file; nothing writes to the run yet.
    run.sweep_temp()
    if config.models.global_limit is not None:
        await ensure_global_limit(config.models.global_limit)
    totals = {"calls": 0, "cache_hits": 0, "provider_calls": 0}
    failures: list[str] = []

    def account(name: str, result: StageResult, cached: bool) -> None:
        manifest["stages"][name] = {
            "seconds": 0.0 if cached else round(result.seconds, 3),
            "task_s": round(result.task_seconds, 3),
            "cached": cached,
            "worker": result.worker,
            "llm": {k: 0 for k in totals} if cached else result.llm,
            "tables": sorted(result.tables),
        }
        if not cached:
            for k in totals:
                totals[k] += result.llm[k]

    # The flow holds the cache folder's gateway: its stages share it, and the memo is closed
    # when the flow ends rather than kept open for the life of the process.
    held = contextlib.ExitStack()
    held.enter_context(hold_gateway(config))
    try:
        for stage in selected:
            if stage_tasks and "batches" not in manifest and run.has("questions"):
                # A dask or ray runner at the default batch size: one batch per worker.
                n = pq.ParquetFile(run.table_path("questions")).metadata.num_rows
                scale = config.scale.sized_for(n)
                if scale is not config.scale:
                    config = config.model_copy(update={"scale": scale})
                    config_json = config.model_dump_json()
                    manifest["batches"] = {"batch_size": scale.batch_size, "picked_for": n}
            parts = list(stage.parts(config, _batches(config, run)) or []) if stage.parts else []
            if parts:
                distributed = stage_tasks and config.scale.task_runner != "default"
                if distributed and "workers" not in manifest:
                    manifest["workers"] = await asyncio.to_thread(_ready_workers, config)
                    count = manifest["workers"].get("count")
                    if config.scale.address and count:
                        # A cluster's workers share models.global_limit: each leases its share
                        # of it (ragaudit.cache.global_lease), so they are told how many they are.
                        scale = config.scale.model_copy(update={"workers": count})
                        config = config.model_copy(update={"scale": scale})
                        config_json = config.model_dump_json()
                if not distributed:
                    # Parts are independent: their tasks run together in this event loop,
                    # sharing the gateway's per-model limit.
                    outcomes = await asyncio.gather(
                        *(
                            _run_one(stage, config, run, config_json, p, as_task=stage_tasks)
                            for p in parts
                        )
                    )
                else:
                    outcomes = await _submit_all(stage, config, run, config_json, parts)
                for p, (result, cached) in zip(parts, outcomes, strict=True):
                    account(f"{stage.name}:{p}", result, cached)
                ctx = make_context(config_json, str(run.path.parent), run_id)
                if stage.combine is not None:
                    stage.combine(ctx, parts)
                else:
                    combine_parts(ctx, stage.writes, parts)
                continue
            result, cached = await _run_one(stage, config, run, config_json, as_task=stage_tasks)
            account(stage.name, result, cached)
        failures = failure_warnings(run, [t for s in selected for t in s.judged])
        if run.has("answers"):
            failures += answer_failure_warnings(run.read("answers")["status"].to_pylist())
        manifest["status"] = "completed_with_failures" if failures else "completed"
    except BaseException as exc:
        stopped = isinstance(exc, KeyboardInterrupt | asyncio.CancelledError | TerminationSignal)
        manifest["status"] = "interrupted" if stopped else "failed"
        from ragaudit.secrets import redact

        manifest["error"] = redact(f"{type(exc).__name__}: {exc}")[:2000]
        raise
    finally:
        held.close()
        manifest["finished_at"] = dt.datetime.now(dt.UTC).isoformat()
        manifest["llm"] = totals
        manifest["timings"] = {
            "total_s": round(time.perf_counter() - started, 3),
            **{f"{k}_s": v["seconds"] for k, v in manifest["stages"].items()},
        }
        manifest["warnings"] = judge_warnings(config, run) + failures
        if run.has("ranking"):
            # What the next night checks before building on this run's judged heads.
            manifest["ordering"] = ordering_manifest(config, run)
        run.write_manifest(manifest)
        if "report" in {s.name for s in selected}:
            from ragaudit.reporting import stamp_completion

            # The report was rendered mid-run: its header gets the run's end (never at the
            # cost of the error that is ending the run).
            with contextlib.suppress(OSError):
                stamp_completion(run.path, manifest["status"], manifest["finished_at"])
    return manifest


@flow(name="ragaudit-evaluate-config", log_prints=False, persist_result=False)
async def evaluate_config(config_path: str, run_id: str | None = None) -> dict[str, Any]:
    """Deployment entry: evaluate with a config file; a scheduled run gets a timestamped id."""
    from ragaudit.config import load_config

    config = load_config(Path(config_path))
    rid = config.resolved_run_id(run_id)
    return await flow_for(config)(config.model_dump_json(), rid)


if __name__ == "__main__":
    import sys

    asyncio.run(evaluate_config(sys.argv[1] if len(sys.argv) > 1 else "data/demo/config.yaml"))
