"""Answer correctness: a weighted mean of factual F1 and semantic similarity to the reference.

ragas's metric: the answer's and the reference's statements are sorted into TP / FP / FN by the
judge (F-beta of those is the factual part), and the cosine of their embeddings is the semantic
part; the weights are the option ``weights`` (0.75 / 0.25 by default).
"""

from __future__ import annotations

import asyncio
from functools import cache

import numpy as np
from pydantic import Field, field_validator

from ragaudit.metrics._answer_relevancy import check_embedder
from ragaudit.metrics._base import Deps, Options, Outcome, Sample, Skip, metric


@cache
def _answer_correctness_class() -> type:
    """The class scoring answer correctness (ragas's, extended), made on first use."""
    from ragas.metrics import collections as rc
    from ragas.metrics.result import MetricResult

    class _AnswerCorrectness(rc.AnswerCorrectness):
        """ragas's answer correctness; texts without statements are skipped, not assumed correct.

        ragas scores the factual part 1.0 when the judge finds no statements; here that row is
        skipped with the reason. ``parts`` keeps the two components and the TP/FP/FN counts.
        """

        parts: dict[str, object]

        # ragas's ascore takes **kwargs; this one names the inputs it needs.
        async def ascore(self, user_input: str, response: str, reference: str) -> MetricResult:  # type: ignore[override]
            answer, truth = await asyncio.gather(
                self._generate_statements(user_input, response),
                self._generate_statements(user_input, reference),
            )
            if not answer:
                raise Skip("the judge found no statements in the response")
            if not truth:
                raise Skip("the judge found no statements in the reference")
            classes = await self._classify_statements(user_input, answer, truth)
            factual = self._compute_f1_score(classes)
            similarity = (
                await self._calculate_similarity(response, reference) if self.weights[1] else None
            )
            value = float(np.average([factual, similarity or 0.0], weights=self.weights))
            self.parts = {
                "factuality": factual,
                "similarity": similarity,
                "weights": list(self.weights),
                "tp": len(classes.TP),
                "fp": len(classes.FP),
                "fn": len(classes.FN),
            }
            return MetricResult(value=value)

    return _AnswerCorrectness


class AnswerCorrectnessOptions(Options):
    """Options of answer correctness."""

    weights: tuple[float, float] = (0.75, 0.25)
    """Weights of factual F1 and semantic similarity."""
    beta: float = Field(default=1.0, gt=0)
    """Beta of the factual F-score (> 1 favours recall)."""

    @field_validator("weights")
    @classmethod
    def _weights(cls, value: tuple[float, float]) -> tuple[float, float]:
        if min(value) < 0 or not any(value):
            raise ValueError("weights must be non-negative and not both 0")
        return value


@metric(
    "answer_correctness",
    inputs=("question", "response", "reference"),
    llm=True,
    embeddings=True,
    options=AnswerCorrectnessOptions,
    order=170,
    conditioned=True,
)
async def answer_correctness(s: Sample, deps: Deps, opts: AnswerCorrectnessOptions) -> Outcome:
    """Weighted mean of factual F1 against the reference and semantic similarity (0.75/0.25)."""
    from ragaudit.metrics._ragas import embeddings, localise, ragas_llm
    from ragaudit.prompts.correctness import CORRECTNESS
    from ragaudit.prompts.statements import STATEMENTS_CORRECTNESS

    weights = [float(w) for w in opts.weights]
    beta = float(opts.beta)
    if weights[1]:
        check_embedder(s, deps)
    m = _answer_correctness_class()(
        llm=ragas_llm(deps, s.language),
        embeddings=embeddings(deps) if weights[1] else None,
        weights=weights,
        beta=beta,
    )
    localise(
        m,
        s.language,
        statement_generator_prompt=STATEMENTS_CORRECTNESS,
        correctness_classifier_prompt=CORRECTNESS,
    )
    result = await m.ascore(
        user_input=s.question, response=s.response or "", reference=s.reference or ""
    )
    return Outcome(result.value, m.parts, {"weights": weights, "beta": beta})


__all__ = ["AnswerCorrectnessOptions", "answer_correctness"]
