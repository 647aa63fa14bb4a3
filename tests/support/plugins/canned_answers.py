"""An answer source in one plugin module: the question set's reference, behind a prefix.

It is what a user's own module looks like: a factory registered under a name, its options a
typed model (``collect.answers.options`` in the config).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from ragaudit.answers import AnswerError, register_source
from ragaudit.config import AnswerConfig
from ragaudit.dataset import Question


class CannedOptions(BaseModel):
    """Options of the canned source."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    prefix: str = "canned: "
    """Put before every answer, so that a test can tell where the answer came from."""


class CannedSource:
    """Answers each question with its reference (no reference: no answer, skipped)."""

    name = "canned"

    def __init__(self, options: CannedOptions) -> None:
        self.options = options

    async def answer(self, question: Question) -> str:
        """The prefixed reference."""
        if not question.reference:
            raise AnswerError("no reference to answer with", retryable=False, skipped=True)
        return self.options.prefix + question.reference

    async def aclose(self) -> None:
        """Nothing to release."""


@register_source("canned", options=CannedOptions)
def _canned(config: AnswerConfig, options: CannedOptions) -> CannedSource:
    return CannedSource(options)
