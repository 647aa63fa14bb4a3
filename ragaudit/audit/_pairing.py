"""The traffic's own pairing: a day's change split by cause, from the two days' draws alone.

The salted hash sample draws a query again on every day it recurs at a like rate, so two days'
draws share most of their recurring queries: those **pairs** (the same query in the same
segment, drawn on both days) show what happened to the lists the same queries were served, with
no probe and no guess. A segment's change of a metric, ``Δ = μ₁ − μ₀`` (today's design-weighted
mean over its requests minus the reference day's), splits exactly (ADR 24) into

- **mix within** (``within``): the same recurring queries asked in other proportions — the
  change of the recurring queries' mean, ``m_R1 − m_R0``, less their paired change;
- **content** and **engine**: the paired change of the recurring queries' lists, ``C``, the
  traffic-weighted mean over the pairs of each query's value today minus its value on the
  reference day (weights: its average share of the two days' requests); ``content`` is the part
  due to served documents whose text changed between the days (``verdicts.parquet`` keeps each
  graded text's hash: their grades swapped for the other day's, Shapley's average of the two
  orders), ``engine`` the rest. ``C`` stands for the service's change to the whole segment: a
  new query is served by the same engine and documents;
- **new queries** (``new``): what the day's queries that were not asked on the other day add
  beyond it — today's new queries against today's recurring ones, less the reference day's
  gone queries against its recurring ones: ``Δ − (m_R1 − m_R0)``.

The overall figure adds the **mix between segments** (``between``): with each segment's share of
the (estimated) requests ``W``, ``Σ (W₁ − W₀)(μ₀ + μ₁)/2`` (shift-share with symmetric weights),
and each other part the segments' parts weighted by ``(W₀ + W₁)/2``. Against several reference
days (the trailing baseline) every part is the mean of the parts against each day. The parts
add up to the change the day's estimates show.

Every part is a smooth function of Horvitz–Thompson totals of the days' draws (the requests'
weighted counts and values, the recurring queries', the pairs' with weight
``1 / min(π₀, π₁)``: a pair is drawn exactly when its permanent random number is below both
days' inclusion probabilities); its variance is Taylor-linearised over the joint design of the
days (:func:`ragaudit.stats.linearise`, :func:`ragaudit.stats.spread`): a query is one primary
unit across the days (so a query that is simply hard on both days is no noise), a request
sampled within a query taken with certainty its own. What the variance includes and leaves out
is said in ADR 24.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import polars as pl

from ragaudit.audit._estimate import sampled_within
from ragaudit.audit._segments import ALL
from ragaudit.stats import CERTAIN, Design, linearise, spread, variance_strata

OVERALL = ALL
PARTS = ("total", "between", "within", "content", "engine", "new")
"""The parts of a change: the whole, then each cause's share of it."""
CAUSES = {
    "between": "mix",
    "within": "mix within",
    "content": "content",
    "engine": "engine",
    "new": "new queries",
}
"""The cause a part's move is named by."""
TRAFFIC = frozenset({"between", "within", "new"})
"""Parts that are the traffic's doing (who asked what), not the service's: never an alarm."""

ListValue = Callable[[Sequence[int | None]], float | None]
"""A list metric's value of a served list from its grades in served order (None: undefined)."""


@dataclass(frozen=True)
class DayDesign:
    """One day's draw and its values: what a change is computed from.

    ``sample``: the day's draw (``unit``, ``request_id``, ``segment``, ``stratum``, ``pi``,
    ``weight``, ``count``, ``requests_drawn``); ``values``: one row per graded request ×
    metric (``request_id`` or ``unit``, ``metric``, ``value``, ``status``), as
    :func:`ragaudit.audit.estimate` takes them; ``units``: every query of the day (``unit``,
    ``segment``, ``count``), what tells a recurring query from a new one — without it a change
    is not split; ``verdicts``: the graded documents (``request_id``, ``unit``, ``rank``,
    ``doc_id``, ``grade``, ``status``, ``text_hash``), what tells content from engine — without
    it the paired change is the engine's.
    """

    sample: pl.DataFrame
    values: pl.DataFrame
    units: pl.DataFrame | None = None
    verdicts: pl.DataFrame | None = None


@dataclass(frozen=True)
class Figure:
    """A part's estimate and its sampling variance (``df``: the design's degrees of freedom)."""

    estimate: float
    variance: float
    df: int = 0

    @property
    def se(self) -> float:
        """The standard error."""
        return math.sqrt(self.variance) if self.variance > 0 else 0.0


@dataclass(frozen=True)
class Split:
    """One segment's (or the overall) change of a metric split by cause."""

    segment: str
    parts: Mapping[str, Figure]
    """Part (:data:`PARTS`, and ``paired``: content and engine together) → its figure;
    ``between`` only overall. A part the draws cannot tell (no query frame, no query drawn on
    both days) is missing."""
    pairs: int = 0
    """Queries drawn on both days (summed over the reference days)."""
    behind: Mapping[str, tuple[tuple[str, float], ...]] = field(default_factory=dict)
    """Overall only: part → each segment's share of it, largest first."""


class _Columns:
    """Column numbers of the totals, by key."""

    def __init__(self) -> None:
        self.index: dict[tuple[Any, ...], int] = {}

    def __call__(self, *key: Any) -> int:
        return self.index.setdefault(key, len(self.index))


def _elements(designs: Mapping[str, DayDesign], days: Sequence[str], metric: str) -> pl.DataFrame:
    """Every graded request of the ``days``, with the metric's value where it is ok."""
    frames = []
    for t, name in enumerate(days):
        design = designs[name]
        key = "request_id" if "request_id" in design.values.columns else "unit"
        value = pl.col("value").cast(pl.Float64)
        ok = design.values.filter(
            (pl.col("metric") == metric)
            & (pl.col("status") == "ok")
            & value.is_not_null()
            & value.is_finite()
        ).select(pl.col(key).cast(pl.String), value.alias("value"))
        sample = design.sample
        if "request_id" not in sample.columns:
            sample = sample.with_columns(pl.col("unit").alias("request_id"))
        within = sampled_within(sample)
        frames.append(
            sample.with_columns(pl.col(key).cast(pl.String))
            .join(ok, on=key, how="left")
            .select(
                pl.lit(t).alias("t"),
                pl.col("request_id").cast(pl.String),
                pl.col("unit").cast(pl.String),
                pl.col("segment").cast(pl.String),
                pl.col("stratum").cast(pl.String),
                pl.col("pi").cast(pl.Float64),
                pl.col("weight").cast(pl.Float64),
                pl.col("count").cast(pl.Float64),
                "value",
            )
            .with_columns(pl.Series("within", within, dtype=pl.Boolean))
        )
    return pl.concat(frames)


def _changed_docs(a: pl.DataFrame, b: pl.DataFrame) -> set[str]:
    """Documents graded on both days under different texts."""

    def hashes(v: pl.DataFrame) -> dict[str, str]:
        rows = v.select("doc_id", "text_hash").drop_nulls().unique("doc_id", keep="first")
        return dict(rows.iter_rows())

    first, second = hashes(a), hashes(b)
    return {d for d, h in first.items() if d in second and second[d] != h}


def _lists(verdicts: pl.DataFrame) -> dict[str, list[tuple[str, int | None]]]:
    """Request → its served documents' (id, grade) in served order (grade None unless ok)."""
    out: dict[str, list[tuple[str, int | None]]] = {}
    rows = verdicts.sort("request_id", "rank").select(
        "request_id", "doc_id", pl.when(pl.col("status") == "ok").then(pl.col("grade"))
    )
    for rid, doc, grade in rows.iter_rows():
        out.setdefault(str(rid), []).append((str(doc), None if grade is None else int(grade)))
    return out


def _other_grades(verdicts: pl.DataFrame) -> dict[tuple[str, str], int]:
    """(unit, document) → the grade it got for that query (ok grades only)."""
    rows = verdicts.filter(pl.col("status") == "ok").select("unit", "doc_id", "grade")
    return {(str(u), str(d)): int(g) for u, d, g in rows.iter_rows() if g is not None}


def _content_values(
    day: DayDesign,
    other: DayDesign,
    requests: Sequence[tuple[str, str, float]],
    list_value: ListValue | None,
) -> list[float]:
    """Each of a day's paired requests' content value, given its (request id, query, value).

    A list metric's: half its value less its value with the documents whose text changed since
    the other day graded as that day graded them for the query (half: each day's side of
    Shapley's two orders). Another metric's (an answer's): its whole value when its query's
    lists hold such a document on either day, else 0. 0 everywhere without both days' verdicts
    and text hashes: the paired change is then the engine's.
    """
    if day.verdicts is None or other.verdicts is None:
        return [0.0] * len(requests)
    if "text_hash" not in day.verdicts.columns or "text_hash" not in other.verdicts.columns:
        return [0.0] * len(requests)
    changed = _changed_docs(day.verdicts, other.verdicts)
    if not changed:
        return [0.0] * len(requests)
    lists = _lists(day.verdicts)
    if list_value is None:
        touched = {
            str(u)
            for v in (day.verdicts, other.verdicts)
            for u in v.filter(pl.col("doc_id").is_in(list(changed)))["unit"].to_list()
        }
        return [y if unit in touched else 0.0 for _, unit, y in requests]
    there = _other_grades(other.verdicts)
    out = []
    for rid, unit, y in requests:
        served = lists.get(rid, [])
        swapped = [
            there.get((unit, doc), grade) if doc in changed else grade for doc, grade in served
        ]
        value = list_value(swapped) if served else None
        out.append(0.0 if value is None else 0.5 * (y - float(value)))
    return out


@dataclass
class _Totals:
    """The Horvitz–Thompson totals of the days' draws and each graded request's share of them.

    ``unit_part``: the contributions random at the query's level (it was uncertain), summed per
    query into its primary unit; ``within_part``: those random only through the draw of a
    certain query's requests, each request its own unit. A contribution of a query taken with
    certainty and graded whole is in ``totals`` only: it is exact.
    """

    columns: _Columns
    totals: np.ndarray
    unit_part: np.ndarray
    within_part: np.ndarray
    pairs: dict[str, int] = field(default_factory=dict)

    def add(self, e: int, key: tuple[Any, ...], value: float, *, random: bool, within: bool):
        c = self.columns.index[key]
        self.totals[c] += value
        if random:
            self.unit_part[e, c] += value
        elif within:
            self.within_part[e, c] += value


def _totals(
    designs: Mapping[str, DayDesign],
    days: Sequence[str],
    elements: pl.DataFrame,
    segments: Sequence[str],
    list_value: ListValue | None,
) -> _Totals:
    m = len(days) - 1
    # Without every day's query frame a recurring query cannot be told from a new one: the
    # change is then not split (its parts are not computed), only its total.
    split = all(designs[d].units is not None for d in days)
    asked: list[set[str]] = []
    requests_of: list[dict[str, float]] = []
    for d in days:
        units = designs[d].units
        if units is None:
            asked.append(set())
            requests_of.append({})
            continue
        asked.append(set(units["unit"].cast(pl.String).to_list()))
        per_segment = units.group_by(pl.col("segment").cast(pl.String)).agg(
            pl.col("count").sum().cast(pl.Float64)
        )
        requests_of.append(dict(per_segment.iter_rows()))
    col = _Columns()
    for t in range(m + 1):
        for s in segments:
            col("N", t, s)
            col("Y", t, s)
    for j in range(1, m + 1):
        for s in segments:
            for key in ("NR0", "YR0", "NRj", "YRj", "A", "AD", "AC"):
                col(key, j, s)
    n = elements.height
    k = len(col.index)
    found = _Totals(col, np.zeros(k), np.zeros((n, k)), np.zeros((n, k)))
    t_of = elements["t"].to_list()
    unit_of = elements["unit"].to_list()
    seg_of = elements["segment"].to_list()
    rid_of = elements["request_id"].to_list()
    pi = elements["pi"].to_numpy()
    w = elements["weight"].to_numpy()
    count = elements["count"].to_numpy()
    within = elements["within"].to_list()
    value = elements["value"].to_numpy().astype(float)
    ok = np.isfinite(value)
    y = np.where(ok, value, 0.0)
    uncertain = (pi < 1.0).tolist()

    by_unit: dict[tuple[int, str], list[int]] = {}
    for e in np.flatnonzero(ok).tolist():
        t, s, u = t_of[e], seg_of[e], unit_of[e]
        by_unit.setdefault((t, u), []).append(e)
        day_level = {"random": uncertain[e], "within": within[e]}
        found.add(e, ("N", t, s), w[e], **day_level)
        found.add(e, ("Y", t, s), w[e] * y[e], **day_level)
        recurs = [j for j in range(1, m + 1) if u in asked[j]] if t == 0 else []
        for j in recurs:
            found.add(e, ("NR0", j, s), w[e], **day_level)
            found.add(e, ("YR0", j, s), w[e] * y[e], **day_level)
        if t > 0 and u in asked[0]:
            found.add(e, ("NRj", t, s), w[e], **day_level)
            found.add(e, ("YRj", t, s), w[e] * y[e], **day_level)

    today = sorted(u for t, u in by_unit if t == 0) if split else []
    for j in range(1, m + 1):
        both = [u for u in today if (j, u) in by_unit]
        for u in both:
            s = seg_of[by_unit[(0, u)][0]]
            found.pairs[s] = found.pairs.get(s, 0) + 1
        content: dict[int, float] = {}
        for t, other in ((0, j), (j, 0)):
            at = [e for u in both for e in by_unit[(t, u)]]
            rows = [(rid_of[e], unit_of[e], float(y[e])) for e in at]
            values = _content_values(designs[days[t]], designs[days[other]], rows, list_value)
            content.update(zip(at, values, strict=True))
        for u in both:
            now, then = by_unit[(0, u)], by_unit[(j, u)]
            s = seg_of[now[0]]
            pi_pair = float(min(pi[now[0]], pi[then[0]]))
            # The query's share of its segment's requests, the mean of the two days'.
            share = 0.5 * (count[now[0]] / requests_of[0][s] + count[then[0]] / requests_of[j][s])
            for side, sign in ((now, 1.0), (then, -1.0)):
                c = share / pi_pair / len(side)
                for e in side:
                    pair_level = {"random": pi_pair < 1.0, "within": within[e]}
                    if sign > 0:
                        found.add(e, ("A", j, s), c, **pair_level)
                    found.add(e, ("AD", j, s), sign * c * y[e], **pair_level)
                    found.add(e, ("AC", j, s), sign * c * content[e], **pair_level)
    return found


def _figures(
    x: np.ndarray,
    segments: Sequence[str],
    m: int,
    col: _Columns,
    *,
    behind: bool = False,
) -> dict[tuple[str, str], np.ndarray]:
    """The parts (module docstring) as functions of the totals ``x`` (first axis).

    ``behind``: each segment's share of the overall parts instead, keyed (part, segment).
    """

    def get(key: str, t: int) -> np.ndarray:
        return np.stack([x[col.index[(key, t, s)]] for s in segments])

    out: dict[tuple[str, str], list[np.ndarray]] = {}
    n0, y0 = get("N", 0), get("Y", 0)
    for j in range(1, m + 1):
        nj, yj = get("N", j), get("Y", j)
        mu1, mu0 = y0 / n0, yj / nj
        recurring = get("YR0", j) / get("NR0", j) - get("YRj", j) / get("NRj", j)
        paired = get("AD", j) / get("A", j)
        content = get("AC", j) / get("A", j)
        both = (n0 > 0) & (nj > 0)
        nan = np.full_like(mu1, np.nan)
        parts = {
            "total": mu1 - mu0,
            "within": recurring - paired,
            "content": content,
            "engine": paired - content,
            "new": mu1 - mu0 - recurring,
            "paired": paired,
        }
        parts = {k: np.where(both, v, nan) for k, v in parts.items()}
        w1, w0 = n0 / n0.sum(axis=0), nj / nj.sum(axis=0)
        here = np.where(both, 0.5 * (mu1 + mu0), np.where(n0 > 0, mu1, mu0))
        level = 0.5 * (y0.sum(axis=0) / n0.sum(axis=0) + yj.sum(axis=0) / nj.sum(axis=0))
        shift = np.where((n0 > 0) | (nj > 0), (w1 - w0) * (here - level), 0.0)
        mean_share = 0.5 * (w1 + w0)
        overall = {
            "total": y0.sum(axis=0) / n0.sum(axis=0) - yj.sum(axis=0) / nj.sum(axis=0),
            "between": shift.sum(axis=0),
        }
        for name in ("within", "content", "engine", "new", "paired"):
            weighted = np.where(both, mean_share * parts[name], 0.0)
            # A segment on both days whose part is unknown leaves the overall part unknown.
            weighted = np.where(both & ~np.isfinite(parts[name]), np.nan, weighted)
            overall[name] = weighted.sum(axis=0)
            if behind:
                for i, s in enumerate(segments):
                    out.setdefault((name, s), []).append(weighted[i])
        if behind:
            for i, s in enumerate(segments):
                out.setdefault(("between", s), []).append(shift[i])
            continue
        for i, s in enumerate(segments):
            for name, v in parts.items():
                out.setdefault((s, name), []).append(v[i])
        for name, v in overall.items():
            out.setdefault((OVERALL, name), []).append(v)
    return {k: np.mean(np.stack(v), axis=0) for k, v in out.items()}


def _design(elements: pl.DataFrame, random: np.ndarray, across_segments: bool) -> Design:
    """The joint design of the days' draws, its primary units in :func:`_psu_scores`' order.

    A query is one unit across the days (in its stratum of the first day it was drawn); a
    request sampled within a query taken with certainty is its own.
    """
    first = (
        elements.with_row_index("_e")
        .group_by("unit", maintain_order=True)
        .agg(pl.col("stratum").first(), pl.col("segment").first(), pl.col("_e"))
    )
    uncertain = np.zeros(first.height, dtype=bool)
    for i, rows in enumerate(first["_e"].to_list()):
        uncertain[i] = bool(random[rows].any())
    inner = elements.filter("within")
    strata = first["stratum"].to_list() + [
        f"{CERTAIN}/{u}@{t}" for u, t in inner.select("unit", "t").iter_rows()
    ]
    segments = first["segment"].to_list() + inner["segment"].to_list()
    certain = (~uncertain).tolist() + [True] * inner.height
    flags = [False] * first.height + [True] * inner.height
    vstrata = variance_strata(
        strata, segments, certain, across_segments=across_segments, within=flags
    )
    psus = first["unit"].to_list() + [
        f"{t}#{r}" for r, t in inner.select("request_id", "t").iter_rows()
    ]
    return Design.of(psus, vstrata, {s: 0.0 if s == CERTAIN else 1.0 for s in set(vstrata)})


def _psu_segments(elements: pl.DataFrame) -> list[str]:
    """Each primary unit's segment (rows in :func:`_design`'s order)."""
    first = elements.group_by("unit", maintain_order=True).agg(pl.col("segment").first())
    return first["segment"].to_list() + elements.filter("within")["segment"].to_list()


def _psu_scores(elements: pl.DataFrame, found: _Totals, jac: np.ndarray) -> np.ndarray:
    """Each primary unit's linearised score of each figure (rows in :func:`_design`'s order)."""
    order = {u: i for i, u in enumerate(dict.fromkeys(elements["unit"].to_list()))}
    index = np.array([order[u] for u in elements["unit"].to_list()], dtype=int)
    slopes = np.nan_to_num(jac).T
    per_unit = np.zeros((len(order), jac.shape[0]))
    np.add.at(per_unit, index, found.unit_part @ slopes)
    per_request = found.within_part[elements["within"].to_numpy()] @ slopes
    return np.vstack([per_unit, per_request])


def split_changes(
    designs: Mapping[str, DayDesign],
    day: str,
    reference: Sequence[str],
    metric: str,
    *,
    list_value: ListValue | None = None,
) -> dict[str, Split]:
    """Each segment's and the overall change of ``metric``, split by cause, with variances.

    The change from the ``reference`` days' mean to ``day`` (the module docstring).

    ``list_value`` computes the metric of a served list from its grades (a list metric), so
    content is told from engine document by document; None for an answer's metric (a query
    whose lists hold a rewritten document has all its paired change counted as content).
    Empty when a day's draw or its query frame (``DayDesign.units``) is missing.
    """
    days = [day, *reference]
    if not reference or any(d not in designs for d in days):
        return {}
    elements = _elements(designs, days, metric)
    if elements["value"].is_null().all():
        return {}
    m = len(reference)
    segments = sorted(set(elements["segment"].to_list()))
    found = _totals(designs, days, elements, segments, list_value)
    col = found.columns
    with np.errstate(divide="ignore", invalid="ignore"):
        names = list(_figures(found.totals, segments, m, col))
        shares = _figures(found.totals, segments, m, col, behind=True)

    def figures(x: np.ndarray) -> np.ndarray:
        out = _figures(x, segments, m, col)
        return np.stack([out[name] for name in names])

    size = np.abs(found.unit_part).sum(axis=0) + np.abs(found.within_part).sum(axis=0)
    values, jac = linearise(figures, found.totals, scale=np.maximum(size, np.abs(found.totals)))
    scores = _psu_scores(elements, found, jac)
    random = elements["pi"].to_numpy() < 1.0
    whole = _design(elements, random, across_segments=True)
    alone = _design(elements, random, across_segments=False)
    psu_segment = np.asarray(_psu_segments(elements), dtype=object)
    # A segment's figure has scores only in its own strata (its units' shares of the others'
    # totals are 0): its variance is computed over its own units.
    own = {s: psu_segment == s for s in segments}
    parts: dict[str, dict[str, Figure]] = {}
    for f, (segment, part) in enumerate(names):
        if not (math.isfinite(values[f]) and np.isfinite(jac[f]).all()):
            continue
        if segment == OVERALL:
            var = spread(scores[:, f], whole, skew=False)
        else:
            keep = own[segment]
            var = spread(scores[keep, f], alone.subset(keep), skew=False)
        parts.setdefault(segment, {})[part] = Figure(float(values[f]), var.variance, var.df)
    out = {}
    for segment, figures_of in parts.items():
        behind: dict[str, tuple[tuple[str, float], ...]] = {}
        if segment == OVERALL:
            for part in PARTS[1:]:
                pieces = [(s, float(shares[(part, s)])) for s in segments if (part, s) in shares]
                behind[part] = tuple(sorted(pieces, key=lambda p: -abs(p[1])))
        pairs = sum(found.pairs.values()) if segment == OVERALL else found.pairs.get(segment, 0)
        out[segment] = Split(segment, figures_of, pairs, behind)
    return out


__all__ = [
    "CAUSES",
    "OVERALL",
    "PARTS",
    "TRAFFIC",
    "DayDesign",
    "Figure",
    "ListValue",
    "Split",
    "split_changes",
]
