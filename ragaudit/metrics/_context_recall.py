"""Context recall (judged): the share of the reference answer's statements the contexts support."""

from __future__ import annotations

from functools import cache
from typing import cast

from ragaudit.lang import sentences
from ragaudit.metrics._base import CostSheet, Deps, JudgeError, Outcome, Sample, Window, metric


@cache
def _context_recall_class() -> type:
    """The class scoring context recall (ragas's, extended), made on first use."""
    from ragas.metrics import collections as rc
    from ragas.metrics.collections.context_recall.util import (
        ContextRecallInput,
        ContextRecallOutput,
    )
    from ragas.metrics.result import MetricResult

    class _ContextRecall(rc.ContextRecall):
        """ragas's context recall; no classifications, or labels other than 0/1, is an error."""

        # ragas's ascore takes **kwargs; this one names the inputs it needs.
        async def ascore(  # type: ignore[override]
            self, user_input: str, retrieved_contexts: list[str], reference: str
        ) -> MetricResult:
            data = ContextRecallInput(
                question=user_input, context="\n".join(retrieved_contexts), answer=reference
            )
            # ragas's InstructorTypeVar is not a valid TypeVar to mypy; the prompt (ragas's or its
            # translation) replies with ContextRecallOutput.
            result = cast(
                ContextRecallOutput,
                await self.llm.agenerate(self.prompt.to_string(data), self.prompt.output_model),
            )
            labels = [c.attributed for c in result.classifications]
            if not labels:
                raise JudgeError("the judge classified no statement of the reference")
            if any(v not in (0, 1) for v in labels):
                raise JudgeError(f"the judge gave labels {labels}; expected 0 or 1")
            return MetricResult(value=sum(labels) / len(labels))

    return _ContextRecall


def _window(s: Sample, deps: Deps) -> Window:
    from ragas.metrics.collections.context_recall.util import (
        ContextRecallInput,
        ContextRecallPrompt,
    )

    from ragaudit.metrics._ragas import prompt_for, ragas_window
    from ragaudit.prompts.context_recall import CONTEXT_RECALL

    prompt = prompt_for(ContextRecallPrompt(), CONTEXT_RECALL, s.language)
    return ragas_window(
        prompt,
        ContextRecallInput(question=s.question, context="", answer=s.reference or ""),
        "joined",
    )


def _cost(s: Sample, deps: Deps, sheet: CostSheet) -> None:
    from ragas.metrics.collections.context_recall.util import (
        ContextRecallInput,
        ContextRecallPrompt,
    )

    from ragaudit.metrics._ragas import prompt_for, ragas_call_tokens
    from ragaudit.prompts.context_recall import CONTEXT_RECALL

    # One call classifies every statement of the reference (about one per sentence).
    prompt = prompt_for(ContextRecallPrompt(), CONTEXT_RECALL, s.language)
    data = ContextRecallInput(
        question=s.question, context="\n".join(s.contexts), answer=s.reference or ""
    )
    n = max(1, len(sentences(s.reference or "")))
    sheet.tally(
        "classifications",
        "completion",
        1,
        ragas_call_tokens(prompt, data, sheet),
        2 * n * sheet.assume.statement_tokens,
        "statement_tokens",
    )


@metric(
    "context_recall",
    inputs=("question", "contexts", "reference"),
    llm=True,
    window=_window,
    cost=_cost,
    order=50,
    threshold=0.7,
)
async def context_recall(s: Sample, deps: Deps) -> Outcome:
    """Share of the reference answer's statements the retrieved contexts support (judged)."""
    from ragaudit.metrics._ragas import localise, ragas_llm
    from ragaudit.prompts.context_recall import CONTEXT_RECALL

    m = localise(
        _context_recall_class()(llm=ragas_llm(deps, s.language)), s.language, prompt=CONTEXT_RECALL
    )
    result = await m.ascore(
        user_input=s.question, retrieved_contexts=s.contexts, reference=s.reference or ""
    )
    return Outcome(result.value)


__all__ = ["context_recall"]
