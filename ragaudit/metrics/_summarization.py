"""Summarization score: how much of the retrieved contexts' key information the answer carries.

ragas's metric: key phrases of the contexts, yes/no questions on them, then which questions the
answer (as a summary) can answer; blended with a conciseness term (the options
``length_penalty`` and ``coeff``).
"""

from __future__ import annotations

from functools import cache

from pydantic import Field

from ragaudit.metrics._base import Deps, JudgeError, Options, Outcome, Sample, Window, metric


@cache
def _summary_score_class() -> type:
    """The class scoring summary score (ragas's, extended), made on first use."""
    from ragas.metrics import collections as rc

    class _SummaryScore(rc.SummaryScore):
        """ragas's summary score; no questions or a wrong answer count is an error, not a crash."""

        async def _generate_answers(self, summary: str, questions: list[str]) -> list[str]:
            if not questions:
                raise JudgeError("the judge generated no questions from the contexts")
            answers = await super()._generate_answers(summary, questions)
            if len(answers) != len(questions):
                raise JudgeError(
                    f"the judge gave {len(answers)} answers to {len(questions)} questions"
                )
            return answers

    return _SummaryScore


def _window(s: Sample, deps: Deps) -> Window:
    from ragas.metrics.collections.summary_score.util import (
        GenerateQuestionsInput,
        GenerateQuestionsPrompt,
    )

    from ragaudit.metrics._ragas import prompt_for, ragas_window
    from ragaudit.prompts.summary import QUESTIONS

    # The question prompt holds the contexts and their key phrases; the phrases are not known
    # before the first call, so the window leaves them out.
    prompt = prompt_for(GenerateQuestionsPrompt(), QUESTIONS, s.language)
    return ragas_window(prompt, GenerateQuestionsInput(text="", keyphrases=[]), "joined")


class SummarizationOptions(Options):
    """Options of the summarization score."""

    length_penalty: bool = True
    """Blend a conciseness term into the score."""
    coeff: float = Field(default=0.5, ge=0.0, le=1.0)
    """Weight of that conciseness term (0: questions answered only, 1: length only)."""


@metric(
    "summarization_score",
    inputs=("response", "contexts"),
    llm=True,
    window=_window,
    options=SummarizationOptions,
    order=400,
)
async def summarization_score(s: Sample, deps: Deps, opts: SummarizationOptions) -> Outcome:
    """Share of questions on the contexts' key facts the answer answers, with a length penalty."""
    from ragaudit.metrics._ragas import localise, ragas_llm
    from ragaudit.prompts.summary import ANSWERS, KEYPHRASES, QUESTIONS

    length_penalty = bool(opts.length_penalty)
    coeff = float(opts.coeff)
    args = {"length_penalty": length_penalty, "coeff": coeff}
    m = _summary_score_class()(
        llm=ragas_llm(deps, s.language), length_penalty=length_penalty, coeff=coeff
    )
    localise(
        m,
        s.language,
        extract_keyphrases_prompt=KEYPHRASES,
        generate_questions_prompt=QUESTIONS,
        generate_answers_prompt=ANSWERS,
    )
    result = await m.ascore(reference_contexts=s.contexts, response=s.response or "")
    return Outcome(result.value, args=args)


__all__ = ["SummarizationOptions", "summarization_score"]
