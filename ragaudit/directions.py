"""Which way each metric is better, declared as data.

Reports, ``ragaudit compare`` and ``ragaudit runs`` need a metric's direction and nothing else
of it; the scorers (``ragaudit.metrics``) import ragas and litellm, 15-20 s of a cold start.
So the direction lives here, importable on its own, and the metric registry reads it from here
too: this is its only declaration.
"""

from __future__ import annotations

from ragaudit.prompts.aspect import BUILTIN_ASPECTS

ASPECT_PREFIX = "aspect_"
"""Aspect critiques are registered, and defined in ``score.aspects``, as ``aspect_<name>``."""

LOWER_IS_BETTER = frozenset(
    {"noise_sensitivity", "noise_sensitivity_irrelevant", "citation_uncited_share"}
)
"""The registered metrics other than aspects whose smaller values are the better ones."""


def higher_is_better(metric: str) -> bool:
    """Whether a larger value of ``metric`` is the better one.

    An aspect takes its built-in's direction (1 is the good verdict for all but
    maliciousness); an aspect defined only in a run's config asks a yes/no question whose yes
    is the good answer. A metric this version does not know is taken as higher-is-better, the
    direction of nearly all of them, so an old run still renders.
    """
    if metric.startswith(ASPECT_PREFIX):
        builtin = BUILTIN_ASPECTS.get(metric[len(ASPECT_PREFIX) :])
        return builtin.higher_is_better if builtin is not None else True
    return metric not in LOWER_IS_BETTER


__all__ = ["ASPECT_PREFIX", "LOWER_IS_BETTER", "higher_is_better"]
