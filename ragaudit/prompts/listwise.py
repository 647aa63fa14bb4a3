"""Listwise ranking: a window of contexts put in order, best first.

The head ordering's ``window`` method slides such a window from the bottom of the candidates
to the top, so the best ones rise to the head in one pass. The contexts are shown in an order
shuffled per call from their ids, so a judge's preference for a position becomes noise.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from ragaudit.prompts._base import Prompt
from ragaudit.prompts.setwise import Passage


class ListwiseInput(BaseModel):
    """A question and the contexts to put in order."""

    question: str
    passages: list[Passage]


class ListwiseRanking(BaseModel):
    """Every passage id once, best first, and why the first is best."""

    ranking: list[int]
    reason: str = Field(default="", max_length=400)


LISTWISE = Prompt(
    name="listwise",
    version="1",
    input_model=ListwiseInput,
    output_model=ListwiseRanking,
    instruction={
        "en": (
            "You rank search results. Several passages are given for one question, each with an "
            "id. Put every passage in order of how much it helps to answer the question, best "
            "first: more direct, complete and specific answers go higher. List each id exactly "
            "once. Judge by content only: the order in which the passages are shown and their "
            "length must not matter. Give a one-sentence reason for the first."
        ),
        "zh": (
            "你是检索结果的评审。针对同一个问题给出若干段落，每段有一个编号。请按各段对回答问题的帮助"
            "从大到小排序：回答得更直接、更完整、更具体的排在前面。每个编号恰好列出一次。只依据内容"
            "判断，段落的先后顺序和长短都不应影响判断。用一句话说明排第一的理由。"
        ),
    },
    examples={
        "en": [
            (
                ListwiseInput(
                    question="When was the Eiffel Tower built?",
                    passages=[
                        Passage(id=1, text="The Eiffel Tower is 330 metres tall."),
                        Passage(id=2, text="The Eiffel Tower was built from 1887 to 1889."),
                        Passage(id=3, text="Its construction began in 1887."),
                    ],
                ),
                ListwiseRanking(ranking=[2, 3, 1], reason="Passage 2 gives both years."),
            ),
        ],
        "zh": [
            (
                ListwiseInput(
                    question="埃菲尔铁塔是哪一年建成的？",
                    passages=[
                        Passage(id=1, text="埃菲尔铁塔高330米。"),
                        Passage(id=2, text="埃菲尔铁塔于1887年开工，1889年建成。"),
                        Passage(id=3, text="埃菲尔铁塔于1887年开工。"),
                    ],
                ),
                ListwiseRanking(ranking=[2, 3, 1], reason="段落2同时给出了开工和建成年份。"),
            ),
        ],
    },
)


__all__ = ["LISTWISE", "ListwiseInput", "ListwiseRanking"]
