"""Context precision and recall without a judge: retrieved against gold contexts as strings.

These are ragas's non-LLM metrics: a retrieved context matches a gold one when their
Levenshtein similarity reaches 0.5.
"""

from __future__ import annotations

import math
import warnings

from ragaudit.metrics._base import Deps, JudgeError, Outcome, Sample, metric


async def _nonllm(kind: str, s: Sample) -> Outcome:
    from ragas.dataset_schema import SingleTurnSample

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # ragas marks these metrics deprecated, not replaced
        from ragas.metrics import NonLLMContextPrecisionWithReference, NonLLMContextRecall

        cls = NonLLMContextPrecisionWithReference if kind == "precision" else NonLLMContextRecall
        m = cls()
        sample = SingleTurnSample(
            retrieved_contexts=s.contexts, reference_contexts=s.reference_contexts
        )
        value = await m.single_turn_ascore(sample)
    if value is None or math.isnan(value):
        raise JudgeError("ragas returned no value (no contexts to compare)")
    return Outcome(float(value), None, {"distance": "levenshtein", "threshold": m.threshold})


@metric("nonllm_context_precision", inputs=("contexts", "reference_contexts"), order=70)
async def nonllm_context_precision(s: Sample, deps: Deps) -> Outcome:
    """Average precision of the contexts that match a gold context by string similarity."""
    return await _nonllm("precision", s)


@metric("nonllm_context_recall", inputs=("contexts", "reference_contexts"), order=60)
async def nonllm_context_recall(s: Sample, deps: Deps) -> Outcome:
    """Share of the gold contexts that some retrieved context matches by string similarity."""
    return await _nonllm("recall", s)


__all__ = ["nonllm_context_precision", "nonllm_context_recall"]
