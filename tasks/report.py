"""Stage 5, report: summary statistics and a Prefect table artifact.

Means with bootstrap confidence intervals, threshold flags and the worst questions.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import polars as pl

from ragaudit.schemas import SUMMARY, to_table
from ragaudit.tasks._common import StageContext


def bootstrap_ci(
    values: np.ndarray, samples: int, seed: int = 0, level: float = 0.95
) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean (NaN, NaN when it cannot be formed)."""
    if samples <= 0 or len(values) < 2:
        return math.nan, math.nan
    rng = np.random.default_rng(seed)
    means = rng.choice(values, size=(samples, len(values)), replace=True).mean(axis=1)
    alpha = (1 - level) / 2
    return float(np.quantile(means, alpha)), float(np.quantile(means, 1 - alpha))


def summarise(
    scores: pl.DataFrame,
    thresholds: dict[str, float],
    samples: int,
    lower_is_better: frozenset[str] = frozenset(),
) -> list[dict[str, Any]]:
    """One summary row per metric: mean over ``ok`` rows and how many rows it rests on.

    A mean is flagged below its threshold, or above it for the metrics in ``lower_is_better``
    (noise sensitivity, maliciousness).
    """
    rows = []
    for metric in scores["metric"].unique(maintain_order=True).to_list():
        part = scores.filter(pl.col("metric") == metric)
        ok = part.filter(pl.col("status") == "ok")["value"].to_numpy()
        mean = float(ok.mean()) if len(ok) else math.nan
        low, high = bootstrap_ci(ok, samples)
        threshold = thresholds.get(metric)
        rows.append(
            {
                "metric": metric,
                "mean": None if math.isnan(mean) else mean,
                "ci_low": None if math.isnan(low) else low,
                "ci_high": None if math.isnan(high) else high,
                "n_ok": len(ok),
                "n_failed": part.filter(pl.col("status") == "failed").height,
                "n_skipped": part.filter(pl.col("status") == "skipped").height,
                "threshold": threshold,
                "flagged": bool(
                    threshold is not None
                    and not math.isnan(mean)
                    and (mean > threshold if metric in lower_is_better else mean < threshold)
                ),
            }
        )
    return rows


def worst_questions(scores: pl.DataFrame, n: int) -> dict[str, list[tuple[str, float]]]:
    """The ``n`` lowest-scoring questions per metric."""
    out: dict[str, list[tuple[str, float]]] = {}
    ok = scores.filter(pl.col("status") == "ok")
    for metric in ok["metric"].unique(maintain_order=True).to_list():
        part = ok.filter(pl.col("metric") == metric).sort("value").head(n)
        out[metric] = list(zip(part["question_id"].to_list(), part["value"].to_list(), strict=True))
    return out


async def _artifact(ctx: StageContext, rows: list[dict[str, Any]]) -> None:
    """A Prefect table artifact of the summary (only inside a Prefect run)."""
    from prefect.artifacts import acreate_table_artifact
    from prefect.context import get_run_context

    try:
        get_run_context()
    except Exception:  # called outside a flow (a plain CLI stage): no artifact to attach to
        return
    key = "ragaudit-summary-" + "".join(c if c.isalnum() else "-" for c in ctx.run.run_id.lower())
    table = [
        {k: (round(v, 4) if isinstance(v, float) else v) for k, v in r.items() if k != "run_id"}
        for r in rows
    ]
    await acreate_table_artifact(
        key=key[:100],
        table=table,
        description=f"ragaudit run {ctx.run.run_id}: judge {ctx.judge}; folder {ctx.run.path}",
    )


async def report(ctx: StageContext) -> list[str]:
    """Write ``summary`` and publish the artifact."""
    scores = pl.from_arrow(ctx.run.read("scores"))
    cfg = ctx.config.report
    from ragaudit.metrics import METRICS

    lower = frozenset(name for name, m in METRICS.items() if not m.higher_is_better)
    rows = [
        {"run_id": ctx.run.run_id, **r}
        for r in summarise(scores, cfg.thresholds, cfg.bootstrap_samples, lower)
    ]
    ctx.run.write("summary", to_table(rows, SUMMARY))
    await _artifact(ctx, rows)
    return ["summary"]


__all__ = ["bootstrap_ci", "report", "summarise", "worst_questions"]
