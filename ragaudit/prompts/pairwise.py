"""Pairwise preference: which of two contexts answers the question better?"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from ragaudit.prompts._base import Prompt


class PairwiseInput(BaseModel):
    """A question and two contexts, in the order shown to the judge."""

    question: str
    context_1: str
    context_2: str


class PairwisePreference(BaseModel):
    """The context that answers better (1 or 2) and why."""

    better: Literal[1, 2]
    reason: str = Field(default="", max_length=400)


PAIRWISE = Prompt(
    name="pairwise",
    version="1",
    input_model=PairwiseInput,
    output_model=PairwisePreference,
    instruction={
        "en": (
            "Two contexts are given. Choose the one that is more useful for answering the question: "
            "1 for context_1, 2 for context_2. You must choose one. Judge by content, not by position "
            "or length. Give a one-sentence reason."
        ),
        "zh": (
            "给定两个文档，请选择更有助于回答问题的那一个：选 context_1 输出 1，选 context_2 输出 2。"
            "必须二选一。请依据内容判断，不要受顺序或长度影响，并用一句话说明理由。"
        ),
    },
)

__all__ = ["PAIRWISE", "PairwiseInput", "PairwisePreference"]
