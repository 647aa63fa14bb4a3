"""Graded relevance of one candidate to a question, on a four-point scale (0–3).

The scale is the one TREC's automatic relevance assessment uses: 0 unrelated, 1 on the topic
but no answer, 2 answers in part or among unrelated material, 3 given over to the question and
holding its answer. A grade at or above ``sort.relevant_grade`` (2 by default, TREC's cut)
counts as relevant.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from ragaudit.prompts._base import Prompt

GRADES = (0, 1, 2, 3)


class RelevanceInput(BaseModel):
    """A question and one candidate context."""

    question: str
    context: str


class RelevanceGrade(BaseModel):
    """The context's grade (0–3) for the question, with a one-sentence reason."""

    grade: int = Field(ge=0, le=3)
    reason: str = Field(default="", max_length=400)


_SCALE = {
    "en": (
        "You judge search results. Grade how well the context answers the question:\n"
        "3 = the context is about this question and contains its answer;\n"
        "2 = the context answers the question in part, or the answer is there but mixed with "
        "unrelated material or unclear;\n"
        "1 = the context is on the question's topic but does not answer it;\n"
        "0 = the context has nothing to do with the question.\n"
        "Judge by what the context says, not by shared words. Give the grade and a "
        "one-sentence reason."
    ),
    "zh": (
        "你是检索结果的评审。请评定文档回答问题的程度：\n"
        "3 = 文档专门讨论这个问题，并包含答案；\n"
        "2 = 文档部分回答了问题，或答案夹杂在无关内容中、不够清楚；\n"
        "1 = 文档与问题的话题相关，但没有回答问题；\n"
        "0 = 文档与问题无关。\n"
        "依据文档的内容判断，而不是看字面上有没有相同的词。给出等级，并用一句话说明理由。"
    ),
}

RELEVANCE = Prompt(
    name="relevance",
    version="3",
    input_model=RelevanceInput,
    output_model=RelevanceGrade,
    instruction=_SCALE,
    examples={
        "en": [
            (
                RelevanceInput(
                    question="When was the Eiffel Tower built?",
                    context="The Eiffel Tower was built from 1887 to 1889 for the World's Fair.",
                ),
                RelevanceGrade(grade=3, reason="It gives the construction years."),
            ),
            (
                RelevanceInput(
                    question="When was the Eiffel Tower built?",
                    context="The Eiffel Tower is 330 metres tall and repainted every seven years.",
                ),
                RelevanceGrade(grade=1, reason="Same tower, but nothing about when it was built."),
            ),
        ],
        "zh": [
            (
                RelevanceInput(
                    question="埃菲尔铁塔是哪一年建成的？",
                    context="埃菲尔铁塔于1887年至1889年建造，为世界博览会而建。",
                ),
                RelevanceGrade(grade=3, reason="文档给出了建造年份。"),
            ),
            (
                RelevanceInput(
                    question="埃菲尔铁塔是哪一年建成的？",
                    context="埃菲尔铁塔高330米，每七年重新粉刷一次。",
                ),
                RelevanceGrade(grade=1, reason="说的是同一座塔，但没有提到建成时间。"),
            ),
        ],
    },
)


__all__ = ["GRADES", "RELEVANCE", "RelevanceGrade", "RelevanceInput"]
