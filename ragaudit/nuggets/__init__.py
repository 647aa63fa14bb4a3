"""Nuggets: atomic facts from all of a question's relevant contexts, and how answers hold them.

Extraction is map-reduce within the judge's window (:func:`extract_nuggets`); the recall
scores follow TREC's AutoNuggetizer definitions (:func:`nugget_scores`). Importing the package
registers the offline judge's answers to its prompts.
"""

from ragaudit.nuggets import _fake  # noqa: F401  (registers the fake judge's answers)
from ragaudit.nuggets._assign import NUGGETS_PER_CALL, assign_nuggets, nugget_scores
from ragaudit.nuggets._extract import Nugget, NuggetExtractor, NuggetResult, extract_nuggets
from ragaudit.nuggets._fake import PlantedFact, PlantedTruth

__all__ = [
    "NUGGETS_PER_CALL",
    "Nugget",
    "NuggetExtractor",
    "NuggetResult",
    "PlantedFact",
    "PlantedTruth",
    "assign_nuggets",
    "extract_nuggets",
    "nugget_scores",
]
