"""A turn of a conversation rewritten as a question that stands alone, for the search engine.

``collect.query_form: rewrite`` searches each turn as the judge's model rewrites it: the
earlier turns name what the turn's pronouns and ellipses point at ("and in Germany?", "它主要吃什么"),
and the rewrite spells it out so the engine can find it. The rewrite keeps the turn's language
and intent and never answers it.
"""

# ruff: noqa: E501  (a CJK character is two columns wide: Chinese prompt text would wrap mid-phrase)

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from ragaudit.prompts._base import Prompt


class ConversationTurn(BaseModel):
    """One earlier turn: who spoke, and what."""

    role: Literal["user", "assistant"]
    text: str


class RewriteInput(BaseModel):
    """The conversation so far (oldest first) and the user's current turn."""

    conversation: list[ConversationTurn]
    question: str


class StandaloneQuestion(BaseModel):
    """The current turn as a question that can be searched without the conversation."""

    question: str = Field(min_length=1, max_length=1000)


_INSTRUCTION = {
    "en": (
        "You prepare search queries for a search engine that cannot see the conversation. "
        "Rewrite the user's current question as one question that stands on its own: replace "
        "every pronoun and reference (it, they, that one, the second, there) by what the earlier "
        "turns name, and add what the question leaves implied. Keep its intent and its language; "
        "do not answer it and do not add facts the conversation does not hold. If it already "
        "stands on its own, return it unchanged."
    ),
    "zh": (
        "你为搜索引擎准备检索问题，搜索引擎看不到对话内容。请把用户当前的问题改写成一个不依赖上下文、"
        "可以单独理解的问题：把其中的代词和指代（它、他们、那个、第二个、那里）换成前面对话中提到的具体"
        "对象，补全问题省略的内容。保持问题的意图和语言，不要回答问题，也不要添加对话中没有的信息。"
        "如果问题本身已经可以单独理解，原样返回。"
    ),
}

REWRITE = Prompt(
    name="rewrite",
    version="1",
    input_model=RewriteInput,
    output_model=StandaloneQuestion,
    instruction=_INSTRUCTION,
    examples={
        "en": [
            (
                RewriteInput(
                    conversation=[
                        ConversationTurn(
                            role="user", text="What is the VAT rate on books in France?"
                        ),
                        ConversationTurn(
                            role="assistant", text="Books are taxed at 5.5 % in France."
                        ),
                    ],
                    question="Does that apply in Germany too?",
                ),
                StandaloneQuestion(question="What is the VAT rate on books in Germany?"),
            ),
        ],
        "zh": [
            (
                RewriteInput(
                    conversation=[
                        ConversationTurn(role="user", text="壁虎是益虫吗"),
                        ConversationTurn(
                            role="assistant",
                            text="壁虎捕食蚊子、苍蝇等害虫，对人是有益的。",
                        ),
                    ],
                    question="它主要吃什么？",
                ),
                StandaloneQuestion(question="壁虎主要吃什么？"),
            ),
        ],
    },
)


__all__ = ["REWRITE", "ConversationTurn", "RewriteInput", "StandaloneQuestion"]
