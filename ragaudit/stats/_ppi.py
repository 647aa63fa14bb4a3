"""Prediction-powered inference (PPI): a judge's figure corrected by people's labels.

The judge's mean over every judged item plus the mean of people's label minus the judge's on
the labelled ones, with power tuning (``ppi_py``, the authors' library), whose 95 % interval
stays valid however biased the judge is. Its width depends on how well the judge predicts the
labels (the PPI correlation ρ); from ρ follows how many more labels would halve it. Between
two runs, :func:`ppi_paired_test` compares the corrected means.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ragaudit.stats._resample import CONFIDENCE, bootstrap, bootstrap_ci
from ragaudit.stats._survey import Design, design_mean, design_ppi
from ragaudit.stats._tests import PairedTest, _degenerate, paired_test

# The cost of a judged item relative to a person's label, only to ask ppi_py's planner for the
# PPI correlation: any small positive cost gives the same correlation.
_JUDGE_COST = 1e-3


@dataclass(frozen=True)
class Corrected:
    """One figure three ways: the judge's alone, corrected by the labels (PPI), labels alone."""

    figure: str
    """A judged metric's name, ``relevant share`` or ``NDCG@10``."""
    judge_mean: float | None
    judge_ci_low: float | None
    judge_ci_high: float | None
    n_judged: int
    ppi_mean: float | None
    ppi_ci_low: float | None
    ppi_ci_high: float | None
    n_labelled: int
    labels_mean: float | None
    labels_ci_low: float | None
    labels_ci_high: float | None
    ppi_corr: float | None
    """How well the judge predicts the labels (ρ of ppi_py's power analysis)."""
    labels_to_halve: int | None
    """More labels of this run that would halve the PPI interval at the observed ρ; None when
    this run's judged items are too few to get there."""
    note: str = ""
    residuals: tuple[float, ...] = ()
    """People's label minus the judge's on each labelled item, times its weight scaled to a
    mean of 1 (a per-stratum draw): their plain mean is the correction ``compare`` applies."""
    clusters: tuple[str, ...] = ()
    """The first-stage unit (question) of each residual when the labels were drawn question
    by question: a test of the correction must resample these, not the residuals one by one."""

    @property
    def questions(self) -> int | None:
        """How many questions the labels came from, when drawn question by question.

        None when each label stood alone (as many clusters as labels, or none).
        """
        found = len(set(self.clusters))
        return found if 0 < found < self.n_labelled else None

    @property
    def width_ratio(self) -> float | None:
        """The PPI interval's width over the labels-only interval's (below 1: PPI is tighter)."""
        if None in (self.ppi_ci_low, self.ppi_ci_high, self.labels_ci_low, self.labels_ci_high):
            return None
        labels = self.labels_ci_high - self.labels_ci_low  # type: ignore[operator]
        return None if labels <= 0 else (self.ppi_ci_high - self.ppi_ci_low) / labels  # type: ignore[operator]


def labels_to_halve(n: int, total: int, rho: float) -> int | None:
    """More labels, drawn from the same ``total`` judged items, that halve the PPI interval.

    With n of N items labelled and PPI correlation ρ, PPI's effective sample size is
    n·N / (n + (1 − ρ²)(N − n)) (ppi_py's power analysis); the interval's width goes as its
    inverse square root, so halving it takes four times the effective size. Solved for n':
    n' = 4E(1 − ρ²)N / (N − 4Eρ²). None when no n' ≤ N gets there.
    """
    if n <= 0 or total <= n:
        return None
    r2 = min(rho * rho, 1.0)
    effective = n * total / (n + (1 - r2) * (total - n))
    target = 4 * effective
    denominator = total - target * r2
    if denominator <= 0:
        return None
    needed = math.ceil(target * (1 - r2) * total / denominator)
    return None if needed > total else max(needed - n, 0)


def corrected_mean(
    figure: str,
    human: Sequence[float],
    judge_labelled: Sequence[float],
    judge_all: Sequence[float],
    *,
    weights: Sequence[float] | None = None,
    resamples: int = 2000,
    seed: int = 0,
) -> Corrected:
    """The judge-only mean, the PPI mean and the labels-only mean of one figure, with intervals.

    The judge's side of PPI is its mean over every judged item, the labelled ones included (an
    unbiased mean of the population whatever way the labelled ones were drawn); the
    correction is the mean of label minus judge on the labelled items, weighted back to the
    population when they were drawn per stratum.

    Args:
        figure: What the figure is (shown as is).
        human: People's value of each labelled item.
        judge_labelled: The judge's value of the same items, in the same order.
        judge_all: The judge's value of every judged item, labelled or not.
        weights: Each labelled item's inverse chance of being drawn (its stratum's size over
            the items drawn from it); None for a uniform draw.
        resamples: Bootstrap resamples of the judge-only interval.
        seed: The bootstrap's seed.
    """
    # ppi_py here, not at the top: it loads statsmodels, pandas and scikit-learn (~1 s), which
    # a run without labels never needs.
    from ppi_py import classical_mean_ci, ppi_mean_ci, ppi_mean_pointestimate, ppi_mean_power

    y = np.asarray(human, dtype=float)
    f = np.asarray(judge_labelled, dtype=float)
    judged = np.asarray(judge_all, dtype=float)
    w = None if weights is None else np.asarray(weights, dtype=float)
    if y.shape != f.shape or (w is not None and w.shape != y.shape):
        raise ValueError(f"{figure}: {y.size} label(s) against {f.size} judge value(s)")
    judge_mean = float(judged.mean()) if judged.size else None
    judge_low, judge_high = bootstrap_ci(judged, resamples, seed)
    empty = Corrected(
        figure, judge_mean, judge_low, judge_high, int(judged.size),
        None, None, None, int(y.size), None, None, None, None, None,
    )  # fmt: skip
    if y.size < 2:
        return _replace(empty, note=f"{y.size} labelled item(s): no interval")
    alpha = 1 - CONFIDENCE
    labels_low, labels_high = (float(v) for v in classical_mean_ci(y, w=w, alpha=alpha))
    labels = {
        "labels_mean": float(np.average(y, weights=w)),
        "labels_ci_low": labels_low,
        "labels_ci_high": labels_high,
    }
    if judged.size <= y.size:
        return _replace(empty, note="every judged item is labelled: nothing to correct", **labels)
    # ρ is undefined when the judge or the labels do not vary (no correlation to use).
    rho: float | None = None
    uncorrelated = False
    if np.ptp(y) > 0 and np.ptp(f) > 0:
        # ppi_py's plan divides by ρ: labels that do not correlate with the judge at all (ρ
        # zero to rounding) make it 0/0. The correction still stands; only the plan is void.
        if abs(float(np.corrcoef(y, f)[0, 1])) < 1e-9:
            uncorrelated = True
        else:
            planned = ppi_mean_power(
                y, f, cost_Y=1.0, cost_Yhat=_JUDGE_COST, effective_n=int(y.size), w=w
            )
            rho = float(planned["ppi_corr"])
    point = float(np.asarray(ppi_mean_pointestimate(y, f, judged, w=w)).ravel()[0])
    found = ppi_mean_ci(y, f, judged, alpha=alpha, w=w)
    low, high = (float(np.asarray(v).ravel()[0]) for v in found)
    return Corrected(
        figure,
        judge_mean,
        judge_low,
        judge_high,
        int(judged.size),
        point,
        low,
        high,
        int(y.size),
        labels["labels_mean"],
        labels_low,
        labels_high,
        rho,
        None if rho is None else labels_to_halve(int(y.size), int(judged.size), rho),
        (
            ""
            if rho is not None
            else "the labels do not correlate with the judge (ρ ≈ 0)"
            if uncorrelated
            else "the judge or the labels do not vary: ρ is undefined"
        )
        + ("" if w is None else ("; " if rho is None else "") + "strata weighted back"),
        tuple(float(v) for v in (y - f) * (1.0 if w is None else w * w.size / w.sum())),
    )


def design_corrected_mean(
    figure: str,
    human: Sequence[float],
    judge_labelled: Sequence[float],
    judge_all: Sequence[float],
    *,
    weights: Sequence[float],
    clusters: Sequence[str],
    units_total: int | None = None,
    bounds: tuple[float, float] | None = None,
    n_labels: int | None = None,
    resamples: int = 2000,
    seed: int = 0,
) -> Corrected:
    """A figure corrected by labels drawn under a sampling design (clustered, weighted).

    PPI's estimate in the survey form it takes under a design, the difference estimator
    (Särndal, Swensson & Wretman 1992, §6.3): the judge's mean over every judged item plus
    the design-weighted mean of people's label minus the judge's on the labelled items. The
    judge's part is the run's own mean, known exactly; the figure is the run's (its finite
    population), so all of the interval's width is the correction's, estimated over the
    ``clusters`` (questions drawn whole: their items are not independent) by
    :func:`_design_mean`. No power tuning (λ = 1): the plain difference is design-unbiased
    whatever the judge, and its variance linearises without a fitted coefficient.

    Args:
        figure: What the figure is (shown as is).
        human: People's value of each labelled item.
        judge_labelled: The judge's value of the same items, in the same order.
        judge_all: The judge's value of every judged item, labelled or not.
        weights: Each labelled item's inverse chance of being drawn.
        clusters: Each labelled item's first-stage unit (its question).
        units_total: The first stage's units in the run (for the labels that would halve).
        bounds: The figure's range (a share: (0, 1)); the interval is kept inside it.
        n_labels: The labels behind the values when one value stands for many (a question's
            NDCG@10 from its twenty labels); None: one label a value.
        resamples: Bootstrap resamples of the judge-only interval.
        seed: The bootstrap's seed.
    """
    y = np.asarray(human, dtype=float)
    f = np.asarray(judge_labelled, dtype=float)
    judged = np.asarray(judge_all, dtype=float)
    w = np.asarray(weights, dtype=float)
    c = np.asarray(clusters, dtype=object).astype(str)
    if not (y.shape == f.shape == w.shape == c.shape):
        raise ValueError(f"{figure}: {y.size} label(s) against {f.size} judge value(s)")
    judge_mean = float(judged.mean()) if judged.size else None
    judge_low, judge_high = bootstrap_ci(judged, resamples, seed)
    m = int(np.unique(c).size)
    labelled = int(y.size) if n_labels is None else n_labels
    empty = Corrected(
        figure, judge_mean, judge_low, judge_high, int(judged.size),
        None, None, None, labelled, None, None, None, None, None,
    )  # fmt: skip
    if m < 2 or judge_mean is None:
        return _replace(
            empty, note=f"{y.size} labelled item(s) in {m} question(s): no interval (two needed)"
        )

    design = Design.of(c.tolist())
    labels = design_mean(y, w, design, skewed=True, bounds=bounds)
    corrected = design_ppi(judge_mean, y - f, w, design, bounds=bounds)
    rho: float | None = None
    if np.ptp(y) > 0 and np.ptp(f) > 0:
        cov = np.cov(y, f, aweights=w)
        rho = float(cov[0, 1] / math.sqrt(cov[0, 0] * cov[1, 1]))
    # The interval narrows as the square root of the questions drawn: four times as many
    # questions (as many labels each) halve it, when the run has them.
    halve = 3 * labelled if units_total is not None and 4 * m <= units_total else None
    return Corrected(
        figure,
        judge_mean,
        judge_low,
        judge_high,
        int(judged.size),
        corrected.point,
        corrected.ci_low,
        corrected.ci_high,
        labelled,
        labels.point,
        labels.ci_low,
        labels.ci_high,
        rho,
        halve,
        f"design-weighted, intervals over {m} question(s)",
        tuple(float(v) for v in (y - f) * w * w.size / w.sum()),
        tuple(c.tolist()),
    )


def _replace(c: Corrected, **changes: Any) -> Corrected:
    return dataclasses.replace(c, **changes)


PPI_NOISE = "questions and people's labels (PPI)"


def _by_cluster(residuals: np.ndarray, clusters: Sequence[str]) -> np.ndarray:
    """Residuals as one value per cluster whose plain mean is theirs (the mean correction).

    A cluster's value is its residuals' sum times clusters over residuals: resampling these
    resamples whole questions (the labels' primary units) while the point estimate stays the
    residuals' mean. No clusters given (items drawn one by one): the residuals as they are.
    """
    if len(clusters) != len(residuals) or len(set(clusters)) == len(clusters):
        return residuals
    keys, index = np.unique(np.asarray(clusters, dtype=str), return_inverse=True)
    sums = np.bincount(index, weights=residuals, minlength=keys.size)
    return np.asarray(sums * keys.size / residuals.size, dtype=float)


def ppi_paired_test(
    a: np.ndarray,
    b: np.ndarray,
    residuals_a: np.ndarray,
    residuals_b: np.ndarray,
    resamples: int = 9999,
    seed: int = 0,
    clusters_a: Sequence[str] = (),
    clusters_b: Sequence[str] = (),
) -> PairedTest:
    """B − A of means corrected by each run's labels (prediction-powered, λ = 1).

    Each run's corrected mean is its judge's mean over the paired questions plus the mean of
    people's label minus the judge's on its labelled items (``residuals``), so the difference
    is the paired judge difference plus the difference of the two corrections. The three are
    independent samples (questions, A's labels, B's labels): the interval is scipy's bootstrap
    of each drawn again on its own; the p-value is the normal test on that bootstrap's standard
    error. Fewer than two labels in either run: the judge's own paired test.

    ``clusters_a``/``clusters_b`` (each residual's question, :attr:`Corrected.clusters`): labels
    drawn question by question are not independent, so a run's residuals are resampled by
    question (each question's share of the mean correction, :func:`_by_cluster`), not one by one.
    """
    from scipy import stats

    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    ra, rb = np.asarray(residuals_a, dtype=float), np.asarray(residuals_b, dtype=float)
    if len(a) < 2 or len(ra) < 2 or len(rb) < 2:
        return paired_test(a, b, resamples, seed)
    d = b - a
    mean_a = float(a.mean() + ra.mean())
    mean_b = float(b.mean() + rb.mean())
    ra, rb = _by_cluster(ra, clusters_a), _by_cluster(rb, clusters_b)
    if len(ra) < 2 or len(rb) < 2:
        return paired_test(a, b, resamples, seed)
    diff = mean_b - mean_a

    def statistic(d: np.ndarray, rb: np.ndarray, ra: np.ndarray, axis: int = -1) -> np.ndarray:
        return np.mean(d, axis=axis) + np.mean(rb, axis=axis) - np.mean(ra, axis=axis)

    if all(_degenerate(x) for x in (d, ra, rb)):
        low = high = diff
        p = 1.0 if diff == 0 else 0.0
    else:
        res = bootstrap((d, rb, ra), statistic, resamples=resamples, seed=seed)
        low, high, se = res.low, res.high, res.standard_error
        p = float(2 * stats.norm.sf(abs(diff) / se)) if se > 0 else float(diff == 0)
    return PairedTest(len(a), mean_a, mean_b, diff, low, high, p, noise=PPI_NOISE)


__all__ = [
    "PPI_NOISE",
    "Corrected",
    "corrected_mean",
    "design_corrected_mean",
    "labels_to_halve",
    "ppi_paired_test",
]
