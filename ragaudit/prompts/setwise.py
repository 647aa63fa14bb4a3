"""Setwise choice: which of a few contexts answers the question best?

The head ordering (``sort.order: head``, method ``setwise``) builds a heap whose every sift is
one such choice among a node and its children. The contexts are shown in an order shuffled per
call from their ids, so a judge's preference for a position becomes noise, not an order.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from ragaudit.prompts._base import Prompt


class Passage(BaseModel):
    """One context as the judge sees it, with the number the answer names it by."""

    id: int
    text: str


class SetwiseInput(BaseModel):
    """A question and the contexts to choose from."""

    question: str
    passages: list[Passage]


class SetwiseChoice(BaseModel):
    """The id of the passage that answers the question best, and why."""

    best: int
    reason: str = Field(default="", max_length=400)


SETWISE = Prompt(
    name="setwise",
    version="1",
    input_model=SetwiseInput,
    output_model=SetwiseChoice,
    instruction={
        "en": (
            "You compare search results. Several passages are given for one question, each with "
            "an id. Choose the passage that helps most to answer the question: the one that "
            "answers it most directly, completely and specifically. Reply with its id; you must "
            "choose one, even when they are close. Judge by content only: the order in which the "
            "passages are shown and their length must not matter. Give a one-sentence reason."
        ),
        "zh": (
            "你是检索结果的评审。针对同一个问题给出若干段落，每段有一个编号。请选出最有助于回答问题的"
            "段落：回答得最直接、最完整、最具体的那一段，输出它的编号；即使几段相近也必须选一段。"
            "只依据内容判断，段落的先后顺序和长短都不应影响判断。用一句话说明理由。"
        ),
    },
    examples={
        "en": [
            (
                SetwiseInput(
                    question="When was the Eiffel Tower built?",
                    passages=[
                        Passage(id=1, text="The Eiffel Tower is 330 metres tall."),
                        Passage(id=2, text="The Eiffel Tower was built from 1887 to 1889."),
                        Passage(id=3, text="Paris hosted the World's Fair in 1889."),
                    ],
                ),
                SetwiseChoice(best=2, reason="Passage 2 gives the construction years."),
            ),
        ],
        "zh": [
            (
                SetwiseInput(
                    question="埃菲尔铁塔是哪一年建成的？",
                    passages=[
                        Passage(id=1, text="埃菲尔铁塔高330米。"),
                        Passage(id=2, text="埃菲尔铁塔于1887年开工，1889年建成。"),
                        Passage(id=3, text="巴黎于1889年举办了世界博览会。"),
                    ],
                ),
                SetwiseChoice(best=2, reason="段落2给出了建成年份。"),
            ),
        ],
    },
)


__all__ = ["SETWISE", "Passage", "SetwiseChoice", "SetwiseInput"]
