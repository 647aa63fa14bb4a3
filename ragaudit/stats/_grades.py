"""Per-grade figures: a judge's relevance grades (0–3) against a person's, grade by grade.

For each judge grade, the share of its items a person calls relevant (a binomial proportion
with its exact interval); for each person's grade, the share the judge graded higher (its
over-rating) and lower; every (person's grade, judge's grade) share. A judge that over-rates
shows it at every grade below the top. The engine's NDCG@k under three gains (the person's
grades, the judge's, and the judge's calibrated to P(person calls it relevant)) says how far a
judge-based figure sits from the human one.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from ragaudit.ranking import ndcg_at_k
from ragaudit.stats._figures import GRADES, share_ci
from ragaudit.stats._resample import CONFIDENCE


@dataclass(frozen=True)
class Share:
    """A binomial share with its exact (Clopper–Pearson) interval."""

    k: int
    n: int
    share: float | None
    ci_low: float | None
    ci_high: float | None


def share(k: int, n: int) -> Share:
    """``k`` of ``n``, with scipy's exact binomial interval."""
    if n == 0:
        return Share(0, 0, None, None, None)
    # scipy here, not at the top: the manifest's warnings import this package on every command.
    from scipy import stats

    ci = stats.binomtest(k, n).proportion_ci(confidence_level=CONFIDENCE, method="exact")
    return Share(k, n, k / n, float(ci.low), float(ci.high))


@dataclass(frozen=True)
class GradeCalibration:
    """How a judge's grades map onto a human's, per grade."""

    relevant_given_grade: dict[int, Share]
    """Judge grade → share of its items the human calls relevant."""
    over_rated: dict[int, Share]
    """Human grade → share of its items the judge graded higher."""
    under_rated: dict[int, Share]
    """Human grade → share of its items the judge graded lower."""
    relevant_grade: int


def calibrate_grades(
    judge: Sequence[int], human: Sequence[int], relevant_grade: int = 2
) -> GradeCalibration:
    """Per-grade calibration of ``judge`` grades against ``human`` grades of the same items.

    The human calls an item relevant at ``relevant_grade`` or above (TREC's cut is 2).
    """
    j = np.asarray(judge, dtype=int)
    h = np.asarray(human, dtype=int)
    if j.shape != h.shape:
        raise ValueError(f"{j.size} judge grade(s) against {h.size} human grade(s)")
    relevant = h >= relevant_grade
    given = {int(g): share(int(relevant[j == g].sum()), int((j == g).sum())) for g in np.unique(j)}
    over = {int(g): share(int((j[h == g] > g).sum()), int((h == g).sum())) for g in np.unique(h)}
    under = {int(g): share(int((j[h == g] < g).sum()), int((h == g).sum())) for g in np.unique(h)}
    return GradeCalibration(given, over, under, relevant_grade)


def calibrated_grades(judge: Sequence[int], calibration: GradeCalibration) -> np.ndarray:
    """Each judge grade replaced by the probability that a human calls its item relevant.

    A grade the labels never saw keeps NaN: there is nothing to calibrate it with.
    """
    table = calibration.relevant_given_grade
    return np.array(
        [table[g].share if g in table and table[g].share is not None else np.nan for g in judge],
        dtype=float,
    )


@dataclass(frozen=True)
class ConfusionCell:
    """Of the items a person graded ``human``, the share the judge graded ``judge``."""

    human: int
    judge: int
    share: Share


@dataclass(frozen=True)
class GradeConfusion:
    """The judge's grades against a person's, per grade, with exact intervals."""

    cells: tuple[ConfusionCell, ...]
    over_rated: dict[int, Share]
    """Human grade → share of its items the judge graded higher."""
    under_rated: dict[int, Share]
    relevant_given_grade: dict[int, Share]
    """Judge grade → share of its items the person calls relevant (the calibration table)."""


def grade_confusion(
    human: Sequence[int], judge: Sequence[int], relevant_grade: int = 2
) -> GradeConfusion:
    """Every (human grade, judge grade) share, and the per-grade calibration of the judge."""
    h = np.asarray(human, dtype=int)
    j = np.asarray(judge, dtype=int)
    cells = tuple(
        ConfusionCell(g, k, share(int(((h == g) & (j == k)).sum()), int((h == g).sum())))
        for g in GRADES
        if (h == g).any()
        for k in GRADES
    )
    cal = calibrate_grades(judge, human, relevant_grade)
    return GradeConfusion(cells, cal.over_rated, cal.under_rated, cal.relevant_given_grade)


NDCG_GAINS = "human grade, judge grade, judge grade calibrated to P(human relevant)"


def engine_ndcg(
    graded: Iterable[tuple[str, str, int | None, float, int | None]],
    calibration: GradeCalibration,
    k: int = 10,
) -> tuple[dict[str, tuple[float | None, float | None, float | None]] | None, int]:
    """The engine's NDCG@k with human, judge and calibrated judge grades as gains.

    ``graded`` holds one (question id, context id, engine rank, human grade, judge grade) per
    label. Only questions whose every label has a rank and a judge grade count, and only those
    where each of the three gains holds some gain (NDCG is undefined without one), so the
    three means are over the same questions. Several labels of one context (several humans)
    average their grades. Returns each gain's mean with its bootstrap interval, and the
    questions counted.
    """
    per_q: dict[str, dict[str, list[tuple[int, float, int | None]]]] = defaultdict(dict)
    for qid, cid, rank, human, judged in graded:
        per_q[qid].setdefault(cid, []).append((rank or 0, human, judged))
    table = calibration.relevant_given_grade
    values: dict[str, list[float]] = {"human": [], "judge": [], "calibrated": []}
    for contexts in per_q.values():
        seen = [x for xs in contexts.values() for x in xs]
        if any(rank == 0 or judged is None for rank, _, judged in seen):
            continue
        order = sorted(contexts, key=lambda c: min(r for r, _, _ in contexts[c]))
        gains = {
            "human": {c: sum(h for _, h, _ in xs) / len(xs) for c, xs in contexts.items()},
            "judge": {c: float(xs[0][2] or 0) for c, xs in contexts.items()},
            # Unjudged contexts were left out above: the judge's grade is there.
            "calibrated": {c: table[xs[0][2] or 0].share or 0.0 for c, xs in contexts.items()},
        }
        scores = {name: ndcg_at_k(order, g, k) for name, g in gains.items()}
        if all(math.isfinite(v) for v in scores.values()):
            for name, v in scores.items():
                values[name].append(v)
    n = len(values["human"])
    if not n:
        return None, 0
    return {name: share_ci(v) for name, v in values.items()}, n


__all__ = [
    "NDCG_GAINS",
    "ConfusionCell",
    "GradeCalibration",
    "GradeConfusion",
    "Share",
    "calibrate_grades",
    "calibrated_grades",
    "engine_ndcg",
    "grade_confusion",
    "share",
]
