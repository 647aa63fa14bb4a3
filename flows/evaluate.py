"""The ``evaluate`` flow: collect → sort → ground_truth → score (one task per metric) → report.

Each stage is one Prefect task (PITFALLS: a task run costs ~25 ms of server CPU, so never one
per LLM call); the LLM work inside a task runs concurrently under the gateway's limit.
Stage results are cached by Prefect on (inputs + task source): the inputs are the stage's
slice of the config and the content hashes of the tables it reads, so re-running a run id
returns the finished stages as ``Cached`` and runs only the rest, whose LLM calls then hit
the memo. Running a subset of stages (the CLI's stage commands) uses the same flow.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import time
from pathlib import Path
from typing import Any

from prefect import flow, task
from prefect.cache_policies import INPUTS, TASK_SOURCE

import ragaudit
from ragaudit.cache import canonical_hash
from ragaudit.config import RunConfig
from ragaudit.errors import ConfigError, InputError, RagauditError, StageError
from ragaudit.manifest import base_manifest, judge_warnings
from ragaudit.runfolder import RunFolder
from ragaudit.tasks import collect as collect_mod
from ragaudit.tasks import ground_truth as gt_mod
from ragaudit.tasks import report as report_mod
from ragaudit.tasks import score as score_mod
from ragaudit.tasks import sort as sort_mod
from ragaudit.tasks._common import (
    StageResult,
    file_digest,
    hold_gateway,
    make_context,
    run_stage,
)

_FINAL_ERRORS = (RagauditError, ConfigError, InputError, StageError)

STAGES = ("collect", "sort", "ground_truth", "score", "report")

# Which config sections change each stage's output: the stage's task cache keys on them only,
# so changing a report threshold never re-runs the judge.
_SECTIONS = {
    "collect": ("questions", "limit", "collect", "models.embedder"),
    "sort": (
        "sort",
        "models.judge",
        "models.temperature",
        "models.max_output_tokens",
        "models.judge_context_window",
    ),
    "ground_truth": (
        "ground_truth",
        "sort.enabled",
        "models.judge",
        "models.temperature",
        "models.judge_context_window",
    ),
    "score": (
        "score",
        "models.judge",
        "models.embedder",
        "models.max_output_tokens",
        "models.judge_context_window",
    ),
    "report": ("report",),
}
# The tables each stage reads; their content hashes are part of its cache key.
_READS = {
    "collect": (),
    "sort": ("questions", "candidates"),
    "ground_truth": ("questions", "candidates", "ranking"),
    "score": ("questions", "candidates", "answers", "ground_truth"),
    "report": ("scores",),
}
_WRITES = {
    "collect": ("questions", "candidates", "answers", "retrieval"),
    "sort": ("verdicts", "comparisons", "ranking", "agreement"),
    "ground_truth": ("ground_truth",),
    "report": ("summary",),
}


def stage_key(config: RunConfig, stage: str, extra: Any = None) -> str:
    """Hash of the config sections and code version that change ``stage``'s output."""
    data = config.model_dump(mode="json")
    picked: dict[str, Any] = {}
    for dotted in _SECTIONS[stage]:
        node: Any = data
        for part in dotted.split("."):
            node = node.get(part) if isinstance(node, dict) else None
        picked[dotted] = node
    return canonical_hash(
        {"stage": stage, "version": ragaudit.__version__, "config": picked, "extra": extra}
    )


def _retryable(task: Any, task_run: Any, state: Any) -> bool:
    """Retry a stage on infrastructure trouble, never on a bad input or config (same result).

    The failed state's message names the exception class; reading its result here would need
    the event loop the condition is not given.
    """
    message = state.message or ""
    return not any(cls.__name__ in message for cls in _FINAL_ERRORS)


@task(
    name="ragaudit-stage",
    cache_policy=(INPUTS - "config_json") + TASK_SOURCE,
    persist_result=True,
    retries=1,
    retry_delay_seconds=[5],
    retry_condition_fn=_retryable,
)
async def stage_task(
    stage: str,
    config_json: str,
    run_root: str,
    run_id: str,
    key: str,
    upstream: dict[str, str],
    metric: str | None = None,
) -> StageResult:
    """Run one stage (or one metric of the score stage) and return what it wrote."""
    ctx = make_context(config_json, run_root, run_id)
    if stage == "score":
        return await run_stage(f"score:{metric}", ctx, lambda c: score_mod.score_metric(c, metric))
    work = {
        "collect": collect_mod.collect,
        "sort": sort_mod.sort,
        "ground_truth": gt_mod.ground_truth,
        "report": report_mod.report,
    }[stage]
    return await run_stage(stage, ctx, work)


def _digests(run: RunFolder, names: tuple[str, ...]) -> dict[str, str]:
    return {n: file_digest(run.table_path(n)) for n in names if run.has(n)}


async def _run_one(
    stage: str, config: RunConfig, run: RunFolder, config_json: str, metric: str | None = None
) -> tuple[StageResult, bool]:
    extra: Any = None
    if stage == "collect":
        files = [Path(config.questions)] + (
            [Path(config.collect.corpus)] if config.collect.corpus else []
        )
        extra = {str(p): file_digest(p) if p.is_file() else None for p in files}
    if stage == "score":
        extra = {"metric": metric}
    writes = (f"scores/{metric}",) if stage == "score" else _WRITES[stage]
    # A cached result whose tables were deleted would point at nothing: run it again.
    refresh = not all(run.has(t) for t in writes)
    outer = time.perf_counter()
    state = await stage_task.with_options(
        task_run_name=f"{stage}{':' + metric if metric else ''}", refresh_cache=refresh
    )(
        stage,
        config_json,
        str(run.path.parent),
        run.run_id,
        stage_key(config, stage, extra),
        _digests(run, _READS[stage]),
        metric,
        return_state=True,
    )
    result: StageResult = await state.result()
    # Wall time around the task call, Prefect's bookkeeping included (the stage's own time is
    # result.seconds): the difference is what orchestration costs.
    result.task_seconds = time.perf_counter() - outer
    return result, state.name == "Cached"


@flow(name="ragaudit-evaluate", log_prints=False, persist_result=False)
async def evaluate(
    config_json: str, run_id: str, stages: list[str] | None = None
) -> dict[str, Any]:
    """Evaluate a question set end to end (or the given stages) in the run folder ``run_id``."""
    config = RunConfig.model_validate_json(config_json)
    run = RunFolder(config.runs_root, run_id)
    selected = [s for s in STAGES if stages is None or s in stages]
    if not config.sort.enabled and "sort" in selected:
        selected.remove("sort")
    if not config.ground_truth.enabled and "ground_truth" in selected:
        selected.remove("ground_truth")
    started = time.perf_counter()
    previous = run.read_manifest()
    manifest = base_manifest(config, run_id)
    manifest["stages"] = dict(previous.get("stages", {}))
    manifest["status"] = "running"
    manifest["started_at"] = dt.datetime.now(dt.UTC).isoformat()
    run.write_manifest(manifest)
    totals = {"calls": 0, "cache_hits": 0, "provider_calls": 0}

    def account(name: str, result: StageResult, cached: bool) -> None:
        manifest["stages"][name] = {
            "seconds": 0.0 if cached else round(result.seconds, 3),
            "task_s": round(result.task_seconds, 3),
            "cached": cached,
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
            if stage == "score":
                # Metrics are independent: their tasks run together in this event loop, sharing
                # the gateway's per-model limit.
                metric_names = list(config.score.metrics)
                outcomes = await asyncio.gather(
                    *(_run_one("score", config, run, config_json, m) for m in metric_names)
                )
                for m, (result, cached) in zip(metric_names, outcomes, strict=True):
                    account(f"score:{m}", result, cached)
                ctx = make_context(config_json, str(run.path.parent), run_id)
                score_mod.combine_scores(ctx, metric_names)
                continue
            result, cached = await _run_one(stage, config, run, config_json)
            account(stage, result, cached)
        manifest["status"] = "completed"
    except BaseException as exc:
        manifest["status"] = "failed"
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
        manifest["warnings"] = judge_warnings(config, run)
        run.write_manifest(manifest)
    return manifest


@flow(name="ragaudit-evaluate-config", log_prints=False, persist_result=False)
async def evaluate_config(config_path: str, run_id: str | None = None) -> dict[str, Any]:
    """Deployment entry: evaluate with a config file; a scheduled run gets a timestamped id."""
    from ragaudit.config import load_config

    config = load_config(Path(config_path))
    rid = run_id or config.run_id or dt.datetime.now(dt.UTC).strftime("%Y%m%d-%H%M%S")
    return await evaluate(config.model_dump_json(), rid)


if __name__ == "__main__":
    import sys

    asyncio.run(evaluate_config(sys.argv[1] if len(sys.argv) > 1 else "data/demo/config.yaml"))
