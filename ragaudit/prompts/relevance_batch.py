"""Graded relevance of several candidates in one call (``sort.grade_batch`` above 1).

The same 0–3 scale as :mod:`ragaudit.prompts.relevance`; fewer calls and fewer instruction
tokens per candidate, at the price of each grade depending on its neighbours in the prompt
(the benchmark measures how often it agrees with one candidate per call).
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from ragaudit.prompts._base import Prompt
from ragaudit.prompts.relevance import _SCALE
from ragaudit.prompts.setwise import Passage


class BatchRelevanceInput(BaseModel):
    """A question and the candidate contexts to grade, each with an id."""

    question: str
    passages: list[Passage]


class PassageGrade(BaseModel):
    """One passage's grade (0–3) and a short reason."""

    id: int
    grade: int = Field(ge=0, le=3)
    reason: str = Field(default="", max_length=200)


class BatchRelevanceGrades(BaseModel):
    """A grade for every passage id."""

    grades: list[PassageGrade]


_EACH = {
    "en": "\nGrade every passage on its own, by its id; the others must not change its grade.",
    "zh": "\n逐段独立评定，按编号给出每一段的等级；其他段落不应影响它的等级。",
}

RELEVANCE_BATCH = Prompt(
    name="relevance_batch",
    version="1",
    input_model=BatchRelevanceInput,
    output_model=BatchRelevanceGrades,
    instruction={lang: _SCALE[lang] + _EACH[lang] for lang in _SCALE},
    examples={
        "en": [
            (
                BatchRelevanceInput(
                    question="When was the Eiffel Tower built?",
                    passages=[
                        Passage(id=1, text="The Eiffel Tower was built from 1887 to 1889."),
                        Passage(id=2, text="The Eiffel Tower is 330 metres tall."),
                    ],
                ),
                BatchRelevanceGrades(
                    grades=[
                        PassageGrade(id=1, grade=3, reason="Gives the years."),
                        PassageGrade(id=2, grade=1, reason="Same tower, no date."),
                    ]
                ),
            ),
        ],
        "zh": [
            (
                BatchRelevanceInput(
                    question="埃菲尔铁塔是哪一年建成的？",
                    passages=[
                        Passage(id=1, text="埃菲尔铁塔于1887年至1889年建造。"),
                        Passage(id=2, text="埃菲尔铁塔高330米。"),
                    ],
                ),
                BatchRelevanceGrades(
                    grades=[
                        PassageGrade(id=1, grade=3, reason="给出了建造年份。"),
                        PassageGrade(id=2, grade=1, reason="同一座塔，没有年份。"),
                    ]
                ),
            ),
        ],
    },
)


__all__ = ["RELEVANCE_BATCH", "BatchRelevanceGrades", "BatchRelevanceInput", "PassageGrade"]
