"""``question_set``: the candidates are each question's own ``retrieved_contexts``, in order.

Registered like every backend so that the config names it and callers ask its capabilities;
it never searches (``searches`` is False), so the collect stage reads the question set instead.
"""

from __future__ import annotations

from typing import Any

from ragaudit.search._base import Capabilities, Document, Hit, register_backend
from ragaudit.search._query import SearchError


@register_backend("question_set")
class QuestionSetBackend:
    """The question set's own retrieved contexts; there is no index to search."""

    name = "question_set"
    capabilities = Capabilities(searches=False)

    @classmethod
    def from_config(cls, config: Any, options: Any, *, embed: Any = None) -> QuestionSetBackend:
        """The backend (it reads nothing from the config)."""
        return cls()

    def index(self, docs: Any) -> int:
        """Nothing can be indexed into the question set."""
        raise SearchError("not_engine", "the question_set backend has no index to write to")

    def count(self) -> int:
        """No index, no documents."""
        return 0

    async def search(self, query: str, *, filters: dict[str, Any], top_n: int) -> list[Hit]:
        """Never asked: its capabilities say it does not search."""
        raise SearchError("not_engine", "the question_set backend does not search")


__all__ = ["Document", "QuestionSetBackend"]
