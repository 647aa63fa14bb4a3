"""Registered metrics: each a named unit with its inputs and whether it needs a judge or embeddings."""

from ragaudit.metrics import _classic, _ragas  # noqa: F401  (registration)
from ragaudit.metrics._base import METRICS, Deps, Metric, Outcome, Sample, Skip, metric

__all__ = ["METRICS", "Deps", "Metric", "Outcome", "Sample", "Skip", "metric"]
