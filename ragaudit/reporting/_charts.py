"""The report's charts: Vega-Lite specs built with Altair, rendered offline to inline SVG.

vl-convert bundles Vega and renders in-process, so the page needs no script and no network to
show a chart, and a chart prints like the rest of the page. Data is put into a spec after
Altair has built it: Altair deep-copies and converts inline rows, which took 4 s for the
20,000 cells of a 1,000 × 20 heatmap against milliseconds for the encodings alone.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, TypeGuard

import altair as alt
import vl_convert as vlc

from ragaudit.directions import about, goodness, label, shown, span
from ragaudit.reporting._calibration import CalibrationFigure, CalibrationSection
from ragaudit.reporting._model import Report

# The page's font stack, so chart text (Chinese included) renders like the page's.
FONT = (
    'system-ui, -apple-system, "Segoe UI", "Noto Sans CJK SC", "Noto Sans SC", '
    '"PingFang SC", "Microsoft YaHei", "WenQuanYi Micro Hei", sans-serif'
)
HEATMAP_MAX_ROWS = 200
"""Questions shown in the heatmap, worst first; a 1,000-row grid is unreadable and heavy."""
_WIDTH = 560
_STATUS_COLORS = {"failed": "#222222", "skipped": "#c8c8c8", "missing": "#f0f0f0"}


@dataclass(frozen=True)
class Figure:
    """One rendered chart of the page."""

    key: str
    title: str
    caption: str
    svg: str


def _svg(chart: alt.TopLevelMixin, data: dict[str, list[dict[str, Any]]]) -> str:
    """Render ``chart`` with its named datasets filled in (see the module docstring)."""
    spec = chart.to_dict(validate=False)
    spec["datasets"] = {**spec.get("datasets", {}), **data}
    return vlc.vegalite_to_svg(spec)


def _configure(chart: Any, left: int = 30) -> Any:
    # Padding: the browser's fallback font may set labels wider than vl-convert measured them.
    return (
        chart.configure(font=FONT, padding={"left": left, "right": 30, "top": 5, "bottom": 5})
        .configure_view(strokeWidth=0)
        .configure_legend(labelLimit=0, titleLimit=0)
    )


def _finite(v: float | None) -> TypeGuard[float]:
    return v is not None and math.isfinite(v)


def _value_scale(names: list[str]) -> alt.Scale:
    """An axis over the declared ranges of ``names`` (clamped), or the data's when unbounded."""
    found = span(names)
    return alt.Scale(domain=list(found), clamp=True) if found else alt.Scale(zero=False)


def means_chart(report: Report) -> Figure | None:
    """Mean of every metric with its 95% bootstrap interval and its threshold."""
    rows: list[dict[str, Any]] = [
        {
            "metric": shown(s.metric, s.higher_is_better),
            "mean": s.mean,
            "low": s.ci_low if _finite(s.ci_low) else s.mean,
            "high": s.ci_high if _finite(s.ci_high) else s.mean,
            "threshold": s.threshold,
            "flag": "beyond threshold" if s.flagged else "within threshold",
            "n": s.n_ok,
        }
        for s in report.summary
        if _finite(s.mean)
    ]
    if not rows:
        return None
    order = [r["metric"] for r in rows]
    # One axis for every metric: the declared ranges of those drawn.
    scale = _value_scale([s.metric for s in report.summary if _finite(s.mean)])
    data = alt.NamedData(name="means")
    y = alt.Y("metric:N", sort=order, title=None)
    base = alt.Chart(data).encode(y=y)
    x = alt.X("mean:Q", scale=scale, title="mean (95% CI)")
    point = base.mark_point(filled=True, size=90).encode(
        x=x,
        color=alt.Color(
            "flag:N",
            scale=alt.Scale(
                domain=["within threshold", "beyond threshold"], range=["#2b7bba", "#d62728"]
            ),
            legend=alt.Legend(title=None, orient="bottom"),
        ),
    )
    x_low = alt.X("low:Q", scale=scale)
    ci = base.mark_rule(strokeWidth=2, color="#555").encode(x=x_low, x2="high:Q")
    thr = (
        alt.Chart(data)
        .transform_filter("isValid(datum.threshold)")
        .mark_tick(color="#d62728", thickness=2, size=18)
        .encode(y=y, x=alt.X("threshold:Q"))
    )
    chart = _configure(
        alt.layer(ci, point, thr).properties(width=_WIDTH - 200, height=alt.Step(22))
    )
    return Figure(
        "means",
        "Metric means against thresholds",
        "Dot: mean over the ok rows; bar: 95% percentile bootstrap interval; red tick: the "
        "threshold. Red dots are on the wrong side of their threshold.",
        _svg(chart, {"means": rows}),
    )


_BINS = 20
"""Bins of a histogram over a metric's range (steps of 0.05 over a share)."""
_PANEL_COLUMNS = 4


def _bin_counts(values: list[float], low: float, high: float, step: float) -> list[int]:
    """Values per bin of width ``step`` from ``low`` to ``high`` (the last bin holds ``high``).

    The quotient is rounded before it is floored, so a value on a bin's edge (-0.2 in steps of
    0.1 from -1) falls in the bin Vega puts it in, not the one below.
    """
    n_bins = round((high - low) / step)
    counts = [0] * n_bins
    for v in values:
        counts[min(n_bins - 1, max(0, math.floor(round((v - low) / step, 9))))] += 1
    return counts


def _count_ticks(counts: list[int]) -> list[int]:
    """Whole-number ticks up to the tallest bar: Vega's own ticks printed ``0 1 1`` at height 1."""
    top = max(counts, default=1)
    power = 10 ** max(0, math.floor(math.log10(max(top, 1) / 5)))
    step = next(m * power for m in (1, 2, 5, 10) if top / (m * power) <= 5)
    return list(range(0, top + 1, step))


def distributions_chart(report: Report) -> Figure | None:
    """A histogram of every metric's ok values, one small panel per metric with values.

    Panels are concatenated, each with its own axes, rather than faceted: a wrapped facet draws
    a column's x axis in the grid's footer, so a last row with fewer panels than columns showed
    an axis under an empty cell. A metric without one ok value gets no panel; the caption
    names it.
    """
    rows: list[dict[str, Any]] = [
        {"metric": cell.metric, "value": cell.value}
        for q in report.questions
        for cell in q.scores.values()
        if cell.status == "ok" and _finite(cell.value)
    ]
    if not rows:
        return None
    values: dict[str, list[float]] = {}
    for r in rows:
        values.setdefault(r["metric"], []).append(r["value"])
    drawn = [m for m in report.metrics if m in values]
    drawn += [m for m in values if m not in drawn]
    empty = [m for m in report.metrics if m not in values]
    panels = []
    steps = set()
    for m in drawn:
        low, high = _extent(m, values[m])
        step = (high - low) / _BINS
        steps.add(step)
        counts = _bin_counts(values[m], low, high, step)
        panels.append(
            alt.Chart(
                alt.NamedData(name="values"),
                title=alt.TitleParams(m, fontSize=11, fontWeight="normal"),
            )
            .transform_filter(alt.datum.metric == m)
            .mark_bar(color="#2b7bba")
            .encode(
                x=alt.X(
                    "value:Q",
                    bin=alt.Bin(extent=[low, high], step=step),
                    title=None,
                    axis=alt.Axis(values=[low, (low + high) / 2, high], format=".1f"),
                ),
                y=alt.Y(
                    "count():Q",
                    title=None,
                    axis=alt.Axis(values=_count_ticks(counts), format="d"),
                ),
            )
            .properties(width=150, height=80)
        )
    chart = alt.concat(*panels, columns=_PANEL_COLUMNS)
    width = f"steps of {steps.pop():g}" if len(steps) == 1 else "twentieths of its range"
    caption = (
        f"Histogram of each metric's ok values in {width} (counts per panel on their own "
        "scale). Failed and skipped rows are not values and are counted in the summary."
    )
    if empty:
        caption += f" No ok value to draw: {', '.join(empty)}."
    return Figure(
        "distributions",
        "Distributions per metric",
        caption,
        _svg(_configure(chart), {"values": rows}),
    )


def _extent(metric: str, values: list[float]) -> tuple[float, float]:
    """The x extent of ``metric``'s histogram: its declared range, else its values' span."""
    info = about(metric)
    if info.bounded:
        return info.range
    low, high = min(values), max(values)
    return (low, high) if high > low else (low - 0.5, high + 0.5)


def heatmap_chart(report: Report, max_rows: int = HEATMAP_MAX_ROWS) -> Figure | None:
    """Question × metric: colour by score (flipped for lower-is-better), grey for no score."""
    metrics = list(report.metrics)
    if not metrics or not report.questions:
        return None
    up = {s.metric: s.higher_is_better for s in report.summary}
    # An unbounded metric is coloured over the values the questions have.
    seen: dict[str, list[float]] = {}
    for q in report.questions:
        for c in q.scores.values():
            if c.status == "ok" and _finite(c.value) and not about(c.metric).bounded:
                seen.setdefault(c.metric, []).append(c.value)
    extents = {m: _extent(m, v) for m, v in seen.items()}

    def shade(m: str, value: float) -> float:
        return goodness(m, value, up.get(m, True), extents.get(m))

    def mean_goodness(q: Any) -> float:
        vals = [
            shade(c.metric, c.value)
            for c in q.scores.values()
            if c.status == "ok" and _finite(c.value)
        ]
        # A question without any score sorts first: it is the one to look at.
        return sum(vals) / len(vals) if vals else -1.0

    ranked = sorted(report.questions, key=mean_goodness)
    shown = ranked[:max_rows]
    order = [q.question_id for q in shown]
    labels = {m: label(m) + ("" if up.get(m, True) else " ↓") for m in metrics}
    scored, other = [], []
    for q in shown:
        for m in metrics:
            cell = q.scores.get(m)
            if cell is not None and cell.status == "ok" and _finite(cell.value):
                scored.append(
                    {
                        "q": q.question_id,
                        "metric": labels[m],
                        "good": min(1.0, max(0.0, shade(m, cell.value))),
                        "d": q.question_id,
                    }
                )
            else:
                status = "missing" if cell is None else cell.status
                other.append(
                    {"q": q.question_id, "metric": labels[m], "status": status, "d": q.question_id}
                )
    step = 14 if len(shown) <= 60 else max(4, min(10, 1400 // len(shown)))
    y = alt.Y(
        "q:N",
        sort=order,
        title=None,
        axis=alt.Axis(labels=len(shown) <= 60, ticks=len(shown) <= 60),
    )
    x = alt.X(
        "metric:N",
        sort=[labels[m] for m in metrics],
        title=None,
        # On top: a tall grid's bottom edge is screens away from its first rows.
        axis=alt.Axis(labelAngle=-40, orient="top"),
    )
    good = (
        alt.Chart(alt.NamedData(name="scored"))
        .mark_rect()
        .encode(
            x=x,
            y=y,
            color=alt.Color(
                "good:Q",
                scale=alt.Scale(scheme="redyellowgreen", domain=[0, 1]),
                legend=alt.Legend(title="score", orient="right"),
            ),
            description="d:N",
        )
    )
    rest = (
        alt.Chart(alt.NamedData(name="other"))
        .mark_rect()
        .encode(
            x=x,
            y=y,
            color=alt.Color(
                "status:N",
                scale=alt.Scale(domain=list(_STATUS_COLORS), range=list(_STATUS_COLORS.values())),
                legend=alt.Legend(title="no score"),
            ),
            description="d:N",
        )
    )
    chart = (
        alt.layer(good, rest)
        .resolve_scale(color="independent")
        .properties(width=max(200, 26 * len(metrics)), height=alt.Step(step))
    )
    n = len(report.questions)
    caption = (
        "One row per question, worst mean score at the top; a cell is one metric's value "
        "(green good, red bad; metrics marked ↓ are lower-is-better and shown flipped). "
        "Black: failed, grey: skipped. Click a cell to open that question."
    )
    if n > len(shown):
        caption += (
            f" Shows the {len(shown)} lowest of {n} questions; every question is in the "
            "drill-down below and in report.xlsx."
        )
    return Figure(
        "heatmap",
        "Questions × metrics",
        caption,
        _svg(_configure(chart), {"scored": scored, "other": other}),
    )


_CURVE_NAMES = {
    "engine_vs_gold": "engine order vs gold",
    "judge_vs_gold": "judge order vs gold",
    "judge_vs_engine": "engine order vs judge (graded)",
}


def ndcg_chart(report: Report) -> Figure | None:
    """Mean NDCG@k over k of the engine's and the judge's orders."""
    ndcg = "ndcg@k"
    rows = [
        {
            "k": p.k,
            "ndcg": p.mean,
            "comparison": _CURVE_NAMES.get(p.comparison, p.comparison),
            "n": p.n_questions,
        }
        for p in report.ndcg_curve
        if _finite(p.mean)
    ]
    if not rows:
        return None
    chart = (
        alt.Chart(alt.NamedData(name="curve"))
        .mark_line(point=True)
        .encode(
            x=alt.X("k:O", title="k", axis=alt.Axis(labelAngle=0)),
            y=alt.Y(
                "ndcg:Q",
                scale=alt.Scale(domain=list(about(ndcg).range)),
                title=f"mean {label(ndcg)}",
            ),
            color=alt.Color(
                "comparison:N",
                sort=list(_CURVE_NAMES.values()),
                legend=alt.Legend(title=None, orient="bottom", columns=1),
            ),
        )
        .properties(width=_WIDTH - 260, height=200)
    )
    return Figure(
        "ndcg",
        "Ranking quality over k",
        "Mean NDCG@k over the questions where it is defined, graded gains throughout: the "
        "search engine's order and the judge's order against the question set's gold grades, "
        "and the engine's order against the judge's grades. At k = the agreement table's k it "
        "is the table's NDCG.",
        _svg(_configure(chart), {"curve": rows}),
    )


def spearman_chart(report: Report) -> Figure | None:
    """Per-question Spearman correlation of the judge's and the engine's orders."""
    found = [
        (a.question_id, a.value)
        for a in report.agreement
        if a.question_id != "__all__"
        and a.comparison == "judge_vs_engine"
        and a.metric == "spearman"
        and a.status == "ok"
        and _finite(a.value)
    ]
    if not found:
        return None
    rows = [{"question": q, "spearman": rho} for q, rho in found]
    counts = _bin_counts([rho for _, rho in found], -1.0, 1.0, 0.1)
    chart = (
        alt.Chart(alt.NamedData(name="rho"))
        .mark_bar(color="#6a51a3")
        .encode(
            x=alt.X(
                "spearman:Q",
                bin=alt.Bin(extent=[-1, 1], step=0.1),
                title="Spearman ρ (judge vs engine)",
            ),
            y=alt.Y(
                "count():Q",
                title="questions",
                axis=alt.Axis(values=_count_ticks(counts), format="d"),
            ),
        )
        .properties(width=_WIDTH - 260, height=200)
    )
    return Figure(
        "spearman",
        "Judge vs engine, per question",
        "Spearman correlation between the judge's ranking and the engine's order of the same "
        "candidates, one count per question (1: the engine already ranks as the judge would).",
        _svg(_configure(chart), {"rho": rows}),
    )


def calls_chart(report: Report) -> Figure | None:
    """LLM calls per stage, split into provider calls and memo hits, with cost when known."""
    rows = []
    for s in report.calls:
        stage = s.stage or "(none)"
        rows.append({"stage": stage, "kind": "provider calls", "calls": s.provider_calls})
        rows.append({"stage": stage, "kind": "memo hits", "calls": s.memo_hits})
    if not rows:
        return None
    order = [s.stage or "(none)" for s in report.calls]
    bars = (
        alt.Chart(alt.NamedData(name="calls"))
        .mark_bar()
        .encode(
            y=alt.Y("stage:N", sort=order, title=None),
            x=alt.X("sum(calls):Q", title="calls"),
            color=alt.Color(
                "kind:N",
                scale=alt.Scale(
                    domain=["provider calls", "memo hits"], range=["#e6550d", "#9ecae1"]
                ),
                legend=alt.Legend(title=None, orient="bottom"),
            ),
        )
        .properties(width=_WIDTH - 260, height=alt.Step(18))
    )
    data: dict[str, list[dict[str, Any]]] = {"calls": rows}
    costs = [
        {"stage": s.stage or "(none)", "cost": s.cost_usd}
        for s in report.calls
        if s.cost_usd is not None
    ]
    chart: Any = bars
    if costs:
        cost = (
            alt.Chart(alt.NamedData(name="cost"))
            .mark_bar(color="#31a354")
            .encode(
                y=alt.Y("stage:N", sort=order, title=None, axis=None),
                x=alt.X("cost:Q", title="cost (USD, priced calls)"),
            )
            .properties(width=200, height=alt.Step(18))
        )
        chart = alt.hconcat(bars, cost)
        data["cost"] = costs
    caption = "Calls each stage made through the gateway: provider calls and memo hits."
    caption += (
        " Green: the cost litellm could price."
        if costs
        else " No cost: litellm has no price for these models."
    )
    return Figure("calls", "Cost and calls per stage", caption, _svg(_configure(chart), data))


def compare_chart(comparison: Any) -> Figure | None:
    """B − A per metric with its paired 95% interval, coloured by the verdict."""
    rows: list[dict[str, Any]] = [
        {
            "metric": shown(m.metric, m.higher_is_better),
            "diff": m.diff,
            "low": m.ci_low if _finite(m.ci_low) else m.diff,
            "high": m.ci_high if _finite(m.ci_high) else m.diff,
            "verdict": m.verdict if m.verdict in _VERDICT_COLORS else "no change beyond noise",
        }
        for m in comparison.metrics
        if _finite(m.diff)
    ]
    if not rows:
        return None
    # Metric names with "(lower is better)" run past Vega's default 180 px label limit.
    y = alt.Y(
        "metric:N",
        sort=[r["metric"] for r in rows],
        title=None,
        axis=alt.Axis(labelLimit=_COMPARE_LABEL_LIMIT),
    )
    # Few ticks with room between them: Vega drops overlapping labels by its own text
    # measure, and a browser's fallback font sets them wider, so labels 0.05 apart ran
    # together on the page.
    x_axis = alt.Axis(
        tickCount=5, labelOverlap="greedy", labelSeparation=12, labelFlush=False, grid=True
    )
    base = alt.Chart(alt.NamedData(name="diffs")).encode(y=y)
    ci = base.mark_rule(strokeWidth=2, color="#555").encode(
        x=alt.X("low:Q", axis=x_axis), x2="high:Q"
    )
    point = base.mark_point(filled=True, size=90).encode(
        x=alt.X("diff:Q", title="B − A (paired 95% CI)", axis=x_axis),
        color=alt.Color(
            "verdict:N",
            scale=alt.Scale(domain=list(_VERDICT_COLORS), range=list(_VERDICT_COLORS.values())),
            legend=alt.Legend(title=None, orient="bottom"),
        ),
    )
    zero = alt.Chart(alt.NamedData(name="zero")).mark_rule(color="#999").encode(x="x:Q")
    chart = alt.layer(zero, ci, point).properties(width=_WIDTH - 200, height=alt.Step(22))
    longest = max(len(r["metric"]) for r in rows)
    return Figure(
        "compare",
        "What moved between the runs",
        "Dot: mean paired difference B − A over the questions scored in both runs; bar: its "
        "paired bootstrap interval. Red: regressed beyond noise, green: improved, grey: no "
        "change beyond noise (after adjusting for the number of metrics).",
        # Room on the left for labels set wider than vl-convert measured them.
        _svg(
            _configure(chart, left=min(120, 30 + 2 * longest)),
            {"diffs": rows, "zero": [{"x": 0}]},
        ),
    )


_COMPARE_LABEL_LIMIT = 360
_VERDICT_COLORS = {
    "regressed": "#d62728",
    "improved": "#2ca02c",
    "no change beyond noise": "#7f7f7f",
}


def figures(report: Report) -> list[Figure]:
    """Every chart the run's data supports, in page order."""
    out = []
    for make in (
        means_chart,
        distributions_chart,
        heatmap_chart,
        ndcg_chart,
        spearman_chart,
        calls_chart,
    ):
        fig = make(report)
        if fig is not None:
            out.append(fig)
    return out


# -- calibration --------------------------------------------------------------------------------


def statistic_label(statistic: str) -> str:
    """How the page names a statistic of ``calibration.parquet`` (declared in ``directions``)."""
    return shown(statistic)


def _statistics_domain(figs: tuple[CalibrationFigure, ...]) -> tuple[float, float]:
    """The x axis of a calibration chart: the declared ranges of the statistics it draws."""
    return span(dict.fromkeys(f.statistic for f in figs)) or (0.0, 1.0)


def models_line(section: CalibrationSection, figs: tuple[CalibrationFigure, ...] = ()) -> str:
    """``judge J · embedder E`` of the figures shown (else the section's models)."""
    judges = sorted({f.judge for f in figs if f.judge}) or [section.judge or "unknown"]
    embedders = sorted({f.embedder for f in figs if f.embedder}) or [section.embedder or "unknown"]
    return f"judge {', '.join(judges)} · embedder {', '.join(embedders)}"


def _interval_chart(
    key: str,
    title: str,
    caption: str,
    rows: list[dict[str, Any]],
    *,
    models: str,
    domain: tuple[float, float],
    x_title: str,
    reference: float,
    legend: bool = True,
) -> Figure | None:
    """Dot (value) and bar (95% interval) per row, a dashed rule at the chance level.

    ``rows`` carry ``label`` (one line of the chart), ``group`` (the colour), ``value``, ``low``
    and ``high``. The models are drawn into the chart itself, so the figure names them wherever
    it is copied to.
    """
    drawn = [
        {
            **r,
            "low": r["low"] if _finite(r["low"]) else r["value"],
            "high": r["high"] if _finite(r["high"]) else r["value"],
        }
        for r in rows
        if _finite(r["value"])
    ]
    if not drawn:
        return None
    scale = alt.Scale(domain=list(domain), clamp=True)
    y = alt.Y(
        "label:N", sort=[r["label"] for r in drawn], title=None, axis=alt.Axis(labelLimit=360)
    )
    base = alt.Chart(alt.NamedData(name="rows")).encode(y=y)
    ci = base.mark_rule(strokeWidth=2, color="#555").encode(
        x=alt.X("low:Q", scale=scale, title=x_title), x2="high:Q"
    )
    groups = list(dict.fromkeys(r["group"] for r in drawn))
    point = base.mark_point(filled=True, size=90, opacity=1).encode(
        x=alt.X("value:Q", scale=scale),
        color=alt.Color(
            "group:N",
            sort=groups,
            scale=alt.Scale(scheme="tableau10"),
            legend=alt.Legend(title=None, orient="bottom", columns=4, columnPadding=24)
            if legend and len(groups) > 1
            else None,
        ),
    )
    chance = (
        alt.Chart(alt.NamedData(name="chance"))
        .mark_rule(color="#999", strokeDash=[4, 3])
        .encode(x=alt.X("x:Q", scale=scale))
    )
    chart = alt.layer(chance, ci, point).properties(
        width=_WIDTH - 160,
        height=alt.Step(22),
        title=alt.TitleParams(
            models, anchor="start", fontSize=12, fontWeight="normal", color="#444"
        ),
    )
    undefined = len(rows) - len(drawn)
    if undefined:
        caption += f" {undefined} figure(s) undefined on these data are in the table only."
    return Figure(
        key,
        title,
        f"{caption} ({models}.)",
        # Long labels on the left: the most room for a font wider than vl-convert's.
        _svg(_configure(chart, left=90), {"rows": drawn, "chance": [{"x": reference}]}),
    )


def _row(f: CalibrationFigure, label: str, group: str) -> dict[str, Any]:
    return {
        "label": f"{label} (n={f.n})",
        "group": group,
        "value": f.value,
        "low": f.ci_low,
        "high": f.ci_high,
    }


def monotonicity_chart(section: CalibrationSection) -> Figure | None:
    """Per scenario family and metric: the share of level pairs scored in the expected order."""
    figs = section.of_kind("monotonicity")
    rows = [_row(f, f"{f.family} · {f.metric}", f.family or "") for f in figs]
    return _interval_chart(
        "cal-monotonicity",
        "Share in the expected order, per family and metric",
        "Dot: the share of level pairs of one base question that the metric scores in the "
        "family's expected order (best > random > worst, 80/20 > 50/50 > 20/80, …; a tie counts "
        "½); bar: 95% interval. Dashed: a metric that cannot tell the levels apart (½).",
        rows,
        models=models_line(section, figs),
        domain=_statistics_domain(figs),
        x_title="share in the expected order (95% CI)",
        reference=0.5,
    )


def agreement_chart(section: CalibrationSection) -> Figure | None:
    """Agreement with human labels: WikiEval's pairwise protocol, HaluEval as a detector."""
    figs = section.of_kind("agreement", "detection")
    rows = [
        _row(
            f,
            f"{f.dataset} · {f.metric} · {statistic_label(f.statistic)}",
            f.dataset,
        )
        for f in figs
    ]
    return _interval_chart(
        "cal-agreement",
        "Agreement with the human label, per data set and metric",
        "WikiEval: the share of pairs in which the metric prefers the answer or context the "
        "humans preferred (RAGAS's protocol; a tie counts ½). HaluEval: faithfulness as a "
        "detector of the right answer (balanced accuracy at the threshold, AUC). Bar: 95% "
        "interval; dashed: chance (½).",
        rows,
        models=models_line(section, figs),
        domain=_statistics_domain(figs),
        x_title="agreement (95% CI)",
        reference=0.5,
    )


def alignment_chart(section: CalibrationSection) -> Figure | None:
    """A labels file: MAE, Spearman, Kendall, Cohen's κ and AUC per metric."""
    figs = section.of_kind("alignment")
    rows = [_row(f, f"{f.metric} · {statistic_label(f.statistic)}", f.metric) for f in figs]
    return _interval_chart(
        "cal-alignment",
        "MAE, rank correlations, κ and AUC per metric",
        "Each metric against the labels file's human label: mean absolute error (lower is "
        "better), Spearman and Kendall rank correlations, Cohen's κ and AUC with both sides cut "
        "at the threshold. Bar: 95% paired bootstrap interval; dashed: 0 (no agreement beyond "
        "chance for the correlations and κ).",
        rows,
        models=models_line(section, figs),
        domain=_statistics_domain(figs),
        x_title="value (95% CI)",
        reference=0.0,
    )


def consistency_chart(section: CalibrationSection) -> Figure | None:
    """The judge's consistency: position bias in pairwise ranking, self-agreement on repeats."""
    figs = section.of_kind("consistency")
    rows = [_row(f, statistic_label(f.statistic), f.statistic) for f in figs]
    return _interval_chart(
        "cal-consistency",
        "Position bias and self-agreement",
        "Position bias: the share of context pairs for which the pairwise ranking prompt "
        "prefers a different context when the two are swapped (0 is best). Self-agreement: the "
        "share of relevance verdicts a second sample repeats (1 is best). Bar: 95% interval.",
        rows,
        models=models_line(section, figs),
        domain=_statistics_domain(figs),
        x_title="share (95% CI)",
        reference=0.5,
        legend=False,  # each line is its own statistic: the labels say it
    )


def calibration_figures(section: CalibrationSection) -> list[Figure]:
    """Every calibration chart the section's figures support, in page order."""
    out = []
    for make in (monotonicity_chart, agreement_chart, alignment_chart, consistency_chart):
        fig = make(section)
        if fig is not None:
            out.append(fig)
    return out


# The tune report draws with the same configuration and renderer (public names for it).
configure_chart = _configure
chart_svg = _svg

__all__ = [
    "FONT",
    "HEATMAP_MAX_ROWS",
    "Figure",
    "agreement_chart",
    "alignment_chart",
    "calibration_figures",
    "chart_svg",
    "configure_chart",
    "consistency_chart",
    "models_line",
    "monotonicity_chart",
    "calls_chart",
    "compare_chart",
    "distributions_chart",
    "figures",
    "heatmap_chart",
    "means_chart",
    "ndcg_chart",
    "spearman_chart",
    "statistic_label",
]
