"""The traffic's own pairing: a day's change split by cause, each part against a hand computation.

Two days of a small service. Segment ``a``: q1 asked on both days, rewritten in part and
served one more relevant document by the engine; q2 asked on both days, unchanged but asked
more often; q3 asked on day 0 only (gone), q4 on day 1 only (new). Segment ``b``: one
unchanged query whose share of the traffic triples. Every query is taken whole (π = 1, one
request graded, its weight the query's requests), so each figure is the population's and has
no sampling variance; a second case draws queries with π < 1 and checks the pair weights and
the variance over the joint design by hand.
"""

from __future__ import annotations

import math

import polars as pl
import pytest

from ragaudit.audit._listmetrics import list_metrics
from ragaudit.audit._pairing import OVERALL, DayDesign, split_changes

METRIC = "relevant share"

# unit -> (segment, requests, served list: (document, grade, text))
DAY0 = {
    "q1": (
        "a",
        2,
        [("d1", 3, "t1"), ("d2", 3, "t2"), ("d3", 2, "t3"), ("d4", 2, "t4"), ("d5", 0, "t5")],
    ),
    "q2": (
        "a",
        2,
        [("e1", 2, "x"), ("e2", 2, "x"), ("e3", 0, "x"), ("e4", 0, "x"), ("e5", 0, "x")],
    ),
    "q3": (
        "a",
        1,
        [("f1", 2, "x"), ("f2", 0, "x"), ("f3", 0, "x"), ("f4", 0, "x"), ("f5", 0, "x")],
    ),
    "q5": (
        "b",
        5,
        [("g1", 2, "x"), ("g2", 2, "x"), ("g3", 0, "x"), ("g4", 2, "x"), ("g5", 0, "x")],
    ),
}
DAY1 = {
    # d1 and d2 rewritten (3 -> 0, 3 -> 1), d5 (0) replaced by d6 (3) by the engine.
    "q1": (
        "a",
        1,
        [("d1", 0, "t1'"), ("d2", 1, "t2'"), ("d3", 2, "t3"), ("d4", 2, "t4"), ("d6", 3, "t6")],
    ),
    "q2": (
        "a",
        3,
        [("e1", 2, "x"), ("e2", 2, "x"), ("e3", 0, "x"), ("e4", 0, "x"), ("e5", 0, "x")],
    ),
    "q4": (
        "a",
        1,
        [("h1", 0, "x"), ("h2", 0, "x"), ("h3", 0, "x"), ("h4", 0, "x"), ("h5", 0, "x")],
    ),
    "q5": (
        "b",
        15,
        [("g1", 2, "x"), ("g2", 2, "x"), ("g3", 0, "x"), ("g4", 2, "x"), ("g5", 0, "x")],
    ),
}


def share(grades):
    return list_metrics(grades, 5, 2)[METRIC]


def _census(day: str, lists) -> DayDesign:
    rows = [
        {
            "unit": u,
            "request_id": f"{u}@{day}",
            "segment": seg,
            "stratum": f"{seg}/head",
            "pi": 1.0,
            "weight": float(count),
            "count": count,
            "requests_drawn": 1,
        }
        for u, (seg, count, _) in lists.items()
    ]
    sample = pl.DataFrame(rows)
    values = pl.DataFrame(
        [
            {
                "request_id": f"{u}@{day}",
                "unit": u,
                "metric": METRIC,
                "value": share([g for _, g, _ in docs]),
                "status": "ok",
            }
            for u, (_, _, docs) in lists.items()
        ]
    )
    verdicts = pl.DataFrame(
        [
            {
                "request_id": f"{u}@{day}",
                "unit": u,
                "rank": i,
                "doc_id": doc,
                "grade": grade,
                "status": "ok",
                "text_hash": text,
            }
            for u, (_, _, docs) in lists.items()
            for i, (doc, grade, text) in enumerate(docs, start=1)
        ]
    )
    return DayDesign(sample, values, sample.select("unit", "segment", "count"), verdicts)


@pytest.fixture(scope="module")
def split():
    designs = {"d0": _census("d0", DAY0), "d1": _census("d1", DAY1)}
    return split_changes(designs, "d1", ["d0"], METRIC, list_value=share)


def _part(split, segment, part):
    figure = split[segment].parts[part]
    assert figure.variance == pytest.approx(0.0, abs=1e-18)  # every query taken whole
    return figure.estimate


# By hand. Segment a: μ0 = (2·0.8 + 2·0.4 + 1·0.2) / 5 = 0.52, μ1 = (1·0.6 + 3·0.4 + 0) / 5 = 0.36.
# Recurring q1, q2: m_R0 = (1.6 + 0.8) / 4 = 0.6, m_R1 = (0.6 + 1.2) / 4 = 0.45.
# Pairs weighted by their mean share of the two days' requests: q1 (1/5 + 2/5) / 2 = 0.3,
# q2 (3/5 + 2/5) / 2 = 0.5; q1 moved 0.8 → 0.6, q2 did not: C = 0.3 · −0.2 / 0.8 = −0.075.


def test_the_total_is_the_days_difference(split):
    assert _part(split, "a", "total") == pytest.approx(0.36 - 0.52)
    assert _part(split, "b", "total") == pytest.approx(0.0)
    # Overall: (2.6 + 3.0) / 10 = 0.56 on day 0, (1.8 + 9.0) / 20 = 0.54 on day 1.
    assert _part(split, OVERALL, "total") == pytest.approx(0.54 - 0.56)


def test_mix_between_segments_is_the_shift_of_their_shares(split):
    # Shares of a: 0.5 → 0.25, of b: 0.5 → 0.75; each at its mean figure of the two days.
    by_hand = (0.25 - 0.5) * (0.52 + 0.36) / 2 + (0.75 - 0.5) * (0.6 + 0.6) / 2
    assert _part(split, OVERALL, "between") == pytest.approx(by_hand)
    assert "between" not in split["a"].parts  # a segment is one stratum of the mix
    # Each segment's share of it, about the overall level (0.56 + 0.54) / 2: a, below it,
    # lost share (+), b, above it, gained share (+).
    segments = dict(split[OVERALL].behind["between"])
    assert segments == pytest.approx({"a": -0.25 * (0.44 - 0.55), "b": 0.25 * (0.6 - 0.55)})


def test_mix_within_is_the_recurring_queries_reweighted(split):
    # The recurring mean moved by 0.45 − 0.6 = −0.15, of which the pairs' lists −0.075.
    assert _part(split, "a", "within") == pytest.approx(-0.15 - (-0.075))
    assert _part(split, "b", "within") == pytest.approx(0.0)


def test_content_is_the_rewritten_documents_share_of_the_paired_change(split):
    # q1 with d1, d2 graded as on day 0: (3, 3, 2, 2, 3) → 1.0, so day 1's side 0.6 − 1.0;
    # day 0's list with their day-1 grades: (0, 1, 2, 2, 0) → 0.4, so 0.4 − 0.8. Shapley:
    # (−0.4 − 0.4) / 2 = −0.4 for q1, weighted as C: 0.3 · −0.4 / 0.8.
    assert _part(split, "a", "content") == pytest.approx(0.3 * -0.4 / 0.8)


def test_engine_is_the_rest_of_the_paired_change(split):
    # q1's d5 → d6 (0 → 3): +0.2 of its −0.2, weighted as C.
    assert _part(split, "a", "engine") == pytest.approx(0.3 * 0.2 / 0.8)
    assert _part(split, "a", "content") + _part(split, "a", "engine") == pytest.approx(-0.075)


def test_new_queries_are_what_the_new_and_gone_add_beyond_the_recurring(split):
    # Today's new q4 (share 0.2, 0.0) against today's recurring (0.45), less the gone q3
    # (share 0.2, 0.2) against day 0's recurring (0.6).
    by_hand = 0.2 * (0.0 - 0.45) - 0.2 * (0.2 - 0.6)
    assert _part(split, "a", "new") == pytest.approx(by_hand)


def test_the_parts_add_up_to_the_change(split):
    for segment, found in split.items():
        parts = sum(
            f.estimate for name, f in found.parts.items() if name not in ("total", "paired")
        )
        assert parts == pytest.approx(found.parts["total"].estimate), segment
    overall = split[OVERALL]
    # The overall parts are the segments' weighted by their mean share (a: 0.375, b: 0.625).
    assert overall.parts["content"].estimate == pytest.approx(0.375 * 0.3 * -0.4 / 0.8)
    assert overall.pairs == 3 and split["a"].pairs == 2


def test_an_answer_metric_puts_a_rewritten_querys_whole_change_on_content():
    designs = {"d0": _census("d0", DAY0), "d1": _census("d1", DAY1)}
    found = split_changes(designs, "d1", ["d0"], METRIC)  # no list value: not a list metric
    assert found["a"].parts["content"].estimate == pytest.approx(-0.075)
    assert found["a"].parts["engine"].estimate == pytest.approx(0.0, abs=1e-12)


def test_without_the_days_queries_only_the_total_and_the_mix_between_are_told():
    designs = {
        d: DayDesign(x.sample, x.values, None, x.verdicts)
        for d, x in {"d0": _census("d0", DAY0), "d1": _census("d1", DAY1)}.items()
    }
    found = split_changes(designs, "d1", ["d0"], METRIC, list_value=share)
    assert set(found["a"].parts) == {"total"}
    assert set(found[OVERALL].parts) == {"total", "between"}


def _drawn(day: str, rows) -> DayDesign:
    """Units drawn with π < 1 (one request each, weight count / π), and the day's queries."""
    sample = pl.DataFrame(
        [
            {
                "unit": u,
                "request_id": f"{u}@{day}",
                "segment": "a",
                "stratum": "a/s",
                "pi": pi,
                "weight": count / pi,
                "count": count,
                "requests_drawn": 1,
            }
            for u, count, pi, _ in rows
            if pi is not None
        ]
    )
    values = pl.DataFrame(
        [
            {"request_id": f"{u}@{day}", "unit": u, "metric": METRIC, "value": y, "status": "ok"}
            for u, _, pi, y in rows
            if pi is not None
        ]
    )
    units = pl.DataFrame([{"unit": u, "segment": "a", "count": c} for u, c, _, _ in rows])
    return DayDesign(sample, values, units)


def test_drawn_queries_pairs_weighted_by_the_chance_of_both_draws_and_a_hand_variance():
    # (unit, requests, π (None: not drawn), value). Day 0: q1 certain, q2 and q3 at 1/4, q3
    # not drawn. Day 1: q1 at 1/2, q2 at 1/4, q4 at 1/2. Weights count/π: 4 each.
    designs = {
        "d0": _drawn("d0", [("q1", 4, 1.0, 0.8), ("q2", 1, 0.25, 0.5), ("q3", 1, None, 0.2)]),
        "d1": _drawn("d1", [("q1", 2, 0.5, 0.6), ("q2", 1, 0.25, 0.5), ("q4", 2, 0.5, 0.0)]),
    }
    found = split_changes(designs, "d1", ["d0"], METRIC)["a"].parts
    mu0, mu1 = (4 * 0.8 + 4 * 0.5) / 8, (4 * 0.6 + 4 * 0.5 + 4 * 0.0) / 12
    assert found["total"].estimate == pytest.approx(mu1 - mu0)
    recurring = (4 * 0.6 + 4 * 0.5) / 8 - mu0
    # A pair is drawn with min(π0, π1): q1 1/2 (weight 2), q2 1/4 (weight 4); each weighted
    # by its mean share of the day's requests (q1 (2/5 + 4/6) / 2, q2 (1/5 + 1/6) / 2).
    w1, w2 = 2 * (2 / 5 + 4 / 6) / 2, 4 * (1 / 5 + 1 / 6) / 2
    paired = w1 * (0.6 - 0.8) / (w1 + w2)
    assert found["engine"].estimate == pytest.approx(paired)
    assert found["within"].estimate == pytest.approx(recurring - paired)
    assert found["new"].estimate == pytest.approx(mu1 - mu0 - recurring)
    # The total's variance over the joint design, by hand: a query is one unit across the days;
    # q1's day-0 share is exact (taken with certainty), the rest random. Scores w (y − μ) / Σw:
    z = [
        4 * (0.6 - mu1) / 12,  # q1, day 1
        4 * (0.5 - mu1) / 12 - 4 * (0.5 - mu0) / 8,  # q2, both days
        4 * (0.0 - mu1) / 12,  # q4, day 1
    ]
    mean = sum(z) / 3
    variance = 3 / 2 * sum((x - mean) ** 2 for x in z)
    assert found["total"].variance == pytest.approx(variance)
    assert found["total"].se == pytest.approx(math.sqrt(variance))
