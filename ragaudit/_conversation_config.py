"""The ``conversation`` section of a config: how much of a turn's history the judge is shown.

Beside ``conversation.py``, in the base layer (ADR 19): pydantic and base modules only.
"""

from __future__ import annotations

from pydantic import Field

from ragaudit._section import Section


class ConversationConfig(Section):
    """A question that is a turn of a conversation is judged with the turns before it."""

    max_history_turns: int = Field(default=8, ge=0, le=1000)
    """Earlier exchanges (a user turn and the answer to it) shown with a turn in every judge
    prompt: grades, order, reference answers, nuggets, answer metrics, battles. The oldest are
    left out first, and how many were left out is said on the question's row. 0: a turn is
    judged alone, as a question that stands alone is."""
    history_share: float = Field(default=0.5, gt=0.0, le=0.9)
    """At most this share of the judge's prompt budget (its window less its answer's tokens)
    goes to the history: older exchanges are left out until it fits, so the passages a prompt
    judges keep their room."""


__all__ = ["ConversationConfig"]
