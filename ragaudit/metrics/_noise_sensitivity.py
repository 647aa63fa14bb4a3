"""Noise sensitivity: how often the answer states something wrong that a context supports.

ragas's metric (from RAGChecker): the statements of the reference and of the answer are checked
against every retrieved context, and the answer's statements against the reference. A context
is *relevant* when it supports a reference statement. ``noise_sensitivity`` is the share of the
answer's statements that are incorrect yet supported by a relevant context;
``noise_sensitivity_irrelevant`` the share supported only by irrelevant ones. Lower is better.
The 2k + 1 verdict prompts are asked concurrently.
"""

from __future__ import annotations

import asyncio
from functools import cache
from typing import Literal

import numpy as np

from ragaudit.metrics._base import Deps, JudgeError, Outcome, Sample, Skip, Window, metric


@cache
def _noise_sensitivity_class() -> type:
    """The class scoring noise sensitivity (ragas's, extended), made on first use."""
    from ragas.metrics import collections as rc
    from ragas.metrics.result import MetricResult

    class _NoiseSensitivity(rc.NoiseSensitivity):
        """ragas's noise sensitivity with its per-context verdicts asked at once, and checked."""

        # ragas's ascore takes **kwargs; this one names the inputs it needs.
        async def ascore(  # type: ignore[override]
            self, user_input: str, response: str, reference: str, retrieved_contexts: list[str]
        ) -> MetricResult:
            gt, ans = await asyncio.gather(
                self._decompose_answer_into_statements(reference, user_input),
                self._decompose_answer_into_statements(response, user_input),
            )
            if not ans:
                raise Skip("the judge found no statements in the response")
            if not gt:
                raise Skip("the judge found no statements in the reference")
            k = len(retrieved_contexts)
            verdicts = await asyncio.gather(
                *(self._checked(gt, c) for c in retrieved_contexts),
                *(self._checked(ans, c) for c in retrieved_contexts),
                self._checked(ans, reference),
            )
            answers = {
                "retrieved2ground_truth": np.array(verdicts[:k]).T.astype(bool),
                "retrieved2answer": np.array(verdicts[k : 2 * k]).T.astype(bool),
                "ground_truth2answer": np.array([verdicts[-1]]).astype(bool),
            }
            return MetricResult(value=float(self._compute_score(answers)))

        async def _checked(self, statements: list[str], context: str) -> list[int]:
            verdicts = await self._evaluate_statement_faithfulness(statements, context)
            if len(verdicts) != len(statements):
                raise JudgeError(
                    f"the judge gave {len(verdicts)} verdicts for {len(statements)} statements"
                )
            return verdicts

    return _NoiseSensitivity


def _window(s: Sample, deps: Deps) -> Window:
    from ragas.metrics.collections.noise_sensitivity.util import (
        StatementFaithfulnessInput,
        StatementFaithfulnessPrompt,
    )

    from ragaudit.metrics._ragas import prompt_for, ragas_window
    from ragaudit.prompts.statements import NLI_NOISE

    longer = max(s.response or "", s.reference or "", key=len)
    prompt = prompt_for(StatementFaithfulnessPrompt(), NLI_NOISE, s.language)
    return ragas_window(prompt, StatementFaithfulnessInput(context="", statements=[longer]), "each")


async def _score(s: Sample, deps: Deps, mode: Literal["relevant", "irrelevant"]) -> Outcome:
    from ragaudit.metrics._ragas import localise, ragas_llm
    from ragaudit.prompts.statements import NLI_NOISE, STATEMENTS_NOISE

    m = localise(
        _noise_sensitivity_class()(llm=ragas_llm(deps, s.language), mode=mode),
        s.language,
        statement_prompt=STATEMENTS_NOISE,
        faithfulness_prompt=NLI_NOISE,
    )
    result = await m.ascore(
        user_input=s.question,
        response=s.response or "",
        reference=s.reference or "",
        retrieved_contexts=s.contexts,
    )
    return Outcome(result.value, args={"mode": mode})


@metric(
    "noise_sensitivity",
    inputs=("question", "response", "reference", "contexts"),
    llm=True,
    window=_window,
    order=110,
    higher_is_better=False,
)
async def noise_sensitivity(s: Sample, deps: Deps) -> Outcome:
    """Share of the answer's statements wrong yet backed by a relevant context (lower is better)."""
    return await _score(s, deps, "relevant")


@metric(
    "noise_sensitivity_irrelevant",
    inputs=("question", "response", "reference", "contexts"),
    llm=True,
    window=_window,
    order=120,
    higher_is_better=False,
)
async def noise_sensitivity_irrelevant(s: Sample, deps: Deps) -> Outcome:
    """Share of the answer's statements wrong, backed only by irrelevant contexts (lower wins)."""
    return await _score(s, deps, "irrelevant")


__all__ = ["noise_sensitivity", "noise_sensitivity_irrelevant"]
