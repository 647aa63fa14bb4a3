"""Test sets generated from a corpus: single-document, multi-document and unanswerable questions."""

from ragaudit.testset._generate import KINDS, generate_testset, write_question_set

__all__ = ["KINDS", "generate_testset", "write_question_set"]
