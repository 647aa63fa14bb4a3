"""Metrics without a judge: ROUGE-L on a CJK-aware tokenisation, and ragas's non-LLM context
precision/recall against the gold contexts."""

from __future__ import annotations

import math
import warnings

from rouge_score import rouge_scorer

from ragaudit.lang import tokens
from ragaudit.metrics._base import Deps, Outcome, Sample, metric


class _CJKTokenizer:
    """rouge-score's default tokenizer drops every non-ASCII character, so Chinese scores 0;
    this one keeps each CJK character as a token and Latin words whole."""

    def tokenize(self, text: str) -> list[str]:
        return tokens(text)


_ROUGE = rouge_scorer.RougeScorer(["rougeL"], tokenizer=_CJKTokenizer())


@metric("rouge_l", inputs=("response", "reference"))
async def rouge_l(s: Sample, deps: Deps) -> Outcome:
    """ROUGE-L F-measure of the answer against the reference (CJK-aware tokens)."""
    score = _ROUGE.score(s.reference, s.response)["rougeL"]
    return Outcome(score.fmeasure, {"precision": score.precision, "recall": score.recall},
                   {"tokenizer": "cjk-char+latin-word"})


def _gold_texts(s: Sample) -> list[str] | None:
    return s.reference_contexts


async def _nonllm(kind: str, s: Sample) -> Outcome:
    from ragas.dataset_schema import SingleTurnSample

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # ragas marks these metrics deprecated, not replaced
        from ragas.metrics import NonLLMContextPrecisionWithReference, NonLLMContextRecall

        metric_cls = NonLLMContextPrecisionWithReference if kind == "precision" else NonLLMContextRecall
        m = metric_cls()
        sample = SingleTurnSample(retrieved_contexts=s.contexts, reference_contexts=_gold_texts(s))
        value = await m.single_turn_ascore(sample)
    value = None if value is None or math.isnan(value) else float(value)
    return Outcome(value, None, {"distance": "levenshtein", "threshold": m.threshold})


@metric("nonllm_context_precision", inputs=("contexts", "reference_contexts"))
async def nonllm_context_precision(s: Sample, deps: Deps) -> Outcome:
    """Average precision of the contexts that match a gold context by string similarity."""
    return await _nonllm("precision", s)


@metric("nonllm_context_recall", inputs=("contexts", "reference_contexts"))
async def nonllm_context_recall(s: Sample, deps: Deps) -> Outcome:
    """Share of the gold contexts that some retrieved context matches by string similarity."""
    return await _nonllm("recall", s)
