"""Context recall: can each statement of the reference answer be attributed to the contexts?"""

# ruff: noqa: E501  (a CJK character is two columns wide: Chinese prompt text would wrap mid-phrase)

from __future__ import annotations

from ragas.metrics.collections.context_recall.util import ContextRecallPrompt

from ragaudit.prompts._ragas import translated

CONTEXT_RECALL = translated(
    "context_recall.classify",
    ContextRecallPrompt,
    "给定一段上下文和一个答案，分析答案中的每个陈述，判断该陈述能否归因于给定的上下文。"
    "只使用二元分类：能归因于上下文时 attributed 为 1，不能时为 0。请为每个分类给出详细理由。",
    [
        (
            {
                "question": "你能介绍一下阿尔伯特·爱因斯坦吗？",
                "context": "阿尔伯特·爱因斯坦（1879年3月14日—1955年4月18日）是出生于德国的理论物理学家，被广泛认为是有史以来最伟大、"
                "最有影响力的科学家之一。他以创立相对论而闻名，也对量子力学做出了重要贡献。他因“对理论物理的贡献，"
                "特别是发现了光电效应定律”获得1921年诺贝尔物理学奖。",
                "answer": "阿尔伯特·爱因斯坦生于1879年3月14日，是出生于德国的理论物理学家，被广泛认为是有史以来最伟大、最有影响力的科学家之一。"
                "他因对理论物理的贡献获得1921年诺贝尔物理学奖。他在1905年发表了4篇论文。爱因斯坦于1895年移居瑞士。",
            },
            {
                "classifications": [
                    {
                        "statement": "阿尔伯特·爱因斯坦生于1879年3月14日，是出生于德国的理论物理学家，被广泛认为是有史以来最伟大、最有影响力的科学家之一。",
                        "reason": "上下文中明确提到了爱因斯坦的出生日期和这些评价。",
                        "attributed": 1,
                    },
                    {
                        "statement": "他因对理论物理的贡献获得1921年诺贝尔物理学奖。",
                        "reason": "上下文中有完全对应的句子。",
                        "attributed": 1,
                    },
                    {
                        "statement": "他在1905年发表了4篇论文。",
                        "reason": "上下文中没有提到他写过的论文。",
                        "attributed": 0,
                    },
                    {
                        "statement": "爱因斯坦于1895年移居瑞士。",
                        "reason": "上下文中没有支持这一点的依据。",
                        "attributed": 0,
                    },
                ]
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
                "classifications": [
                    {
                        "statement": "英格兰队",
                        "reason": "上下文说明英格兰队赢得了原定于2020年举行的那届（2022年）世界杯。",
                        "attributed": 1,
                    }
                ]
            },
        ),
        (
            {
                "question": "世界上最高的山是哪座？",
                "context": "安第斯山脉是世界上最长的大陆山脉，位于南美洲，横跨七个国家，拥有西半球许多最高的山峰。",
                "answer": "珠穆朗玛峰。",
            },
            {
                "classifications": [
                    {
                        "statement": "珠穆朗玛峰。",
                        "reason": "上下文讨论的是安第斯山脉，没有提到珠穆朗玛峰，与世界最高峰没有直接关系。",
                        "attributed": 0,
                    }
                ]
            },
        ),
    ],
)

__all__ = ["CONTEXT_RECALL"]
