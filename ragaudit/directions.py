"""What each figure a report shows is: which way is better, its range, its label.

A registered metric declares it in its registration (``ragaudit.metrics.metric(...,
higher_is_better=…, range=…, threshold=…, order=…, label=…)``), which the metric registry
holds (:class:`ragaudit.registry.MetricInfo`); asking loads the built-in metric modules, which
import no ragas or litellm, so ``compare`` and ``runs`` read it without a scorer. A plugin's
metric is known once a config allow-listing it has loaded.

The figures that are not registered metrics are declared once, here (:data:`FIGURES`): the
ranking figures of a list (NDCG@k, DCG@k, precision@k, recall@k, hit@k, MRR, the relevant
share: the audit's list metrics, the tune's metrics, the judge-against-people figures, the
agreement table) and the calibration page's statistics. A name ending in ``@<k>`` is the
figure ``@k`` at that depth. Anything else (an old run's metric this version does not know, an
aspect defined only in a run's config, whose yes is the good answer) is read as a
higher-is-better share, the direction of nearly every figure, so an old run still renders.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable

from ragaudit.registry import METRICS, MetricInfo

UNBOUNDED = (0.0, math.inf)
"""The range of a sum of gains (DCG@k)."""
CORRELATION = (-1.0, 1.0)
"""The range of a rank correlation and of Cohen's κ."""

FIGURES: dict[str, MetricInfo] = {
    # Ranking figures of one list (``ragaudit.ranking``): the audit's list metrics, the tune's
    # metrics, the judge-against-people figures, the agreement table.
    "ndcg@k": MetricInfo(label="NDCG@k"),
    "dcg@k": MetricInfo(range=UNBOUNDED, label="DCG@k"),
    "precision@k": MetricInfo(label="precision@k"),
    "recall@k": MetricInfo(label="recall@k"),
    "hit@k": MetricInfo(label="hit@k"),
    "mrr": MetricInfo(label="MRR"),
    "relevant share": MetricInfo(label="relevant share"),
    "spearman": MetricInfo(range=CORRELATION, label="Spearman ρ"),
    "kendall_tau": MetricInfo(range=CORRELATION, label="Kendall τ-b"),
    "top_k_overlap": MetricInfo(label="top-k overlap"),
    # The calibration page's statistics (``calibration.parquet``'s ``statistic``).
    "human_relevant": MetricInfo(label="P(human relevant)"),
    "over_rated": MetricInfo(higher_is_better=False, label="judge over-rated"),
    "under_rated": MetricInfo(higher_is_better=False, label="judge under-rated"),
    "ndcg_human": MetricInfo(label="NDCG, human grades"),
    "ndcg_judge": MetricInfo(label="NDCG, judge grades"),
    "ndcg_calibrated": MetricInfo(label="NDCG, calibrated judge grades"),
    "in_expected_order": MetricInfo(label="in expected order"),
    "pairwise_agreement": MetricInfo(label="pairwise agreement"),
    "balanced_accuracy": MetricInfo(label="balanced accuracy"),
    "auc": MetricInfo(label="AUC"),
    "mae": MetricInfo(higher_is_better=False, label="MAE"),
    "kendall": MetricInfo(range=CORRELATION, label="Kendall τ"),
    "cohen_kappa": MetricInfo(range=CORRELATION, label="Cohen's κ"),
    "order_disagreement": MetricInfo(
        higher_is_better=False, label="position bias: orders disagree"
    ),
    "self_agreement": MetricInfo(label="self-agreement of repeated verdicts"),
}
"""What each figure that is not a registered metric is, by name (``@k`` for any depth)."""

UNKNOWN = MetricInfo()
"""What a name nothing declares is taken for: a share, higher is better."""

_DEPTH = re.compile(r"@(\d+)$")


def _figure(name: str) -> tuple[MetricInfo | None, str | None]:
    """The declared figure ``name`` is, and its depth when it names one (``ndcg@10``: 10)."""
    key = name.lower()
    depth = _DEPTH.search(key)
    if depth is not None:
        key = key[: depth.start()] + "@k"
    return FIGURES.get(key), depth.group(1) if depth is not None else None


def about(name: str) -> MetricInfo:
    """What ``name`` is: its registration's, else its :data:`FIGURES` entry, else UNKNOWN."""
    registered = METRICS.info_of(name)
    if registered is not None:
        return registered
    found, _ = _figure(name)
    return found or UNKNOWN


def higher_is_better(metric: str) -> bool:
    """Whether a larger value of ``metric`` is the better one."""
    return about(metric).higher_is_better


def label(name: str) -> str:
    """How reports name ``name``: its declared label (at its depth), else the name itself."""
    registered = METRICS.info_of(name)
    if registered is not None:
        return registered.label or name
    found, depth = _figure(name)
    if found is None or not found.label:
        return name
    return found.label.replace("@k", f"@{depth}") if depth is not None else found.label


def shown(name: str, higher: bool | None = None) -> str:
    """``label (lower is better)`` for a lower-is-better figure, else its label.

    ``higher`` is the direction when the caller holds it (a stored summary's), else declared.
    """
    up = higher_is_better(name) if higher is None else higher
    return label(name) + ("" if up else " (lower is better)")


def span(names: Iterable[str]) -> tuple[float, float] | None:
    """The smallest range holding every one of ``names``' ranges; None when one is unbounded."""
    ranges = [about(n).range for n in names]
    if not ranges:
        return None
    low, high = min(r[0] for r in ranges), max(r[1] for r in ranges)
    return (low, high) if math.isfinite(low) and math.isfinite(high) else None


def goodness(
    name: str,
    value: float,
    higher: bool | None = None,
    extent: tuple[float, float] | None = None,
) -> float:
    """``value`` as a share of ``name``'s range from worst (0) to best (1).

    ``higher`` is the direction when the caller holds it (else declared). An unbounded range
    has no such share: it is taken over ``extent`` (the values seen) when given, else the value
    itself is returned, negated when lower is better, so that larger still means better.
    """
    info = about(name)
    up = info.higher_is_better if higher is None else higher
    low, high = info.range if info.bounded or extent is None else extent
    if not (math.isfinite(low) and math.isfinite(high)):
        return value if up else -value
    share = (value - low) / (high - low) if high > low else 0.5
    return share if up else 1.0 - share


__all__ = [
    "CORRELATION",
    "FIGURES",
    "UNBOUNDED",
    "UNKNOWN",
    "about",
    "goodness",
    "higher_is_better",
    "label",
    "shown",
    "span",
]
