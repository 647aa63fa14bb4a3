"""Resampling: the one call of scipy's bootstrap, and the percentile interval of a mean.

Every bootstrap interval ragaudit reports (a metric's mean, a paired difference, a
PPI-corrected difference, an agreement figure) is drawn here, by ``scipy.stats.bootstrap``
with the percentile method; nothing re-implements it. scipy is imported inside the functions:
``ragaudit runs`` reads stored summaries and never needs it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

CONFIDENCE = 0.95


@dataclass(frozen=True)
class Interval:
    """A bootstrap's percentile interval and the standard error of its resampled statistic."""

    low: float
    high: float
    standard_error: float


def bootstrap(
    data: Sequence[np.ndarray],
    statistic: Callable[..., Any],
    *,
    resamples: int,
    seed: int,
    paired: bool = False,
    vectorized: bool = True,
    level: float = CONFIDENCE,
) -> Interval:
    """Percentile bootstrap of ``statistic`` over ``data`` (scipy's, seeded).

    Percentile rather than BCa: BCa is undefined (NaN) when every value is equal, which a
    metric scored 1.0 on every question often is.

    Args:
        data: The samples; drawn again together when ``paired``, each on its own otherwise.
        statistic: Of the samples (with ``axis`` when ``vectorized``).
        resamples: Bootstrap resamples.
        seed: The generator's seed.
        paired: Whether the samples' elements are drawn together (one unit, several values).
        vectorized: Whether ``statistic`` takes ``axis`` and computes every resample at once.
        level: The interval's confidence level.
    """
    from scipy import stats

    res = stats.bootstrap(
        tuple(data),
        statistic,
        paired=paired,
        vectorized=vectorized,
        n_resamples=resamples,
        confidence_level=level,
        method="percentile",
        rng=np.random.default_rng(seed),
    )
    ci = res.confidence_interval
    return Interval(float(ci.low), float(ci.high), float(res.standard_error))


def bootstrap_ci(
    values: np.ndarray, samples: int, seed: int = 0, level: float = CONFIDENCE
) -> tuple[float | None, float | None]:
    """Percentile bootstrap interval of the mean; (None, None) when it cannot be formed."""
    if samples <= 0 or len(values) < 2:
        return None, None
    if np.all(values == values[0]):
        # Every resample has the same mean: the interval is that point (scipy warns and
        # returns NaN for degenerate data).
        return float(values[0]), float(values[0])
    found = bootstrap((values,), np.mean, resamples=samples, seed=seed, level=level)
    return found.low, found.high


__all__ = ["CONFIDENCE", "Interval", "bootstrap", "bootstrap_ci"]
