"""A ratio of totals over clusters as per-cluster values a paired test can draw.

A figure pooled over items that come in clusters (the relevant share over every judged
candidate, the candidates grouped by question) is a ratio R = Σt / Σn of cluster totals t over
cluster sizes n. Its Taylor linearisation, z = R + (t − R·n) / n̄, has mean R exactly and the
spread whose variance over the clusters is the ratio's (the textbook ratio-estimator variance,
as survey packages compute it), so resampling clusters of z resamples the ratio with its
clustering accounted for.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def ratio_values(totals: Sequence[float], sizes: Sequence[float]) -> np.ndarray:
    """Each cluster's linearised value of the ratio Σ totals / Σ sizes (their mean is the ratio).

    With every size 1 the values are the totals themselves (a plain mean over clusters).
    Clusters of size 0 count with value R. [] for no cluster or no item.
    """
    t = np.asarray(totals, dtype=float)
    n = np.asarray(sizes, dtype=float)
    if t.shape != n.shape:
        raise ValueError(f"{t.size} total(s) against {n.size} size(s)")
    if not t.size or n.sum() <= 0:
        return np.array([], dtype=float)
    ratio = t.sum() / n.sum()
    return np.asarray(ratio + (t - ratio * n) / n.mean(), dtype=float)


__all__ = ["ratio_values"]
