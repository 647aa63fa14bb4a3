"""Nugget assignment: does the answer contain each nugget (support / partial / not supported)?"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel

from ragaudit.prompts._base import Prompt

Support = Literal["support", "partial_support", "not_support"]


class AssignInput(BaseModel):
    """A question, the answer under test and up to a batch of nuggets, numbered from 1."""

    question: str
    answer: str
    nuggets: list[str]


class Assignment(BaseModel):
    """The verdict on one nugget (by its 1-based position) with the reason."""

    nugget: int
    verdict: Support
    reason: str


class Assignments(BaseModel):
    """One verdict per nugget of the input."""

    assignments: list[Assignment]


ASSIGN = Prompt(
    name="nugget_assign",
    version="1",
    input_model=AssignInput,
    output_model=Assignments,
    instruction={
        "en": (
            "For each nugget, decide whether the answer contains it: 'support' when the answer "
            "states the fact fully, 'partial_support' when it states only part of it or states "
            "it vaguely, 'not_support' when it does not state it or contradicts it. Judge only "
            "from the answer's text, not from what you know. Give one verdict per nugget with "
            "its position (1 for the first nugget) and a short reason."
        ),
        "zh": (
            "对每个要点判断答案是否包含它：答案完整陈述了这个事实为 'support'，"
            "只陈述了一部分或说得含糊为 'partial_support'，没有陈述或与之矛盾为 'not_support'。"
            "只根据答案的文字判断，不要依据你自己的知识。"
            "每个要点给出一个判断，写明它的位置（第一个要点为 1）和简短理由。"
        ),
    },
)

__all__ = ["ASSIGN", "AssignInput", "Assignment", "Assignments", "Support"]
