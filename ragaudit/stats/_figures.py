"""Figures of a judge against labels, each with a confidence interval.

Intervals come from scipy's bootstrap over the independent units (a pair, a labelled row), so a
figure resting on few units says so by its width. A bootstrap of data that are all equal has no
spread to resample: the interval is then the Wilson interval of the same share (binomtest),
which is what keeps an oracle's 1.0 from reading as certain on 10 pairs.

Relevance grades (0–3) are ordinal: the judge against a person is Cohen's κ with quadratic
weights and Krippendorff's α at the ordinal level (:mod:`ragaudit.stats._agreement`). A judged
metric's score in [0, 1] against a person's yes/no is the alignment (MAE, Spearman, Kendall,
κ at ½, AUC) plus α at the interval level. When two people labelled the same items, the same κ
and α between them is the ceiling the judge can be held to. scipy is imported inside the
functions: the manifest's warnings import this package on every command.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from ragaudit.stats._agreement import Level, kappa, pair_alpha
from ragaudit.stats._resample import CONFIDENCE, bootstrap, bootstrap_ci

RESAMPLES = 2000
GRADES = (0, 1, 2, 3)
METRIC_CUT = 0.5
"""A score at or above this counts as a "yes" where a figure needs both sides binary."""


@dataclass(frozen=True)
class Figure:
    """One statistic with its interval and the number of units it rests on."""

    statistic: str
    value: float | None
    ci_low: float | None
    ci_high: float | None
    n: int
    note: str = ""


def _wilson(share: float, n: int, confidence: float) -> tuple[float, float]:
    from scipy import stats

    ci = stats.binomtest(round(share * n), n).proportion_ci(confidence, method="wilson")
    return float(ci.low), float(ci.high)


def share_ci(
    credits: Sequence[float], *, confidence: float = CONFIDENCE, seed: int = 0
) -> tuple[float | None, float | None, float | None]:
    """Mean of per-unit credits in [0, 1] (1 right, ½ tie, 0 wrong) with a bootstrap interval."""
    data = np.asarray(credits, dtype=float)
    if data.size == 0:
        return None, None, None
    mean = float(data.mean())
    if data.size < 2 or np.all(data == data[0]):
        low, high = _wilson(mean, int(data.size), confidence)
        return mean, low, high
    boot_low, boot_high = bootstrap_ci(data, RESAMPLES, seed=seed, level=confidence)
    return mean, boot_low, boot_high


def preference_credit(preferred: float | None, other: float | None) -> float | None:
    """1 when the preferred item scores higher, ½ on a tie, 0 otherwise; None if one is missing."""
    if preferred is None or other is None or math.isnan(preferred) or math.isnan(other):
        return None
    if preferred > other:
        return 1.0
    return 0.5 if preferred == other else 0.0


def share_figure(statistic: str, credits: Sequence[float | None], seed: int = 0) -> Figure:
    """A share (agreement, monotonicity) over the units that have a credit."""
    kept = [c for c in credits if c is not None]
    value, low, high = share_ci(kept, seed=seed)
    missing = len(credits) - len(kept)
    note = f"{missing} unit(s) without a score left out" if missing else ""
    return Figure(statistic, value, low, high, len(kept), note)


def auc_score(labels: np.ndarray, scores: np.ndarray) -> float:
    """ROC AUC of ``scores`` for binary ``labels`` (ties count ½); NaN with one class only.

    The Mann-Whitney form of the AUC: the same value as ``sklearn.metrics.roc_auc_score`` at a
    hundredth of its cost, which matters inside a bootstrap of 2,000 resamples.
    """
    y = np.asarray(labels).astype(bool)
    n_pos = int(y.sum())
    n_neg = y.size - n_pos
    if n_pos == 0 or n_neg == 0:
        return float("nan")
    from scipy import stats

    ranks = stats.rankdata(scores)
    return float((ranks[y].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


def balanced_accuracy(labels: np.ndarray, predicted: np.ndarray) -> float:
    """Mean of the recall of each class of binary labels; NaN with one class only."""
    y = np.asarray(labels).astype(bool)
    p = np.asarray(predicted).astype(bool)
    if y.all() or not y.any():
        return float("nan")
    return float((p[y].mean() + (~p[~y]).mean()) / 2)


def _paired(
    fn: Callable[..., np.ndarray | float],
    y: np.ndarray,
    s: np.ndarray,
    statistic: str,
    seed: int,
    vectorized: bool = False,
) -> Figure:
    # ``vectorized``: ``fn`` takes ``axis`` and computes every resample at once (scipy's
    # convention), for figures too slow to call 2,000 times one by one.
    if len(y) < 2:
        # One item agrees or not by itself: κ, α or a correlation of it would print a number
        # (κ = 0) that measures nothing.
        return Figure(statistic, None, None, None, len(y), "not enough labels (one item)")
    try:
        value = float(fn(y, s))
    except ValueError as exc:  # one class only, constant input
        return Figure(statistic, None, None, None, len(y), str(exc))
    if not math.isfinite(value):
        return Figure(statistic, None, None, None, len(y), "undefined on these data")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            res = bootstrap(
                (y, s),
                fn if vectorized else lambda a, b: fn(a, b),
                resamples=RESAMPLES,
                seed=seed,
                paired=True,
                vectorized=vectorized,
            )
            low, high = res.low, res.high
        except ValueError:
            low = high = float("nan")
    if not (math.isfinite(low) and math.isfinite(high)):
        # Resamples where the figure is undefined (one class drawn) leave no interval.
        return Figure(statistic, value, None, None, len(y), "no interval: too few units")
    return Figure(statistic, value, low, high, len(y))


def detector_figures(
    labels: Sequence[int], scores: Sequence[float], threshold: float, seed: int = 0
) -> list[Figure]:
    """A score as a detector of a binary label: balanced accuracy at ``threshold`` and AUC."""
    y = np.asarray(labels, dtype=int)
    s = np.asarray(scores, dtype=float)

    def bacc(a: np.ndarray, b: np.ndarray) -> float:
        return balanced_accuracy(a, b >= threshold)

    return [
        _paired(bacc, y, s, "balanced_accuracy", seed),
        _paired(auc_score, y, s, "auc", seed),
    ]


def alignment_figures(
    human: Sequence[float], scores: Sequence[float], threshold: float, seed: int = 0
) -> list[Figure]:
    """TruLens's alignment figures of a metric against human labels in [0, 1].

    MAE, Spearman, Kendall, Cohen's κ with both sides cut at ``threshold``, and the AUC of the
    score for the human label cut at ``threshold``.
    """
    h = np.asarray(human, dtype=float)
    s = np.asarray(scores, dtype=float)

    def cut_kappa(a: np.ndarray, b: np.ndarray, axis: int = -1) -> np.ndarray | float:
        return kappa(a >= threshold, b >= threshold, axis)

    def auc(a: np.ndarray, b: np.ndarray, axis: int = -1) -> np.ndarray:
        return _auc(a >= threshold, b, axis)

    # Every figure computes all 2,000 resamples at once (scipy's ``axis`` convention): one by
    # one, the five took ~7 s a metric, and the run page redoes them after each label.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # constant input: the figure is reported as undefined
        return [
            _paired(_mae, h, s, "mae", seed, vectorized=True),
            _paired(_spearman, h, s, "spearman", seed, vectorized=True),
            _paired(_kendall, h, s, "kendall", seed, vectorized=True),
            _paired(cut_kappa, h, s, "cohen_kappa", seed, vectorized=True),
            _paired(auc, h, s, "auc", seed, vectorized=True),
        ]


def _mae(a: np.ndarray, b: np.ndarray, axis: int = -1) -> np.ndarray:
    return np.mean(np.abs(a - b), axis=axis)


def _spearman(a: np.ndarray, b: np.ndarray, axis: int = -1) -> np.ndarray:
    """Spearman's ρ along ``axis``: Pearson's r of the average ranks (scipy's ``spearmanr``)."""
    from scipy import stats

    ra = np.moveaxis(stats.rankdata(a, axis=axis), axis, -1)
    rb = np.moveaxis(stats.rankdata(b, axis=axis), axis, -1)
    ra = ra - ra.mean(axis=-1, keepdims=True)
    rb = rb - rb.mean(axis=-1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.asarray(
            (ra * rb).sum(-1) / np.sqrt((ra * ra).sum(-1) * (rb * rb).sum(-1)), dtype=float
        )


def _kendall(a: np.ndarray, b: np.ndarray, axis: int = -1, chunk: int = 64) -> np.ndarray:
    """Kendall's τ-b along ``axis`` (scipy's ``kendalltau``), from the pairs' sign products.

    (concordant − discordant) / √(pairs untied in a × pairs untied in b), over every pair at
    once; resamples go ``chunk`` at a time so the n × n sign matrices stay small.
    """
    x = np.moveaxis(np.asarray(a, dtype=float), axis, -1)
    y = np.moveaxis(np.asarray(b, dtype=float), axis, -1)
    lead = x.shape[:-1]
    x, y = x.reshape(-1, x.shape[-1]), y.reshape(-1, y.shape[-1])
    out = np.empty(x.shape[0])
    for start in range(0, x.shape[0], chunk):
        xs, ys = x[start : start + chunk], y[start : start + chunk]
        sx = np.sign(xs[:, :, None] - xs[:, None, :])
        sy = np.sign(ys[:, :, None] - ys[:, None, :])
        with np.errstate(invalid="ignore", divide="ignore"):
            out[start : start + chunk] = (sx * sy).sum((1, 2)) / np.sqrt(
                np.abs(sx).sum((1, 2)) * np.abs(sy).sum((1, 2))
            )
    return out.reshape(lead)


def _auc(labels: np.ndarray, scores: np.ndarray, axis: int = -1) -> np.ndarray:
    """:func:`auc_score` along ``axis`` (every resample at once); NaN with one class only."""
    from scipy import stats

    y = np.moveaxis(np.asarray(labels).astype(bool), axis, -1)
    ranks = np.moveaxis(stats.rankdata(scores, axis=axis), axis, -1)
    n_pos = y.sum(-1)
    n_neg = y.shape[-1] - n_pos
    with np.errstate(invalid="ignore", divide="ignore"):
        value = ((ranks * y).sum(-1) - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg)
    return np.asarray(np.where((n_pos == 0) | (n_neg == 0), np.nan, value), dtype=float)


def _alpha(level: Level) -> Callable[..., np.ndarray | float]:
    # Vectorised (every resample in one pass): one α at a time, 2,000 resamples took ~1 s.
    def alpha(a: np.ndarray, b: np.ndarray, axis: int = -1) -> np.ndarray | float:
        return pair_alpha(a, b, level, axis)

    return alpha


def _grade_kappa(a: np.ndarray, b: np.ndarray, axis: int = -1) -> np.ndarray | float:
    return kappa(a, b, axis, categories=GRADES, weights="quadratic")


def grade_agreement(human: Sequence[int], judge: Sequence[int], seed: int = 0) -> list[Figure]:
    """Weighted κ (quadratic) and ordinal α of two raters' grades 0–3 of the same items."""
    h = np.asarray(human, dtype=int)
    j = np.asarray(judge, dtype=int)
    return [
        # κ computes every resample at once: 2,000 one by one took ~2 s each figure.
        _paired(_grade_kappa, h, j, "weighted_kappa", seed, vectorized=True),
        _paired(_alpha("ordinal"), h, j, "krippendorff_alpha", seed, vectorized=True),
    ]


def score_agreement(human: Sequence[float], scores: Sequence[float], seed: int = 0) -> list[Figure]:
    """A metric's scores against people's labels in [0, 1]: alignment figures and interval α."""
    h = np.asarray(human, dtype=float)
    s = np.asarray(scores, dtype=float)
    return [
        *alignment_figures(human, scores, METRIC_CUT, seed),
        _paired(_alpha("interval"), h, s, "krippendorff_alpha", seed, vectorized=True),
    ]


def rater_agreement(
    a: Sequence[float], b: Sequence[float], grades: bool, seed: int = 0
) -> list[Figure]:
    """Two people on the same items: κ and α as the judge is measured (the ceiling)."""
    if grades:
        return grade_agreement([int(x) for x in a], [int(x) for x in b], seed)
    x = np.asarray(a, dtype=float)
    y = np.asarray(b, dtype=float)

    def cut_kappa(p: np.ndarray, q: np.ndarray) -> float:
        return float(kappa(p >= METRIC_CUT, q >= METRIC_CUT))

    return [
        _paired(cut_kappa, x, y, "cohen_kappa", seed),
        _paired(_alpha("interval"), x, y, "krippendorff_alpha", seed, vectorized=True),
    ]


__all__ = [
    "GRADES",
    "METRIC_CUT",
    "Figure",
    "alignment_figures",
    "auc_score",
    "balanced_accuracy",
    "detector_figures",
    "grade_agreement",
    "preference_credit",
    "rater_agreement",
    "score_agreement",
    "share_ci",
    "share_figure",
]
