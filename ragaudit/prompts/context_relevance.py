"""Context relevance: ragas's two rating judges (0/1/2), and the RAGAS paper's sentence extraction.

The paper's form (Es et al., 2023) asks the judge to copy out the context sentences that help
answer the question; the score is the share of the context's sentences it copied.
"""

# ruff: noqa: E501  (a CJK character is two columns wide: Chinese prompt text would wrap mid-phrase)

from __future__ import annotations

from pydantic import BaseModel, Field
from ragas.metrics.collections.context_relevance.util import (
    ContextRelevanceJudge1Prompt,
    ContextRelevanceJudge2Prompt,
)

from ragaudit.prompts._base import Prompt
from ragaudit.prompts._ragas import translated

_RATING_EXAMPLES_ZH = [
    (
        {
            "user_input": "阿尔伯特·爱因斯坦是哪一年出生的？",
            "context": "阿尔伯特·爱因斯坦生于1879年3月14日。",
        },
        {"rating": 2},
    ),
    (
        {"user_input": "什么是光合作用？", "context": "光合作用是植物把阳光转化为能量的过程。"},
        {"rating": 2},
    ),
]

CONTEXT_RELEVANCE_JUDGE1 = translated(
    "context_relevance.judge1",
    ContextRelevanceJudge1Prompt,
    "你是一位世界级的专家，负责评估一段上下文对于回答问题的相关性得分。\n"
    "你的任务是判断上下文是否包含回答问题所需的恰当信息。\n"
    "不要依赖你对该问题已有的知识，只使用上下文和问题中写明的内容。\n"
    "请遵循以下规则：\n"
    "0. 如果上下文不包含任何可用于回答问题的相关信息，给 0。\n"
    "1. 如果上下文部分包含可用于回答问题的相关信息，给 1。\n"
    "2. 如果上下文包含可用于回答问题的相关信息，给 2。\n"
    "你只能给出 0、1 或 2 的相关性得分，不要输出其他内容，也不要解释。\n"
    '请以如下 JSON 格式返回：{"rating": X}，其中 X 为 0、1 或 2。',
    [
        *_RATING_EXAMPLES_ZH,
        (
            {
                "user_input": "计算机是如何工作的？",
                "context": "阿尔伯特·爱因斯坦是一位理论物理学家。",
            },
            {"rating": 0},
        ),
    ],
)

CONTEXT_RELEVANCE_JUDGE2 = translated(
    "context_relevance.judge2",
    ContextRelevanceJudge2Prompt,
    "作为专门评估给定上下文与问题相关性的专家，我的任务是判断上下文在多大程度上提供了回答问题所需的信息。"
    "我只依据上下文和问题中提供的信息，不依赖任何先验知识。\n\n"
    "我将遵循以下规则：\n"
    "* 如果上下文不包含任何可用于回答问题的相关信息，我给出相关性得分 0。\n"
    "* 如果上下文部分包含可用于回答问题的相关信息，我给出相关性得分 1。\n"
    "* 如果上下文包含可用于回答问题的相关信息，我给出相关性得分 2。\n"
    '请以如下 JSON 格式返回：{"rating": X}，其中 X 为 0、1 或 2。',
    [
        *_RATING_EXAMPLES_ZH,
        ({"user_input": "计算机是如何工作的？", "context": "今天天气晴朗。"}, {"rating": 0}),
    ],
)


class SentenceExtractionInput(BaseModel):
    """A question and the retrieved context (all top-k contexts, one after another)."""

    question: str
    context: str


class RelevantSentences(BaseModel):
    """The context's sentences that help answer the question, copied unchanged."""

    sentences: list[str] = Field(default_factory=list)
    """Empty when nothing in the context helps (the paper's "Insufficient Information")."""


SENTENCE_EXTRACTION = Prompt(
    name="context_relevance.sentences",
    version="1",
    input_model=SentenceExtractionInput,
    output_model=RelevantSentences,
    instruction={
        "en": (
            "Extract the sentences of the context that can potentially help answer the question. "
            "Copy each relevant sentence exactly as it appears in the context, without any change, "
            "one sentence per list item. If no sentence is relevant, or the question cannot be "
            "answered from the context, return an empty list."
        ),
        "zh": (
            "从上下文中提取可能有助于回答问题的句子。每个相关句子都要按上下文中的原样逐字照抄，不做任何改动，"
            "列表中每项一个句子。如果没有相关的句子，或者无法根据上下文回答该问题，返回空列表。"
        ),
    },
    examples={
        "en": [
            (
                SentenceExtractionInput(
                    question="When was the Eiffel Tower completed?",
                    context="The Eiffel Tower is in Paris. It was completed in 1889. Paris has many museums.",
                ),
                RelevantSentences(sentences=["It was completed in 1889."]),
            ),
            (
                SentenceExtractionInput(
                    question="Who founded Apple?", context="Bananas are rich in potassium."
                ),
                RelevantSentences(sentences=[]),
            ),
        ],
        "zh": [
            (
                SentenceExtractionInput(
                    question="埃菲尔铁塔是哪一年建成的？",
                    context="埃菲尔铁塔位于巴黎。它于1889年建成。巴黎有很多博物馆。",
                ),
                RelevantSentences(sentences=["它于1889年建成。"]),
            ),
            (
                SentenceExtractionInput(
                    question="苹果公司是谁创立的？", context="香蕉富含钾元素。"
                ),
                RelevantSentences(sentences=[]),
            ),
        ],
    },
)

__all__ = [
    "CONTEXT_RELEVANCE_JUDGE1",
    "CONTEXT_RELEVANCE_JUDGE2",
    "SENTENCE_EXTRACTION",
    "RelevantSentences",
    "SentenceExtractionInput",
]
