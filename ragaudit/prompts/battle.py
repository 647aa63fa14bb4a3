"""Battle: which of two runs' answers to one question is better, or do they tie?

Each pair is asked in both orders (answer 1 / answer 2 swapped) so that a judge's preference
for a position cancels out; the runs are never named, only numbered by the order shown.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from ragaudit.prompts._base import Prompt


class BattleInput(BaseModel):
    """A question, two answers in the order shown, and what a good answer holds when known."""

    question: str
    answer_1: str
    answer_2: str
    reference: str = ""
    """The reference answer, when the run has one ("" otherwise)."""
    vital_nuggets: list[str] = Field(default_factory=list)
    """Facts a good answer must contain, when the run has nuggets."""


class BattleVerdict(BaseModel):
    """The better answer (1 or 2) or a tie, and why."""

    verdict: Literal["1", "2", "tie"]
    reason: str = Field(default="", max_length=400)


BATTLE = Prompt(
    name="battle",
    version="1",
    input_model=BattleInput,
    output_model=BattleVerdict,
    instruction={
        "en": (
            "You compare two answers to one question. Decide which answer is better: the one "
            "that is correct, answers the question directly and completely, and says nothing "
            "unsupported. When a reference answer or vital nuggets are given, use them as the "
            "facts a good answer must hold. Reply verdict 1 for answer_1, 2 for answer_2, or "
            "tie when neither is clearly better. The order in which the answers are shown and "
            "their length must not matter. Give a one-sentence reason."
        ),
        "zh": (
            "你是答案的评审。针对同一个问题给出两个答案，请判断哪个更好：内容正确、直接且完整地"
            "回答了问题、没有无依据的说法的那一个。如果给出了参考答案或关键要点，以它们作为好答案"
            "必须包含的事实。answer_1 更好输出 1，answer_2 更好输出 2，两者不相上下输出 tie。"
            "答案的先后顺序和长短都不应影响判断。用一句话说明理由。"
        ),
    },
    examples={
        "en": [
            (
                BattleInput(
                    question="When was the Eiffel Tower built?",
                    answer_1="It is an iron tower in Paris.",
                    answer_2="It was built from 1887 to 1889 for the World's Fair.",
                    reference="1887–1889",
                ),
                BattleVerdict(
                    verdict="2",
                    reason="Answer 2 gives the construction years; answer 1 does not answer.",
                ),
            ),
        ],
        "zh": [
            (
                BattleInput(
                    question="埃菲尔铁塔是哪一年建成的？",
                    answer_1="它是巴黎的一座铁塔。",
                    answer_2="埃菲尔铁塔于1887年开工，1889年建成。",
                    reference="1889年建成",
                ),
                BattleVerdict(verdict="2", reason="答案2给出了建成年份，答案1没有回答问题。"),
            ),
        ],
    },
)

__all__ = ["BATTLE", "BattleInput", "BattleVerdict"]
