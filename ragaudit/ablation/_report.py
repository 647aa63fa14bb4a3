"""The ablation's outputs, written into its folder.

``ablation.parquet``, ``outliers.parquet``, one SVG chart per swept dimension,
``ablation.json``, a self-contained ``report.html`` and ``ablation.xlsx``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl

from ragaudit._ablate_config import DIMENSIONS
from ragaudit.ablation._charts import LABELS, describe, dimension_chart, fixed_values
from ragaudit.ablation._pipeline import IndexInfo, ablation_dir
from ragaudit.ablation._plan import PlannedPoint
from ragaudit.ablation._results import OBJECTIVE, Findings, findings, load_results, write_parquet
from ragaudit.atomic import atomic_path
from ragaudit.config import RunConfig
from ragaudit.reporting import template_env, text_workbook
from ragaudit.runfolder import write_bytes, write_json


def write_outputs(
    config: RunConfig,
    done: list[PlannedPoint],
    indexes: dict[str, IndexInfo],
    failed: dict[str, str] | None = None,
) -> Findings:
    """Read the evaluated points back and write every output into the ablation's folder."""
    folder = ablation_dir(config)
    found = findings(config, load_results(config, done, indexes))
    write_parquet(found.table, folder / "ablation.parquet", "ablation")
    write_parquet(found.outliers, folder / "outliers.parquet", "ablation_outliers")
    charts: dict[str, str] = {}
    for dim in DIMENSIONS:
        if dim not in config.ablate.sweeps or found.table.is_empty():
            continue
        svg = dimension_chart(found.table, dim, config.ablate.baseline)
        if svg is not None:
            charts[dim] = svg
            write_bytes(svg.encode("utf-8"), folder / "charts" / f"{dim}.svg")
    write_json(summary(config, found, failed or {}), folder / "ablation.json")
    write_bytes(
        render_html(config, found, charts, failed or {}).encode("utf-8"), folder / "report.html"
    )
    write_xlsx(found, folder / "ablation.xlsx")
    return found


def _points(found: Findings) -> pl.DataFrame:
    """One row per point: dimensions, objective, verdict against the best."""
    return (
        found.table.filter(pl.col("metric") == OBJECTIVE)
        .drop("metric")
        .rename({"mean": "objective", "ci_low": "objective_low", "ci_high": "objective_high"})
        .sort("objective", descending=True, nulls_last=True)
    )


def summary(config: RunConfig, found: Findings, failed: dict[str, str]) -> dict[str, Any]:
    """``ablation.json``: the recommendation in a few fields."""
    pts = _points(found)
    best = pts.filter(pl.col("is_best")).to_dicts()
    return {
        "best": found.best,
        "best_point": {d: best[0][d] for d in DIMENSIONS} if best else None,
        "objective": found.weights,
        "objective_left_out": found.left_out,
        "indistinguishable_from_best": pts.filter(pl.col("indistinguishable") & ~pl.col("is_best"))[
            "point_id"
        ].to_list(),
        "points": pts.height,
        "failed_points": failed,
        "alpha": config.report.alpha,
    }


def _cell(v: Any) -> str:
    if v is None:
        return "–"
    if isinstance(v, float):
        return f"{v:.3f}"
    return str(v)


def _table(df: pl.DataFrame, cols: list[str], mark: str | None = None) -> dict[str, Any]:
    """A table for the template: its columns and, per row, its class and its cells as text."""
    rows = []
    for r in df.iter_rows(named=True):
        cls = ""
        if mark and r.get("is_best"):
            cls = "best"
        elif mark and r.get(mark):
            cls = "tie"
        rows.append((cls, [_cell(r.get(c)) for c in cols]))
    return {"columns": cols, "rows": rows}


_ENV = template_env("ragaudit.ablation")
_POINT_COLUMNS = [
    "point_id",
    *DIMENSIONS,
    "objective",
    "objective_low",
    "objective_high",
    "n_ok",
    "diff_vs_best",
    "p_vs_best",
    "provider_calls",
    "cost_usd",
    "chunks",
    "status",
]


def render_html(
    config: RunConfig, found: Findings, charts: dict[str, str], failed: dict[str, str]
) -> str:
    """The self-contained report: charts inline as SVG, no script, no external resource."""
    pts = _points(found)
    base = config.ablate.baseline
    best: dict[str, Any] | None = None
    if found.best:
        row = pts.filter(pl.col("is_best")).row(0, named=True)
        best = {
            "point": ", ".join(f"{d}={describe(d, row[d])}" for d in DIMENSIONS),
            "objective": f"{row['objective']:.3f}",
            "ties": pts.filter(pl.col("indistinguishable") & ~pl.col("is_best"))[
                "point_id"
            ].to_list(),
        }
    wide = found.table.pivot(on="metric", index="point_id", values="mean")
    return _ENV.get_template("ablation.html.j2").render(
        name=config.ablate.name,
        judge=config.models.judge_model,
        generator=config.models.generator_model,
        corpus=str(config.ablate.corpus),
        backend=config.collect.backend,
        baseline=", ".join(f"{d}={describe(d, getattr(base, d))}" for d in DIMENSIONS),
        warnings=sorted({w for r in found.results for w in r.report.warnings}),
        failed=failed,
        best=best,
        weights=", ".join(f"{m}×{w:g}" for m, w in found.weights.items()),
        alpha=f"{config.report.alpha:g}",
        left_out=found.left_out,
        charts=[
            {"label": LABELS[dim], "fixed": fixed_values(dim, base), "svg": svg}
            for dim, svg in charts.items()
        ],
        points=_table(pts, _POINT_COLUMNS, mark="indistinguishable"),
        means=_table(wide, wide.columns),
        outliers=_table(found.outliers, found.outliers.columns),
    )


def write_xlsx(found: Findings, path: Path) -> None:
    """``ablation.xlsx``: points, the point × metric table and the outliers (atomically)."""
    with atomic_path(path) as tmp, text_workbook(str(tmp)) as book:
        _points(found).write_excel(book, worksheet="points")
        found.table.write_excel(book, worksheet="metrics")
        found.outliers.write_excel(book, worksheet="outliers")


__all__ = ["render_html", "summary", "write_outputs", "write_xlsx"]
