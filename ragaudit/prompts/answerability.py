"""Answerability: can the user's turn be answered from the passages found relevant to it?

A turn is labelled as MTRAG labels its tasks: ``answerable``, ``partial``, ``unanswerable``,
``underspecified`` (ambiguous: a good assistant asks which the user means) or
``conversational`` (no information asked for). The turn is shown in its conversation, so a
follow-up is understood as the user meant it.
"""

# ruff: noqa: E501  (a CJK character is two columns wide: Chinese prompt text would wrap mid-phrase)

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from ragaudit.prompts._base import Prompt

Answerability = Literal["answerable", "partial", "unanswerable", "underspecified", "conversational"]
"""A turn's label (``dataset.ANSWERABILITY``, as a type the judge's schema carries)."""


class AnswerabilityInput(BaseModel):
    """The user's turn (after the earlier turns, when it has any) and the passages."""

    question: str
    passages: list[str]


class AnswerabilityLabel(BaseModel):
    """A one-sentence reason, then the turn's label."""

    reason: str = Field(default="", max_length=1000)
    label: Answerability


ANSWERABILITY_JUDGE = Prompt(
    name="answerability",
    version="1",
    input_model=AnswerabilityInput,
    output_model=AnswerabilityLabel,
    instruction={
        "en": (
            "Label the user's current turn: can an assistant answer it from the passages? When "
            "the input shows the earlier turns of the conversation, read them first to grasp "
            "what the turn asks (a pronoun or an ellipsis refers to them). Pick one label:\n"
            "- 'conversational': the turn asks for no information (a greeting, thanks, small talk, a remark);\n"
            "- 'underspecified': the turn asks for information but is ambiguous or lacks a detail the answer "
            "depends on, so a good assistant would first ask the user what they mean;\n"
            "- 'answerable': the passages hold a full answer;\n"
            "- 'partial': the passages answer part of the turn and not the rest;\n"
            "- 'unanswerable': the passages hold no answer (none is given, or none is about it).\n"
            "Judge only from the passages, not from what you know. Give a one-sentence reason, then the label."
        ),
        "zh": (
            "请给用户当前这一轮的问题打标签：助手能否根据这些段落回答它？如果输入中给出了此前的对话，"
            "先读对话，弄清这一轮问的是什么（代词或省略指的是前面的内容）。从下列标签中选一个：\n"
            "- 'conversational'：这一轮没有询问任何信息（问候、致谢、闲聊、评论）；\n"
            "- 'underspecified'：这一轮在询问信息，但有歧义或缺少答案所依赖的细节，好的助手会先问用户具体指什么；\n"
            "- 'answerable'：段落中有完整的答案；\n"
            "- 'partial'：段落只回答了问题的一部分；\n"
            "- 'unanswerable'：段落中没有答案（没有给出段落，或段落与之无关）。\n"
            "只根据段落判断，不要依据你自己的知识。先用一句话说明理由，再给出标签。"
        ),
    },
    examples={
        "en": [
            (
                AnswerabilityInput(
                    question="When was the Eiffel Tower completed?",
                    passages=["The Eiffel Tower was completed in 1889 for the World's Fair."],
                ),
                AnswerabilityLabel(
                    reason="The passage gives the year of completion.", label="answerable"
                ),
            ),
            (
                AnswerabilityInput(
                    question="How tall is it, and who paid for it?",
                    passages=["The tower is 330 metres tall."],
                ),
                AnswerabilityLabel(
                    reason="The height is given; who paid for it is not.", label="partial"
                ),
            ),
            (
                AnswerabilityInput(question="Thanks, that helps!", passages=[]),
                AnswerabilityLabel(reason="The user thanks; no question.", label="conversational"),
            ),
        ],
        "zh": [
            (
                AnswerabilityInput(
                    question="埃菲尔铁塔是哪一年建成的？",
                    passages=["埃菲尔铁塔于1889年为世界博览会建成。"],
                ),
                AnswerabilityLabel(reason="段落给出了建成年份。", label="answerable"),
            ),
            (
                AnswerabilityInput(question="它的门票多少钱？", passages=["埃菲尔铁塔高330米。"]),
                AnswerabilityLabel(reason="段落没有提到门票价格。", label="unanswerable"),
            ),
            (
                AnswerabilityInput(question="谢谢，很有帮助！", passages=[]),
                AnswerabilityLabel(reason="用户在致谢，没有提问。", label="conversational"),
            ),
        ],
    },
)

__all__ = ["ANSWERABILITY_JUDGE", "Answerability", "AnswerabilityInput", "AnswerabilityLabel"]
