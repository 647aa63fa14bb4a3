"""Ranking agreement against independent implementations, and the pairwise ordering strategies."""

from __future__ import annotations

import asyncio
import itertools
import math
import random

import numpy as np
import pytest
from scipy.stats import kendalltau, rankdata, spearmanr
from sklearn.metrics import dcg_score, ndcg_score

from ragaudit.ordering import (
    STRATEGIES,
    binary_insertion,
    merge_rounds,
    parallel_quicksort,
    sample_sort,
)
from ragaudit.ranking import (
    average_ranks,
    dcg,
    full_judge_ranks,
    hit_at_k,
    ideal_dcg,
    judge_gains,
    kendall_tau_b,
    mrr,
    ndcg_at_k,
    order_vs_labels,
    precision_at_k,
    recall_at_k,
    spearman,
    top_k_overlap,
)

TOL = 1e-9
SEEDS = range(25)


def ids(n: int) -> list[str]:
    return [f"c{i:03d}" for i in range(n)]


def shuffled(items: list[str], rng: random.Random) -> list[str]:
    out = list(items)
    rng.shuffle(out)
    return out


def tied_ranks(
    rng: random.Random, items: list[str]
) -> tuple[list[str], list[int], dict[str, float]]:
    """A random order with random tie groups, and the ranks average_ranks gives it."""
    order = shuffled(items, rng)
    groups, g = [], 0
    for i in range(len(order)):
        if i and rng.random() < 0.4:
            groups.append(g)
        else:
            g = i
            groups.append(g)
    return order, groups, average_ranks(order, groups)


# -- ranks ----------------------------------------------------------------------------------


def test_average_ranks_matches_scipy_rankdata() -> None:
    rng = random.Random(0)
    for _ in SEEDS:
        n = rng.randint(2, 30)
        order, groups, ranks = tied_ranks(rng, ids(n))
        expected = rankdata(groups, method="average")
        assert [ranks[x] for x in order] == pytest.approx(list(expected), abs=TOL)
    assert average_ranks(["a", "b", "c"]) == {"a": 1.0, "b": 2.0, "c": 3.0}


def test_full_judge_ranks_by_hand() -> None:
    ranks = full_judge_ranks(["a", "b", "c"], [0, 0, 1], ["d", "e"])
    assert ranks == {"a": 1.5, "b": 1.5, "c": 3.0, "d": 4.5, "e": 4.5}
    assert full_judge_ranks([], [], ["x", "y", "z"]) == {"x": 2.0, "y": 2.0, "z": 2.0}


def test_judge_gains() -> None:
    assert judge_gains(["a", "b", "c"]) == {"a": 3.0, "b": 2.0, "c": 1.0}
    assert judge_gains([]) == {}


# -- Spearman and Kendall -------------------------------------------------------------------


def test_spearman_and_kendall_on_random_permutations() -> None:
    rng = random.Random(1)
    for _ in SEEDS:
        items = ids(rng.randint(3, 40))
        a = average_ranks(shuffled(items, rng))
        b = average_ranks(shuffled(items, rng))
        x, y = [a[k] for k in items], [b[k] for k in items]
        assert spearman(a, b) == pytest.approx(spearmanr(x, y).statistic, abs=TOL)
        assert kendall_tau_b(a, b) == pytest.approx(kendalltau(x, y).statistic, abs=TOL)


def test_spearman_and_kendall_with_ties() -> None:
    rng = random.Random(2)
    for _ in SEEDS:
        items = ids(rng.randint(3, 40))
        _, _, a = tied_ranks(rng, items)
        _, _, b = tied_ranks(rng, items)
        x, y = [a[k] for k in items], [b[k] for k in items]
        if len(set(x)) < 2 or len(set(y)) < 2:
            continue
        assert spearman(a, b) == pytest.approx(spearmanr(x, y).statistic, abs=TOL)
        assert kendall_tau_b(a, b) == pytest.approx(
            kendalltau(x, y, variant="b").statistic, abs=TOL
        )


def test_agreement_only_over_common_ids() -> None:
    a = {"a": 1.0, "b": 2.0, "c": 3.0, "only_a": 4.0}
    b = {"c": 1.0, "b": 2.0, "a": 3.0, "only_b": 9.0}
    assert spearman(a, b) == pytest.approx(-1.0, abs=TOL)
    assert kendall_tau_b(a, b) == pytest.approx(-1.0, abs=TOL)
    same = {"a": 1.0, "b": 2.0, "c": 3.0}
    assert spearman(same, same) == pytest.approx(1.0, abs=TOL)
    assert kendall_tau_b(same, same) == pytest.approx(1.0, abs=TOL)


def test_agreement_undefined_cases_are_nan() -> None:
    assert math.isnan(spearman({"a": 1.0}, {"a": 1.0}))
    assert math.isnan(kendall_tau_b({"a": 1.0}, {"b": 1.0}))
    # All tied on one side: no correlation is defined (scipy agrees: nan).
    flat = {"a": 1.0, "b": 1.0, "c": 1.0}
    ranked = {"a": 1.0, "b": 2.0, "c": 3.0}
    assert math.isnan(spearman(flat, ranked))
    assert math.isnan(kendall_tau_b(flat, ranked))


# -- NDCG -----------------------------------------------------------------------------------


def test_ndcg_matches_sklearn_on_random_orders() -> None:
    rng = random.Random(3)
    for _ in SEEDS:
        n = rng.randint(2, 40)
        items = ids(n)
        gains = {x: float(rng.choice([0, 0, 1, 2, 3])) for x in items}
        if not any(gains.values()):
            gains[items[0]] = 1.0
        order = shuffled(items, rng)
        # Distinct scores, descending along ``order``: sklearn sees the same ranking, no ties.
        score = {x: float(n - i) for i, x in enumerate(order)}
        y_true = np.array([[gains[x] for x in items]])
        y_score = np.array([[score[x] for x in items]])
        for k in {1, 3, 5, 10, n}:
            expected = ndcg_score(y_true, y_score, k=k)
            assert ndcg_at_k(order, gains, k) == pytest.approx(expected, abs=TOL)


def test_ndcg_by_hand() -> None:
    # Relevant at positions 1 and 3 of 3, binary gains: (1 + 1/log2(4)) / (1 + 1/log2(3)).
    value = ndcg_at_k(["a", "x", "b"], {"a": 1.0, "b": 1.0}, 3)
    assert value == pytest.approx((1 + 0.5) / (1 + 1 / math.log2(3)), abs=TOL)
    assert ndcg_at_k(["a", "b"], {"a": 1.0, "b": 1.0}, 2) == pytest.approx(1.0, abs=TOL)
    # A relevant item the order never shows still counts in the ideal.
    assert ndcg_at_k(["a", "x"], {"a": 1.0, "gone": 1.0}, 2) == pytest.approx(
        1 / (1 + 1 / math.log2(3)), abs=TOL
    )
    assert math.isnan(ndcg_at_k(["a"], {}, 1))


# -- label metrics --------------------------------------------------------------------------


def test_label_metrics_by_hand() -> None:
    order = ["x1", "r1", "x2", "r2", "x3", "r3"]
    relevant = {"r1", "r2", "r3", "r_unranked"}
    assert mrr(order, relevant) == pytest.approx(1 / 2, abs=TOL)
    assert hit_at_k(order, relevant, 1) == 0.0
    assert hit_at_k(order, relevant, 2) == 1.0
    assert precision_at_k(order, relevant, 4) == pytest.approx(2 / 4, abs=TOL)
    assert precision_at_k(order, relevant, 10) == pytest.approx(3 / 10, abs=TOL)
    assert recall_at_k(order, relevant, 4) == pytest.approx(2 / 4, abs=TOL)
    assert recall_at_k(order, relevant, 6) == pytest.approx(3 / 4, abs=TOL)
    assert mrr(order, {"nowhere"}) == 0.0
    assert math.isnan(recall_at_k(order, set(), 3))


def test_label_metrics_on_random_orders() -> None:
    rng = random.Random(4)
    for _ in SEEDS:
        n = rng.randint(1, 30)
        order = shuffled(ids(n), rng)
        relevant = {x for x in order if rng.random() < 0.3} or {order[-1]}
        flags = np.array([x in relevant for x in order], dtype=float)
        first = int(np.argmax(flags))
        for k in (1, 3, 5, 10):
            got = order_vs_labels(order, relevant, k)
            assert got["mrr"] == pytest.approx(1.0 / (first + 1), abs=TOL)
            assert got["hit"] == float(flags[:k].any())
            assert got["precision"] == pytest.approx(flags[:k].sum() / k, abs=TOL)
            assert got["recall"] == pytest.approx(flags[:k].sum() / len(relevant), abs=TOL)
            y_true = np.array([[x in relevant for x in order]], dtype=float)
            y_score = np.array([[float(n - i) for i in range(n)]])
            if n > 1:  # sklearn refuses a single document
                assert got["ndcg"] == pytest.approx(ndcg_score(y_true, y_score, k=k), abs=TOL)


def test_top_k_overlap() -> None:
    share, common = top_k_overlap(["a", "b", "c", "d"], ["c", "x", "a", "y"], 3)
    assert share == pytest.approx(2 / 3, abs=TOL)
    assert common == ["a", "c"]  # in the first order's order
    assert top_k_overlap(["a", "b"], ["a", "b"], 2) == (1.0, ["a", "b"])
    assert top_k_overlap(["a"], ["b"], 1) == (0.0, [])
    rng = random.Random(5)
    for _ in SEEDS:
        items = ids(20)
        a, b, k = shuffled(items, rng), shuffled(items, rng), rng.randint(1, 20)
        share, common = top_k_overlap(a, b, k)
        assert share == pytest.approx(len(set(a[:k]) & set(b[:k])) / k, abs=TOL)
        assert set(common) == set(a[:k]) & set(b[:k])


# -- ordering strategies --------------------------------------------------------------------


def exact(values: dict[str, float], counter: list[int] | None = None):
    """A comparator that puts higher values first and calls equal values a tie."""

    async def compare(a: str, b: str) -> int:
        if counter is not None:
            counter.append(1)
        await asyncio.sleep(0)
        return (values[a] < values[b]) - (values[a] > values[b])

    return compare


def expected_groups(ordered: list[str], values: dict[str, float]) -> list[bool]:
    """For each neighbour pair: do they share a tie group?"""
    return [values[a] == values[b] for a, b in itertools.pairwise(ordered)]


@pytest.mark.parametrize("sort", [merge_rounds, binary_insertion])
async def test_strategies_sort_distinct_values(sort) -> None:
    rng = random.Random(6)
    for n in (0, 1, 2, 3, 7, 16, 33):
        items = ids(n)
        values = {x: rng.random() for x in items}
        calls: list[int] = []
        ordered, groups = await sort(shuffled(items, rng), exact(values, calls))
        assert ordered == sorted(items, key=lambda x: -values[x])
        assert groups == list(range(n))  # no ties, one group each
        # Both are comparison sorts of O(n log n) comparisons.
        assert len(calls) <= (n * math.ceil(math.log2(n)) if n > 1 else 0)


@pytest.mark.parametrize("sort", [merge_rounds, binary_insertion])
async def test_strategies_with_ties_share_groups_and_are_stable(sort) -> None:
    rng = random.Random(7)
    for _ in range(15):
        items = ids(rng.randint(2, 30))
        values = {x: float(rng.randint(0, 4)) for x in items}
        start = shuffled(items, rng)
        ordered, groups = await sort(start, exact(values))
        # Stable: equal values keep their input order.
        assert ordered == sorted(start, key=lambda x: -values[x])
        assert len(groups) == len(ordered)
        shared = [g1 == g2 for g1, g2 in itertools.pairwise(groups)]
        assert shared == expected_groups(ordered, values)
        # Group numbers never go down along the order.
        assert groups == sorted(groups)


async def test_all_equal_items_form_one_group() -> None:
    values = dict.fromkeys(ids(9), 1.0)
    for sort in (merge_rounds, binary_insertion):
        ordered, groups = await sort(ids(9), exact(values))
        assert ordered == ids(9)
        assert set(groups) == {groups[0]}


async def test_merge_rounds_runs_the_merges_of_a_level_at_once() -> None:
    values = {x: float(i) for i, x in enumerate(ids(16))}
    state = {"now": 0, "max": 0}

    async def compare(a: str, b: str) -> int:
        state["now"] += 1
        state["max"] = max(state["max"], state["now"])
        await asyncio.sleep(0)
        state["now"] -= 1
        return (values[a] < values[b]) - (values[a] > values[b])

    ordered, _ = await merge_rounds(ids(16), compare)
    assert ordered == sorted(ids(16), key=lambda x: -values[x])
    assert state["max"] == 8  # the first level: 8 independent pairs

    state["max"] = 0
    await binary_insertion(ids(16), compare)
    assert state["max"] == 1  # plain insertion: one comparison at a time


def test_strategies_are_registered_by_name() -> None:
    assert STRATEGIES["merge"] is merge_rounds
    assert STRATEGIES["insertion"] is binary_insertion


# -- tie-aware gains and the parallel strategies ----------------------------------------------


def test_judge_gains_share_within_tie_groups() -> None:
    gains = judge_gains(["a", "b", "c", "d"], [0, 0, 1, 2])
    assert gains == {"a": 3.5, "b": 3.5, "c": 2.0, "d": 1.0}
    assert judge_gains(["a", "b", "c"], [0, 1, 2]) == judge_gains(["a", "b", "c"])
    # Ties change the gains, not their total.
    assert sum(judge_gains(ids(9), [0, 0, 0, 1, 2, 2, 3, 3, 3]).values()) == sum(range(1, 10))


@pytest.mark.parametrize("sort", [sample_sort, parallel_quicksort])
async def test_parallel_strategies_sort_distinct_values(sort) -> None:
    rng = random.Random(8)
    for n in (0, 1, 2, 3, 7, 16, 33, 70):
        items = ids(n)
        values = {x: rng.random() for x in items}
        calls: list[int] = []
        ordered, groups = await sort(shuffled(items, rng), exact(values, calls))
        assert ordered == sorted(items, key=lambda x: -values[x])
        assert groups == list(range(n))
        # Never a pair twice; the sample sort stays within a binary insertion's n log2 n.
        assert len(calls) <= n * (n - 1) // 2
        if sort is sample_sort:
            assert len(calls) <= (n * math.ceil(math.log2(n)) if n > 1 else 0)


@pytest.mark.parametrize("sort", [sample_sort, parallel_quicksort])
async def test_parallel_strategies_with_ties_share_groups_and_are_stable(sort) -> None:
    rng = random.Random(9)
    for _ in range(15):
        items = ids(rng.randint(2, 60))
        values = {x: float(rng.randint(0, 4)) for x in items}
        start = shuffled(items, rng)
        ordered, groups = await sort(start, exact(values))
        assert ordered == sorted(start, key=lambda x: -values[x])
        shared = [g1 == g2 for g1, g2 in itertools.pairwise(groups)]
        if sort is sample_sort:
            # Every neighbour pair is asked before the end, so every tie between neighbours shows.
            assert shared == expected_groups(ordered, values)
        else:
            pairs = zip(itertools.pairwise(ordered), shared, strict=True)
            assert all(values[a] == values[b] for (a, b), tie in pairs if tie)
        assert groups == sorted(groups)


async def test_parallel_strategies_keep_all_equal_items_in_one_group() -> None:
    values = dict.fromkeys(ids(40), 1.0)
    for sort in (sample_sort, parallel_quicksort):
        ordered, groups = await sort(ids(40), exact(values))
        assert ordered == ids(40)
        assert set(groups) == {groups[0]}


def test_all_strategies_are_registered_by_name() -> None:
    assert STRATEGIES["sample"] is sample_sort
    assert STRATEGIES["quick"] is parallel_quicksort


def test_dcg_matches_scikit_learn_and_the_ideal_of_whole_counts_is_the_sorted_list() -> None:
    rng = random.Random(7)
    for _ in range(50):
        gains = [rng.choice([0, 1, 2, 3]) for _ in range(rng.randint(2, 15))]
        k = rng.randint(1, 12)
        # Distinct scores in list order: scikit-learn ranks exactly that order.
        scores = [float(len(gains) - i) for i in range(len(gains))]
        assert dcg(gains[:k]) == pytest.approx(dcg_score([gains], [scores], k=k), abs=TOL)
        counts = {g: float(gains.count(g)) for g in set(gains)}
        assert ideal_dcg(counts, k) == pytest.approx(dcg(sorted(gains, reverse=True)[:k]), abs=TOL)


def test_the_ideal_dcg_of_estimated_counts_moves_smoothly_between_whole_ones() -> None:
    one, two = ideal_dcg({3: 1.0, 1: 4.0}, 10), ideal_dcg({3: 2.0, 1: 3.5}, 10)
    half = ideal_dcg({3: 1.5, 1: 3.75}, 10)
    assert one < half < two
    # Position 1 (0-based) is half grade 3 and half grade 1 (1 was grade 1 there: +1), and a
    # quarter of a grade-1 item reaches position 5.
    assert half - one == pytest.approx(1 / math.log2(3) + 0.25 / math.log2(7), abs=TOL)
    # The depth cuts the ideal like a list's.
    assert ideal_dcg({2: 30.0}, 10) == pytest.approx(dcg([2] * 10), abs=TOL)
