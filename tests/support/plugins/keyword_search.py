"""A search backend in one plugin module: in-memory character-overlap search over a JSONL file.

It is what a user's own module looks like: a class registered under a name, its options a
typed model (``collect.options`` in the config), built from the run config by ``from_config``.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from ragaudit.search import Capabilities, Document, Hit, read_corpus, register_backend


class KeywordOptions(BaseModel):
    """Options of the keyword backend."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    corpus: Path
    """The JSONL corpus searched (read once, when the backend is built)."""
    min_overlap: int = Field(default=1, ge=1)
    """Characters a document must share with the query to be a hit."""


@register_backend("keyword", options=KeywordOptions)
class KeywordBackend:
    """Documents ranked by the distinct characters they share with the query."""

    name = "keyword"
    # A server-like backend: nothing embedded, nothing `ragaudit index` may write into.
    capabilities = Capabilities()

    def __init__(self, options: KeywordOptions) -> None:
        self.options = options
        self.docs: dict[str, Document] = {d.id: d for d in read_corpus(options.corpus)}

    @classmethod
    def from_config(cls, config: Any, options: KeywordOptions, *, embed: Any = None) -> Any:
        """The backend over ``options.corpus`` (the run config is not needed)."""
        return cls(options)

    def index(self, docs: Iterable[Document]) -> int:
        """Add or replace documents by id."""
        added = 0
        for doc in docs:
            self.docs[doc.id] = doc
            added += 1
        return added

    def count(self) -> int:
        """Documents held."""
        return len(self.docs)

    async def search(self, query: str, *, filters: dict[str, Any], top_n: int) -> list[Hit]:
        """The documents sharing most characters with ``query`` among those matching ``filters``."""
        wanted = set(query)
        scored = []
        for doc in self.docs.values():
            if any(doc.metadata.get(k) != v for k, v in filters.items()):
                continue
            overlap = len(wanted & set(doc.text))
            if overlap >= self.options.min_overlap:
                scored.append((-overlap, doc.id, doc))
        scored.sort()
        return [
            Hit(id=d.id, text=d.text, rank=i + 1, score=float(-neg), metadata=d.metadata)
            for i, (neg, _, d) in enumerate(scored[:top_n])
        ]
