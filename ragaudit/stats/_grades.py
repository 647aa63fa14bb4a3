"""Per-grade figures: a judge's relevance grades (0–3) against a person's, grade by grade.

For each judge grade, the share of its items a person calls relevant (a binomial proportion
with its exact interval); for each person's grade, the share the judge graded higher (its
over-rating) and lower; every (person's grade, judge's grade) share. A judge that over-rates
shows it at every grade below the top. The engine's NDCG@k under three gains (the person's
grades, the judge's, and the judge's calibrated to P(person calls it relevant)) says how far a
judge-based figure sits from the human one.
"""

from __future__ import annotations

import dataclasses
import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from ragaudit.ranking import ndcg_at_k
from ragaudit.stats._agreement import (
    _alpha_of_sums,
    cluster_jackknife_weights,
    design_kappa_counts,
    jackknife_interval,
    kappa_of_counts,
)
from ragaudit.stats._figures import GRADES, Figure, share_ci
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
    expected_grade: dict[int, float] = dataclasses.field(default_factory=dict)
    """Judge grade → the human grade its items get on average (0–3, weighted back to the run
    when the labels were drawn with weights): the calibrated gain of NDCG."""


def calibrate_grades(
    judge: Sequence[int],
    human: Sequence[int],
    relevant_grade: int = 2,
    weights: Sequence[float] | None = None,
) -> GradeCalibration:
    """Per-grade calibration of ``judge`` grades against ``human`` grades of the same items.

    The human calls an item relevant at ``relevant_grade`` or above (TREC's cut is 2).
    ``weights`` (each item's inverse chance of being drawn) weight the expected grade back to
    the run; the shares are the sample's counts.
    """
    j = np.asarray(judge, dtype=int)
    h = np.asarray(human, dtype=int)
    if j.shape != h.shape:
        raise ValueError(f"{j.size} judge grade(s) against {h.size} human grade(s)")
    w = np.ones(j.size) if weights is None else np.asarray(weights, dtype=float)
    relevant = h >= relevant_grade
    given = {int(g): share(int(relevant[j == g].sum()), int((j == g).sum())) for g in np.unique(j)}
    over = {int(g): share(int((j[h == g] > g).sum()), int((h == g).sum())) for g in np.unique(h)}
    under = {int(g): share(int((j[h == g] < g).sum()), int((h == g).sum())) for g in np.unique(h)}
    expected = {int(g): float(np.average(h[j == g], weights=w[j == g])) for g in np.unique(j)}
    return GradeCalibration(given, over, under, relevant_grade, expected)


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


NDCG_GAINS = (
    "human grade, judge grade, judge grade calibrated to the human grade its items get on "
    "average (all 0–3); the ideal order over the question's judged candidates"
)


def engine_ndcg(
    graded: Iterable[tuple[str, str, int | None, float, int | None]],
    calibration: GradeCalibration,
    k: int = 10,
) -> tuple[dict[str, tuple[float | None, float | None, float | None]] | None, int]:
    """The engine's NDCG@k with human, judge and calibrated judge grades as gains.

    All three gains are on the 0–3 grade scale: the calibrated gain of a judge grade is the
    human grade its items get on average (``calibration.expected_grade``), so the three
    figures are comparable. The ideal order is over the question's judged candidates (those
    ``graded`` names), never over a qrels file's full list.

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
    table = calibration.expected_grade
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
            "calibrated": {c: table.get(xs[0][2] or 0, 0.0) for c, xs in contexts.items()},
        }
        scores = {name: ndcg_at_k(order, g, k) for name, g in gains.items()}
        if all(math.isfinite(v) for v in scores.values()):
            for name, v in scores.items():
                values[name].append(v)
    n = len(values["human"])
    if not n:
        return None, 0
    return {name: share_ci(v) for name, v in values.items()}, n


def _weighted_share(numerator: np.ndarray, denominator: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        return numerator / denominator


@dataclass(frozen=True)
class DesignAgreement:
    """The judge against people weighted back to the run, intervals over questions."""

    figures: tuple[Figure, ...]
    """Weighted κ (quadratic) and ordinal α of the run, each with its cluster interval."""
    confusion: GradeConfusion
    """Per-grade shares of the run (``Share.k``/``n``: the sample's counts behind each)."""


def design_grade_agreement(
    human: Sequence[int],
    judge: Sequence[int],
    weights: Sequence[float],
    clusters: Sequence[str],
    relevant_grade: int = 2,
) -> DesignAgreement:
    """κ, α and the per-grade confusion of the run, from labels drawn by a sampling design.

    Each labelled pair counts ``weights`` times (its inverse chance of being drawn), so the
    figures estimate what the judge would score against people over every judged candidate
    of the run, not over the sample (which over-draws rare grades and the engine's top).
    Intervals: the delete-one-cluster jackknife over ``clusters`` (the questions, the first
    stage's units: items of one question go together) with Student t, every replicate one
    weighted matrix (:func:`jackknife_interval`). With one item per cluster and weights of
    one it is the plain jackknife of the sample's figures.
    """
    h = np.asarray(human, dtype=int)
    j = np.asarray(judge, dtype=int)
    w = np.asarray(weights, dtype=float)
    n = int(h.size)
    point_w = w[None, :]
    replicate_w = cluster_jackknife_weights(clusters, w)
    counts = design_kappa_counts(h, j, np.vstack([point_w, replicate_w]), GRADES)
    figures: list[Figure] = []
    if n < 2:
        figures = [
            Figure(s, None, None, None, n, "not enough labels (one item)")
            for s in ("weighted_kappa", "krippendorff_alpha")
        ]
    else:
        kappas = np.atleast_1d(kappa_of_counts(counts, "quadratic"))
        # α of two raters over weighted items: the coincidences are (a, b) and (b, a) of
        # each pair, that is the confusion matrix plus its transpose.
        coincidences = counts + np.swapaxes(counts, 1, 2)
        totals = counts.sum(axis=(1, 2))
        within = 2 * (totals - np.trace(counts, axis1=1, axis2=2))
        alphas = _alpha_of_sums(
            (2 * totals, within, coincidences.reshape(len(totals), -1)), "ordinal"
        )
        for name, values in (("weighted_kappa", kappas), ("krippendorff_alpha", alphas)):
            value = float(values[0])
            if not np.isfinite(value):
                figures.append(Figure(name, None, None, None, n, "undefined on these data"))
                continue
            low, high = jackknife_interval(value, values[1:], (-1.0, 1.0))
            note = "" if low is not None else "no interval: too few units"
            figures.append(Figure(name, value, low, high, n, note))
    return DesignAgreement(tuple(figures), _design_confusion(h, j, counts, relevant_grade))


def _design_confusion(
    h: np.ndarray, j: np.ndarray, counts: np.ndarray, relevant_grade: int
) -> GradeConfusion:
    """The per-grade shares of weighted confusion matrices (row 0 the point, then replicates)."""
    by_human = counts.sum(axis=2)
    by_judge = counts.sum(axis=1)
    grades = np.asarray(GRADES)

    def shared(k: int, n: int, values: np.ndarray) -> Share:
        if n == 0:
            return Share(0, 0, None, None, None)
        point = float(values[0]) if np.isfinite(values[0]) else None
        if point is None:
            return Share(k, n, None, None, None)
        low, high = jackknife_interval(point, values[1:], (0.0, 1.0))
        return Share(k, n, point, low, high)

    cells = tuple(
        ConfusionCell(
            g,
            k,
            shared(
                int(((h == g) & (j == k)).sum()),
                int((h == g).sum()),
                _weighted_share(counts[:, gi, ki], by_human[:, gi]),
            ),
        )
        for gi, g in enumerate(GRADES)
        if (h == g).any()
        for ki, k in enumerate(GRADES)
    )
    over, under, given = {}, {}, {}
    for gi, g in enumerate(GRADES):
        if (h == g).any():
            above, below = grades > g, grades < g
            over[g] = shared(
                int((j[h == g] > g).sum()),
                int((h == g).sum()),
                _weighted_share(counts[:, gi, above].sum(axis=1), by_human[:, gi]),
            )
            under[g] = shared(
                int((j[h == g] < g).sum()),
                int((h == g).sum()),
                _weighted_share(counts[:, gi, below].sum(axis=1), by_human[:, gi]),
            )
        if (j == g).any():
            relevant = grades >= relevant_grade
            given[g] = shared(
                int(((j == g) & (h >= relevant_grade)).sum()),
                int((j == g).sum()),
                _weighted_share(counts[:, relevant, gi].sum(axis=1), by_judge[:, gi]),
            )
    return GradeConfusion(cells, over, under, given)


__all__ = [
    "NDCG_GAINS",
    "ConfusionCell",
    "DesignAgreement",
    "GradeCalibration",
    "GradeConfusion",
    "Share",
    "calibrate_grades",
    "calibrated_grades",
    "design_grade_agreement",
    "engine_ndcg",
    "grade_confusion",
    "share",
]
