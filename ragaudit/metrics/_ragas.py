"""Metrics ragas has, scored with ``ragas.metrics.collections`` on an LLM and embeddings that
route every call through our gateway (memoised, logged, rate-limited)."""

from __future__ import annotations

import math
from functools import lru_cache
from typing import Any

from ragas.embeddings.base import BaseRagasEmbedding
from ragas.llms import llm_factory
from ragas.metrics import collections as rc

from ragaudit.cache import Gateway
from ragaudit.metrics._base import Deps, Outcome, Sample, Skip, metric

RAGAS_PROMPTS = "ragas-0.4.3"


class GatewayEmbeddings(BaseRagasEmbedding):
    """ragas embeddings whose calls go through the gateway."""

    def __init__(self, gateway: Gateway, model: str) -> None:
        super().__init__()
        self.gateway, self.model = gateway, model

    def embed_text(self, text: str, **kwargs: Any) -> list[float]:  # noqa: D102
        raise NotImplementedError("ragaudit scores asynchronously; use aembed_text")

    async def aembed_text(self, text: str, **kwargs: Any) -> list[float]:  # noqa: D102
        return (await self.gateway.aembed([text], model=self.model))[0]

    async def aembed_texts(self, texts: list[str], **kwargs: Any) -> list[list[float]]:  # noqa: D102
        return await self.gateway.aembed(list(texts), model=self.model)


@lru_cache(maxsize=32)
def _llm(gateway: Gateway, model: str) -> Any:
    # instructor's JSON mode: the schema travels in the system message, so any chat model
    # (and our fake and local providers) can answer it.
    return llm_factory(model, provider="litellm", client=gateway.litellm_acompletion(RAGAS_PROMPTS))


def ragas_llm(deps: Deps) -> Any:
    """The ragas LLM for the judge (one per gateway and model)."""
    return _llm(deps.gateway, deps.judge)


def _outcome(result: Any, **args: Any) -> Outcome:
    value = getattr(result, "value", result)
    value = None if value is None or (isinstance(value, float) and math.isnan(value)) else float(value)
    return Outcome(value, getattr(result, "reason", None), args)


@metric("faithfulness", inputs=("question", "response", "contexts"), llm=True)
async def faithfulness(s: Sample, deps: Deps) -> Outcome:
    """Share of the answer's claims that the retrieved contexts support."""
    m = rc.Faithfulness(llm=ragas_llm(deps))
    return _outcome(await m.ascore(user_input=s.question, response=s.response, retrieved_contexts=s.contexts))


@metric("answer_relevancy", inputs=("question", "response"), llm=True, embeddings=True)
async def answer_relevancy(s: Sample, deps: Deps) -> Outcome:
    """Mean similarity of questions regenerated from the answer to the real question."""
    strictness = int(deps.options.get("answer_relevancy_strictness", 3))
    m = rc.AnswerRelevancy(
        llm=ragas_llm(deps), embeddings=GatewayEmbeddings(deps.gateway, deps.embedder), strictness=strictness
    )
    return _outcome(await m.ascore(user_input=s.question, response=s.response), strictness=strictness)


@metric("context_precision", inputs=("question", "contexts"), llm=True)
async def context_precision(s: Sample, deps: Deps) -> Outcome:
    """Average precision of the useful contexts in the system's order (reference if present, else answer)."""
    if s.reference:
        m = rc.ContextPrecisionWithReference(llm=ragas_llm(deps))
        result = await m.ascore(user_input=s.question, reference=s.reference, retrieved_contexts=s.contexts)
        return _outcome(result, variant="with_reference")
    if not s.response:
        raise Skip("context precision needs a reference or a response")
    m = rc.ContextPrecisionWithoutReference(llm=ragas_llm(deps))
    result = await m.ascore(user_input=s.question, response=s.response, retrieved_contexts=s.contexts)
    return _outcome(result, variant="without_reference")


@metric("context_recall", inputs=("question", "contexts", "reference"), llm=True)
async def context_recall(s: Sample, deps: Deps) -> Outcome:
    """Share of the reference answer's claims the retrieved contexts support."""
    m = rc.ContextRecall(llm=ragas_llm(deps))
    return _outcome(await m.ascore(user_input=s.question, retrieved_contexts=s.contexts, reference=s.reference))


__all__ = ["GatewayEmbeddings", "ragas_llm"]
