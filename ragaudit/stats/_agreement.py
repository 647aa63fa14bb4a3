"""Agreement of raters: one Krippendorff's α, one Cohen's κ.

Krippendorff's α over (raters or samples × items): α = 1 − observed disagreement within items
/ disagreement expected by chance, at the ``interval`` level (scores: for a judge whose score
is the item's value plus noise of variance σ², α estimates var(value) / (var(value) + σ²)),
the ``nominal`` level (a grade is right or wrong) or the ``ordinal`` level (grades in order:
a grade off by two is farther than one off by one). Its interval is a bootstrap over items,
since items, not samples, are the independent units.

Cohen's κ of two raters' categories, unweighted (nominal) or with quadratic weights, computed
from one-hot counts so that a bootstrap's resamples are one array operation.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from ragaudit.stats._resample import CONFIDENCE

Level = Literal["nominal", "ordinal", "interval"]


@dataclass(frozen=True)
class Agreement:
    """Krippendorff's α over items, with its bootstrap interval."""

    alpha: float | None
    ci_low: float | None
    ci_high: float | None
    n_items: int
    """Items with at least two answers (the only ones α can use)."""
    n_raters: int
    """Samples (self-agreement) or judges (a jury) per item, at most."""
    level: Level

    @property
    def text(self) -> str:
        """``α 0.81 (95% CI 0.74–0.86, 120 items × 3)``, or why there is none."""
        if self.alpha is None:
            return f"α not measurable ({self.n_items} item(s) with two answers or more)"
        ci = ""
        if self.ci_low is not None and self.ci_high is not None:
            ci = f", 95% CI {self.ci_low:.2f}–{self.ci_high:.2f}"
        return f"α {self.alpha:.2f} ({self.level}{ci}, {self.n_items} items × {self.n_raters})"


def _usable(matrix: np.ndarray) -> np.ndarray:
    """The columns (items) with at least two answers."""
    return matrix[:, np.sum(~np.isnan(matrix), axis=0) >= 2]


def _unit_terms(matrix: np.ndarray, level: Level) -> tuple[np.ndarray, ...]:
    """Per item: its answers m, and the sums α's disagreements add up over items.

    Returned as (m, within, s1, s2) for ``interval`` (within = m·SS/(m−1), s1 = Σx,
    s2 = Σx²), (m, within, counts) for ``nominal`` (within = (m² − Σ n_c²)/(m−1),
    counts = answers per category) and (m, within, coincidences) for ``ordinal`` (the item's
    categories × categories coincidences, flattened).
    """
    present = ~np.isnan(matrix)
    m = present.sum(axis=0).astype(float)
    x = np.where(present, matrix, 0.0)
    if level == "interval":
        s1 = x.sum(axis=0)
        s2 = (x * x).sum(axis=0)
        within = m * (s2 - s1 * s1 / m) / (m - 1)
        return m, within, s1, s2
    categories = np.unique(matrix[present])
    counts = np.stack([((matrix == c) & present).sum(axis=0) for c in categories], axis=1)
    within = (m * m - (counts * counts).sum(axis=1)) / (m - 1)
    if level == "nominal":
        return m, within, counts.astype(float)
    # Ordinal: each item's coincidences (pairs of its answers, c then k, over m − 1), whose
    # sum over items is Krippendorff's coincidence matrix; the distance of two grades depends
    # on how many answers lie between them, so it is formed from the summed matrix.
    pairs = counts[:, :, None] * counts[:, None, :] - counts[:, :, None] * np.eye(len(categories))
    coincidences = pairs / (m - 1)[:, None, None]
    return m, within, coincidences.reshape(len(m), -1)


def _alpha_weighted(terms: tuple[np.ndarray, ...], weights: np.ndarray, level: Level) -> np.ndarray:
    """α of items taken ``weights`` times each (resamples × items): one α per resample.

    The same sums as Krippendorff's coincidence matrices (α = 1 − D_o / D_e), added per item
    so that a bootstrap of thousands of resamples is a few matrix products. The
    ``krippendorff`` package builds a value-by-value distance matrix per call, which for
    continuous scores made one interval take minutes; its value equals this one's for
    weights of one (tested against it). Weights need not be whole: a design weight (an item's
    inverse chance of being drawn) makes α the run's rather than the sample's.
    """
    return _alpha_of_sums(tuple(weights @ t for t in terms), level)


def _alpha_of_sums(sums: tuple[np.ndarray, ...], level: Level) -> np.ndarray:
    """α from the per-resample sums of :func:`_unit_terms` (each resamples × ...)."""
    n, within = sums[0], sums[1]
    observed = within / n
    if level == "interval":
        s1, s2 = sums[2], sums[3]
        total_ss = s2 - s1**2 / n
        expected = 2 * total_ss / (n - 1)
        observed = 2 * observed
    elif level == "nominal":
        per_category = sums[2]
        expected = (n * n - (per_category * per_category).sum(axis=1)) / (n * (n - 1))
    else:
        k = int(round(np.sqrt(sums[2].shape[1])))
        o = sums[2].reshape(-1, k, k)
        marginal = o.sum(axis=2)
        # δ²(c, k) = (n_c + … + n_k − (n_c + n_k) / 2)²: the answers between two grades.
        cum = np.cumsum(marginal, axis=1)
        lo, hi = (
            np.minimum.outer(np.arange(k), np.arange(k)),
            np.maximum.outer(np.arange(k), np.arange(k)),
        )
        between = cum[:, hi] - cum[:, lo] + marginal[:, lo]
        delta = (between - (marginal[:, :, None] + marginal[:, None, :]) / 2) ** 2
        observed = (o * delta).sum(axis=(1, 2)) / n
        pair_sums = marginal[:, :, None] * marginal[:, None, :]
        expected = (pair_sums * delta).sum(axis=(1, 2)) / (n * (n - 1))
    with np.errstate(divide="ignore", invalid="ignore"):
        return 1 - observed / expected


def pair_alpha(a: np.ndarray, b: np.ndarray, level: Level, axis: int = -1) -> np.ndarray | float:
    """α of two raters who answered every item, for every resample along the leading axes.

    scipy's vectorised bootstrap hands every resample at once: the items' terms are built
    for all of them together and summed per resample, so 2,000 resamples are one pass
    rather than 2,000 calls of :func:`krippendorff_alpha` (equal to it, tested).
    """
    first = np.moveaxis(np.asarray(a, dtype=float), axis, -1)
    second = np.moveaxis(np.asarray(b, dtype=float), axis, -1)
    batch, items = first.shape[:-1], first.shape[-1]
    rows = int(np.prod(batch)) if batch else 1
    if level == "interval":
        terms = _unit_terms(np.vstack([first.reshape(-1), second.reshape(-1)]), level)
        sums = tuple(t.reshape(rows, items).sum(axis=1) for t in terms)
    else:
        # Two answers per item: its coincidences are (a, b) and (b, a), so a resample's
        # coincidence matrix is one product of one-hot codes (as κ's confusion matrix). One
        # category list for every resample: a grade one resample lacks adds zeros.
        cats = np.unique(np.concatenate([first.reshape(-1), second.reshape(-1)]))
        x = _one_hot(first.reshape(rows, items), cats)
        y = _one_hot(second.reshape(rows, items), cats)
        pairs = np.einsum("rni,rnj->rij", x, y)
        o = pairs + np.swapaxes(pairs, 1, 2)
        n = np.full(rows, 2.0 * items)
        within = 2.0 * (items - np.trace(pairs, axis1=1, axis2=2))
        extra = o.sum(axis=2) if level == "nominal" else o.reshape(rows, -1)
        sums = (n, within, extra)
    out = _alpha_of_sums(sums, level).reshape(batch)
    return float(out) if out.ndim == 0 else out


def cluster_jackknife_weights(
    clusters: Sequence[object] | np.ndarray, weights: Sequence[float] | np.ndarray
) -> np.ndarray:
    """Each item's weight in each delete-one-cluster jackknife replicate (clusters × items).

    Items labelled question by question are not independent: a replicate leaves one question
    out whole and scales the others by m / (m − 1) (the JK1 replicate weights of survey
    practice, Wolter 2007 ch. 4).
    """
    _, inverse = np.unique(np.asarray(clusters, dtype=object).astype(str), return_inverse=True)
    m = int(inverse.max()) + 1 if inverse.size else 0
    w = np.asarray(weights, dtype=float)
    if m < 2:
        return np.zeros((0, w.size))
    kept = inverse[None, :] != np.arange(m)[:, None]
    return kept * w[None, :] * (m / (m - 1))


def jackknife_interval(
    point: float, replicates: np.ndarray, bounds: tuple[float, float]
) -> tuple[float | None, float | None]:
    """The 95 % interval point ± t·se of delete-one-cluster replicates, kept inside ``bounds``.

    se² = (m − 1)/m · Σ (θ₍ⱼ₎ − θ̄)², Student t on m − 1 degrees of freedom: with a handful of
    questions a percentile bootstrap over them is too narrow (its variance is short by
    (m − 1)/m and it uses the normal quantile).
    """
    from scipy import stats

    finite = replicates[np.isfinite(replicates)]
    m = finite.size
    if m < 2:
        return None, None
    se = math.sqrt((m - 1) / m * float(np.sum((finite - finite.mean()) ** 2)))
    half = float(stats.t.ppf(1 - (1 - CONFIDENCE) / 2, m - 1)) * se
    return max(point - half, bounds[0]), min(point + half, bounds[1])


def agreement(
    answers: np.ndarray | Sequence[Sequence[float | None]],
    level: Level = "interval",
    *,
    resamples: int = 999,
    seed: int = 0,
) -> Agreement:
    """Krippendorff's α of ``answers`` (raters or samples × items; NaN/None = no answer).

    The interval is the percentile bootstrap over items. No spread at all (every answer
    equal) leaves α undefined: it is reported as None, never as 1. Levels: ``interval``
    (scores), ``nominal`` (grades as categories) and ``ordinal`` (grades in order).
    """
    matrix = np.array(answers, dtype=float)
    if matrix.ndim != 2:
        raise ValueError(f"answers must be raters × items, got shape {matrix.shape}")
    usable = _usable(matrix)
    raters, items = usable.shape
    point = krippendorff_alpha(usable, level)
    if np.isnan(point):
        return Agreement(None, None, None, items, raters, level)
    terms = _unit_terms(usable, level)
    low = high = None
    if items >= 5 and resamples > 0:
        rng = np.random.default_rng(seed)
        drawn = rng.integers(0, items, size=(resamples, items))
        weights = np.zeros((resamples, items))
        np.add.at(weights, (np.arange(resamples)[:, None], drawn), 1.0)
        replicates = _alpha_weighted(terms, weights, level)
        replicates = replicates[np.isfinite(replicates)]
        if replicates.size:
            tail = (1 - CONFIDENCE) / 2
            low, high = (float(v) for v in np.quantile(replicates, [tail, 1 - tail]))
    return Agreement(point, low, high, items, raters, level)


def krippendorff_alpha(
    answers: np.ndarray | Sequence[Sequence[float | None]], level: Level = "interval"
) -> float:
    """Krippendorff's α of ``answers`` (raters × items; NaN = no answer), NaN when undefined.

    Undefined: fewer than two items with two answers, or no spread at all (α is never 1 for
    answers that are all equal).
    """
    matrix = _usable(np.array(answers, dtype=float))
    values = matrix[~np.isnan(matrix)]
    if matrix.shape[1] < 2 or values.size == 0 or np.all(values == values[0]):
        return float("nan")
    terms = _unit_terms(matrix, level)
    return float(_alpha_weighted(terms, np.ones((1, matrix.shape[1])), level)[0])


def kappa(
    a: np.ndarray | Sequence[float],
    b: np.ndarray | Sequence[float],
    axis: int = -1,
    *,
    categories: Sequence[int] = (0, 1),
    weights: Literal["nominal", "quadratic"] = "nominal",
) -> np.ndarray | float:
    """Cohen's κ of two raters' ``categories`` (resamples along the leading axes).

    1 − Σ w·observed / Σ w·expected over the confusion matrix, with w = 1 off the diagonal
    (``nominal``, Cohen's) or the squared distance of the categories (``quadratic``: a grade
    off by two costs four times one off by one), as scikit-learn's ``cohen_kappa_score`` with
    ``labels=categories`` (tested equal to it). Booleans count as 0 and 1. NaN when chance
    agreement is certain (both raters gave one and the same category).

    Raises:
        ValueError: A rating is not one of ``categories``.
    """
    cats = np.sort(np.asarray(categories))
    first, second = np.asarray(a), np.asarray(b)
    x = np.moveaxis(first, axis, -1)
    y = np.moveaxis(second, axis, -1)
    observed = np.einsum("...ni,...nj->...ij", _one_hot(x, cats), _one_hot(y, cats))
    return kappa_of_counts(observed, weights)


def _one_hot(ratings: np.ndarray, cats: np.ndarray) -> np.ndarray:
    if not np.isin(ratings, cats).all():
        raise ValueError(f"κ: a rating is not one of the categories {cats.tolist()}")
    return np.eye(len(cats))[np.searchsorted(cats, ratings)]


def kappa_of_counts(
    observed: np.ndarray, weights: Literal["nominal", "quadratic"] = "nominal"
) -> np.ndarray | float:
    """Cohen's κ of confusion matrices (… × categories × categories; counts or weights).

    Counts need not be whole: a design-weighted matrix (each pair times its inverse chance of
    being drawn) gives the run's κ rather than the sample's.
    """
    observed = np.asarray(observed, dtype=float)
    k = observed.shape[-1]
    expected = observed.sum(-1)[..., :, None] * observed.sum(-2)[..., None, :]
    expected = expected / observed.sum((-1, -2))[..., None, None]
    grid = np.arange(k)
    if weights == "quadratic":
        w = (grid[:, None] - grid[None, :]) ** 2
    else:
        w = (grid[:, None] != grid[None, :]).astype(int)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = 1 - (w * observed).sum((-1, -2)) / (w * expected).sum((-1, -2))
    return float(out) if np.ndim(out) == 0 else out


def design_kappa_counts(
    a: Sequence[int] | np.ndarray,
    b: Sequence[int] | np.ndarray,
    item_weights: np.ndarray,
    categories: Sequence[int],
) -> np.ndarray:
    """The confusion matrices of two raters with items weighted (weight rows × k × k)."""
    cats = np.sort(np.asarray(categories))
    ha, hb = _one_hot(np.asarray(a), cats), _one_hot(np.asarray(b), cats)
    k = len(cats)
    # One matrix product (rows × items @ items × k²): einsum over three operands is ~10×
    # slower on a thousand bootstrap rows.
    pairs = (ha[:, :, None] * hb[:, None, :]).reshape(len(ha), k * k)
    return (np.atleast_2d(item_weights) @ pairs).reshape(-1, k, k)


__all__ = [
    "Agreement",
    "Level",
    "agreement",
    "cluster_jackknife_weights",
    "design_kappa_counts",
    "jackknife_interval",
    "kappa",
    "kappa_of_counts",
    "krippendorff_alpha",
    "pair_alpha",
]
