"""Pairwise preference: which of two contexts answers the question better?

The sort stage asks every pair in both orders and keeps a preference only when the two answers
agree, so a judge that favours a position (first or second) produces ties, not an order.
"""

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
    version="2",
    input_model=PairwiseInput,
    output_model=PairwisePreference,
    instruction={
        "en": (
            "You compare search results. Two contexts are given for one question. Choose the one "
            "that helps more to answer the question: the one that answers it more directly, more "
            "completely and more specifically. Reply 1 for context_1 or 2 for context_2; you must "
            "choose one, even when they are close. Judge by content only: the order in which the "
            "contexts are shown and their length must not matter. Give a one-sentence reason."
        ),
        "zh": (
            "你是检索结果的评审。针对同一个问题给出两个文档，请选择更有助于回答问题的那一个："
            "回答得更直接、更完整、更具体的那个。选 context_1 输出 1，选 context_2 输出 2；"
            "即使两者相近也必须二选一。只依据内容判断，文档的先后顺序和长短都不应影响判断。"
            "用一句话说明理由。"
        ),
    },
    examples={
        "en": [
            (
                PairwiseInput(
                    question="When was the Eiffel Tower built?",
                    context_1="The Eiffel Tower is an iron tower in Paris, named after its maker.",
                    context_2="The Eiffel Tower was built from 1887 to 1889 for the World's Fair.",
                ),
                PairwisePreference(
                    better=2,
                    reason="Context 2 gives the construction years; context 1 only "
                    "describes the tower.",
                ),
            ),
        ],
        "zh": [
            (
                PairwiseInput(
                    question="埃菲尔铁塔是哪一年建成的？",
                    context_1="埃菲尔铁塔是位于巴黎的一座铁塔，以设计者古斯塔夫·埃菲尔命名。",
                    context_2="埃菲尔铁塔于1887年开工，1889年建成，是1889年世界博览会的入口。",
                ),
                PairwisePreference(better=2, reason="文档2给出了建成年份，文档1只介绍了铁塔本身。"),
            ),
        ],
    },
)

__all__ = ["PAIRWISE", "PairwiseInput", "PairwisePreference"]
