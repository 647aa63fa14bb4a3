"""Answer relevancy: how well questions regenerated from the answer match the real question."""

from __future__ import annotations

from ragas.metrics import collections as rc

from ragaudit.metrics._base import Deps, JudgeError, Outcome, Sample, Skip, metric
from ragaudit.metrics._judge import steps
from ragaudit.metrics._ragas import embeddings, localise, ragas_llm
from ragaudit.prompts.answer_relevancy import ANSWER_RELEVANCE

ENGLISH_ONLY_EMBEDDER = (
    "the embedder is English-only (the offline all-MiniLM-L6-v2): configure a multilingual "
    "embedding model (models.embedder) to score Chinese text"
)


def check_embedder(s: Sample, deps: Deps) -> None:
    """Skip a Chinese row when the embedder cannot read Chinese (its score would mean nothing)."""
    if deps.english_only_embedder and s.language == "zh":
        raise Skip(ENGLISH_ONLY_EMBEDDER)


@metric("answer_relevancy", inputs=("question", "response"), llm=True, embeddings=True)
async def answer_relevancy(s: Sample, deps: Deps) -> Outcome:
    """Mean similarity of questions regenerated from the answer to the real question."""
    check_embedder(s, deps)
    n = int(deps.option("answer_relevancy_strictness", 3))
    # n samples of one prompt must be able to differ: sample at a temperature, as ragas's
    # original implementation did; the gateway keeps each sample apart in the memo.
    temperature = float(deps.option("sampling_temperature", 0.3)) if n > 1 else deps.temperature
    m = rc.AnswerRelevancy(
        llm=ragas_llm(deps, s.language, temperature), embeddings=embeddings(deps), strictness=n
    )
    localise(m, s.language, prompt=ANSWER_RELEVANCE)
    result = await m.ascore(user_input=s.question, response=s.response or "")
    asked = [st for st in steps() if st["step"] == "AnswerRelevanceOutput" and "output" in st]
    if not any(st["output"].get("question") for st in asked):
        # ragas scores this 0; it is the judge giving nothing, not an irrelevant answer.
        raise JudgeError("the judge generated no question from the answer")
    return Outcome(result.value, args={"strictness": n, "temperature": temperature})


__all__ = ["ENGLISH_ONLY_EMBEDDER", "answer_relevancy", "check_embedder"]
