"""Statements and their verdicts: the judges behind faithfulness, noise sensitivity and more.

Used by faithfulness, noise sensitivity, factual correctness and answer correctness.
*Statements* breaks an answer into standalone statements; *NLI* decides, statement by
statement, whether a context supports it. The English side is ragas's own prompt (instruction
and examples read from ragas, never copied); the Chinese side is ours. ragas declares the same
prompt once per metric with slightly different input models, so each model gets its prompt here.
"""

# ruff: noqa: E501  (a CJK character is two columns wide: Chinese prompt text would wrap mid-phrase)

from __future__ import annotations

from typing import Any

from pydantic import BaseModel
from ragas.metrics.collections.answer_correctness import util as ac
from ragas.metrics.collections.factual_correctness import util as fc
from ragas.metrics.collections.faithfulness import util as ff
from ragas.metrics.collections.noise_sensitivity import util as ns

from ragaudit.prompts._base import Prompt
from ragaudit.prompts._ragas import Example, translated

STATEMENTS_ZH = (
    "给定一个问题和一个回答，分析回答中每个句子的复杂程度，把每个句子拆分成一个或多个可以独立理解的陈述。"
    "任何陈述中都不要使用代词，要写出所指的具体对象。陈述使用与回答相同的语言。"
)

_STATEMENTS_EXAMPLE_ZH: Example = (
    {
        "question": "阿尔伯特·爱因斯坦是谁？他最为人所知的成就是什么？",
        "answer": "他是一位出生于德国的理论物理学家，被公认为有史以来最伟大、最有影响力的物理学家之一。"
        "他最为人所知的成就是提出了相对论，他还对量子力学的发展做出了重要贡献。",
    },
    {
        "statements": [
            "阿尔伯特·爱因斯坦是一位出生于德国的理论物理学家。",
            "阿尔伯特·爱因斯坦被公认为有史以来最伟大、最有影响力的物理学家之一。",
            "阿尔伯特·爱因斯坦最为人所知的成就是提出了相对论。",
            "阿尔伯特·爱因斯坦对量子力学的发展做出了重要贡献。",
        ]
    },
)

NLI_ZH = (
    "你的任务是依据给定的上下文判断一系列陈述是否忠实于上下文。对每个陈述，如果能从上下文直接推断出该陈述，"
    "verdict 为 1；如果不能从上下文直接推断出该陈述，verdict 为 0。statement 字段逐字照抄原陈述，"
    "reason 字段用一句话说明理由。"
)

_NLI_EXAMPLE_ZH: Example = (
    {
        "context": "张伟是XYZ大学的学生，正在攻读计算机科学学位。本学期他选修了多门课程，包括数据结构、算法和数据库管理。"
        "张伟学习勤奋，花大量时间学习和完成作业，经常在图书馆待到很晚做项目。",
        "statements": [
            "张伟主修生物学。",
            "张伟正在上人工智能课程。",
            "张伟是一名用功的学生。",
            "张伟有一份兼职工作。",
        ],
    },
    {
        "statements": [
            {
                "statement": "张伟主修生物学。",
                "reason": "上下文明确说明张伟的专业是计算机科学，而不是生物学。",
                "verdict": 0,
            },
            {
                "statement": "张伟正在上人工智能课程。",
                "reason": "上下文提到的课程是数据结构、算法和数据库管理，没有提到人工智能。",
                "verdict": 0,
            },
            {
                "statement": "张伟是一名用功的学生。",
                "reason": "上下文说张伟学习勤奋，花大量时间学习和完成作业。",
                "verdict": 1,
            },
            {
                "statement": "张伟有一份兼职工作。",
                "reason": "上下文中没有任何关于张伟做兼职的信息。",
                "verdict": 0,
            },
        ]
    },
)


def _statements(name: str, module: Any, rename: dict[str, str] | None = None) -> Prompt:
    # ragas's English wording is the faithfulness one, shared by all three metrics.
    return translated(
        name,
        ff.StatementGeneratorPrompt,
        STATEMENTS_ZH,
        [_STATEMENTS_EXAMPLE_ZH],
        input_model=module.StatementGeneratorInput,
        output_model=module.StatementGeneratorOutput,
        rename=rename,
    )


def _nli(name: str, input_model: type[BaseModel], output_model: type[BaseModel]) -> Prompt:
    return translated(
        name,
        ff.NLIStatementPrompt,
        NLI_ZH,
        [_NLI_EXAMPLE_ZH],
        input_model=input_model,
        output_model=output_model,
    )


STATEMENTS_FAITHFULNESS = _statements("faithfulness.statements", ff)
STATEMENTS_CORRECTNESS = _statements("answer_correctness.statements", ac)
STATEMENTS_NOISE = _statements("noise_sensitivity.statements", ns, rename={"answer": "text"})
NLI_FAITHFULNESS = _nli("faithfulness.nli", ff.NLIStatementInput, ff.NLIStatementOutput)
NLI_FACTUAL = _nli("factual_correctness.nli", fc.NLIStatementInput, fc.NLIStatementOutput)
NLI_NOISE = _nli(
    "noise_sensitivity.nli", ns.StatementFaithfulnessInput, ns.StatementFaithfulnessOutput
)

__all__ = [
    "NLI_FACTUAL",
    "NLI_FAITHFULNESS",
    "NLI_NOISE",
    "STATEMENTS_CORRECTNESS",
    "STATEMENTS_FAITHFULNESS",
    "STATEMENTS_NOISE",
]
