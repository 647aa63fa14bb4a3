"""Nugget creation: atomic facts from a group of contexts, then merged across groups.

:data:`EXTRACT` reads the contexts one prompt holds and lists the facts that answer the
question, each with the positions of the contexts that state it; :data:`MERGE_NUGGETS` takes
nuggets written from different groups and keeps one per fact, saying which inputs it stands for
(so the code can take the union of their context ids; the judge never copies ids).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from ragaudit.prompts._base import Prompt

Importance = Literal["vital", "okay"]


class ExtractInput(BaseModel):
    """A question and the contexts of one prompt, numbered from 1 by their list position."""

    question: str
    contexts: list[str]


class ExtractedNugget(BaseModel):
    """One atomic fact, its importance and the contexts (1-based positions) that state it."""

    text: str
    importance: Importance
    sources: list[int] = Field(default_factory=list)


class ExtractedNuggets(BaseModel):
    """The nuggets of one group of contexts (empty when none answers the question)."""

    nuggets: list[ExtractedNugget]


class MergeNuggetsInput(BaseModel):
    """A question and nuggets written from different groups of contexts, numbered from 1."""

    question: str
    nuggets: list[str]


class MergedNugget(BaseModel):
    """One fact and the input nuggets (1-based) that state it."""

    text: str
    importance: Importance
    merged_from: list[int]


class MergedNuggets(BaseModel):
    """The de-duplicated nuggets."""

    nuggets: list[MergedNugget]


EXTRACT = Prompt(
    name="nugget_extract",
    version="1",
    input_model=ExtractInput,
    output_model=ExtractedNuggets,
    instruction={
        "en": (
            "List the information nuggets in the contexts that help answer the question. A "
            "nugget is one atomic fact of at most one sentence, written so that it can be "
            "checked on its own. Mark a nugget 'vital' when a good answer must contain it and "
            "'okay' when it is useful but not required. For each nugget give in 'sources' the "
            "positions (1 for the first context) of every context that states it. List each "
            "fact once; leave out what does not bear on the question. If no context helps, "
            "return an empty list."
        ),
        "zh": (
            "请列出文档中有助于回答问题的信息要点（nugget）。每个要点是一个原子事实，最多一句话，"
            "可以单独核实。好的答案必须包含的要点标为 'vital'，有用但不是必需的标为 'okay'。"
            "对每个要点，在 sources 中给出陈述它的所有文档的位置（第一个文档为 1）。"
            "每个事实只列一次；与问题无关的内容不要列出。如果没有文档有帮助，返回空列表。"
        ),
    },
)

MERGE_NUGGETS = Prompt(
    name="nugget_merge",
    version="1",
    input_model=MergeNuggetsInput,
    output_model=MergedNuggets,
    instruction={
        "en": (
            "The nuggets were written from different documents, so one fact may appear several "
            "times in other words. Return one nugget per distinct fact: where inputs state the "
            "same fact, write it once and list all their positions (1 for the first input) in "
            "'merged_from'; every other input is returned as it is with its own position. Do not "
            "combine different facts into one nugget and do not add facts. Mark a nugget 'vital' "
            "when a good answer to the question must contain it, else 'okay'."
        ),
        "zh": (
            "这些要点来自不同的文档，同一个事实可能以不同说法出现多次。请每个不同的事实只返回一个要点："
            "几个输入陈述同一事实时，只写一次，"
            "并在 merged_from 中列出它们的全部位置（第一个输入为 1）；"
            "其余输入按原样返回，并给出各自的位置。不要把不同的事实合成一个要点，也不要添加事实。"
            "好的答案必须包含的要点标为 'vital'，否则标为 'okay'。"
        ),
    },
)

__all__ = [
    "EXTRACT",
    "MERGE_NUGGETS",
    "ExtractInput",
    "ExtractedNugget",
    "ExtractedNuggets",
    "Importance",
    "MergeNuggetsInput",
    "MergedNugget",
    "MergedNuggets",
]
