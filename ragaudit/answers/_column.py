"""The ``column`` answer source: answers already in the question set."""

from __future__ import annotations

from ragaudit.answers._base import AnswerError, CitedAnswer, register_source
from ragaudit.config import AnswerConfig
from ragaudit.dataset import Question


class ColumnSource:
    """Reads ``response`` (or a key of the question's ``metadata``) of each question.

    A question's ``citations`` field, a list of context ids, says what the answer's numbered
    markers point at (marker n → the n-th id).
    """

    name = "column"

    def __init__(self, column: str = "response", error_column: str | None = None) -> None:
        """Read answers from ``column``, and why there is none from ``error_column``."""
        self.column = column
        self.error_column = error_column

    async def answer(self, question: Question) -> str:
        """The stored answer.

        A question without one is skipped (there is nothing to score), unless the question set
        records in ``error_column`` that the system failed to answer it: then it failed.
        """
        value = (
            question.response if self.column == "response" else question.metadata.get(self.column)
        )
        if value is None or (isinstance(value, str) and not value.strip()):
            error = question.metadata.get(self.error_column) if self.error_column else None
            if error:
                raise AnswerError(f"the system gave no answer: {error}", retryable=False)
            raise AnswerError(
                f"the question set has no {self.column} for this question", skipped=True
            )
        cited = question.metadata.get("citations")
        if isinstance(cited, list):
            # The question set lists what the answer's markers point at, as a service would.
            return CitedAnswer(str(value), [str(c) for c in cited])
        return str(value)

    async def aclose(self) -> None:
        """Nothing to release."""


@register_source("column")
def _column(config: AnswerConfig, options: object) -> ColumnSource:
    return ColumnSource(config.column, config.error_column)


__all__ = ["ColumnSource"]
