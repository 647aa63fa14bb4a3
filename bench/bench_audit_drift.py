"""Day after day: does the audit say what moved, where, and why, without false alarms? 30 days.

The simulated service of ``_traffic.py`` (100,000 requests a day, 6 segments, Zipf queries, a
planted grade per served document) replayed for 30 days with three planted events:

- **day 10, the query mix**: the segments' shares of the traffic move (news 30 % → 15 %,
  legal 10 % → 25 %); no query is served any differently, so no segment's quality changes;
- **day 20, the engine**: in ``sports`` the engine reverses the served top-10 of about one query
  in five (the same documents, worse order): the segment's nDCG@10 falls by about 5 points;
- **day 25, the content**: ``health``'s documents are rewritten (new text under the same ids),
  and half of them lose a grade.

Each day the audit's own code draws the sample (:func:`ragaudit.audit.draw_sample`), grades each
drawn request's top 10 through a store keyed by normalised query and document **text** (a
rewritten document is graded anew; a miss is one call to a scripted judge off by one grade 15 %
of the time, deterministic per query and text), scores the lists
(:func:`ragaudit.audit.list_metrics`) and estimates per segment and per stratum
(:func:`ragaudit.audit.estimate`). A probe of 100 queries drawn on day 1 is re-run through the
day's engine and graded through the same store. The drift module then compares each day with
the day before and with the trailing week (:func:`ragaudit.audit._drift.day_changes`), splits
the overall change by the query mix (:func:`~ragaudit.audit._drift.shift_share`), tests the
probe (:func:`~ragaudit.audit._drift.probe_changes`), counts rewritten documents, and names a
cause (:func:`~ragaudit.audit._drift.attribute`). Printed, each met or not:

- the day-20 drop is flagged on day 20 in ``sports`` and attributed to the engine;
- the day-10 shift moves the overall figure, is attributed to the mix, and no segment is flagged;
- the day-25 rewrite is flagged in ``health`` and attributed to the content;
- false alarms in <= 5 % of (clean day, segment) cells;
- >= 70 % of grades from the store from day 2 on, the probe included.

    python bench/bench_audit_drift.py [--days 30] [--sample 800] [--requests 100000]
"""

from __future__ import annotations

import argparse
import hashlib
import time
from dataclasses import dataclass, field

import numpy as np
import polars as pl
from _traffic import RELEVANT, SEGMENTS, SHARES, Service, truth_metrics
from _util import table

from ragaudit.audit import ALL, SampleOptions, draw_sample, estimate, list_metrics
from ragaudit.audit._drift import DayDesign, Evidence, attribute, day_changes, probe_changes
from ragaudit.audit._sample import permanent_random
from ragaudit.audit._watch import SERIES_SCHEMA, mix_splits

MIX_DAY, ENGINE_DAY, CONTENT_DAY = 9, 19, 24  # 0-based: days 10, 20 and 25
MIX_SHARES = (0.15, 0.20, 0.15, 0.15, 0.10, 0.25)
ENGINE_SEGMENT, CONTENT_SEGMENT = "sports", "health"
REVERSED_SHARE = 0.38
PROBE_SIZE = 100
FALSE_ALARM_GOAL = 0.05
MIN_STORED = 0.70
SALT = "bench-drift"
METRICS = ("ndcg@10", "relevant share")
Z95 = 1.959963984540054


def _u(*parts: object) -> float:
    digest = hashlib.blake2b("\x1f".join(map(str, parts)).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2**64


@dataclass
class DriftingService(Service):
    """The simulated service with the three planted events."""

    reversed_q: dict[str, np.ndarray] = field(init=False, repr=False)
    lowered: dict[str, np.ndarray] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        super().__post_init__()
        ranks = np.arange(1, self.vocabulary + 1)
        self.reversed_q = {
            s: np.array([_u("engine", s, r) < REVERSED_SHARE for r in ranks]) for s in SEGMENTS
        }
        self.lowered = {
            s: np.array([[_u("rewrite", s, r, p) < 0.5 for p in range(self.k)] for r in ranks])
            for s in SEGMENTS
        }
        self._states: dict[tuple[bool, bool], pl.DataFrame] = {}

    def state(self, day: int) -> tuple[bool, bool]:
        """(engine changed, content rewritten) on ``day``."""
        return day >= ENGINE_DAY, day >= CONTENT_DAY

    def grades_on(self, day: int, segment: str) -> np.ndarray:
        """The planted grades of every query's served list **in served order** on ``day``."""
        engine, content = self.state(day)
        g = self.grades[segment].astype(int)
        if content and segment == CONTENT_SEGMENT:
            g = np.where(self.lowered[segment], np.maximum(g - 1, 0), g)
        if engine and segment == ENGINE_SEGMENT:
            g = np.where(self.reversed_q[segment][:, None], g[:, ::-1], g)
        return g

    def served(self, day: int, segment: str, rank: int) -> list[tuple[str, str, int]]:
        """One query's served list on ``day``: (document id, text, planted grade) in order."""
        engine, content = self.state(day)
        positions = list(range(self.k))
        if engine and segment == ENGINE_SEGMENT and self.reversed_q[segment][rank - 1]:
            positions.reverse()
        grades = self.grades_on(day, segment)[rank - 1]
        word = "Revised" if content and segment == CONTENT_SEGMENT else "Text"
        return [
            (
                self.doc_id(segment, rank, p),
                f"{word} of document {p} of {segment} topic {rank}.",
                int(g),
            )
            for p, g in zip(positions, grades, strict=True)
        ]

    def counts(self, day: int) -> dict[str, np.ndarray]:
        """Requests per query; the segments' shares move on the mix day."""
        self.shares = MIX_SHARES if day >= MIX_DAY else SHARES
        return super().counts(day)

    def truth(self, day: int) -> dict[tuple[str, str], float]:
        """(segment, metric) → the day's mean over every request, with the day's grades."""
        counts = self.counts(day)
        out: dict[tuple[str, str], float] = {}
        sums: dict[str, list[float]] = {}
        for segment, c in counts.items():
            for metric, per_query in truth_metrics(self.grades_on(day, segment), self.k).items():
                ok = ~np.isnan(per_query)
                num, den = float((c * np.where(ok, per_query, 0.0)).sum()), float(c[ok].sum())
                out[(segment, metric)] = num / den
                sums.setdefault(metric, [0.0, 0.0])
                sums[metric][0] += num
                sums[metric][1] += den
        for metric, (num, den) in sums.items():
            out[(ALL, metric)] = num / den
        return out


@dataclass
class Store:
    """Grades by (normalised query, document text), as the judgment store keys them; a miss
    asks a scripted judge that is off by one grade 15 % of the time, the same way every time
    it is asked the same pair."""

    grades: dict[tuple[str, str], int] = field(default_factory=dict)
    paid: int = 0
    stored: int = 0

    def grade(self, query: str, text: str, planted: int) -> int:
        key = (query, text)
        if key in self.grades:
            self.stored += 1
            return self.grades[key]
        self.paid += 1
        grade = planted
        if _u("judge", query, text) < 0.15:
            grade = min(3, planted + 1) if _u("up", query, text) < 0.5 else max(0, planted - 1)
        self.grades[key] = grade
        return grade


def _parse(query_norm: str) -> tuple[str, int]:
    words = query_norm.split()
    return words[3], int(words[5])


def values_of(service: DriftingService, day: int, units: pl.DataFrame, store: Store):
    """Per unit × metric: the list metrics of the day's served list graded through the store;
    and segment → (changed documents, graded documents) against texts seen on earlier days."""
    rows = []
    for unit, query_norm in units.select("unit", "query_norm").iter_rows():
        segment, rank = _parse(query_norm)
        grades = [
            store.grade(query_norm, text, g) for _, text, g in service.served(day, segment, rank)
        ]
        for metric, value in list_metrics(grades, service.k, RELEVANT).items():
            rows.append(
                {
                    "unit": unit,
                    "metric": metric,
                    "value": value,
                    "status": "ok" if value is not None else "skipped",
                }
            )
    schema = {"unit": pl.String, "metric": pl.String, "value": pl.Float64, "status": pl.String}
    return pl.DataFrame(rows, schema=schema)


def content_share(
    service: DriftingService, day: int, sample: pl.DataFrame, seen: dict[str, str]
) -> dict[str, float]:
    """segment → the share of its drawn served documents whose text differs from the text an
    earlier day served under the same id (the audit's content check)."""
    changed: dict[str, list[int]] = {}
    for query_norm in sample["query_norm"]:
        segment, rank = _parse(query_norm)
        for doc_id, text, _ in service.served(day, segment, rank):
            digest = hashlib.blake2b(text.encode(), digest_size=8).hexdigest()
            before = seen.get(doc_id)
            tally = changed.setdefault(segment, [0, 0])
            tally[0] += before is not None and before != digest
            tally[1] += 1
            seen[doc_id] = digest
    return {s: c / n for s, (c, n) in changed.items() if n}


def series_rows(day: str, estimates: pl.DataFrame) -> pl.DataFrame:
    """The day's rows of ``series.parquet`` (se from the interval's half width)."""
    return (
        estimates.filter(pl.col("metric").is_in(METRICS))
        .select(
            pl.lit("s1:bench").alias("series"),
            pl.lit(day).alias("day"),
            "segment",
            "metric",
            "estimate",
            ((pl.col("ci_high") - pl.col("ci_low")) / (2 * Z95)).alias("se"),
            "ci_low",
            "ci_high",
            "n",
            "requests",
        )
        .cast(SERIES_SCHEMA)
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--days", type=int, default=30)
    # 800 draws a day give each of the six segments ~130 units: what a 5-point drop in one
    # segment needs to pass BH across 14 cells; the first day then grades ~8,000 documents.
    parser.add_argument("--sample", type=int, default=800, help="expected draws a day")
    parser.add_argument("--requests", type=int, default=100_000, help="requests a day")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    started = time.perf_counter()
    service = DriftingService(requests_per_day=args.requests, seed=args.seed)
    opts = SampleOptions(sample=args.sample, k=service.k)
    store, seen = Store(), {}
    series = pl.DataFrame(schema=SERIES_SCHEMA)
    probe_values: dict[int, pl.DataFrame] = {}
    probe: pl.DataFrame | None = None
    designs: dict[str, DayDesign] = {}
    flagged: dict[tuple[int, str], list] = {}
    log, reuse, paid_days = [], [], []
    for day in range(args.days):
        name = f"2026-11-{day + 1:02d}"
        requests = service.day(day)
        sample = draw_sample(requests.lazy(), opts, salt=SALT)
        before = (store.paid, store.stored)
        values = values_of(service, day, sample, store)
        if probe is None:
            # The probe: 100 of day 1's drawn units, kept for the series.
            probe = sample.sort(
                pl.col("unit").map_elements(
                    lambda u: permanent_random("probe", u), return_dtype=pl.Float64
                )
            ).head(PROBE_SIZE)
        pv = values_of(service, day, probe, store)
        probe_values[day] = pv.join(probe.select("unit", "segment"), on="unit").select(
            pl.col("unit").alias("probe"), "segment", "metric", "value"
        )
        paid, stored = store.paid - before[0], store.stored - before[1]
        reuse.append(stored / (paid + stored))
        paid_days.append(paid)
        changed = content_share(service, day, sample, seen)
        est = estimate(values, sample)
        series = pl.concat([series, series_rows(name, est)])
        designs[name] = DayDesign(sample, values)
        changes = day_changes(
            series, name, higher_is_better=dict.fromkeys(METRICS, True), designs=designs
        )
        evidence: dict[int, Evidence] = {}
        for c in changes:
            ref_day = int(c.reference_days[0][-2:]) - 1
            if ref_day not in evidence:
                evidence[ref_day] = Evidence(
                    probe={
                        (p.segment, p.metric): p
                        for p in probe_changes(probe_values[day], probe_values[ref_day])
                    },
                    changed_docs=changed,
                    mix=mix_splits(designs[f"2026-11-{ref_day + 1:02d}"], designs[name]),
                )
            c = attribute(c, evidence[ref_day])
            if c.moved:
                flagged.setdefault((day, c.segment), []).append(c)
        log.append(
            (
                day + 1,
                sample.height,
                paid,
                f"{reuse[-1]:.0%}",
                "; ".join(
                    f"{s} {c.metric} {c.diff:+.3f} vs {c.against} → {c.attribution}"
                    for (d, s), cs in flagged.items()
                    if d == day
                    for c in cs
                )
                or "-",
            )
        )
    print(
        f"service: {args.requests:,} requests/day, 6 segments, sample {args.sample}/day, probe "
        f"{PROBE_SIZE}; {time.perf_counter() - started:.0f} s for {args.days} days"
    )
    print(table(log, ("day", "drawn", "paid", "from store", "flagged (change → cause)")))
    truth = {
        d: service.truth(d)
        for d in (MIX_DAY - 1, MIX_DAY, ENGINE_DAY - 1, ENGINE_DAY, CONTENT_DAY - 1, CONTENT_DAY)
    }

    def moved(day: int, segment: str, metric: str = "ndcg@10") -> str:
        return f"{truth[day][(segment, metric)] - truth[day - 1][(segment, metric)]:+.3f}"

    print(
        f"planted: overall nDCG@10 day 9→10 {moved(MIX_DAY, ALL)}; {ENGINE_SEGMENT} nDCG@10 "
        f"day 19→20 {moved(ENGINE_DAY, ENGINE_SEGMENT)}; {CONTENT_SEGMENT} nDCG@10 day 24→25 "
        f"{moved(CONTENT_DAY, CONTENT_SEGMENT)}, relevant share "
        f"{moved(CONTENT_DAY, CONTENT_SEGMENT, 'relevant share')}"
    )
    print()

    def said(day: int, segment: str) -> list:
        return flagged.get((day, segment), [])

    engine = [c for c in said(ENGINE_DAY, ENGINE_SEGMENT) if c.metric == "ndcg@10"]
    ok = bool(engine) and all(c.attribution == "engine" for c in engine)
    print(
        f"day-20 drop flagged in {ENGINE_SEGMENT} and attributed to the engine: "
        + (
            "met"
            if ok
            else f"not met: {[(c.against, c.attribution) for c in engine] or 'not flagged'}"
        )
    )
    segs = [s for s in SEGMENTS if said(MIX_DAY, s)]
    overall = said(MIX_DAY, ALL)
    split = mix_splits(designs[f"2026-11-{MIX_DAY:02d}"], designs[f"2026-11-{MIX_DAY + 1:02d}"])[
        (ALL, "ndcg@10")
    ]
    ok = not segs and split.mix_moved and all(c.attribution == "mix" for c in overall)
    print(
        f"day-10 shift: overall nDCG@10 mix part {split.mix:+.3f} "
        f"({split.mix_ci[0]:+.3f}..{split.mix_ci[1]:+.3f}), within {split.within:+.3f}; "
        f"overall flagged {[(c.metric, c.against, c.attribution) for c in overall]}; "
        f"segments flagged {segs}: " + ("met" if ok else "not met")
    )
    content = said(CONTENT_DAY, CONTENT_SEGMENT)
    ok = bool(content) and all(c.attribution == "content" for c in content)
    print(
        f"day-25 rewrite flagged in {CONTENT_SEGMENT} as content: "
        + (
            "met"
            if ok
            else "not met: "
            + str([(c.metric, c.against, c.attribution) for c in content] or "not flagged")
        )
    )
    clean = [
        (d, s)
        for d in range(1, args.days)
        for s in SEGMENTS
        if not (s == ENGINE_SEGMENT and d >= ENGINE_DAY)
        and not (s == CONTENT_SEGMENT and d >= CONTENT_DAY)
    ]
    false = [(d + 1, s) for d, s in clean if said(d, s)]
    rate = len(false) / len(clean)
    print(
        f"false alarms: {len(false)} of {len(clean)} clean (day, segment) cells, {rate:.1%} "
        f"(goal <= {FALSE_ALARM_GOAL:.0%}): "
        + ("met" if rate <= FALSE_ALARM_GOAL else f"not met: {false}")
    )
    print(
        f"judge calls (no goal here; #45's bench holds the 2,000 a day at sample 160): day 1 "
        f"{paid_days[0]:,}, from day 2 max {max(paid_days[1:]):,}, "
        f"mean {np.mean(paid_days[1:]):,.0f}"
    )
    low = min(reuse[1:])
    print(
        f"grades from the store from day 2 on, probe included: min {low:.0%}, "
        f"mean {np.mean(reuse[1:]):.0%} "
        f"(goal >= {MIN_STORED:.0%}): "
        + ("met" if low >= MIN_STORED else f"not met: day {reuse.index(low) + 1}")
    )


if __name__ == "__main__":
    main()
