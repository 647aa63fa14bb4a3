"""Factual correctness: break a text into claims, at the asked atomicity and coverage.

ragas keeps one pair of examples per (atomicity, coverage); every pair is listed here and the
prompt shows only the pair matching the input's levels, as ragas does.
"""

# ruff: noqa: E501  (a CJK character is two columns wide: Chinese prompt text would wrap mid-phrase)

from __future__ import annotations

from ragas.metrics.collections.factual_correctness.util import ClaimDecompositionPrompt

from ragaudit.prompts._base import Prompt
from ragaudit.prompts._ragas import typed

_BABBAGE = "查尔斯·巴贝奇是一位法国数学家、哲学家和美食评论家。"
_EINSTEIN = (
    "阿尔伯特·爱因斯坦是一位德国理论物理学家。他提出了相对论，还对量子力学的发展做出了贡献。"
)

_CLAIMS_ZH: dict[tuple[str, str], tuple[list[str], list[str]]] = {
    ("low", "low"): (
        ["查尔斯·巴贝奇是一位数学家和哲学家。"],
        [
            "阿尔伯特·爱因斯坦是一位德国物理学家。",
            "阿尔伯特·爱因斯坦提出了相对论，并对量子力学做出了贡献。",
        ],
    ),
    ("low", "high"): (
        ["查尔斯·巴贝奇是一位法国数学家、哲学家和美食评论家。"],
        [
            "阿尔伯特·爱因斯坦是一位德国理论物理学家。",
            "阿尔伯特·爱因斯坦提出了相对论，还对量子力学的发展做出了贡献。",
        ],
    ),
    ("high", "low"): (
        ["查尔斯·巴贝奇是一位数学家。", "查尔斯·巴贝奇是一位哲学家。"],
        ["阿尔伯特·爱因斯坦是一位德国理论物理学家。", "阿尔伯特·爱因斯坦提出了相对论。"],
    ),
    ("high", "high"): (
        [
            "查尔斯·巴贝奇是一位数学家。",
            "查尔斯·巴贝奇是一位哲学家。",
            "查尔斯·巴贝奇是一位美食评论家。",
            "查尔斯·巴贝奇是法国人。",
        ],
        [
            "阿尔伯特·爱因斯坦是一位德国理论物理学家。",
            "阿尔伯特·爱因斯坦提出了相对论。",
            "阿尔伯特·爱因斯坦对量子力学的发展做出了贡献。",
        ],
    ),
}


def _zh_examples() -> list:
    out = []
    for (atomicity, coverage), (babbage, einstein) in _CLAIMS_ZH.items():
        for text, claims in ((_BABBAGE, babbage), (_EINSTEIN, einstein)):
            out.append(
                typed(
                    (
                        {"response": text, "atomicity": atomicity, "coverage": coverage},
                        {"claims": claims},
                    ),
                    ClaimDecompositionPrompt.input_model,
                    ClaimDecompositionPrompt.output_model,
                )
            )
    return out


CLAIMS = Prompt(
    name="factual_correctness.claims",
    version="1",
    input_model=ClaimDecompositionPrompt.input_model,
    output_model=ClaimDecompositionPrompt.output_model,
    instruction={
        "en": ClaimDecompositionPrompt.instruction,
        "zh": "把输入中的每个句子分解为一个或多个独立的陈述。每个陈述都应是可以单独核实的论断。"
        "请按照示例所示的原子性（atomicity）和覆盖度（coverage）级别进行分解。陈述使用与输入相同的语言。",
    },
    examples={
        "en": [pair for pairs in ClaimDecompositionPrompt._all_examples.values() for pair in pairs],
        "zh": _zh_examples(),
    },
)


def matching_examples(examples: list, data: object) -> list:
    """The examples written for ``data``'s atomicity and coverage (ragas shows only those)."""
    key = (getattr(data, "atomicity", "low"), getattr(data, "coverage", "low"))
    picked = [(i, o) for i, o in examples if (i.atomicity, i.coverage) == key]
    return picked or [(i, o) for i, o in examples if (i.atomicity, i.coverage) == ("low", "low")]


__all__ = ["CLAIMS", "matching_examples"]
