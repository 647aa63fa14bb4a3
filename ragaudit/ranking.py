"""Agreement between two orders of the same candidates, and of an order with relevance labels.

Written out from the formulas (average ranks for ties, tau-b, sklearn's linear-gain NDCG) so
the tests can hold each one against an independent implementation.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence


def average_ranks(order: Sequence[str], groups: Sequence[int] | None = None) -> dict[str, float]:
    """1-based ranks of ``order``; items sharing a tie group share their average rank."""
    if groups is None:
        return {item: float(i + 1) for i, item in enumerate(order)}
    ranks: dict[str, float] = {}
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and groups[j + 1] == groups[i]:
            j += 1
        avg = (i + 1 + j + 1) / 2.0
        for item in order[i : j + 1]:
            ranks[item] = avg
        i = j + 1
    return ranks


def _pearson(x: Sequence[float], y: Sequence[float]) -> float:
    n = len(x)
    mx, my = sum(x) / n, sum(y) / n
    sxy = sum((a - mx) * (b - my) for a, b in zip(x, y, strict=True))
    sxx = sum((a - mx) ** 2 for a in x)
    syy = sum((b - my) ** 2 for b in y)
    if sxx == 0 or syy == 0:
        return math.nan
    return sxy / math.sqrt(sxx * syy)


def spearman(a: Mapping[str, float], b: Mapping[str, float]) -> float:
    """Spearman's rho: Pearson correlation of the rank vectors over the ids both rank."""
    common = [k for k in a if k in b]
    if len(common) < 2:
        return math.nan
    return _pearson([a[k] for k in common], [b[k] for k in common])


def kendall_tau_b(a: Mapping[str, float], b: Mapping[str, float]) -> float:
    """Kendall's tau-b over the ids both rank (ties in either order handled)."""
    common = [k for k in a if k in b]
    n = len(common)
    if n < 2:
        return math.nan
    concordant = discordant = ties_a = ties_b = 0
    for i in range(n):
        for j in range(i + 1, n):
            da = a[common[i]] - a[common[j]]
            db = b[common[i]] - b[common[j]]
            if da == 0 and db == 0:
                continue
            if da == 0:
                ties_a += 1
            elif db == 0:
                ties_b += 1
            elif (da > 0) == (db > 0):
                concordant += 1
            else:
                discordant += 1
    denom = math.sqrt((concordant + discordant + ties_a) * (concordant + discordant + ties_b))
    return (concordant - discordant) / denom if denom else math.nan


def top_k_overlap(a: Sequence[str], b: Sequence[str], k: int) -> tuple[float, list[str]]:
    """Top-k similarity: share of ``a``'s top k also in ``b``'s top k, and those ids.

    The share is over k (not over the shorter list), as the teams' existing reports compute it.
    """
    top_b = set(b[:k])
    overlap = [x for x in a[:k] if x in top_b]
    return len(overlap) / k, overlap


def discounted(gain: float, position: int) -> float:
    """``gain`` at 0-based ``position`` of a list: over log2(position + 2) (trec_eval's)."""
    return gain / math.log2(position + 2)


def dcg(gains: Iterable[float]) -> float:
    """DCG of gains in list order: linear gains, log2 discounts (trec_eval's, scikit-learn's)."""
    return sum(discounted(g, i) for i, g in enumerate(gains))


def ideal_dcg(counts: Mapping[int, float], k: int) -> float:
    """The DCG@k of the best order of a pool holding ``counts[g]`` items of grade (gain) g.

    Counts may be estimates (not whole): the ideal's positions are filled in grade order by
    the counts as lengths, a position shared by two grades taking each in proportion, so the
    estimate moves smoothly with the counts. Whole counts give :func:`dcg` of the grades
    sorted best first.
    """
    total, start = 0.0, 0.0
    for g in sorted(counts, reverse=True):
        if g <= 0 or counts[g] <= 0:
            continue
        end = min(start + counts[g], float(k))
        for i in range(int(math.floor(start)), int(math.ceil(end))):
            overlap = min(end, i + 1) - max(start, i)
            total += discounted(g * overlap, i)
        start = end
        if start >= k:
            break
    return total


def ndcg_at_k(order: Sequence[str], gains: Mapping[str, float], k: int) -> float:
    """NDCG@k with linear gains and log2 discounts (scikit-learn's ``ndcg_score`` convention)."""
    found = dcg(gains.get(item, 0.0) for item in order[:k])
    ideal = dcg(sorted(gains.values(), reverse=True)[:k])
    return found / ideal if ideal > 0 else math.nan


def mrr(order: Sequence[str], relevant: set[str]) -> float:
    """Reciprocal rank of the first relevant item (0 when none is ranked)."""
    for i, item in enumerate(order):
        if item in relevant:
            return 1.0 / (i + 1)
    return 0.0


def hit_at_k(order: Sequence[str], relevant: set[str], k: int) -> float:
    """1 when any relevant item is in the top k."""
    return 1.0 if any(item in relevant for item in order[:k]) else 0.0


def precision_at_k(order: Sequence[str], relevant: set[str], k: int) -> float:
    """Relevant items in the top k over k."""
    return sum(1 for item in order[:k] if item in relevant) / k


def recall_at_k(order: Sequence[str], relevant: set[str], k: int) -> float:
    """Relevant items in the top k over all relevant items."""
    if not relevant:
        return math.nan
    return sum(1 for item in order[:k] if item in relevant) / len(relevant)


def judge_gains(ordered: Sequence[str], groups: Sequence[int] | None = None) -> dict[str, float]:
    """Graded relevance from a judge order: the first of n relevant gets n, the last 1.

    Items sharing a tie group share the mean gain of their positions (the judge did not tell
    them apart, so neither may the gain).
    """
    n = len(ordered)
    return {item: float(n + 1) - rank for item, rank in average_ranks(ordered, groups).items()}


def full_judge_ranks(
    ordered: Sequence[str],
    tie_group: Sequence[int],
    irrelevant: Sequence[str],
    grades: Mapping[str, int] | None = None,
) -> dict[str, float]:
    """Ranks of every judged id: the ordered relevant ones, then the irrelevant ones.

    Without ``grades`` the irrelevant ones are all tied last; with them, they are tied within
    each grade, a better grade first (``irrelevant`` in that order).
    """
    base = max(tie_group, default=-1) + 1
    if grades is None:
        groups = list(tie_group) + [base] * len(irrelevant)
    else:
        distinct = sorted({grades[c] for c in irrelevant}, reverse=True)
        groups = list(tie_group) + [base + distinct.index(grades[c]) for c in irrelevant]
    return average_ranks([*ordered, *irrelevant], groups)


def order_vs_labels(order: Sequence[str], relevant: set[str], k: int) -> dict[str, float]:
    """Relevance-label metrics of one order (binary labels: every relevant item has gain 1)."""
    return order_vs_grades(order, dict.fromkeys(relevant, 1.0), k)


def order_vs_grades(order: Sequence[str], grades: Mapping[str, float], k: int) -> dict[str, float]:
    """Graded-relevance metrics of one order, as trec_eval computes them.

    NDCG@k takes the grade as the gain (trec_eval's default linear gain); MRR, hit, precision
    and recall count an item as relevant when its grade is above 0 (a grade of 0 is judged
    not relevant). Items of ``grades`` that ``order`` never shows still count (recall, ideal DCG).
    """
    relevant = {item for item, grade in grades.items() if grade > 0}
    return {
        "ndcg": ndcg_at_k(order, {i: float(g) for i, g in grades.items() if g > 0}, k),
        "mrr": mrr(order, relevant),
        "hit": hit_at_k(order, relevant, k),
        "precision": precision_at_k(order, relevant, k),
        "recall": recall_at_k(order, relevant, k),
    }


__all__ = [
    "average_ranks",
    "dcg",
    "discounted",
    "full_judge_ranks",
    "hit_at_k",
    "ideal_dcg",
    "judge_gains",
    "kendall_tau_b",
    "mrr",
    "ndcg_at_k",
    "order_vs_grades",
    "order_vs_labels",
    "precision_at_k",
    "recall_at_k",
    "spearman",
    "top_k_overlap",
]
