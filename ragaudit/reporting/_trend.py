"""A metric's mean over the runs of one question set, as an inline SVG chart."""

from __future__ import annotations

from typing import Any

import altair as alt

from ragaudit.reporting._charts import _WIDTH, Figure, _configure, _finite, _svg
from ragaudit.reporting._runs import RunOverview


def trend_chart(metric: str, series: list[RunOverview]) -> Figure | None:
    """The mean of ``metric`` per run (oldest first) with its 95% interval (None: no run has one).

    The x axis is the run, in order, not its date: runs an hour apart and a month apart are
    one step each, which is what a reader comparing runs wants to see.
    """
    rows: list[dict[str, Any]] = []
    for r in series:
        mean = r.means.get(metric)
        if not _finite(mean):
            continue
        low, high = r.ci.get(metric, (None, None))
        rows.append(
            {
                "run": r.run_id,
                "mean": mean,
                "low": low if _finite(low) else mean,
                "high": high if _finite(high) else mean,
                "judge": r.judge or "unknown",
                "started": (r.started_at or "")[:16].replace("T", " "),
            }
        )
    if not rows:
        return None
    order = [r["run"] for r in rows]
    data = alt.NamedData(name="trend")
    x = alt.X("run:N", sort=order, title=None, axis=alt.Axis(labelAngle=-30, labelLimit=160))
    base = alt.Chart(data).encode(x=x)
    line = base.mark_line(color="#2b7bba").encode(y=alt.Y("mean:Q", title=f"{metric} (95% CI)"))
    ci = base.mark_rule(strokeWidth=2, color="#555").encode(y="low:Q", y2="high:Q")
    point = base.mark_point(filled=True, size=70).encode(
        y="mean:Q",
        color=alt.Color("judge:N", legend=alt.Legend(title="judge", orient="bottom")),
        tooltip=["run:N", "started:N", "judge:N", alt.Tooltip("mean:Q", format=".3f")],
    )
    layers = [line, ci, point]
    caption = (
        "Dot: the run's mean over its ok rows, coloured by judge; bar: its 95% percentile "
        "bootstrap interval. Runs in the order they started; a change of judge changes what a "
        "mean measures."
    )
    # People's labels of a run correct its judge's mean: drawn beside it, never instead.
    people = [
        {"run": r.run_id, "mean": c.mean, "low": c.ci_low, "high": c.ci_high, "labels": c.n_labels}
        for r in series
        if r.run_id in order
        and (c := r.corrected.get(metric)) is not None
        and _finite(c.mean)
        and _finite(c.ci_low)
        and _finite(c.ci_high)
    ]
    if people:
        shown = alt.Chart(alt.NamedData(name="people")).encode(x=x)
        layers += [
            shown.mark_rule(strokeWidth=2, color="#e6550d", xOffset=6).encode(
                y="low:Q", y2="high:Q"
            ),
            shown.mark_point(
                shape="diamond", filled=True, size=70, color="#e6550d", xOffset=6
            ).encode(
                y="mean:Q",
                tooltip=["run:N", alt.Tooltip("mean:Q", format=".3f"), "labels:Q"],
            ),
        ]
        caption += (
            " Orange diamond: the mean corrected by people's labels of that run (PPI), with its "
            "95% interval."
        )
    chart = alt.layer(*layers).properties(width=_WIDTH, height=260)
    datasets = {"trend": rows} | ({"people": people} if people else {})
    return Figure(
        "trend",
        f"{metric} over the runs of one question set",
        caption,
        _svg(_configure(chart), datasets),
    )


def audit_series_chart(metric: str, rows: list[dict[str, Any]]) -> Figure | None:
    """An audit's daily estimates of ``metric`` per segment, and the probe's mean beside them.

    None when no day has the metric. ``rows``: ``day``, ``segment``, ``estimate``, ``ci_low``,
    ``ci_high`` (the traffic's, from ``series.parquet``) and rows whose segment is ``probe``
    (the fixed probe queries' mean, no interval): a traffic line that moves while the probe's
    stays is the traffic's doing.
    """
    kept = [
        {
            **r,
            "low": r["ci_low"] if _finite(r.get("ci_low")) else r["estimate"],
            "high": r["ci_high"] if _finite(r.get("ci_high")) else r["estimate"],
        }
        for r in rows
        if _finite(r.get("estimate"))
    ]
    if not kept:
        return None
    data = alt.NamedData(name="series")
    x = alt.X("day:O", title=None, axis=alt.Axis(labelAngle=-30))
    colour = alt.Color("segment:N", legend=alt.Legend(title="segment", orient="bottom"))
    base = alt.Chart(data).encode(x=x, color=colour)
    line = base.mark_line(point=True).encode(
        y=alt.Y("estimate:Q", title=f"{metric} (95% CI)", scale=alt.Scale(zero=False)),
        strokeDash=alt.condition("datum.segment == 'probe'", alt.value([4, 3]), alt.value([1, 0])),
        tooltip=["day:O", "segment:N", alt.Tooltip("estimate:Q", format=".3f")],
    )
    ci = base.mark_rule(strokeWidth=1.5, opacity=0.5).encode(y="low:Q", y2="high:Q")
    chart = alt.layer(line, ci).properties(width=_WIDTH, height=280)
    return Figure(
        "audit-series",
        f"{metric} day by day, per segment",
        "Line: the day's design-weighted estimate per segment, bar: its 95% interval; dashed: "
        "the probe's mean (the same queries searched again every day through the engine).",
        _svg(_configure(chart), {"series": kept}),
    )


__all__ = ["audit_series_chart", "trend_chart"]
