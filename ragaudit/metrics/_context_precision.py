"""Context precision: average precision of the useful contexts, in the system's order.

Usefulness is judged against the reference answer (``context_precision``) or, without one,
against the system's own answer (``context_precision_without_reference``, ragas's context
utilization). The k verdicts are asked concurrently; the score is ragas's average precision.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, cast

from ragaudit.metrics._base import CostSheet, Deps, JudgeError, Outcome, Sample, Window, metric

if TYPE_CHECKING:
    from ragas.metrics import collections as rc


def average_precision(verdicts: list[int]) -> float:
    """Mean of precision@i over the ranks i of the useful contexts (0 when none is useful).

    ragas's formula without its 1e-10 in the denominator, so that all-useful scores exactly 1.
    """
    useful = sum(verdicts)
    if not useful:
        return 0.0
    return sum(sum(verdicts[: i + 1]) / (i + 1) * v for i, v in enumerate(verdicts)) / useful


async def _verdicts(
    m: rc.ContextPrecisionWithReference, question: str, answer: str, contexts: list[str]
) -> list[int]:
    from ragas.metrics.collections.context_precision.util import (
        ContextPrecisionInput,
        ContextPrecisionOutput,
    )

    async def one(context: str) -> int:
        data = ContextPrecisionInput(question=question, context=context, answer=answer)
        # ragas's InstructorTypeVar is no TypeVar to mypy; the reply is the model asked for.
        out = cast(
            ContextPrecisionOutput,
            await m.llm.agenerate(m.prompt.to_string(data), ContextPrecisionOutput),
        )
        if out.verdict not in (0, 1):
            raise JudgeError(f"the judge gave verdict {out.verdict!r}; expected 0 or 1")
        return out.verdict

    return list(await asyncio.gather(*(one(c) for c in contexts)))


async def _score(s: Sample, deps: Deps, answer: str) -> Outcome:
    from ragas.metrics import collections as rc

    from ragaudit.metrics._ragas import localise, ragas_llm
    from ragaudit.prompts.context_precision import CONTEXT_PRECISION

    m = localise(
        rc.ContextPrecisionWithReference(llm=ragas_llm(deps, s.language)),
        s.language,
        prompt=CONTEXT_PRECISION,
    )
    verdicts = await _verdicts(m, s.question, answer, s.contexts)
    value = average_precision(verdicts)
    return Outcome(value, {"verdicts": verdicts, "context_ids": s.context_ids})


def _window_for(answer_field: str):
    def window(s: Sample, deps: Deps) -> Window:
        from ragas.metrics.collections.context_precision.util import (
            ContextPrecisionInput,
            ContextPrecisionPrompt,
        )

        from ragaudit.metrics._ragas import prompt_for, ragas_window
        from ragaudit.prompts.context_precision import CONTEXT_PRECISION

        prompt = prompt_for(ContextPrecisionPrompt(), CONTEXT_PRECISION, s.language)
        data = ContextPrecisionInput(
            question=s.question, context="", answer=getattr(s, answer_field) or ""
        )
        return ragas_window(prompt, data, "each")

    return window


def _cost_for(answer_field: str):
    def cost(s: Sample, deps: Deps, sheet: CostSheet) -> None:
        from ragas.metrics.collections.context_precision.util import (
            ContextPrecisionInput,
            ContextPrecisionPrompt,
        )

        from ragaudit.metrics._ragas import prompt_for, ragas_call_tokens
        from ragaudit.prompts.context_precision import CONTEXT_PRECISION

        # One verdict per context.
        prompt = prompt_for(ContextPrecisionPrompt(), CONTEXT_PRECISION, s.language)
        answer = getattr(s, answer_field) or ""
        for context in s.contexts:
            data = ContextPrecisionInput(question=s.question, context=context, answer=answer)
            tokens = ragas_call_tokens(prompt, data, sheet)
            verdict = sheet.assume.verdict_tokens
            sheet.tally("verdicts", "completion", 1, tokens, verdict, "verdict_tokens")

    return cost


@metric(
    "context_precision",
    inputs=("question", "contexts", "reference"),
    llm=True,
    window=_window_for("reference"),
    cost=_cost_for("reference"),
    order=30,
    threshold=0.8,
)
async def context_precision(s: Sample, deps: Deps) -> Outcome:
    """Average precision of the contexts useful for the reference answer, in the system's order."""
    return await _score(s, deps, s.reference or "")


@metric(
    "context_precision_without_reference",
    inputs=("question", "contexts", "response"),
    llm=True,
    window=_window_for("response"),
    cost=_cost_for("response"),
    order=40,
)
async def context_precision_without_reference(s: Sample, deps: Deps) -> Outcome:
    """Average precision of the contexts useful for the system's own answer (no reference)."""
    return await _score(s, deps, s.response or "")


__all__ = ["average_precision", "context_precision", "context_precision_without_reference"]
