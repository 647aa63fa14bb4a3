"""Citation support: do the cited contexts support one sentence of the answer?"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel

from ragaudit.prompts._base import Prompt

SupportLevel = Literal["full", "partial", "none"]


class SupportInput(BaseModel):
    """One sentence of an answer and the contexts it cites (or a subset of them)."""

    sentence: str
    contexts: list[str]


class SupportVerdict(BaseModel):
    """How far the contexts support the sentence, with the reason."""

    support: SupportLevel
    reason: str


CITATION_SUPPORT = Prompt(
    name="citation_support",
    version="1",
    input_model=SupportInput,
    output_model=SupportVerdict,
    instruction={
        "en": (
            "Decide whether the contexts, taken together, support the sentence. 'full': every "
            "claim of the sentence follows from the contexts; 'partial': some of its claims do "
            "and others are missing; 'none': the contexts do not support it or contradict it. "
            "Judge only from the contexts, not from what you know, and give a short reason."
        ),
        "zh": (
            "请判断这些文档合在一起是否支持这句话。'full'：这句话的每个论断都能从文档得出；"
            "'partial'：部分论断能得出，其余没有依据；'none'：文档不支持或与之矛盾。"
            "只根据文档判断，不要依据你自己的知识，并给出简短理由。"
        ),
    },
)

__all__ = ["CITATION_SUPPORT", "SupportInput", "SupportLevel", "SupportVerdict"]
