"""Answer relevancy: write the question an answer replies to, and say whether it evades."""

# ruff: noqa: E501  (a CJK character is two columns wide: Chinese prompt text would wrap mid-phrase)

from __future__ import annotations

from ragas.metrics.collections.answer_relevancy.util import AnswerRelevancePrompt

from ragaudit.prompts._ragas import translated

ANSWER_RELEVANCE = translated(
    "answer_relevancy.question",
    AnswerRelevancePrompt,
    "为给定的回答生成一个它所回答的问题，并判断该回答是否含糊其辞。如果回答含糊其辞（回避、模糊或模棱两可），"
    "noncommittal 为 1；如果回答有实质内容，noncommittal 为 0。含糊其辞的回答例如：“我不知道”、“我不确定”、“视情况而定”。"
    "问题使用与回答相同的语言。",
    [
        (
            {"response": "阿尔伯特·爱因斯坦出生于德国。"},
            {"question": "阿尔伯特·爱因斯坦出生在哪里？", "noncommittal": 0},
        ),
        (
            {"response": "法国的首都是巴黎，这座城市以其建筑和文化闻名。"},
            {"question": "法国的首都是哪里？", "noncommittal": 0},
        ),
        (
            {
                "response": "我不清楚2023年发明的那款智能手机有什么突破性功能，因为我不了解2022年以后的信息。"
            },
            {"question": "2023年发明的那款智能手机有什么突破性功能？", "noncommittal": 1},
        ),
    ],
)

__all__ = ["ANSWER_RELEVANCE"]
