"""A tune's metrics at its depth, each registered by name (``tune.metrics``).

A metric reads one question's condensed list (its top-k with unjudged documents left out) and
the question's pooled grades; a plugin registers one the same way, with :func:`tune_metric`.
What a built-in one is (range, label) is the ranking figure's of the same name, declared once
in :data:`ragaudit.directions.FIGURES`; a plugin's declares its own.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from ragaudit.directions import FIGURES
from ragaudit.ranking import mrr, ndcg_at_k, precision_at_k, recall_at_k
from ragaudit.registry import TUNE_METRICS as REGISTRY
from ragaudit.registry import MetricInfo


@dataclass(frozen=True)
class Judged:
    """One question's judged list for one variant.

    Attributes:
        judged: Its top-k, unjudged documents left out (a condensed list), best first.
        grades: Every graded document of the question (the pool's qrels), by id.
        depth: k.
        relevant_grade: The lowest grade that counts as relevant.
    """

    judged: Sequence[str]
    grades: Mapping[str, int]
    depth: int
    relevant_grade: int

    @property
    def relevant(self) -> set[str]:
        """The graded documents at or above the relevant grade."""
        return {c for c, g in self.grades.items() if g >= self.relevant_grade}

    @property
    def gains(self) -> dict[str, float]:
        """Each document graded above 0, its grade as its gain."""
        return {c: float(g) for c, g in self.grades.items() if g > 0}


TuneMetric = Callable[[Judged], float]
TUNE_METRICS: dict[str, TuneMetric] = REGISTRY.units
"""The registered tune metrics by name: the registry's own table (``ragaudit.registry``)."""


def tune_metric(name: str, info: MetricInfo | None = None) -> Callable[[TuneMetric], TuneMetric]:
    """Register a tune metric under ``name`` (built-in or a plugin's): ``Judged`` → a value.

    ``info`` is what its values are (range, label; a share when not given). The tune
    maximises its first metric, so a metric's larger values must be the better ones.

    Raises:
        ValueError: ``info`` says smaller values are better.
    """
    if info is not None and not info.higher_is_better:
        raise ValueError(
            f"tune metric '{name}': a tune maximises its metrics; register one whose larger "
            "values are better (1 − x, −x)"
        )
    return REGISTRY.register(name, info=info or MetricInfo())


def metric_label(name: str, depth: int) -> str:
    """How a chart names tune metric ``name`` at ``depth``: its declared label, else ``name@k``."""
    info = REGISTRY.info.get(name)
    found = info.label if info is not None and info.label else f"{name}@k"
    return found.replace("@k", f"@{depth}")


@tune_metric("ndcg", FIGURES["ndcg@k"])
def ndcg(q: Judged) -> float:
    """NDCG@depth with the grade as the gain, its ideal from every graded document."""
    return ndcg_at_k(q.judged, q.gains, q.depth)


@tune_metric("precision", FIGURES["precision@k"])
def precision(q: Judged) -> float:
    """P@depth."""
    return precision_at_k(q.judged, q.relevant, q.depth)


@tune_metric("recall", FIGURES["recall@k"])
def recall(q: Judged) -> float:
    """R@depth (NaN without a relevant document)."""
    return recall_at_k(q.judged, q.relevant, q.depth)


@tune_metric("mrr", FIGURES["mrr"])
def reciprocal_rank(q: Judged) -> float:
    """MRR over the top depth (NaN without a relevant document)."""
    relevant = q.relevant
    return mrr(q.judged[: q.depth], relevant) if relevant else math.nan


__all__ = ["TUNE_METRICS", "Judged", "TuneMetric", "metric_label", "tune_metric"]
