"""Relevance filter: does this context help answer the question?"""

from __future__ import annotations

from pydantic import BaseModel, Field

from ragaudit.prompts._base import Prompt


class RelevanceInput(BaseModel):
    """A question and one candidate context."""

    question: str
    context: str


class RelevanceVerdict(BaseModel):
    """Whether the context helps answer the question, with a one-sentence reason."""

    relevant: bool
    reason: str = Field(default="", max_length=400)


RELEVANCE = Prompt(
    name="relevance",
    version="2",
    input_model=RelevanceInput,
    output_model=RelevanceVerdict,
    instruction={
        "en": (
            "You judge search results. Decide whether the context contains information that "
            "helps answer the question, fully or in part. Mark it relevant only if it does; a "
            "context on the same topic that does not help answer is not relevant. Give a "
            "one-sentence reason."
        ),
        "zh": (
            "你是检索结果的评审。判断给定文档中是否包含有助于（全部或部分）回答问题的信息。只有在确实有助于回答时才"
            "标记为相关；话题相同但无助于回答的文档不相关。用一句话说明理由。"
        ),
    },
    examples={
        "en": [
            (
                RelevanceInput(
                    question="When was the Eiffel Tower built?",
                    context="The Eiffel Tower was built from 1887 to 1889 for the World's Fair.",
                ),
                RelevanceVerdict(relevant=True, reason="It gives the construction years."),
            ),
            (
                RelevanceInput(
                    question="When was the Eiffel Tower built?",
                    context="The Eiffel Tower is 330 metres tall and repainted every seven years.",
                ),
                RelevanceVerdict(
                    relevant=False, reason="Same tower, but nothing about when it was built."
                ),
            ),
        ],
        "zh": [
            (
                RelevanceInput(
                    question="埃菲尔铁塔是哪一年建成的？",
                    context="埃菲尔铁塔于1887年至1889年建造，为世界博览会而建。",
                ),
                RelevanceVerdict(relevant=True, reason="文档给出了建造年份。"),
            ),
            (
                RelevanceInput(
                    question="埃菲尔铁塔是哪一年建成的？",
                    context="埃菲尔铁塔高330米，每七年重新粉刷一次。",
                ),
                RelevanceVerdict(relevant=False, reason="说的是同一座塔，但没有提到建成时间。"),
            ),
        ],
    },
)

__all__ = ["RELEVANCE", "RelevanceInput", "RelevanceVerdict"]
