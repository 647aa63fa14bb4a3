"""Judge prompts as typed data, one module per judge, in English and Chinese."""

from ragaudit.prompts._base import LANGUAGES, Prompt
from ragaudit.prompts.pairwise import PAIRWISE, PairwiseInput, PairwisePreference
from ragaudit.prompts.reference import (
    ANSWER_GROUP,
    MERGE,
    GroupAnswer,
    GroupAnswerInput,
    MergedAnswer,
    MergeInput,
)
from ragaudit.prompts.relevance import RELEVANCE, RelevanceInput, RelevanceVerdict

__all__ = [
    "ANSWER_GROUP",
    "LANGUAGES",
    "MERGE",
    "PAIRWISE",
    "RELEVANCE",
    "GroupAnswer",
    "GroupAnswerInput",
    "MergeInput",
    "MergedAnswer",
    "PairwiseInput",
    "PairwisePreference",
    "Prompt",
    "RelevanceInput",
    "RelevanceVerdict",
]
