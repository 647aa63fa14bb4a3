"""Registered metrics: named units with their inputs, needs, options and cost model.

One module per metric or family; importing this package registers them all in the metric registry
(``ragaudit.registry.METRICS``, whose table is ``METRICS``) and installs its check of a score
section, which rejects an unknown metric or option when a config loads.
Adding a metric is one module that applies :func:`metric` to its scorer, declaring there what its
values mean (direction, range, default threshold, place in lists, label): a built-in one is
imported here; a user's one is named in ``score.plugins`` (or published under the
``ragaudit.metrics`` entry-point group). User-defined aspects exist through a run's config and
are found with :func:`resolve`.

Registering imports no ragas, rouge-score (nltk) or sacreBLEU: a metric's module imports them,
and our prompts that read ragas's, inside the functions that score, cost or size a row, so a
command that only loads a config (and checks its metrics) pays none of those seconds.
"""

from typing import Any

from ragaudit.metrics import (  # noqa: F401  (registration)
    _answer_correctness,
    _answer_relevancy,
    _aspect,
    _citations,
    _context_entity_recall,
    _context_precision,
    _context_recall,
    _context_relevance,
    _factual_correctness,
    _faithfulness,
    _lexical,
    _noise_sensitivity,
    _nonllm,
    _nuggets,
    _refusal,
    _semantic,
    _summarization,
)
from ragaudit.metrics._answer_relevancy import check_embedder
from ragaudit.metrics._answerability import (
    CLARIFY_EXPECTED,
    DECLINE_EXPECTED,
    SETTLED_BY_CHECK,
    Conditioning,
    answerability_rule,
    condition_on_answerability,
    is_conditioned,
    refusal_check_cost,
)
from ragaudit.metrics._base import (
    ENTRY_POINTS,
    METRICS,
    CostSheet,
    Deps,
    JudgeError,
    Metric,
    NoOptions,
    Options,
    Outcome,
    Sample,
    Skip,
    Window,
    check_score,
    load_plugins,
    metric,
    resolve,
    rough_cost,
)
from ragaudit.metrics._judge import ask, own_window, trace
from ragaudit.registry import METRICS as REGISTRY


def __getattr__(name: str) -> Any:
    # The ragas helpers, imported (with ragas) when first asked for.
    if name in ("prompt_for", "ragas_window"):
        from ragaudit.metrics import _ragas

        return getattr(_ragas, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# The config asks the registry to check its score section, after the registry has loaded this
# package itself: the check never depends on what was imported first.
REGISTRY.section_check = check_score

__all__ = [
    "CLARIFY_EXPECTED",
    "DECLINE_EXPECTED",
    "ENTRY_POINTS",
    "METRICS",
    "SETTLED_BY_CHECK",
    "Conditioning",
    "answerability_rule",
    "condition_on_answerability",
    "is_conditioned",
    "refusal_check_cost",
    "CostSheet",
    "Deps",
    "JudgeError",
    "Metric",
    "NoOptions",
    "Options",
    "Outcome",
    "Sample",
    "Skip",
    "Window",
    "ask",
    "check_embedder",
    "check_score",
    "load_plugins",
    "metric",
    "own_window",
    "prompt_for",
    "ragas_window",
    "resolve",
    "rough_cost",
    "trace",
]
