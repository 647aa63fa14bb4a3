"""How far the judge agrees with people's labels of a run's own items, with intervals.

Relevance grades (0–3) are ordinal: the judge against a person is Cohen's κ with quadratic
weights (a grade off by two costs four times one off by one; scikit-learn's
``cohen_kappa_score``) and Krippendorff's α at the ordinal level (the ``krippendorff``
package). A judged metric's score in [0, 1] against a person's yes/no is the calibration's
alignment (MAE, Spearman, Kendall, κ at ½, AUC) plus α at the interval level. Every interval
is the calibration's paired percentile bootstrap over the labelled items
(:mod:`ragaudit.calibration._stats`), so a figure on few labels says so by its width.

The per-grade confusion is, for each human grade, the share of its items the judge put at
each grade, with the exact binomial interval (:func:`ragaudit.noise.share`). When two people
labelled the same items, the same κ and α between them is the ceiling the judge can be held
to: a judge agreeing with people as well as they agree with each other is as good as a label.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from ragaudit.calibration._stats import Figure, _paired, alignment_figures
from ragaudit.noise import Share, calibrate_grades, share

GRADES = (0, 1, 2, 3)
METRIC_CUT = 0.5
"""A score at or above this counts as a "yes" where a figure needs both sides binary."""


def weighted_kappa(a: Sequence[int], b: Sequence[int]) -> float:
    """Cohen's κ with quadratic weights of two raters' grades 0–3 (scikit-learn's)."""
    from sklearn.metrics import cohen_kappa_score

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # one grade only: NaN, reported as undefined
        return float(cohen_kappa_score(a, b, weights="quadratic", labels=list(GRADES)))


def _kappa_batched(a: np.ndarray, b: np.ndarray, axis: int = -1) -> np.ndarray | float:
    """Quadratic-weighted κ of every resample at once (resamples along the leading axes).

    The same formula as scikit-learn's ``cohen_kappa_score`` (1 − Σ w·observed / Σ w·expected
    over the confusion matrix), computed from one-hot counts so that a bootstrap's 2,000
    resamples are one array operation instead of 2,000 validated calls (~2 s each figure).
    Tested equal to scikit-learn's.
    """
    x = np.moveaxis(np.asarray(a, dtype=int), axis, -1)
    y = np.moveaxis(np.asarray(b, dtype=int), axis, -1)
    k = len(GRADES)
    observed = np.einsum("...ni,...nj->...ij", np.eye(k)[x], np.eye(k)[y])
    expected = observed.sum(-1)[..., :, None] * observed.sum(-2)[..., None, :]
    expected = expected / observed.sum((-1, -2))[..., None, None]
    grid = np.arange(k)
    weights = (grid[:, None] - grid[None, :]) ** 2
    with np.errstate(divide="ignore", invalid="ignore"):
        out = 1 - (weights * observed).sum((-1, -2)) / (weights * expected).sum((-1, -2))
    return float(out) if np.ndim(out) == 0 else out


def _alpha(level: Literal["ordinal", "interval"]) -> Callable[[np.ndarray, np.ndarray], float]:
    import krippendorff

    def alpha(a: np.ndarray, b: np.ndarray) -> float:
        data = np.vstack([a, b]).astype(float)
        if np.all(data == data[0, 0]):
            return float("nan")  # no spread: α is undefined, never 1
        domain = list(GRADES) if level == "ordinal" else None
        return float(
            krippendorff.alpha(
                reliability_data=data, level_of_measurement=level, value_domain=domain
            )
        )

    return alpha


def grade_agreement(human: Sequence[int], judge: Sequence[int], seed: int = 0) -> list[Figure]:
    """Weighted κ (quadratic) and ordinal α of two raters' grades 0–3 of the same items."""
    h = np.asarray(human, dtype=int)
    j = np.asarray(judge, dtype=int)
    alpha = _alpha("ordinal")
    return [
        _paired(_kappa_batched, h, j, "weighted_kappa", seed, vectorized=True),  # type: ignore[arg-type]
        _paired(alpha, h, j, "krippendorff_alpha", seed),
    ]


def score_agreement(human: Sequence[float], scores: Sequence[float], seed: int = 0) -> list[Figure]:
    """A metric's scores against people's labels in [0, 1]: alignment figures and interval α."""
    h = np.asarray(human, dtype=float)
    s = np.asarray(scores, dtype=float)
    alpha = _alpha("interval")
    return [
        *alignment_figures(human, scores, METRIC_CUT, seed),
        _paired(alpha, h, s, "krippendorff_alpha", seed),
    ]


def rater_agreement(
    a: Sequence[float], b: Sequence[float], grades: bool, seed: int = 0
) -> list[Figure]:
    """Two people on the same items: κ and α as the judge is measured (the ceiling)."""
    if grades:
        return grade_agreement([int(x) for x in a], [int(x) for x in b], seed)
    x = np.asarray(a, dtype=float)
    y = np.asarray(b, dtype=float)

    def kappa(p: np.ndarray, q: np.ndarray) -> float:
        from ragaudit.calibration._stats import cohen_kappa

        return cohen_kappa(p >= METRIC_CUT, q >= METRIC_CUT)

    return [
        _paired(kappa, x, y, "cohen_kappa", seed),
        _paired(_alpha("interval"), x, y, "krippendorff_alpha", seed),
    ]


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


__all__ = [
    "GRADES",
    "METRIC_CUT",
    "ConfusionCell",
    "GradeConfusion",
    "grade_agreement",
    "grade_confusion",
    "rater_agreement",
    "score_agreement",
    "weighted_kappa",
]
