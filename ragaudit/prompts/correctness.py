"""Answer correctness: sort answer and reference statements into TP, FP and FN."""

# ruff: noqa: E501  (a CJK character is two columns wide: Chinese prompt text would wrap mid-phrase)

from __future__ import annotations

from ragas.metrics.collections.answer_correctness.util import CorrectnessClassifierPrompt

from ragaudit.prompts._ragas import translated

CORRECTNESS = translated(
    "answer_correctness.classify",
    CorrectnessClassifierPrompt,
    "给定参考答案（ground_truth）中的陈述和回答（answer）中的陈述，分析每个陈述并把它归入以下类别之一："
    "TP（真阳性）：出现在回答中、并且直接得到参考答案中一个或多个陈述支持的陈述；"
    "FP（假阳性）：出现在回答中、但没有得到参考答案中任何陈述直接支持的陈述；"
    "FN（假阴性）：出现在参考答案中、但回答中没有的陈述。"
    "每个陈述只能属于一个类别。请为每个分类给出理由。",
    [
        (
            {
                "question": "太阳的能量来自哪里？它的主要作用是什么？",
                "answer": [
                    "太阳的能量来自核裂变，类似于地球上的核反应堆。",
                    "太阳的主要作用是为太阳系提供光。",
                ],
                "ground_truth": [
                    "太阳的能量来自核聚变，氢原子聚变形成氦。",
                    "太阳核心的聚变过程释放出巨大的能量。",
                    "太阳的能量提供热和光，这对地球上的生命至关重要。",
                    "太阳光在地球气候系统中起着关键作用。",
                    "阳光有助于驱动天气和洋流。",
                ],
            },
            {
                "TP": [
                    {
                        "statement": "太阳的主要作用是为太阳系提供光。",
                        "reason": "参考答案提到太阳提供光及其作用，在一定程度上支持这一陈述，尽管参考答案更广泛地讨论了太阳的能量。",
                    }
                ],
                "FP": [
                    {
                        "statement": "太阳的能量来自核裂变，类似于地球上的核反应堆。",
                        "reason": "这一陈述是错误的，与参考答案所说的太阳能量来自核聚变相矛盾。",
                    }
                ],
                "FN": [
                    {
                        "statement": "太阳的能量来自核聚变，氢原子聚变形成氦。",
                        "reason": "回答中没有包含对太阳能量来源的这一准确描述。",
                    },
                    {
                        "statement": "太阳核心的聚变过程释放出巨大的能量。",
                        "reason": "回答中没有提到这一过程及其意义。",
                    },
                    {
                        "statement": "太阳的能量提供热和光，这对地球上的生命至关重要。",
                        "reason": "回答只提到了光，遗漏了热及其对生命的必要性。",
                    },
                    {
                        "statement": "太阳光在地球气候系统中起着关键作用。",
                        "reason": "回答没有涉及太阳光对地球气候系统的影响。",
                    },
                    {
                        "statement": "阳光有助于驱动天气和洋流。",
                        "reason": "回答遗漏了阳光对天气和洋流的作用。",
                    },
                ],
            },
        ),
        (
            {
                "question": "水的沸点是多少？",
                "answer": ["在海平面上，水的沸点是100摄氏度。"],
                "ground_truth": [
                    "在海平面上，水的沸点是100摄氏度（212华氏度）。",
                    "水的沸点会随海拔变化。",
                ],
            },
            {
                "TP": [
                    {
                        "statement": "在海平面上，水的沸点是100摄氏度。",
                        "reason": "参考答案明确给出海平面上水的沸点为100摄氏度，直接支持这一陈述。",
                    }
                ],
                "FP": [],
                "FN": [
                    {
                        "statement": "水的沸点会随海拔变化。",
                        "reason": "回答中没有提到水的沸点随海拔变化这一补充信息。",
                    }
                ],
            },
        ),
    ],
)

__all__ = ["CORRECTNESS"]
