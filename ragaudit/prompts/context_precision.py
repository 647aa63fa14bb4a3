"""Context precision: was this context useful in arriving at the answer (reference or response)?"""

# ruff: noqa: E501  (a CJK character is two columns wide: Chinese prompt text would wrap mid-phrase)

from __future__ import annotations

from ragas.metrics.collections.context_precision.util import ContextPrecisionPrompt

from ragaudit.prompts._ragas import translated

CONTEXT_PRECISION = translated(
    "context_precision.verdict",
    ContextPrecisionPrompt,
    "给定问题、答案和上下文，判断该上下文对得出给定答案是否有用。有用时 verdict 为 1，没用时为 0，"
    "并在 reason 中说明理由。以 JSON 格式输出。",
    [
        (
            {
                "question": "你能介绍一下阿尔伯特·爱因斯坦吗？",
                "context": "阿尔伯特·爱因斯坦（1879年3月14日—1955年4月18日）是出生于德国的理论物理学家，被广泛认为是有史以来最伟大、"
                "最有影响力的科学家之一。他以创立相对论而闻名，也对量子力学做出了重要贡献。由相对论得出的质能等价公式 E = mc2 "
                "被称为“世界上最著名的方程”。他因“对理论物理的贡献，特别是发现了光电效应定律”获得1921年诺贝尔物理学奖。",
                "answer": "阿尔伯特·爱因斯坦生于1879年3月14日，是出生于德国的理论物理学家，被广泛认为是有史以来最伟大、最有影响力的科学家之一。"
                "他因对理论物理的贡献获得1921年诺贝尔物理学奖。",
            },
            {
                "reason": "该上下文确实有助于得出给定答案：它包含爱因斯坦的生平与贡献等关键信息，这些信息都体现在答案中。",
                "verdict": 1,
            },
        ),
        (
            {
                "question": "谁赢得了2020年国际板球理事会（ICC）世界杯？",
                "context": "2022年ICC男子T20世界杯于2022年10月16日至11月13日在澳大利亚举行，是该赛事的第八届。赛事原定于2020年举行，"
                "因新冠疫情推迟。英格兰队在决赛中以五个柱门的优势击败巴基斯坦队，第二次夺得ICC男子T20世界杯冠军。",
                "answer": "英格兰队",
            },
            {
                "reason": "该上下文说明了原定于2020年举行、实际在2022年举行的那届世界杯的情况，并指出英格兰队是冠军，对得出答案有用。",
                "verdict": 1,
            },
        ),
        (
            {
                "question": "世界上最高的山是哪座？",
                "context": "安第斯山脉是世界上最长的大陆山脉，位于南美洲，横跨七个国家，拥有西半球许多最高的山峰。"
                "该山脉以多样的生态系统著称，包括高海拔的安第斯高原和亚马孙雨林。",
                "answer": "珠穆朗玛峰。",
            },
            {
                "reason": "该上下文讨论的是安第斯山脉，没有提到珠穆朗玛峰，与世界最高峰的问题没有直接关系。",
                "verdict": 0,
            },
        ),
    ],
)

__all__ = ["CONTEXT_PRECISION"]
