"""The summary of a report: each metric's mean with its interval and flag, the worst questions.

The intervals are :func:`ragaudit.stats.bootstrap_ci`'s; this module only gathers them, and
reads ``summary.parquet`` back whatever its schema version (:func:`stored_rows`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import polars as pl

from ragaudit.reporting._model import MetricSummary, WorstQuestion
from ragaudit.stats import bootstrap_ci


def summarise(
    scores: pl.DataFrame,
    thresholds: Mapping[str, float],
    samples: int,
    higher_is_better: Mapping[str, bool] | None = None,
    seed: int = 0,
) -> list[MetricSummary]:
    """One summary per metric (in the scores' order): mean over ``ok`` rows, interval, counts.

    A mean is flagged below its threshold, or above it for a metric whose lower values are
    better (noise sensitivity, maliciousness).
    """
    directions = higher_is_better or {}
    out = []
    for metric in scores["metric"].unique(maintain_order=True).to_list():
        part = scores.filter(pl.col("metric") == metric)
        ok = part.filter(pl.col("status") == "ok")["value"].to_numpy().astype(float)
        mean = float(ok.mean()) if len(ok) else None
        low, high = bootstrap_ci(ok, samples, seed)
        threshold = thresholds.get(metric)
        up = directions.get(metric, True)
        flagged = (
            threshold is not None
            and mean is not None
            and (mean < threshold if up else mean > threshold)
        )
        out.append(
            MetricSummary(
                metric=metric,
                mean=mean,
                ci_low=low,
                ci_high=high,
                n_ok=len(ok),
                n_failed=part.filter(pl.col("status") == "failed").height,
                n_skipped=part.filter(pl.col("status") == "skipped").height,
                threshold=threshold,
                flagged=bool(flagged),
                higher_is_better=up,
            )
        )
    return out


def worst_questions(
    scores: pl.DataFrame, n: int, higher_is_better: Mapping[str, bool] | None = None
) -> list[WorstQuestion]:
    """The ``n`` worst ``ok`` rows per metric: lowest values, highest where lower is better."""
    directions = higher_is_better or {}
    out: list[WorstQuestion] = []
    if n <= 0:
        return out
    ok = scores.filter(pl.col("status") == "ok")
    for metric in ok["metric"].unique(maintain_order=True).to_list():
        up = directions.get(metric, True)
        part = (
            ok.filter(pl.col("metric") == metric)
            .sort(["value", "question_id"], descending=[not up, False])
            .head(n)
        )
        out.extend(
            WorstQuestion(metric=metric, question_id=q, value=float(v))
            for q, v in zip(part["question_id"], part["value"], strict=True)
        )
    return out


# The table's columns that are not a MetricSummary's: which run, which kind of row, the note,
# and which cell of which breakdown a row of kind ``breakdown`` summarises.
_TABLE_ONLY = ("run_id", "kind", "ppi_note", "breakdown", "cell")


def stored_rows(rows: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """``summary.parquet``'s rows as (metric rows, figure rows), any schema version.

    A metric row keeps a ``MetricSummary``'s fields only; a figure row (version 3, the judged
    candidates' figures corrected by grade labels) keeps every column. A row of an older
    table is a metric row. Rows of kind ``breakdown`` (version 4) are neither: the
    breakdowns read them (``_breakdowns.stored_breakdowns``).
    """
    metrics = [
        {k: v for k, v in r.items() if k not in _TABLE_ONLY}
        for r in rows
        if r.get("kind") in (None, "metric")
    ]
    return metrics, [r for r in rows if r.get("kind") == "figure"]


__all__ = ["stored_rows", "summarise", "worst_questions"]
