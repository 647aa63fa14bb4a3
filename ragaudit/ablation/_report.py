"""The ablation's outputs, written into its folder.

``ablation.parquet``, ``outliers.parquet``, one SVG chart per swept dimension,
``ablation.json``, a self-contained ``report.html`` and ``ablation.xlsx``.
"""

from __future__ import annotations

import html
import os
import tempfile
from pathlib import Path
from typing import Any

import polars as pl

from ragaudit.ablation._charts import LABELS, describe, dimension_chart, fixed_values
from ragaudit.ablation._pipeline import IndexInfo, ablation_dir
from ragaudit.ablation._plan import PlannedPoint
from ragaudit.ablation._results import OBJECTIVE, Findings, findings, load_results, write_parquet
from ragaudit.config import DIMENSIONS, RunConfig
from ragaudit.reporting import text_workbook
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
    return html.escape(str(v))


def _table(df: pl.DataFrame, cols: list[str], mark: str | None = None) -> str:
    head = "".join(f"<th>{html.escape(c)}</th>" for c in cols)
    body = []
    for r in df.iter_rows(named=True):
        cls = ""
        if mark and r.get("is_best"):
            cls = ' class="best"'
        elif mark and r.get(mark):
            cls = ' class="tie"'
        body.append(f"<tr{cls}>" + "".join(f"<td>{_cell(r.get(c))}</td>" for c in cols) + "</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


_STYLE = """
body{font-family:system-ui,-apple-system,"Segoe UI","Noto Sans CJK SC","Microsoft YaHei",sans-serif;
margin:2rem auto;max-width:1100px;color:#222;padding:0 1rem}
table{border-collapse:collapse;font-size:.85rem;margin:.5rem 0 1.5rem}
td,th{border:1px solid #ddd;padding:.25rem .5rem;text-align:right}
th{background:#f4f4f4} tr.best td{background:#d8f0d8;font-weight:600} tr.tie td{background:#eef7ee}
td:first-child,th:first-child{text-align:left} .note{color:#555;font-size:.9rem}
figure{margin:1rem 0} .warn{background:#fff4e0;border-left:4px solid #e8a33d;padding:.5rem 1rem}
"""


def render_html(
    config: RunConfig, found: Findings, charts: dict[str, str], failed: dict[str, str]
) -> str:
    """The self-contained report: charts inline as SVG, no script, no external resource."""
    pts = _points(found)
    base = config.ablate.baseline
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'>",
        f"<title>Ablation {html.escape(config.ablate.name)}</title>",
        f"<style>{_STYLE}</style></head><body>",
        f"<h1>Ablation: {html.escape(config.ablate.name)}</h1>",
        "<p class='note'>Judge "
        f"<code>{html.escape(config.models.judge_model)}</code>, generator "
        f"<code>{html.escape(config.models.generator_model)}</code>, corpus "
        f"<code>{html.escape(str(config.ablate.corpus))}</code>, backend "
        f"<code>{html.escape(config.collect.backend)}</code>. Baseline: "
        + ", ".join(f"{d}={describe(d, getattr(base, d))}" for d in DIMENSIONS)
        + ".</p>",
    ]
    warnings = {w for r in found.results for w in r.report.warnings}
    if warnings:
        parts.append("".join(f"<p class='warn'>{html.escape(w)}</p>" for w in sorted(warnings)))
    if failed:
        parts.append(
            "<p class='warn'>Points that failed: "
            + "; ".join(f"{html.escape(k)}: {html.escape(v)}" for k, v in failed.items())
            + "</p>"
        )
    weights = ", ".join(f"{m}×{w:g}" for m, w in found.weights.items())
    parts.append("<h2>Recommendation</h2>")
    if found.best:
        best = pts.filter(pl.col("is_best")).row(0, named=True)
        ties = pts.filter(pl.col("indistinguishable") & ~pl.col("is_best"))["point_id"].to_list()
        parts.append(
            "<p><b>Best combination:</b> "
            + ", ".join(f"{d}={describe(d, best[d])}" for d in DIMENSIONS)
            + f" (objective {best['objective']:.3f}, "
            + f"the weighted mean of {html.escape(weights)}).</p>"
            + "<p>"
            + (
                f"{len(ties)} other point(s) are statistically indistinguishable from it "
                f"(paired permutation test over shared questions, adjusted across points, "
                f"α={config.report.alpha:g}): {html.escape(', '.join(ties))}. Among those, prefer "
                "the cheapest (smaller top-k, smaller corpus)."
                if ties
                else "Every other point is worse beyond noise."
            )
            + "</p>"
        )
    else:
        parts.append(
            "<p>No point has an objective value (no question scored ok on every metric).</p>"
        )
    if found.left_out:
        parts.append(
            "<p class='warn'>Left out of the objective, as no point scored them: "
            + "; ".join(
                f"{html.escape(m)} ({html.escape(why)})" for m, why in found.left_out.items()
            )
            + ". Name the metrics in <code>ablate.objective</code> to decide it yourself.</p>"
        )
    parts.append("<h2>Sweeps</h2>")
    for dim, svg in charts.items():
        parts.append(
            f"<figure><figcaption>{html.escape(LABELS[dim])} — fixed: "
            f"{html.escape(fixed_values(dim, base))}</figcaption>{svg}</figure>"
        )
    parts.append(
        "<h2>Points</h2><p class='note'>Green: best; light green: indistinguishable from it.</p>"
    )
    parts.append(
        _table(
            pts,
            [
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
            ],
            mark="indistinguishable",
        )
    )
    wide = found.table.pivot(on="metric", index="point_id", values="mean")
    parts.append("<h2>Means per metric</h2>")
    parts.append(_table(wide, wide.columns))
    parts.append(
        "<h2>Outliers</h2><p class='note'>Questions whose objective swings most across points.</p>"
    )
    parts.append(_table(found.outliers, found.outliers.columns))
    parts.append("</body></html>")
    return "\n".join(parts)


def write_xlsx(found: Findings, path: Path) -> None:
    """``ablation.xlsx``: points, the point × metric table and the outliers (atomically)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".xlsx.tmp")
    os.close(fd)
    try:
        with text_workbook(tmp) as book:
            _points(found).write_excel(book, worksheet="points")
            found.table.write_excel(book, worksheet="metrics")
            found.outliers.write_excel(book, worksheet="outliers")
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


__all__ = ["render_html", "summary", "write_outputs", "write_xlsx"]
