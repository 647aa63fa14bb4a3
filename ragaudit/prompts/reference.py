"""Reference-answer writing: answer from a group of contexts, then merge partial answers."""

from __future__ import annotations

from pydantic import BaseModel

from ragaudit.prompts._base import Prompt


class GroupAnswerInput(BaseModel):
    """A question and the contexts one prompt can hold."""

    question: str
    contexts: list[str]


class GroupAnswer(BaseModel):
    """An answer from the contexts, or ``answerable=false`` when they hold nothing useful."""

    answerable: bool
    answer: str


class MergeInput(BaseModel):
    """A question and partial answers written from different contexts."""

    question: str
    partial_answers: list[str]


class MergedAnswer(BaseModel):
    """One answer that keeps every fact of the partial answers."""

    answer: str


ANSWER_GROUP = Prompt(
    name="reference_group",
    version="1",
    input_model=GroupAnswerInput,
    output_model=GroupAnswer,
    instruction={
        "en": (
            "Answer the question using only the given contexts. If they can answer it, answer fully "
            "and in detail, keeping specifics such as examples, numbers and names. If they cannot, "
            "set answerable to false and leave the answer empty. Output nothing unrelated to the question."
        ),
        "zh": (
            "请只根据给定的文档回答问题。如果文档中的内容可以回答问题，请全面详细地回答，并保留资料中的细节，"
            "包括例子、数据、名称等；如果不可以回答，请将 answerable 设为 false，answer 留空。"
            "请不要输出与回答问题无关的任何内容。"
        ),
    },
)

MERGE = Prompt(
    name="reference_merge",
    version="1",
    input_model=MergeInput,
    output_model=MergedAnswer,
    instruction={
        "en": (
            "Merge the partial answers into one complete answer to the question. Keep every distinct "
            "fact, number and name from every partial answer; remove only repetition. Do not add "
            "anything the partial answers do not say."
        ),
        "zh": (
            "请把这些部分答案合并成一个完整的答案。保留每个部分答案中所有不同的事实、数字和名称，只去掉重复内容；"
            "不要添加部分答案中没有的内容。"
        ),
    },
)

__all__ = ["ANSWER_GROUP", "MERGE", "GroupAnswer", "GroupAnswerInput", "MergeInput", "MergedAnswer"]
