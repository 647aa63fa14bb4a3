"""Judge prompts as typed data, one module per judge, in English and Chinese."""

from ragaudit.prompts._base import LANGUAGES, Prompt
from ragaudit.prompts.battle import BATTLE, BattleInput, BattleVerdict
from ragaudit.prompts.listwise import LISTWISE, ListwiseInput, ListwiseRanking
from ragaudit.prompts.pairwise import PAIRWISE, PairwiseInput, PairwisePreference
from ragaudit.prompts.reference import (
    ANSWER_GROUP,
    MERGE,
    GroupAnswer,
    GroupAnswerInput,
    MergedAnswer,
    MergeInput,
)
from ragaudit.prompts.relevance import RELEVANCE, RelevanceGrade, RelevanceInput
from ragaudit.prompts.relevance_batch import (
    RELEVANCE_BATCH,
    BatchRelevanceGrades,
    BatchRelevanceInput,
)
from ragaudit.prompts.setwise import SETWISE, Passage, SetwiseChoice, SetwiseInput

__all__ = [
    "ANSWER_GROUP",
    "BATTLE",
    "BattleInput",
    "BattleVerdict",
    "LANGUAGES",
    "MERGE",
    "PAIRWISE",
    "LISTWISE",
    "RELEVANCE",
    "RELEVANCE_BATCH",
    "SETWISE",
    "BatchRelevanceGrades",
    "BatchRelevanceInput",
    "ListwiseInput",
    "ListwiseRanking",
    "Passage",
    "SetwiseChoice",
    "SetwiseInput",
    "GroupAnswer",
    "GroupAnswerInput",
    "MergeInput",
    "MergedAnswer",
    "PairwiseInput",
    "PairwisePreference",
    "Prompt",
    "RelevanceInput",
    "RelevanceGrade",
]
