"""Day after day: the audit's series, what moved beyond noise, by how much, and why.

A day's audit gives design-weighted estimates per segment and metric with their standard
errors. A **series** is the days of one audit whose measuring instrument is the same (judge,
prompt versions, metrics, sampling design): a day whose signature differs starts a new series,
and days of different series are never compared, as the nightly compares only like-for-like
runs.

Each day is compared with the day before and with the trailing baseline (the mean of up to
seven earlier days of the series). With the days' draws, the change and its split by cause
come from the draws themselves (:mod:`ragaudit.audit._pairing`, ADR 24): the hash sample draws
the same queries on days they recur, so the difference is linearised query by query over both
days' draws (a query that is simply hard on both days is no noise), and the queries drawn on
both days are compared as pairs. Without the draws (a day written before them) the two
estimates are taken as independent and the baseline adds the figure's day-to-day spread.
Tests are z-tests, Benjamini–Hochberg-adjusted across segments × metrics (and, for the
parts, × parts) within one comparison; a change or a part moved when the adjusted p is below
α and the interval excludes 0 — the rule ``compare``, ``tune`` and ``battles`` use — and it
matters when it is at least the metric's ``audit.min_change`` (else it is *small*: listed,
raising nothing).

Why a change happened is told apart by evidence, not by guess:

- **the traffic's pairing** splits each change into the mix between segments, the mix within
  a segment (the same queries asked in other proportions), the paired change of recurring
  queries' lists — content (documents whose text changed) and engine (the rest) — and new
  queries; a part that moved names its cause;
- **the probe**, where configured: a fixed set of queries re-run through the configured engine
  every day; said beside an engine move as its independent witness, and the cause of a move
  no part explains when it moved the same way;
- **judge**: stored grades re-asked with the memo bypassed; weighted κ below a bound means the
  judge behind the model name changed, and every move is then the judge's.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import polars as pl

from ragaudit.audit._moves import Move, moves
from ragaudit.audit._pairing import (
    CAUSES,
    PARTS,
    TRAFFIC,
    DayDesign,
    ListValue,
    Split,
    split_changes,
)
from ragaudit.audit._segments import ALL
from ragaudit.directions import label
from ragaudit.hashing import canonical_hash
from ragaudit.numbers import fixed
from ragaudit.stats import (
    adjust,
    baseline_variance,
    beyond_noise,
    kappa,
    paired_test,
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
class Part:
    """One cause's part of a change (:data:`ragaudit.audit._pairing.PARTS`), tested."""

    part: str
    diff: float
    se: float
    ci_low: float
    ci_high: float
    p_value: float
    p_adjusted: float | None = None
    moved: bool = False
    """Beyond noise: adjusted p below α and the interval excludes 0."""
    small: bool = False
    """Beyond noise but smaller than the metric's ``audit.min_change``."""
    behind: tuple[tuple[str, float], ...] = ()
    """Overall only: the segments behind the part (each one's share of it)."""
    kind: str | None = None
    """What the part's move is (:data:`ragaudit.audit._moves.KINDS`); None: no line."""
    reasons: tuple[str, ...] = ()

    @property
    def cause(self) -> str:
        """The cause the part names (:data:`ragaudit.audit._pairing.CAUSES`)."""
        return CAUSES[self.part]


@dataclass(frozen=True)
class Change:
    """One segment × metric compared between a day and a reference, and its parts.

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
    se: float | None = None
    p_adjusted: float | None = None
    moved: bool = False
    higher_is_better: bool = True
    min_change: float = 0.0
    """The metric's ``audit.min_change``: a change beyond noise but smaller is small."""
    attribution: str | None = None
    """The change's cause(s): the parts that moved its way, else the other evidence's."""
    reasons: tuple[str, ...] = ()
    parts: tuple[Part, ...] = ()
    """Its split by cause (:mod:`ragaudit.audit._pairing`); empty when the draws cannot tell."""
    pairs: int = 0
    """Queries drawn on both days (summed over the reference days)."""
    paired_ci: tuple[float, float] | None = None
    """The interval of content and engine together: the recurring queries' paired change."""
    kind: str | None = None
    """What the whole change's move is when no part explains it (a line of its own)."""

    @property
    def small(self) -> bool:
        """Beyond noise but smaller than ``min_change``."""
        return self.moved and abs(self.diff) < self.min_change

    @property
    def regressed(self) -> bool:
        """Moved beyond noise by at least ``min_change`` in the worse direction."""
        return self.moved and not self.small and worse(self.diff, self.higher_is_better)

    def part(self, name: str) -> Part | None:
        """The part ``name``, when the draws could tell it."""
        return next((p for p in self.parts if p.part == name), None)

    def to_row(self) -> dict[str, Any]:
        """The whole change as a row of ``changes.parquet`` (``part`` ``total``)."""
        return {
            **self._common(),
            "part": "total",
            "cause": self.attribution if self.kind else None,
            "kind": self.kind,
            "estimate": self.estimate,
            "reference": self.reference,
            "diff": self.diff,
            "se": self.se,
            "ci_low": self.ci_low,
            "ci_high": self.ci_high,
            "p_value": self.p_value,
            "p_adjusted": self.p_adjusted,
            "moved": self.moved,
            "small": self.small,
            "regressed": self.regressed,
            "attribution": self.attribution,
            "reasons": list(self.reasons),
            "behind": [],
        }

    def rows(self) -> list[dict[str, Any]]:
        """The change and each of its parts as rows of ``changes.parquet``."""
        out = [self.to_row()]
        for p in self.parts:
            out.append(
                {
                    **self._common(),
                    "part": p.part,
                    "cause": p.cause if p.kind else None,
                    "kind": p.kind,
                    "estimate": None,
                    "reference": None,
                    "diff": p.diff,
                    "se": p.se,
                    "ci_low": p.ci_low,
                    "ci_high": p.ci_high,
                    "p_value": p.p_value,
                    "p_adjusted": p.p_adjusted,
                    "moved": p.moved,
                    "small": p.small,
                    "regressed": p.moved
                    and not p.small
                    and worse(p.diff, self.higher_is_better)
                    and p.part not in TRAFFIC,
                    "attribution": None,
                    "reasons": list(p.reasons),
                    "behind": [f"{s} {fixed(v, sign=True)}" for s, v in p.behind],
                }
            )
        return out

    def _common(self) -> dict[str, Any]:
        return {
            "segment": self.segment,
            "metric": self.metric,
            "against": self.against,
            "reference_days": list(self.reference_days),
            "higher_is_better": self.higher_is_better,
            "min_change": self.min_change,
            "pairs": self.pairs,
        }


def worse(diff: float, higher_is_better: bool) -> bool:
    """Whether a change of ``diff`` is for the worse."""
    return diff < 0 if higher_is_better else diff > 0


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
        se=math.sqrt(se**2 + ref_var),
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


def _behind(pieces: Sequence[tuple[str, float]], whole: float) -> tuple[tuple[str, float], ...]:
    """The segments behind an overall part, each with its share of it.

    Those of the part's sign that make up at least a fifth of it, largest first.
    """
    return tuple(
        (segment, share)
        for segment, share in pieces
        if share * whole > 0 and abs(share) >= abs(whole) / 5
    )


def _parts(split: Split, alpha: float) -> list[Part]:
    out = []
    for name in PARTS[1:]:
        figure = split.parts.get(name)
        if figure is None:
            continue
        test = z_test(figure.estimate, figure.variance, alpha=alpha)
        if test is None:
            continue
        out.append(
            Part(
                part=name,
                diff=test.diff,
                se=figure.se,
                ci_low=test.ci_low,
                ci_high=test.ci_high,
                p_value=test.p_value,
                behind=_behind(split.behind.get(name, ()), figure.estimate),
            )
        )
    return out


def day_changes(
    series: pl.DataFrame,
    day: str,
    *,
    alpha: float,
    higher_is_better: Mapping[str, bool] | None = None,
    baseline_days: int = BASELINE_DAYS,
    designs: Mapping[str, DayDesign] | None = None,
    min_change: Callable[[str], float] | None = None,
    list_values: Mapping[str, ListValue] | None = None,
) -> list[Change]:
    """Every segment × metric of ``day`` against the day before and the trailing baseline.

    ``series`` holds one series' rows (``SERIES_SCHEMA``). With the days' ``designs`` a
    change and its split by cause come from the draws themselves
    (:func:`ragaudit.audit._pairing.split_changes`: the total linearised over both days'
    draws, so a query that is simply hard on both days is no noise; the parts from the
    queries drawn on both days); without them, the change is tested on the two estimates as
    independent (with the baseline's day-to-day spread, :func:`baseline`) and not split.
    p-values are adjusted with Benjamini–Hochberg within each comparison (previous, baseline):
    the changes across segments × metrics, the parts across segments × metrics × parts.
    ``moved`` is the beyond-noise rule (adjusted p < α and the interval excludes 0); a move
    smaller than ``min_change(metric)`` is ``small``. ``list_values``: metric → its value of a
    served list from its grades, so content is told from engine document by document.
    """
    better = dict(higher_is_better or {})
    least = min_change or (lambda _metric: 0.0)
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
        splits: dict[str, dict[str, Split]] = {}
        found: list[Change] = []
        for row in today.iter_rows(named=True):
            seg, metric = row["segment"], row["metric"]
            mine = ref_rows.filter((pl.col("segment") == seg) & (pl.col("metric") == metric))
            if mine.is_empty() or row["estimate"] is None or row["se"] is None:
                continue
            if designs is not None and metric not in splits:
                splits[metric] = split_changes(
                    designs, day, days, metric, list_value=(list_values or {}).get(metric)
                )
            split = (splits.get(metric) or {}).get(seg)
            total = split.parts.get("total") if split is not None else None
            if split is not None and total is not None:
                change = _compare(
                    seg,
                    metric,
                    against,
                    tuple(days),
                    (row["estimate"], total.se),
                    (row["estimate"] - total.estimate, 0.0),
                    alpha,
                )
                paired = split.parts.get("paired")
                both = z_test(paired.estimate, paired.variance, alpha=alpha) if paired else None
                if change is not None:
                    change = replace(
                        change,
                        parts=tuple(_parts(split, alpha)),
                        pairs=split.pairs,
                        paired_ci=None if both is None else (both.ci_low, both.ci_high),
                    )
            else:
                ref = baseline(mine)
                if ref is None:
                    continue
                change = _compare(
                    seg, metric, against, tuple(days), (row["estimate"], row["se"]), ref, alpha
                )
            if change is not None:
                found.append(
                    replace(
                        change,
                        higher_is_better=better.get(metric, True),
                        min_change=float(least(metric)),
                    )
                )
        adjusted = adjust([c.p_value for c in found])
        parts = [p for c in found for p in c.parts]
        adjusted_parts = iter(adjust([p.p_value for p in parts]))
        for c, p_adj in zip(found, adjusted, strict=True):
            tested = []
            for p in c.parts:
                q = next(adjusted_parts)
                moved = beyond_noise(q, p.ci_low, p.ci_high, alpha=alpha)
                small = moved and abs(p.diff) < c.min_change
                tested.append(replace(p, p_adjusted=q, moved=moved, small=small))
            moved = beyond_noise(p_adj, c.ci_low, c.ci_high, alpha=alpha)
            out.append(replace(c, p_adjusted=p_adj, moved=moved, parts=tuple(tested)))
    return out


@dataclass(frozen=True)
class Evidence:
    """What else the day found, per segment: the attribution's inputs beside the parts."""

    probe: Mapping[tuple[str, str], ProbeChange] = field(default_factory=dict)
    """(segment, metric) → the probe's change (the engine's independent witness)."""
    changed_docs: Mapping[str, float] = field(default_factory=dict)
    """segment → the share of its graded served documents whose text changed since served."""
    judge: JudgeCheck | None = None
    content_share: float = 0.05
    """A segment whose changed-document share reaches this counts as rewritten (the cause of
    a move its parts cannot tell)."""


def _kind(cause_is_traffic: bool, diff: float, small: bool, higher_is_better: bool) -> str:
    if small:
        return "small"
    if cause_is_traffic:
        return "traffic"
    return "alarm" if worse(diff, higher_is_better) else "better"


def _witness(probe: ProbeChange | None, diff: float) -> str | None:
    """What the probe says of an engine move (None: no probe).

    The same words for every metric, so a line says it once; its figures are in the probe's
    own table.
    """
    if probe is None or probe.diff is None:
        return None
    if probe.moved and (probe.diff < 0) == (diff < 0):
        return f"the probe ({probe.n} queries) moved the same way"
    return (
        f"the probe ({probe.n} queries) did not move that way: the configured engine may not be "
        "the one serving the traffic"
    )


def attribute(change: Change, evidence: Evidence) -> Change:
    """The change with its cause(s) and each moved part with what its move is.

    A part that moved beyond noise names its cause (``mix``, ``mix within``, ``content``,
    ``engine``, ``new queries``) and is a line: ``small`` under the metric's ``min_change``,
    ``traffic`` for the traffic's own parts (who asked what: never an alarm), else ``alarm``
    when for the worse, ``better`` when not; the probe, where configured, is said beside an
    engine move as the engine's independent witness. A judge whose re-check failed is the
    cause of every move (nothing else can be read). A change that moved with no part moved its
    way is a line of its own, its cause from the other evidence: the judge, the segment's
    rewritten documents (``content_share``), the probe moved its way (``engine``), the
    recurring queries' lists shown to have changed by less than ``min_change``
    (``traffic``), else ``unexplained``.
    """
    reasons: list[str] = []
    probe = evidence.probe.get((change.segment, change.metric))
    if evidence.judge is not None and evidence.judge.drifted:
        reasons.append(
            f"judge re-check κ {evidence.judge.kappa:.2f} < {evidence.judge.bound:.2f} "
            f"over {evidence.judge.n} stored grades"
        )
        kind = (
            _kind(False, change.diff, change.small, change.higher_is_better)
            if change.moved
            else None
        )
        unsaid = tuple(replace(p, kind=None) for p in change.parts)
        return replace(change, attribution="judge", reasons=tuple(reasons), kind=kind, parts=unsaid)
    parts: list[Part] = []
    for p in change.parts:
        if not p.moved:
            parts.append(p)
            continue
        said: list[str] = []
        if p.part == "engine":
            said = [w for w in (_witness(probe, p.diff),) if w]
        if p.part == "content":
            share = evidence.changed_docs.get(change.segment)
            if share is not None:
                said.append(f"{share:.0%} of its served documents changed text")
        kind = _kind(p.part in TRAFFIC, p.diff, p.small, change.higher_is_better)
        parts.append(replace(p, kind=kind, reasons=tuple(said)))
    its_way = [p for p in parts if p.moved and (p.diff < 0) == (change.diff < 0)]
    if its_way:
        causes = sorted({p.cause for p in its_way}, key=list(CAUSES.values()).index)
        return replace(change, attribution=", ".join(causes), parts=tuple(parts))
    if not change.moved:
        return replace(change, parts=tuple(parts))
    cause, traffic = "unexplained", False
    share = evidence.changed_docs.get(change.segment)
    if change.segment == OVERALL and evidence.changed_docs:
        share = max(evidence.changed_docs.values())
    if share is not None and share >= evidence.content_share:
        cause = "content"
        reasons.append(f"{share:.0%} of served documents changed text")
    elif probe is not None and probe.moved and (probe.diff or 0) * change.diff > 0:
        cause = "engine"
        reasons.append(
            f"probe {label(change.metric)} moved {fixed(probe.diff, sign=True)} over "
            f"{probe.n} queries"
        )
    elif change.paired_ci is not None and _bounded(change.paired_ci, change.min_change):
        cause, traffic = "traffic", True
        reasons.append(
            "the recurring queries' lists changed by less than the minimum change: the "
            "traffic moved (mix within and new queries together)"
        )
    kind = _kind(traffic, change.diff, change.small, change.higher_is_better)
    return replace(change, attribution=cause, reasons=tuple(reasons), kind=kind, parts=tuple(parts))


def _bounded(interval: tuple[float, float], least: float) -> bool:
    """Whether an interval shows its figure smaller than ``least`` either way."""
    return least > 0 and -least < interval[0] and interval[1] < least


REGRESSION_EVENT = "ragaudit.audit.regression"
"""The Prefect event an alarm emits (``automations/audit-regression.yaml``)."""


def audit_resource(name: str) -> str:
    """The Prefect resource id of an audit (what automations match on)."""
    return f"ragaudit.audit.{name}"


def change_rows(changes: Sequence[Change]) -> list[dict[str, Any]]:
    """Every change and its parts as rows of ``changes.parquet``."""
    return [row for c in changes for row in c.rows()]


def alarms(changes: Sequence[Change], day: str) -> list[Move]:
    """The day's alarm lines, one per (segment, cause).

    A line alarms when a move for the worse, beyond noise and at least the metric's
    ``audit.min_change``, is not the traffic's doing.
    """
    return [m for m in moves(change_rows(changes), day) if m.kind == "alarm"]


def regressed(lines: Sequence[Move]) -> list[str]:
    """``segment/metric`` of every metric an alarm line names."""
    return sorted(
        {f"{m.segment}/{mm.metric}" for m in lines for mm in m.metrics if mm.kind == "alarm"}
    )


def regression_event(
    name: str, day: str, day_dir: str, changes: Sequence[Change]
) -> tuple[str, dict[str, str], dict[str, Any]] | None:
    """The event, resource and payload of the day's alarms; None when nothing alarms.

    The payload's ``alarms`` are the lines (one per segment and cause, each with its text,
    its metrics' changes against each reference and the segments behind an overall line);
    ``changes`` the rows of ``changes.parquet`` they come from.
    """
    lines = alarms(changes, day)
    if not lines:
        return None
    keys = {(m.segment, m.cause) for m in lines}
    payload = {
        "audit": name,
        "day": day,
        "day_dir": day_dir,
        "regressed": regressed(lines),
        "alarms": [m.to_dict() for m in lines],
        "changes": [
            r for r in change_rows(changes) if r["kind"] and (r["segment"], r["cause"]) in keys
        ],
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
