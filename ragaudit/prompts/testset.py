"""Test-set generation: a question and reference answer from contexts; the answerability check."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from ragaudit.prompts._base import Prompt


class QuestionGenInput(BaseModel):
    """The kind of question to write and the contexts to write it from."""

    kind: Literal["single_document", "multi_document", "unanswerable"]
    contexts: list[str]


class GeneratedQuestion(BaseModel):
    """A question a user could ask and the reference answer the contexts give."""

    question: str = Field(min_length=1, max_length=500)
    reference: str = Field(default="", max_length=2000)


class AnswerabilityInput(BaseModel):
    """A question and the contexts it should be answered from."""

    question: str
    contexts: list[str]


class AnswerabilityVerdict(BaseModel):
    """Whether the contexts alone answer the question."""

    answerable: bool
    reason: str = Field(default="", max_length=400)


QUESTION_GEN = Prompt(
    name="testset_question",
    version="1",
    input_model=QuestionGenInput,
    output_model=GeneratedQuestion,
    instruction={
        "en": (
            "You write test questions for a retrieval system, in the language of the contexts. "
            "kind single_document: a question the one context answers fully; give that answer "
            "as the reference. kind multi_document: a question that needs every given context "
            "to answer; give the combined answer. kind unanswerable: a question on the same "
            "topic that the contexts do not answer; the reference says the contexts do not "
            "answer it. Ask as a real user would, without mentioning 'the context'."
        ),
        "zh": (
            "你为检索系统编写测试问题，使用与文档相同的语言。"
            "kind 为 single_document：写一个该文档能完整回答的问题，并给出答案作为参考答案。"
            "kind 为 multi_document：写一个必须综合所有给定文档才能回答的问题，并给出综合答案。"
            "kind 为 unanswerable：写一个同主题但文档无法回答的问题，参考答案说明文档无法回答。"
            "像真实用户一样提问，不要提及“文档”。"
        ),
    },
)

ANSWERABLE = Prompt(
    name="testset_answerable",
    version="1",
    input_model=AnswerabilityInput,
    output_model=AnswerabilityVerdict,
    instruction={
        "en": (
            "Decide whether the contexts alone contain what is needed to answer the question. "
            "Do not use outside knowledge. Give a one-sentence reason."
        ),
        "zh": "判断仅凭给定文档是否足以回答该问题，不要使用文档以外的知识。用一句话说明理由。",
    },
)

__all__ = [
    "ANSWERABLE",
    "QUESTION_GEN",
    "AnswerabilityInput",
    "AnswerabilityVerdict",
    "GeneratedQuestion",
    "QuestionGenInput",
]
