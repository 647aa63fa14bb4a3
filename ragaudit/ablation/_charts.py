"""One line chart per swept dimension: x the value, y each metric's mean with its 95% band.

Altair builds the Vega-Lite spec; vl-convert (Vega bundled) renders it to SVG in-process, so
the charts need no browser and no network, and the HTML report embeds them inline.
"""

from __future__ import annotations

import math
from typing import Any

import altair as alt
import polars as pl
import vl_convert as vlc

from ragaudit._ablate_config import DIMENSIONS, AblationPoint
from ragaudit.directions import span

FONT = (
    'system-ui, -apple-system, "Segoe UI", "Noto Sans CJK SC", "Noto Sans SC", '
    '"PingFang SC", "Microsoft YaHei", "WenQuanYi Micro Hei", sans-serif'
)
LABELS = {
    "file_size": "corpus size (MB)",
    "chunk_size": "chunk size (tokens)",
    "overlap": "chunk overlap (tokens)",
    "context": "paragraph context in chunks",
    "top_k": "top-k chunks retrieved",
}


def describe(dim: str, value: Any) -> str:
    """A value as the charts and the report show it (bytes as MB)."""
    if dim == "file_size":
        return f"{value / 1e6:g} MB"
    if dim == "context":
        return "on" if value else "off"
    return str(value)


def fixed_values(dim: str, baseline: AblationPoint) -> str:
    """``chunk_size=500, context=on, …``: every dimension but ``dim`` at the baseline."""
    return ", ".join(f"{d}={describe(d, getattr(baseline, d))}" for d in DIMENSIONS if d != dim)


def _finite(v: Any) -> bool:
    return v is not None and isinstance(v, int | float) and math.isfinite(v)


def dimension_chart(table: pl.DataFrame, dim: str, baseline: AblationPoint) -> str | None:
    """The SVG line chart of sweep ``dim`` (None when fewer than two points are on it)."""
    on = table.filter(pl.col("sweeps").str.split(",").list.contains(dim))
    if on["point_id"].n_unique() < 2:
        return None
    rows = []
    for r in on.iter_rows(named=True):
        if not _finite(r["mean"]):
            continue
        x = (
            r[dim] / 1e6
            if dim == "file_size"
            else (("on" if r[dim] else "off") if dim == "context" else r[dim])
        )
        rows.append(
            {
                "x": x,
                "metric": r["metric"],
                "mean": r["mean"],
                "low": r["ci_low"] if _finite(r["ci_low"]) else r["mean"],
                "high": r["ci_high"] if _finite(r["ci_high"]) else r["mean"],
                "n": r["n_ok"],
            }
        )
    if not rows:
        return None
    nominal = dim == "context"
    x = (
        alt.X("x:N", title=LABELS[dim], sort=["on", "off"])
        if nominal
        else alt.X(
            "x:Q",
            title=LABELS[dim],
            scale=alt.Scale(zero=False),
            # Ticks at the swept values: Vega's own ticks crowded the corpus sizes' axis into
            # overlapping labels ("0.000.05 … 0.750.80") and fell between the points.
            # The value as given (100, not d3's "1e+2"; 0.08, not "0.1").
            axis=alt.Axis(values=sorted({r["x"] for r in rows}), labelExpr="datum.value"),
        )
    )
    data = alt.NamedData(name="points")
    color = alt.Color("metric:N", title="metric")
    base = alt.Chart(data).encode(x=x, color=color)
    # The declared ranges of the metrics drawn (the data's own when one is unbounded).
    found = span(dict.fromkeys(r["metric"] for r in rows))
    scale = alt.Scale(domain=list(found)) if found else alt.Scale(zero=False)
    band = base.mark_area(opacity=0.15).encode(
        y=alt.Y("low:Q", title="mean (95% CI)", scale=scale), y2="high:Q"
    )
    if nominal:
        band = base.mark_rule(strokeWidth=3, opacity=0.4).encode(
            y=alt.Y("low:Q", title="mean (95% CI)", scale=scale), y2="high:Q"
        )
    line = base.mark_line(point=True).encode(
        y=alt.Y("mean:Q", scale=scale),
        tooltip=["metric:N", "x:N" if nominal else "x:Q", "mean:Q", "low:Q", "high:Q", "n:Q"],
    )
    chart = (
        alt.layer(band, line)
        .properties(
            width=520,
            height=300,
            title=alt.TitleParams(
                f"Varying {LABELS[dim]}",
                subtitle=f"fixed: {fixed_values(dim, baseline)}",
                anchor="start",
            ),
        )
        .configure(font=FONT, padding={"left": 20, "right": 20, "top": 5, "bottom": 5})
        .configure_legend(labelLimit=0)
    )
    spec = chart.to_dict(validate=False)
    spec["datasets"] = {**spec.get("datasets", {}), "points": rows}
    return vlc.vegalite_to_svg(spec)


__all__ = ["LABELS", "describe", "dimension_chart", "fixed_values"]
