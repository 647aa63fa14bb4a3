"""The fake judge's default answers registered beside the algorithms that ask the prompts."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel

import ragaudit.ablation
import ragaudit.judging
import ragaudit.reference  # noqa: F401  (each registers its prompts' fake answers)
from ragaudit.cache._fake import OWN_JUDGES, FakeOptions, FakeRequest
from ragaudit.prompts import (
    ANSWER_GROUP,
    MERGE,
    PAIRWISE,
    GroupAnswerInput,
    MergeInput,
    PairwiseInput,
)
from ragaudit.prompts.rag_answer import RAG_ANSWER, RagAnswerInput


def answer(prompt: Any, inp: BaseModel, lang: str = "en") -> dict[str, Any]:
    """The registered default answer to ``prompt`` asked ``inp``, validated by its schema."""
    schema = prompt.output_model.model_json_schema()
    req = FakeRequest("fake/judge", prompt.messages(inp, lang), schema, {}, FakeOptions())
    out = OWN_JUDGES[req.title](req)
    prompt.output_model.model_validate(out)
    return out


def test_the_cache_holds_no_default_answer_of_its_own() -> None:
    # Every registered title is a schema some library module asks; the retired yes/no relevance
    # verdict is asked by none.
    assert "RelevanceVerdict" not in OWN_JUDGES
    assert {"PairwisePreference", "GroupAnswer", "MergedAnswer", "RagAnswer"} <= set(OWN_JUDGES)


@pytest.mark.parametrize(
    ("first", "second", "better"),
    [("harbour built 1890", "a cat", 1), ("a cat", "harbour built 1890", 2)],
)
def test_pairwise_prefers_the_context_holding_the_question(first, second, better) -> None:
    inp = PairwiseInput(question="When was the harbour built?", context_1=first, context_2=second)
    assert answer(PAIRWISE, inp)["better"] == better


def test_group_answer_uses_only_contexts_sharing_a_word() -> None:
    q = "When was the harbour built?"
    useful = answer(ANSWER_GROUP, GroupAnswerInput(question=q, contexts=["harbour: 1890", "cats"]))
    assert useful == {"answerable": True, "answer": "harbour: 1890"}
    none = answer(ANSWER_GROUP, GroupAnswerInput(question=q, contexts=["cats purr"]))
    assert none["answerable"] is False


def test_merge_joins_each_partial_answer_once() -> None:
    inp = MergeInput(question="q", partial_answers=["built 1890.", "rebuilt 1950.", "built 1890."])
    assert answer(MERGE, inp)["answer"] == "built 1890. rebuilt 1950."


def test_rag_answer_depends_on_what_was_retrieved() -> None:
    q = "When was the harbour built?"
    ctx = ["Cats purr. The harbour was built in 1890.", "Dogs bark."]
    assert answer(RAG_ANSWER, RagAnswerInput(question=q, contexts=ctx))["answer"] == (
        "The harbour was built in 1890."
    )
    assert answer(RAG_ANSWER, RagAnswerInput(question=q, contexts=["Dogs bark."])) == {
        "answer": "I do not know."
    }
