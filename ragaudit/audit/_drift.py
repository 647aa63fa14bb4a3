"""Day after day: the audit's series, what moved beyond noise, and why.

A day's audit gives design-weighted estimates per segment and metric with their standard
errors. A **series** is the days of one audit whose measuring instrument is the same (judge,
prompt versions, metrics, sampling design): a day whose signature differs starts a new series,
and days of different series are never compared, as the nightly compares only like-for-like
runs.

Each day is compared with the day before and with the trailing baseline (the mean of up to
seven earlier days of the series). The two days' samples are drawn independently of each
other's outcomes, so the variance of a difference is the sum of the two variances; the hash
sample draws many of the same queries on both days, which makes the two estimates positively
correlated, so the sum over-states the variance and the test errs on the quiet side. The
baseline adds the day-to-day spread of the true figure (estimated from the baseline days as the
spread of their estimates beyond their own sampling variance): a figure that always wanders by
a point from day to day has not "moved" when it wanders by a point today. Tests are z-tests
on the estimates, Benjamini–Hochberg-adjusted across segments × metrics within one comparison,
and a change is reported only when the adjusted p is below α and the interval excludes 0 —
the rule ``compare``, ``tune`` and ``battles`` use.

Why a change happened is told apart by evidence, not by guess:

- **query mix**: the overall change splits exactly into a part due to the shift of strata
  shares (segment × frequency band, known from the whole day's traffic, not sampled) and a
  part within strata (:func:`shift_share`, symmetric weights so the two parts add up);
- **engine or content**: a fixed probe set re-run through the engine every day; the probe's
  figure moving beyond noise (a paired test over the probe queries) means the engine or the
  index changed whatever the traffic did, and the served documents whose text changed
  since they were indexed tell content from engine;
- **judge**: stored grades re-asked with the memo bypassed; weighted κ below a bound means the
  judge behind the model name changed.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import polars as pl

from ragaudit.audit._estimate import sampled_within
from ragaudit.audit._segments import ALL
from ragaudit.hashing import canonical_hash
from ragaudit.stats import (
    CERTAIN,
    Design,
    adjust,
    baseline_variance,
    beyond_noise,
    hajek_scores,
    kappa,
    paired_test,
    spread,
    variance_strata,
    z_quantile,
    z_test,
)

OVERALL = ALL
"""The segment name of the whole traffic's figure (:data:`ragaudit.audit._segments.ALL`)."""

BASELINE_DAYS = 7
"""How many earlier days of a series the trailing baseline averages."""

SERIES_SCHEMA = pl.Schema(
    {
        "series": pl.Utf8,
        "day": pl.Utf8,
        "segment": pl.Utf8,
        "metric": pl.Utf8,
        "estimate": pl.Float64,
        "se": pl.Float64,
        "ci_low": pl.Float64,
        "ci_high": pl.Float64,
        "n": pl.Int64,
        "requests": pl.Float64,
    }
)
"""Columns of ``series.parquet``: one row per day × segment × metric."""


def series_signature(instrument: Mapping[str, Any]) -> str:
    """The id of a series: a hash of what measures (judge, prompts, metrics, sampling design).

    Two days with the same signature are comparable; any difference starts a new series.
    """
    return "s1:" + canonical_hash(["audit-series", dict(instrument)])[:16]


@dataclass(frozen=True)
class Change:
    """One segment × metric compared between a day and a reference.

    The reference is the day before (``previous``) or the trailing baseline (``baseline``).
    """

    segment: str
    metric: str
    against: str
    """``previous`` (the day before in the series) or ``baseline`` (the trailing days)."""
    reference_days: tuple[str, ...]
    estimate: float
    reference: float
    diff: float
    ci_low: float
    ci_high: float
    p_value: float
    p_adjusted: float | None = None
    moved: bool = False
    higher_is_better: bool = True
    attribution: str | None = None
    reasons: tuple[str, ...] = ()

    @property
    def regressed(self) -> bool:
        """Moved beyond noise in the worse direction."""
        worse = self.diff < 0 if self.higher_is_better else self.diff > 0
        return self.moved and worse

    def to_row(self) -> dict[str, Any]:
        """A flat row for ``changes.parquet`` and the event payload."""
        row = {k: getattr(self, k) for k in self.__dataclass_fields__}
        row["reference_days"] = list(self.reference_days)
        row["reasons"] = list(self.reasons)
        row["regressed"] = self.regressed
        return row


def _compare(
    segment: str,
    metric: str,
    against: str,
    days: tuple[str, ...],
    today: tuple[float, float],
    reference: tuple[float, float],
    alpha: float,
) -> Change | None:
    (est, se), (ref, ref_var) = today, reference
    # With variance 0 both days were taken whole (every unit with certainty): z_test says the
    # difference is exact.
    test = z_test(est - ref, se**2 + ref_var, alpha=alpha)
    if test is None:
        return None
    return Change(
        segment=segment,
        metric=metric,
        against=against,
        reference_days=days,
        estimate=est,
        reference=ref,
        diff=test.diff,
        ci_low=test.ci_low,
        ci_high=test.ci_high,
        p_value=test.p_value,
    )


def baseline(rows: pl.DataFrame) -> tuple[float, float] | None:
    """The trailing baseline of earlier days' rows (``estimate``, ``se``): mean and variance.

    The variance is the one a new day's value has around the mean when nothing changed
    (:func:`ragaudit.stats.baseline_variance`: the mean's own sampling variance plus the true
    figure's day-to-day spread), so ordinary wandering is not a change.
    """
    return baseline_variance(
        rows["estimate"].to_numpy().astype(float), rows["se"].to_numpy().astype(float)
    )


@dataclass(frozen=True)
class DayDesign:
    """One day's drawn units and their values: what a paired change is computed from.

    ``sample``: the day's draw (``unit``, ``segment``, ``stratum``, ``pi``, ``weight``);
    ``values``: one row per drawn unit × metric (``unit``, ``metric``, ``value``, ``status``),
    as :func:`ragaudit.audit.estimate` takes them.
    """

    sample: pl.DataFrame
    values: pl.DataFrame


@dataclass(frozen=True)
class _Linearised:
    """One day's Hájek mean of a metric in a segment and each graded request's score."""

    mean: float
    units: dict[str, tuple[float, str, bool, str]]
    """Unit → (its requests' summed score, stratum, certain, segment): the units that are
    their own PSUs (uncertain, or certain and graded whole)."""
    within: list[tuple[str, str, float]]
    """(request id, unit, score) of the requests sampled within a certain unit."""


def _linearised(design: DayDesign, segment: str, metric: str) -> _Linearised:
    """The day's Hájek mean of ``metric`` in ``segment`` and each graded request's score.

    A graded request outside the domain scores 0.
    """
    key = "request_id" if "request_id" in design.values.columns else "unit"
    ok = design.values.filter(
        (pl.col("metric") == metric)
        & (pl.col("status") == "ok")
        & pl.col("value").is_not_null()
        & pl.col("value").is_finite()
    ).select(pl.col(key).cast(pl.String), pl.col("value").cast(pl.Float64))
    rows = design.sample.join(ok, on=key, how="left")
    inside = rows["value"].is_not_null().to_numpy()
    if segment != OVERALL:
        inside &= (rows["segment"] == segment).to_numpy()
    w = rows["weight"].to_numpy().astype(float)
    y = rows["value"].fill_null(0.0).to_numpy().astype(float)
    mean, z = hajek_scores(y, w, inside)
    if not math.isfinite(mean):
        return _Linearised(math.nan, {}, [])
    sampled = sampled_within(rows)
    units: dict[str, tuple[float, str, bool, str]] = {}
    within = []
    for i, (u, st, pi, seg) in enumerate(
        rows.select("unit", "stratum", "pi", "segment").iter_rows()
    ):
        if sampled[i]:
            within.append((rows["request_id"][i], u, float(z[i])))
            continue
        before = units.get(u, (0.0, st, bool(pi >= 1.0), seg))
        units[u] = (before[0] + float(z[i]), st, bool(pi >= 1.0), seg)
    return _Linearised(mean, units, within)


def _segments(designs: Mapping[str, DayDesign], days: Sequence[str]) -> dict[str, str]:
    """Unit → segment over the ``days``' draws."""
    out: dict[str, str] = {}
    for d in days:
        for u, seg in designs[d].sample.select("unit", "segment").iter_rows():
            out.setdefault(u, seg)
    return out


def paired_change(
    designs: Mapping[str, DayDesign], day: str, reference: Sequence[str], segment: str, metric: str
) -> tuple[float, float, int] | None:
    """A segment's change from the ``reference`` days' mean to ``day``, paired over the draws.

    The hash sample draws the same units on days they recur at the same rate, so the days'
    estimates are correlated: their difference is linearised unit by unit
    (z = z_day − mean of z_reference, 0 on a day a unit was not drawn) and its variance taken
    over the strata with the audit's own design, so a query that is simply hard on both days
    does not count as noise. The requests sampled within a unit taken with certainty differ
    from day to day: each day's are PSUs of that day's stratum of the unit. Returns
    (difference, se, PSUs) or None when a day has no value.
    """
    if day not in designs or any(d not in designs for d in reference) or not reference:
        return None
    now = _linearised(designs[day], segment, metric)
    refs = [(d, _linearised(designs[d], segment, metric)) for d in reference]
    if not math.isfinite(now.mean) or any(not math.isfinite(r.mean) for _, r in refs):
        return None
    ref_mean = float(np.mean([r.mean for _, r in refs]))
    union: dict[str, list[Any]] = {u: list(v) for u, v in now.units.items()}
    within = [(day, rid, u, zr) for rid, u, zr in now.within]
    for d, r in refs:
        for u, (zu, st, certain, seg) in r.units.items():
            entry = union.setdefault(u, [0.0, st, certain, seg])
            entry[0] -= zu / len(refs)
            entry[2] = entry[2] and certain
        within += [(d, rid, u, -zr / len(refs)) for rid, u, zr in r.within]
    names = sorted(union)
    segment_of = _segments(designs, [day, *reference])
    # Each day's requests of a certain unit are that day's stratum of it (its requests differ
    # from day to day); a lone uncertain unit may pool with one, as in the day's estimate.
    vstrata = variance_strata(
        [union[u][1] for u in names] + [f"{CERTAIN}/{u}@{d}" for d, _, u, _ in within],
        [union[u][3] for u in names] + [segment_of.get(u, "") for _, _, u, _ in within],
        [union[u][2] for u in names] + [True] * len(within),
        across_segments=segment == OVERALL,
        within=[False] * len(names) + [True] * len(within),
    )
    fpc = {s: 0.0 if s == CERTAIN else 1.0 for s in set(vstrata)}
    psus = names + [f"{d}#{rid}" for d, rid, _, _ in within]
    z = [union[u][0] for u in names] + [zr for _, _, _, zr in within]
    found = spread(np.array(z), Design.of(psus, vstrata, fpc))
    return now.mean - ref_mean, math.sqrt(found.variance), len(psus)


def day_changes(
    series: pl.DataFrame,
    day: str,
    *,
    alpha: float,
    higher_is_better: Mapping[str, bool] | None = None,
    baseline_days: int = BASELINE_DAYS,
    designs: Mapping[str, DayDesign] | None = None,
) -> list[Change]:
    """Every segment × metric of ``day`` against the day before and the trailing baseline.

    ``series`` holds one series' rows (``SERIES_SCHEMA``). With the days' ``designs`` (drawn
    units and values) a change is tested on the paired difference (:func:`paired_change`);
    without them, on the two estimates as independent (with the baseline's day-to-day spread,
    :func:`baseline`). p-values are adjusted with Benjamini–Hochberg across segments × metrics
    within each comparison (previous, baseline); ``moved`` is the beyond-noise rule: adjusted
    p < α and the interval excludes 0.
    """
    better = dict(higher_is_better or {})
    earlier = sorted({d for d in series["day"].to_list() if d < day})
    if not earlier:
        return []
    today = series.filter(pl.col("day") == day)
    out: list[Change] = []
    for against, days in (
        ("previous", earlier[-1:]),
        ("baseline", earlier[-baseline_days:]),
    ):
        ref_rows = series.filter(pl.col("day").is_in(days))
        found: list[Change] = []
        for row in today.iter_rows(named=True):
            seg, metric = row["segment"], row["metric"]
            mine = ref_rows.filter((pl.col("segment") == seg) & (pl.col("metric") == metric))
            if mine.is_empty() or row["estimate"] is None or row["se"] is None:
                continue
            paired = paired_change(designs, day, days, seg, metric) if designs is not None else None
            if paired is not None:
                diff, se_diff, _ = paired
                change = _compare(
                    seg,
                    metric,
                    against,
                    tuple(days),
                    (row["estimate"], se_diff),
                    (row["estimate"] - diff, 0.0),
                    alpha,
                )
            else:
                ref = baseline(mine)
                if ref is None:
                    continue
                change = _compare(
                    seg, metric, against, tuple(days), (row["estimate"], row["se"]), ref, alpha
                )
            if change is not None:
                found.append(change)
        adjusted = adjust([c.p_value for c in found])
        for c, p_adj in zip(found, adjusted, strict=True):
            moved = beyond_noise(p_adj, c.ci_low, c.ci_high, alpha=alpha)
            out.append(
                _replace(
                    c, p_adjusted=p_adj, moved=moved, higher_is_better=better.get(c.metric, True)
                )
            )
    return out


def _replace(change: Change, **fields: Any) -> Change:
    from dataclasses import replace

    return replace(change, **fields)


@dataclass(frozen=True)
class ShiftShare:
    """An overall change split into the query mix's part and the part within strata."""

    total: float
    mix: float
    mix_ci: tuple[float, float]
    within: float
    within_ci: tuple[float, float]
    unmatched_share: float
    """The share of either day's requests in strata with no estimate on the other day, left
    out of both parts (said, never spread)."""

    @property
    def mix_moved(self) -> bool:
        """The mix's part excludes 0."""
        return self.mix_ci[0] > 0 or self.mix_ci[1] < 0

    @property
    def within_moved(self) -> bool:
        """The within-strata part excludes 0."""
        return self.within_ci[0] > 0 or self.within_ci[1] < 0


def shift_share(before: pl.DataFrame, after: pl.DataFrame, *, alpha: float) -> ShiftShare:
    """The change of a weighted mean split into mix and within-strata parts.

    Each frame has one row per stratum: ``stratum``, ``share`` (its share of the day's
    requests, counted over the whole traffic), ``estimate`` and ``se`` (the stratum's mean and
    its standard error). With symmetric weights,
    Δ = Σ (w₁ − w₀)(μ₀ + μ₁)/2  [mix]  +  Σ (w₀ + w₁)/2 · (μ₁ − μ₀)  [within],
    which adds up exactly. The shares are known (the whole traffic is read), so only the
    strata means carry sampling variance.
    """
    a = before.select("stratum", "share", "estimate", "se")
    b = after.select("stratum", "share", "estimate", "se")
    joined = a.join(b, on="stratum", how="full", coalesce=True, suffix="_1")
    valid = joined.filter(
        pl.col("estimate").is_not_null()
        & pl.col("estimate_1").is_not_null()
        & pl.col("se").is_not_null()
        & pl.col("se_1").is_not_null()
    )
    unmatched = joined.join(valid.select("stratum"), on="stratum", how="anti")
    lost = (
        float(unmatched["share"].fill_null(0).sum())
        + float(unmatched["share_1"].fill_null(0).sum())
    ) / 2
    w0 = valid["share"].fill_null(0).to_numpy().astype(float)
    w1 = valid["share_1"].fill_null(0).to_numpy().astype(float)
    m0 = valid["estimate"].to_numpy().astype(float)
    m1 = valid["estimate_1"].to_numpy().astype(float)
    v = valid["se"].to_numpy().astype(float) ** 2 + valid["se_1"].to_numpy().astype(float) ** 2
    mix = float(np.sum((w1 - w0) * (m0 + m1) / 2))
    within = float(np.sum((w0 + w1) / 2 * (m1 - m0)))
    z = z_quantile(alpha)
    mix_half = z * math.sqrt(float(np.sum(((w1 - w0) / 2) ** 2 * v)))
    within_half = z * math.sqrt(float(np.sum(((w0 + w1) / 2) ** 2 * v)))
    return ShiftShare(
        total=mix + within,
        mix=mix,
        mix_ci=(mix - mix_half, mix + mix_half),
        within=within,
        within_ci=(within - within_half, within + within_half),
        unmatched_share=lost,
    )


@dataclass(frozen=True)
class ProbeChange:
    """The fixed probe set's figure on a day against its reference day, paired by query."""

    segment: str
    metric: str
    n: int
    diff: float | None
    ci_low: float | None
    ci_high: float | None
    p_value: float | None
    moved: bool
    p_adjusted: float | None = None
    """Adjusted across the probe's segments × metrics (reported; ``moved`` uses ``p_value``)."""


def probe_changes(
    today: pl.DataFrame,
    reference: pl.DataFrame,
    *,
    alpha: float,
) -> list[ProbeChange]:
    """Per segment (and overall) and metric: the probe's paired change.

    Frames hold one row per probe query and metric: ``probe`` (the query's id), ``segment``,
    ``metric``, ``value``. The same queries re-run through the same engine give the same
    lists, so any difference is the engine's or the index's; a paired test over the probe
    queries (the comparison's own) tells it from the judge's noise on changed documents.
    """
    joined = today.join(
        reference.select("probe", "metric", pl.col("value").alias("ref")),
        on=["probe", "metric"],
        how="inner",
    ).filter(pl.col("value").is_not_null() & pl.col("ref").is_not_null())
    groups: list[tuple[str, str, pl.DataFrame]] = []
    for metric in sorted(set(joined["metric"].to_list())):
        rows = joined.filter(pl.col("metric") == metric)
        groups.append((OVERALL, metric, rows))
        for seg in sorted(set(rows["segment"].to_list())):
            groups.append((seg, metric, rows.filter(pl.col("segment") == seg)))
    tests = []
    for seg, metric, rows in groups:
        ref = rows["ref"].to_numpy().astype(float)
        t = paired_test(ref, rows["value"].to_numpy().astype(float))
        tests.append((seg, metric, t))
    adjusted = adjust([t.p_value for _, _, t in tests])
    # ``moved`` is judged on the segment's own p: the probe is asked about one flagged change at
    # a time (did the engine move where the traffic moved?), not searched across every cell.
    return [
        ProbeChange(
            segment=seg,
            metric=metric,
            n=t.n,
            diff=t.diff,
            ci_low=t.ci_low,
            ci_high=t.ci_high,
            p_value=t.p_value,
            p_adjusted=p_adj,
            moved=beyond_noise(t.p_value, t.ci_low, t.ci_high, alpha=alpha),
        )
        for (seg, metric, t), p_adj in zip(tests, adjusted, strict=True)
    ]


@dataclass(frozen=True)
class JudgeCheck:
    """Stored grades asked again with the memo bypassed: does the judge still agree with itself?"""

    n: int
    kappa: float | None
    bound: float
    drifted: bool


def judge_check(stored: Sequence[int], asked: Sequence[int], *, bound: float = 0.7) -> JudgeCheck:
    """Weighted κ (quadratic) between the stored grades and the same items graded again.

    Below ``bound`` the judge is flagged: a provider may have changed the model behind a name.
    The bound is on κ itself, not on its interval: the check's size is fixed by the config, and
    a judge that disagrees with itself that much is not one to compare days with.
    """
    pairs = [(int(a), int(b)) for a, b in zip(stored, asked, strict=True)]
    if len(pairs) < 2:
        return JudgeCheck(len(pairs), None, bound, False)
    value = float(
        kappa(
            [a for a, _ in pairs],
            [b for _, b in pairs],
            categories=(0, 1, 2, 3),
            weights="quadratic",
        )
    )
    if not math.isfinite(value):
        return JudgeCheck(len(pairs), None, bound, False)
    return JudgeCheck(len(pairs), value, bound, value < bound)


@dataclass(frozen=True)
class Evidence:
    """What else moved on the day, per segment: the attribution's inputs."""

    probe: Mapping[tuple[str, str], ProbeChange] = field(default_factory=dict)
    """(segment, metric) → the probe's change."""
    changed_docs: Mapping[str, float] = field(default_factory=dict)
    """segment → the share of its graded served documents whose text changed since served."""
    mix: Mapping[tuple[str, str], ShiftShare] = field(default_factory=dict)
    """(segment, metric) → the change's shift-share split over that segment's strata (the
    overall figure's over every stratum; a segment's over its frequency bands)."""
    judge: JudgeCheck | None = None
    content_share: float = 0.05
    """A segment whose changed-document share reaches this counts as rewritten."""


def attribute(change: Change, evidence: Evidence) -> Change:
    """The change with its most likely cause.

    In this order of evidence: judge (the judge disagrees with its own stored grades: nothing
    else can be read), content (the segment's documents were rewritten), engine (the probe
    moved with the same sign), mix (the mix part excludes 0 while the within-strata part does
    not), else ``unexplained``. Every reason that held is kept, so a day with two causes says both.
    """
    reasons: list[str] = []
    causes: list[str] = []
    if evidence.judge is not None and evidence.judge.drifted:
        causes.append("judge")
        reasons.append(
            f"judge re-check κ {evidence.judge.kappa:.2f} < {evidence.judge.bound:.2f} "
            f"over {evidence.judge.n} stored grades"
        )
    share = evidence.changed_docs.get(change.segment)
    if change.segment == OVERALL and evidence.changed_docs:
        share = max(evidence.changed_docs.values())
    if share is not None and share >= evidence.content_share:
        causes.append("content")
        reasons.append(f"{share:.0%} of served documents changed text")
    probe = evidence.probe.get((change.segment, change.metric))
    if (
        probe is not None
        and probe.moved
        and probe.diff is not None
        and (probe.diff < 0) == (change.diff < 0)
    ):
        causes.append("engine")
        reasons.append(f"probe {change.metric} moved {probe.diff:+.3f} over {probe.n} queries")
    mix = evidence.mix.get((change.segment, change.metric))
    if mix is not None and mix.mix_moved and not mix.within_moved:
        causes.append("mix")
        reasons.append(f"query mix {mix.mix:+.3f}, within strata {mix.within:+.3f}")
    return _replace(
        change, attribution=causes[0] if causes else "unexplained", reasons=tuple(reasons)
    )


REGRESSION_EVENT = "ragaudit.audit.regression"
"""The Prefect event a regression beyond noise emits (``automations/audit-regression.yaml``)."""


def audit_resource(name: str) -> str:
    """The Prefect resource id of an audit (what automations match on)."""
    return f"ragaudit.audit.{name}"


def regression_event(
    name: str, day: str, day_dir: str, changes: Sequence[Change]
) -> tuple[str, dict[str, str], dict[str, Any]] | None:
    """The event, resource and payload for the day's regressions; None when nothing regressed.

    One change per segment × metric is reported: against the baseline where both comparisons
    regressed (the steadier reference), else the one that did.
    """
    regressed: dict[tuple[str, str], Change] = {}
    for c in changes:
        if not c.regressed:
            continue
        key = (c.segment, c.metric)
        if key not in regressed or c.against == "baseline":
            regressed[key] = c
    if not regressed:
        return None
    rows = [regressed[k].to_row() for k in sorted(regressed)]
    payload = {
        "audit": name,
        "day": day,
        "day_dir": day_dir,
        "regressed": [f"{r['segment']}/{r['metric']}" for r in rows],
        "changes": rows,
    }
    resource = {
        "prefect.resource.id": audit_resource(name),
        "prefect.resource.name": name,
        "ragaudit.audit.day": day,
    }
    return REGRESSION_EVENT, resource, payload


def emit_regression(event: tuple[str, dict[str, str], dict[str, Any]]) -> Any:
    """Send a :func:`regression_event` to Prefect (a no-op outside a Prefect API)."""
    from prefect.events import emit_event

    name, resource, payload = event
    return emit_event(event=name, resource=resource, payload=payload)
