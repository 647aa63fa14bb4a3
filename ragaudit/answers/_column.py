"""The ``column`` answer source: answers already in the question set."""

from __future__ import annotations

from ragaudit.answers._base import AnswerError, register_source
from ragaudit.config import AnswerConfig
from ragaudit.dataset import Question


class ColumnSource:
    """Reads ``response`` (or a key of the question's ``metadata``) of each question."""

    name = "column"

    def __init__(self, column: str = "response") -> None:
        """Read answers from ``column``."""
        self.column = column

    async def answer(self, question: Question) -> str:
        """The stored answer; a question without one is skipped, not failed."""
        value = (
            question.response if self.column == "response" else question.metadata.get(self.column)
        )
        if value is None or (isinstance(value, str) and not value.strip()):
            raise AnswerError(
                f"the question set has no {self.column} for this question", skipped=True
            )
        return str(value)

    async def aclose(self) -> None:
        """Nothing to release."""


@register_source("column")
def _column(config: AnswerConfig) -> ColumnSource:
    return ColumnSource(config.column)


__all__ = ["ColumnSource"]
