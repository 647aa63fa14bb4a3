"""Reference-answer writing: answer from a group of contexts, then merge partial answers.

Both prompts serve both modes of the ground_truth stage: *fast* sends many contexts to
:data:`ANSWER_GROUP` at once, *slow* sends one; the partial answers then go through
:data:`MERGE` until one remains.
"""

from __future__ import annotations

from pydantic import BaseModel

from ragaudit.prompts._base import Prompt


class GroupAnswerInput(BaseModel):
    """A question and the contexts one prompt can hold (one in slow mode)."""

    question: str
    contexts: list[str]


class GroupAnswer(BaseModel):
    """An answer from the contexts, or ``answerable=false`` with the word for "unknown"."""

    answerable: bool
    answer: str


class MergeInput(BaseModel):
    """A question and partial answers written from different contexts."""

    question: str
    partial_answers: list[str]


class MergedAnswer(BaseModel):
    """One answer that keeps every fact of the partial answers."""

    answer: str


UNKNOWN: dict[str, str] = {"en": "unknown", "zh": "不知道"}
"""What the judge writes, per language, when the contexts cannot answer ("不知道" / "unknown")."""


ANSWER_GROUP = Prompt(
    name="reference_group",
    version="2",
    input_model=GroupAnswerInput,
    output_model=GroupAnswer,
    instruction={
        "en": (
            "Decide whether the given contexts contain the answer to the question. If they do, "
            "answer using only the contexts, fully and in detail, keeping specifics such as "
            "examples, numbers and names, and set answerable to true. If they do not, set "
            f'answerable to false and answer exactly "{UNKNOWN["en"]}". Output nothing unrelated '
            "to the question."
        ),
        "zh": (
            "请判断给定的文档中是否包含问题的答案。如果包含，请只根据文档全面详细地回答问题，"
            "并保留资料中的细节，包括例子、数据、名称等，同时将 answerable 设为 true；"
            f"如果不包含，请将 answerable 设为 false，answer 只写“{UNKNOWN['zh']}”。"
            "请不要输出与回答问题无关的任何内容。"
        ),
    },
)

MERGE = Prompt(
    name="reference_merge",
    version="2",
    input_model=MergeInput,
    output_model=MergedAnswer,
    instruction={
        "en": (
            "Merge the partial answers into one complete answer to the question. Keep every "
            "distinct fact, number and name from every partial answer; remove only repetition. "
            "Where partial answers disagree, keep both statements. Do not add anything the "
            "partial answers do not say."
        ),
        "zh": (
            "请把这些部分答案合并成一个完整的答案。保留每个部分答案中所有不同的事实、数字和名称，只去掉重复内容；"
            "部分答案之间有矛盾时，两种说法都保留；不要添加部分答案中没有的内容。"
        ),
    },
)

__all__ = [
    "ANSWER_GROUP",
    "MERGE",
    "UNKNOWN",
    "GroupAnswer",
    "GroupAnswerInput",
    "MergeInput",
    "MergedAnswer",
]
