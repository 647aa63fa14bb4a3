"""Summarization score: key phrases of the source, yes/no questions on them, answers from the summary."""

# ruff: noqa: E501  (a CJK character is two columns wide: Chinese prompt text would wrap mid-phrase)

from __future__ import annotations

from ragas.metrics.collections.summary_score.util import (
    ExtractKeyphrasesPrompt,
    GenerateAnswersPrompt,
    GenerateQuestionsPrompt,
)

from ragaudit.prompts._ragas import translated

_APPLE = "苹果公司是一家总部位于加利福尼亚州库比蒂诺的科技公司。它由史蒂夫·乔布斯于1976年创立，2023年市值达到3万亿美元。"
_PHRASES = ["苹果公司", "加利福尼亚州库比蒂诺", "史蒂夫·乔布斯", "1976年", "3万亿美元", "2023年"]
_QUESTIONS = [
    "苹果公司是一家科技公司吗？",
    "苹果公司总部位于加利福尼亚州库比蒂诺吗？",
    "苹果公司是由史蒂夫·乔布斯创立的吗？",
    "苹果公司是1976年创立的吗？",
    "苹果公司的市值达到过3万亿美元吗？",
    "苹果公司的市值在2023年达到3万亿美元了吗？",
]

KEYPHRASES = translated(
    "summary_score.keyphrases",
    ExtractKeyphrasesPrompt,
    "提取以下类型的关键短语：人物、组织机构、地点、日期/时间、金额和百分比。关键短语按原文中的写法输出。",
    [({"text": _APPLE}, {"keyphrases": _PHRASES})],
)

QUESTIONS = translated(
    "summary_score.questions",
    GenerateQuestionsPrompt,
    "根据给定的文本和关键短语，生成封闭式问题：能用文本回答的问题答“1”，不能回答的答“0”。"
    "生成的问题依据给定文本的答案必须始终是“1”。问题使用与文本相同的语言。",
    [({"text": _APPLE, "keyphrases": _PHRASES}, {"questions": _QUESTIONS})],
)

ANSWERS = translated(
    "summary_score.answers",
    GenerateAnswersPrompt,
    "给定一组只能回答“1”或“0”的封闭式问题，生成一个键为 answers 的 JSON，其值是字符串列表，"
    "逐一判断所给摘要是否包含足够的信息来回答每个问题。答案只能是“1”或“0”："
    "摘要没有足够的信息回答该问题时答“0”，摘要能回答该问题时答“1”。",
    [
        (
            {
                "summary": _APPLE,
                "questions": [
                    *_QUESTIONS,
                    "苹果公司是一家大型软件公司吗？",
                    "苹果公司以 iPhone 闻名吗？",
                    "史蒂夫·乔布斯是苹果公司的联合创始人吗？",
                ],
            },
            {"answers": ["1", "1", "1", "1", "1", "1", "0", "0", "1"]},
        )
    ],
)

__all__ = ["ANSWERS", "KEYPHRASES", "QUESTIONS"]
