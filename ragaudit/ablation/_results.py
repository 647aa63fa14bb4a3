"""What an ablation found: a table of point × metric, the best point, and the outlier questions.

Every figure is read back from the points' run folders through the report model
(:func:`ragaudit.reporting.build_report`), so a point's means and intervals are the digits its
own report shows. The objective of a question is the weighted mean of its metric values (a
lower-is-better metric counted as 1 − value: its :func:`ragaudit.directions.goodness` over
its declared range), defined where every objective metric is ``ok``;
the default objective leaves out a metric no point scored (:func:`effective_objective`).
A point is *indistinguishable* from the best one when the paired permutation test on the
questions both answered (the one ``compare`` uses, :mod:`ragaudit.stats`), adjusted across the
points, does not put it below the best beyond noise (:func:`ragaudit.stats.beyond_noise`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from ragaudit._ablate_config import DIMENSIONS
from ragaudit.ablation._pipeline import IndexInfo, points_root
from ragaudit.ablation._plan import PlannedPoint
from ragaudit.config import RunConfig
from ragaudit.directions import goodness
from ragaudit.errors import ConfigError
from ragaudit.reporting import Report, build_report
from ragaudit.stats import adjust, beyond_noise, bootstrap_ci, paired_test

SCHEMA_VERSION = 1
OBJECTIVE = "objective"
"""The metric name of the objective's rows in ``ablation.parquet``."""


@dataclass(frozen=True)
class PointResult:
    """One evaluated point and its report."""

    planned: PlannedPoint
    index: IndexInfo
    report: Report
    objective: dict[str, float]
    """question_id → the question's objective (questions where it is defined)."""


@dataclass(frozen=True)
class Findings:
    """What the ablation report shows."""

    table: pl.DataFrame
    """``ablation.parquet``: one row per point × metric (the objective included)."""
    best: str | None
    """The best point's id (highest objective mean)."""
    outliers: pl.DataFrame
    """Questions whose objective swings most across the points."""
    weights: dict[str, float]
    """The objective: metric → weight."""
    results: tuple[PointResult, ...]
    left_out: dict[str, str]
    """Metrics the default objective left out (no point scored them) → why."""


def objective_weights(config: RunConfig) -> dict[str, float]:
    """The objective's metric weights: configured, or every scored metric equally.

    Raises:
        ConfigError: A weighted metric is not scored.
    """
    metrics = list(config.score.metrics)
    weights = dict(config.ablate.objective) or {m: 1.0 for m in metrics}
    unknown = [m for m in weights if m not in metrics]
    if unknown:
        raise ConfigError(
            f"ablate.objective: {', '.join(unknown)} not in score.metrics ({', '.join(metrics)})"
        )
    if not any(weights.values()) or min(weights.values()) < 0:
        raise ConfigError("ablate.objective: weights must be non-negative and not all 0")
    return weights


def effective_objective(
    config: RunConfig, reports: list[Report]
) -> tuple[dict[str, float], dict[str, str]]:
    """The objective's weights over what the points scored, and the metrics left out (→ why).

    A configured ``ablate.objective`` is taken as it is. The default one (every scored metric
    equally) leaves out a metric that no point scored ``ok`` on any question: it cannot tell
    the points apart, and kept, it would leave every question without an objective and the
    sweep without a recommendation (an English-only embedder, MiniLM, skips answer relevancy
    on every Chinese question). When no metric is left, nothing is left out.
    """
    weights = objective_weights(config)
    if config.ablate.objective:
        return weights, {}
    left_out: dict[str, str] = {}
    for metric in weights:
        cells = [c for r in reports for q in r.questions if (c := q.scores.get(metric)) is not None]
        if not any(c.status == "ok" and c.value is not None for c in cells):
            why = next((c.error for c in cells if c.error), None)
            left_out[metric] = why or "no question scored ok at any point"
    kept = {m: w for m, w in weights.items() if m not in left_out}
    if not kept or not any(kept.values()):
        return weights, {}
    return kept, left_out


def question_objective(report: Report, weights: dict[str, float]) -> dict[str, float]:
    """Per question: the weighted mean of its objective metrics, where all are ``ok``."""
    up = {s.metric: s.higher_is_better for s in report.summary}
    total = sum(weights.values())
    out: dict[str, float] = {}
    for q in report.questions:
        cells = [q.scores.get(m) for m in weights]
        if any(c is None or c.status != "ok" or c.value is None for c in cells):
            continue
        values = [c.value for c in cells if c is not None and c.value is not None]
        value = sum(
            w * goodness(m, v, up.get(m, True))
            for (m, w), v in zip(weights.items(), values, strict=True)
        )
        out[q.question_id] = value / total
    return out


def load_results(
    config: RunConfig, planned: list[PlannedPoint], indexes: dict[str, IndexInfo]
) -> list[PointResult]:
    """Every point's report from its run folder (``indexes``: point id → its index)."""
    reports = [build_report(points_root(config) / pp.point_id) for pp in planned]
    weights, _ = effective_objective(config, reports)
    return [
        PointResult(pp, indexes[pp.point_id], report, question_objective(report, weights))
        for pp, report in zip(planned, reports, strict=True)
    ]


def _point_columns(r: PointResult) -> dict[str, Any]:
    p = r.planned.point
    calls = r.report.calls_total
    return {
        "point_id": r.planned.point_id,
        **{d: getattr(p, d) for d in DIMENSIONS},
        "sweeps": ",".join(r.planned.dimensions),
        "status": r.report.status,
        "index": r.index.key,
        "subset_bytes": r.index.bytes,
        "subset_documents": r.index.documents,
        "chunks": r.index.chunks,
        "calls": calls.calls if calls else 0,
        "provider_calls": calls.provider_calls if calls else 0,
        "cost_usd": calls.cost_usd if calls else None,
    }


def findings(config: RunConfig, results: list[PointResult]) -> Findings:
    """The table, the best point with the points indistinguishable from it, the outliers."""
    weights, left_out = effective_objective(config, [r.report for r in results])
    rep = config.report
    obj_mean = {
        r.planned.point_id: float(np.mean(list(r.objective.values()))) if r.objective else None
        for r in results
    }
    ranked = [pid for pid, v in obj_mean.items() if v is not None]
    best = max(ranked, key=lambda pid: (obj_mean[pid], -ranked.index(pid))) if ranked else None
    by_id = {r.planned.point_id: r for r in results}
    tests: dict[str, Any] = {}
    if best is not None:
        b = by_id[best].objective
        for r in results:
            pid = r.planned.point_id
            if pid == best:
                continue
            shared = sorted(set(b) & set(r.objective))
            tests[pid] = paired_test(
                np.array([b[q] for q in shared]),
                np.array([r.objective[q] for q in shared]),
                resamples=rep.compare_resamples,
            )
    names = list(tests)
    adjusted = dict(
        zip(names, adjust([tests[n].p_value for n in names], rep.adjustment), strict=True)
    )

    rows: list[dict[str, Any]] = []
    for r in results:
        pid = r.planned.point_id
        base = _point_columns(r)
        t = tests.get(pid)
        p_adj = adjusted.get(pid)
        below = (
            t is not None
            and beyond_noise(p_adj, t.ci_low, t.ci_high, rep.alpha)
            and t.ci_high is not None
            and t.ci_high < 0
        )
        verdict = {
            "is_best": pid == best,
            "diff_vs_best": None if t is None else t.diff,
            "p_vs_best": p_adj,
            # Untestable (fewer than two shared questions) counts as indistinguishable: nothing
            # shows it is worse.
            "indistinguishable": pid == best or (best is not None and not below),
        }
        for s in r.report.summary:
            rows.append(
                {
                    **base,
                    "metric": s.metric,
                    "mean": s.mean,
                    "ci_low": s.ci_low,
                    "ci_high": s.ci_high,
                    "n_ok": s.n_ok,
                    "n_failed": s.n_failed,
                    "n_skipped": s.n_skipped,
                    **verdict,
                }
            )
        values = np.array(list(r.objective.values()), dtype=float)
        low, high = bootstrap_ci(values, rep.bootstrap_samples)
        n_q = len(r.report.questions)
        rows.append(
            {
                **base,
                "metric": OBJECTIVE,
                "mean": obj_mean[pid],
                "ci_low": low,
                "ci_high": high,
                "n_ok": len(values),
                "n_failed": 0,
                "n_skipped": n_q - len(values),
                **verdict,
            }
        )
    table = pl.DataFrame(rows, infer_schema_length=None)
    return Findings(
        table,
        best,
        _outliers(results, config.ablate.outliers),
        weights,
        tuple(results),
        left_out,
    )


def _outliers(results: list[PointResult], n: int) -> pl.DataFrame:
    """Questions whose objective differs most between points (max − min), largest first."""
    text = {q.question_id: q.question for r in results for q in r.report.questions}
    values: dict[str, dict[str, float]] = {}
    for r in results:
        for qid, v in r.objective.items():
            values.setdefault(qid, {})[r.planned.point_id] = v
    rows = []
    for qid, per in values.items():
        if len(per) < 2:
            continue
        lo, hi = min(per, key=per.__getitem__), max(per, key=per.__getitem__)
        rows.append(
            {
                "question_id": qid,
                "question": text.get(qid, ""),
                "swing": per[hi] - per[lo],
                "best_point": hi,
                "best_value": per[hi],
                "worst_point": lo,
                "worst_value": per[lo],
                "points": len(per),
            }
        )
    schema = {
        "question_id": pl.String, "question": pl.String, "swing": pl.Float64,
        "best_point": pl.String, "best_value": pl.Float64, "worst_point": pl.String,
        "worst_value": pl.Float64, "points": pl.Int64,
    }  # fmt: skip
    df = pl.DataFrame(rows, schema=schema)
    return df.sort(["swing", "question_id"], descending=[True, False]).head(n)


def write_parquet(df: pl.DataFrame, path: Path, table: str) -> None:
    """Write ``df`` atomically with the schema version in its metadata."""
    from ragaudit.runfolder import write_table

    arrow = df.to_arrow()
    write_table(
        arrow.replace_schema_metadata({"schema_version": str(SCHEMA_VERSION), "table": table}),
        path,
    )


__all__ = [
    "OBJECTIVE",
    "SCHEMA_VERSION",
    "Findings",
    "PointResult",
    "effective_objective",
    "findings",
    "load_results",
    "objective_weights",
    "question_objective",
    "write_parquet",
]
