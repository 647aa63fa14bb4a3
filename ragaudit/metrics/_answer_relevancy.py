"""Answer relevancy: how well questions regenerated from the answer match the real question."""

from __future__ import annotations

from collections import deque
from functools import cache
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field

from ragaudit.config import OFFLINE_EMBEDDER, SAMPLING_TEMPERATURE
from ragaudit.metrics._base import (
    CostSheet,
    Deps,
    JudgeError,
    Options,
    Outcome,
    Sample,
    Skip,
    metric,
)
from ragaudit.metrics._judge import settled, steps

if TYPE_CHECKING:
    from ragaudit.cache import Judged
    from ragaudit.metrics._ragas import TracedLLM

ENGLISH_ONLY_EMBEDDER = (
    "the embedder is English-only (all-MiniLM-L6-v2): configure a multilingual embedding "
    f"model (models.embedder; the offline default, {OFFLINE_EMBEDDER}, is one) to score "
    "Chinese text"
)


def check_embedder(s: Sample, deps: Deps) -> None:
    """Skip a Chinese row when the embedder cannot read Chinese (its score would mean nothing)."""
    if deps.english_only_embedder and s.language == "zh":
        raise Skip(ENGLISH_ONLY_EMBEDDER)


@cache
def _samples_class() -> type:
    """The n-samples judge, its class made on first use (it extends ragas's LLM)."""
    from ragas.llms.base import InstructorBaseRagasLLM

    class _Samples(InstructorBaseRagasLLM):
        """The judge of one row's n samples: asked together, handed to ragas one per call.

        ragas asks its prompt n times, one call after another; the first call asks the gateway
        for all n samples at once (one request with n choices where the provider allows it) and
        each call takes the next. The score is the mean similarity over the questions the samples
        generated, and ragas already leaves out a sample that generated none (an empty question); a
        sample whose answer could not be obtained (invalid after the repairs, or the provider
        failed after its retries) is left out the same way, and counted, so the row says on how
        many samples it rests.
        """

        def __init__(self, traced: TracedLLM, n: int) -> None:
            self.traced, self.n = traced, n
            self.pending: deque[tuple[int, Judged]] = deque()
            self.lost: list[str] = []

        def generate(self, prompt: str, response_model: type[BaseModel]) -> Any:  # noqa: D102
            raise NotImplementedError("ragaudit scores asynchronously; use agenerate")

        async def agenerate(self, prompt: str, response_model: type[BaseModel]) -> Any:  # noqa: D102
            if not self.pending:
                answers = await self.traced.asamples(prompt, response_model, self.n)
                self.pending.extend(enumerate(answers))
            index, judged = self.pending.popleft()
            try:
                return settled(response_model.__name__, judged, sample_index=index)
            except JudgeError as exc:  # now in the row's trace, with the judge's reply
                self.lost.append(str(exc))
                # No question: ragas's own way of leaving a sample out of the mean (and out of
                # the all-noncommittal check). Never recorded as the judge's answer.
                return response_model.model_construct(question="", noncommittal=0)

    return _Samples


class AnswerRelevancyOptions(Options):
    """Options of answer relevancy."""

    strictness: int = Field(default=3, ge=1, le=10)
    """Questions generated per answer (n samples of one prompt)."""


def _cost(s: Sample, deps: Deps, opts: AnswerRelevancyOptions, sheet: CostSheet) -> None:
    from ragas.metrics.collections.answer_relevancy.util import (
        AnswerRelevanceInput,
        AnswerRelevancePrompt,
    )

    from ragaudit.cache.providers import samples_at_once
    from ragaudit.metrics._ragas import prompt_for, ragas_call_tokens
    from ragaudit.prompts.answer_relevancy import ANSWER_RELEVANCE

    check_embedder(s, deps)
    n = opts.strictness
    prompt = prompt_for(AnswerRelevancePrompt(), ANSWER_RELEVANCE, s.language)
    tokens = ragas_call_tokens(prompt, AnswerRelevanceInput(response=s.response or ""), sheet)
    # The n samples are one request with n choices where the judge's provider returns them.
    calls = 1 if n > 1 and samples_at_once(deps.judge) else n
    sheet.tally(
        "questions",
        "completion",
        calls,
        calls * tokens,
        n * sheet.assume.question_tokens,
        "question_tokens",
    )
    # The real question, then the generated ones in one request, each about as long as the
    # judge's logged reply for one sample (a request answers ``n / calls`` samples) less the
    # reply's JSON frame.
    seen = sheet.observed_reply("question_tokens")
    question = float(sheet.assume.question_tokens)
    if seen is not None:
        frame = sheet.text_tokens(deps.judge, '{"question": "", "noncommittal": 0}')
        question = max(1.0, seen * calls / n - frame)
    embedded = sheet.text_tokens(deps.embedder, s.question) + n * question
    sheet.tally("embeddings", "embedding", 2, embedded, 0)


@metric(
    "answer_relevancy",
    inputs=("question", "response"),
    llm=True,
    embeddings=True,
    options=AnswerRelevancyOptions,
    cost=_cost,
    order=20,
    conditioned=True,
    threshold=0.8,
)
async def answer_relevancy(s: Sample, deps: Deps, opts: AnswerRelevancyOptions) -> Outcome:
    """Mean similarity of questions regenerated from the answer to the real question."""
    from ragas.metrics import collections as rc

    from ragaudit.metrics._ragas import embeddings, localise, ragas_llm
    from ragaudit.prompts.answer_relevancy import ANSWER_RELEVANCE

    check_embedder(s, deps)
    n = opts.strictness
    # n samples of one prompt must be able to differ: sample at a temperature, as ragas's
    # original implementation did; the gateway keeps each sample apart in the memo.
    temperature = float(deps.option("sampling_temperature", SAMPLING_TEMPERATURE))
    temperature = temperature if n > 1 else deps.temperature
    llm = _samples_class()(ragas_llm(deps, s.language, temperature), n)
    m = rc.AnswerRelevancy(llm=llm, embeddings=embeddings(deps), strictness=n)
    localise(m, s.language, prompt=ANSWER_RELEVANCE)
    result = await m.ascore(user_input=s.question, response=s.response or "")
    if len(llm.lost) == n:
        raise JudgeError(f"no sample of {n} was answered: {llm.lost[-1]}")
    asked = [st for st in steps() if st["step"] == "AnswerRelevanceOutput" and "output" in st]
    if not any(st["output"].get("question") for st in asked):
        # ragas scores this 0; it is the judge giving nothing, not an irrelevant answer.
        raise JudgeError("the judge generated no question from the answer")
    return Outcome(
        result.value,
        args={"strictness": n, "temperature": temperature, "samples_answered": n - len(llm.lost)},
    )


__all__ = ["ENGLISH_ONLY_EMBEDDER", "AnswerRelevancyOptions", "answer_relevancy", "check_embedder"]
