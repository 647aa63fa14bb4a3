"""What every search backend provides, and the registry the config names them by."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable


@dataclass(frozen=True)
class Document:
    """One unit of a corpus: what an index holds and a search returns."""

    id: str
    text: str
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Hit:
    """One search result in engine order (``rank`` starts at 1)."""

    id: str
    text: str
    rank: int
    score: float
    metadata: dict[str, Any] = field(default_factory=dict)


@runtime_checkable
class SearchBackend(Protocol):
    """A search engine the collect stage can fetch candidates from."""

    name: str

    def index(self, docs: Iterable[Document]) -> int:
        """Add or replace documents by id (idempotent); returns how many were written."""
        ...

    def count(self) -> int:
        """Documents in the index."""
        ...

    async def search(self, query: str, *, filters: dict[str, Any], top_n: int) -> list[Hit]:
        """The top ``top_n`` hits for ``query`` restricted by ``filters`` (field → value)."""
        ...


BackendFactory = Callable[..., SearchBackend]
_REGISTRY: dict[str, BackendFactory] = {}


def register_backend(name: str) -> Callable[[BackendFactory], BackendFactory]:
    """Class decorator: make a backend constructible by ``name``."""

    def deco(factory: BackendFactory) -> BackendFactory:
        _REGISTRY[name] = factory
        return factory

    return deco


def backend_names() -> Sequence[str]:
    """Names the config may use."""
    return sorted(_REGISTRY)


def make_backend(name: str, **options: Any) -> SearchBackend:
    """Build backend ``name`` with its options."""
    if name not in _REGISTRY:
        raise KeyError(f"unknown search backend '{name}' (known: {', '.join(backend_names())})")
    return _REGISTRY[name](**options)
