"""The "I don't know" and clarification detector: does an answer decline, or ask the user back?

MTRAG's protocol asks two judges of every answer: whether it says the information is not there
to answer (yes, partial, no), and whether it asks the user for what it needs. Here one prompt
asks both, of the answer to the turn in its conversation.
"""

# ruff: noqa: E501  (a CJK character is two columns wide: Chinese prompt text would wrap mid-phrase)

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from ragaudit.prompts._base import Prompt

Refusal = Literal["yes", "partial", "no"]
YesNo = Literal["yes", "no"]


class RefusalInput(BaseModel):
    """The user's turn (after the earlier turns, when it has any) and the answer to it."""

    question: str
    response: str


class RefusalVerdict(BaseModel):
    """A one-sentence reason, whether the answer declines, and whether it asks for clarification."""

    reason: str = Field(default="", max_length=1000)
    refusal: Refusal
    clarification: YesNo


REFUSAL = Prompt(
    name="refusal",
    version="1",
    input_model=RefusalInput,
    output_model=RefusalVerdict,
    instruction={
        "en": (
            "Read the user's turn (after the earlier turns, when the input shows them) and "
            "the assistant's response to it, then decide two things.\n"
            "refusal: does the response say there is not enough information to answer?\n"
            "- 'yes': it declines the whole turn, says it cannot answer or does not know, or "
            "that the documents do not say;\n"
            "- 'partial': it says part of the turn cannot be answered, and answers the rest;\n"
            "- 'no': it answers, even when the answer needs reasoning or general knowledge, or "
            "when it notes that a document lacks something and still answers from what it has.\n"
            "clarification: is the response's main purpose to ask the user for information "
            "needed to answer (which one they mean, a missing detail), by a question or by a "
            "request such as 'please tell me which product'? 'yes' or 'no'. A response that only "
            "says it cannot answer, without asking for anything, is 'no'.\n"
            "Give a one-sentence reason, then both verdicts."
        ),
        "zh": (
            "阅读用户这一轮的问题（如果输入中给出了此前的对话，结合对话理解）以及助手的回答，然后判断两件事。\n"
            "refusal：回答是否表示没有足够的信息来回答？\n"
            "- 'yes'：拒绝回答整个问题，说无法回答、不知道，或说文档中没有相关内容；\n"
            "- 'partial'：说问题的一部分无法回答，但回答了其余部分；\n"
            "- 'no'：作出了回答，即使需要推理或常识，或者指出文档缺少某些内容但仍根据已有内容作答。\n"
            "clarification：回答的主要目的是否是向用户索取回答所需的信息（问用户具体指哪一个、补充缺少的细节），"
            "无论是提问还是请求（例如“请告诉我是哪款产品”）？填 'yes' 或 'no'。只说无法回答而没有向用户索取任何信息的回答为 'no'。\n"
            "先用一句话说明理由，再给出两个判断。"
        ),
    },
    examples={
        "en": [
            (
                RefusalInput(
                    question="What is the Off-Contract Spend app used for?",
                    response="I do not have information about the Off-Contract Spend app.",
                ),
                RefusalVerdict(
                    reason="It says it has no information.", refusal="yes", clarification="no"
                ),
            ),
            (
                RefusalInput(
                    question="How do I reset it?",
                    response="Which device do you mean, the router or the set-top box?",
                ),
                RefusalVerdict(
                    reason="It asks which device the user means.",
                    refusal="no",
                    clarification="yes",
                ),
            ),
            (
                RefusalInput(
                    question="Do these reimbursements get taxed?",
                    response="Your reimbursements from the HCSA are not taxed.",
                ),
                RefusalVerdict(reason="It answers the question.", refusal="no", clarification="no"),
            ),
        ],
        "zh": [
            (
                RefusalInput(question="这个签可信吗？", response="抱歉，我不知道。"),
                RefusalVerdict(reason="回答说不知道。", refusal="yes", clarification="no"),
            ),
            (
                RefusalInput(question="怎么重置？", response="请问您指的是路由器还是机顶盒？"),
                RefusalVerdict(
                    reason="回答在问用户指的是哪台设备。", refusal="no", clarification="yes"
                ),
            ),
            (
                RefusalInput(question="壁虎主要吃什么？", response="主要吃蚊子、苍蝇等小型昆虫。"),
                RefusalVerdict(reason="回答了问题。", refusal="no", clarification="no"),
            ),
        ],
    },
)

__all__ = ["REFUSAL", "Refusal", "RefusalInput", "RefusalVerdict", "YesNo"]
