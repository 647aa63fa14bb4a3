"""The call log (``llm_calls/*.parquet``) rolled up per stage."""

from __future__ import annotations

import re
from pathlib import Path

import polars as pl

from ragaudit.reporting._model import StageCalls
from ragaudit.runfolder import read_parquet_file

# "RateLimitError: litellm.RateLimitError: ..." → "RateLimitError"; the exception class is what
# calls have in common, the rest of the text (ids, timings) differs call by call.
_ERROR_CLASS = re.compile(r"^\s*([A-Za-z_][\w.]*(?:Error|Exception|Timeout|Exceeded)\w*)\s*:")
_REASON_CHARS = 80


def read_calls(calls_dir: Path) -> pl.DataFrame | None:
    """Every call log file of a run, concatenated (None when there is none)."""
    files = sorted(calls_dir.glob("*.parquet")) if calls_dir.is_dir() else []
    if not files:
        return None
    frames = [pl.DataFrame(read_parquet_file(p)) for p in files]
    return pl.concat(frames, how="diagonal_relaxed").sort("ts")


def failure_reason(error: str) -> str:
    """A short reason that groups failed calls: the exception class, else the text's start."""
    found = _ERROR_CLASS.match(error)
    if found:
        return found.group(1).rsplit(".", 1)[-1]
    first = error.strip().splitlines()[0] if error.strip() else "unknown error"
    return first[:_REASON_CHARS]


def _rollup(stage: str, part: pl.DataFrame) -> StageCalls:
    provider = part.filter(~pl.col("cache_hit"))
    priced = part.filter(pl.col("cost_usd").is_not_null())
    latency = provider["latency_s"].drop_nulls()
    failures: dict[str, int] = {}
    for error in part["error"].drop_nulls().to_list():
        reason = failure_reason(error)
        failures[reason] = failures.get(reason, 0) + 1
    return StageCalls(
        stage=stage,
        calls=part.height,
        memo_hits=int(part["cache_hit"].sum()),
        provider_calls=provider.height,
        tokens_in=int(part["tokens_in"].fill_null(0).sum()),
        tokens_out=int(part["tokens_out"].fill_null(0).sum()),
        cost_usd=float(priced["cost_usd"].sum()) if priced.height else None,
        priced_calls=priced.height,
        latency_p50_s=latency.quantile(0.5, "linear") if len(latency) else None,
        latency_p95_s=latency.quantile(0.95, "linear") if len(latency) else None,
        failures=tuple(sorted(failures.items(), key=lambda kv: (-kv[1], kv[0]))),
        models=tuple(sorted(part["model"].drop_nulls().unique().to_list())),
        prompt_versions=tuple(sorted(part["prompt_version"].drop_nulls().unique().to_list())),
    )


def rollup_calls(calls: pl.DataFrame | None) -> tuple[tuple[StageCalls, ...], StageCalls | None]:
    """Per stage (in the order the stages first called), and the run's total."""
    if calls is None or calls.height == 0:
        return (), None
    stages = calls["stage"].fill_null("").unique(maintain_order=True).to_list()
    per_stage = tuple(_rollup(s, calls.filter(pl.col("stage").fill_null("") == s)) for s in stages)
    return per_stage, _rollup("total", calls)


__all__ = ["failure_reason", "read_calls", "rollup_calls"]
