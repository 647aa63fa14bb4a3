"""What every search backend provides, what it can do, and its registration by name."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from pydantic import BaseModel

from ragaudit.registry import SEARCH_BACKENDS


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


@runtime_checkable
class IndexableBackend(SearchBackend, Protocol):
    """An ``indexable`` backend: ``ragaudit index`` also drops its index and names it."""

    def drop(self) -> None:
        """Delete the index (a missing one is fine)."""
        ...

    def describe(self) -> str:
        """Where the backend reads and writes, in words (backend, index or table, location)."""
        ...


@runtime_checkable
class FetchingBackend(SearchBackend, Protocol):
    """A backend that also returns documents' current texts by id (the audit's served content)."""

    async def fetch_texts(self, ids: Sequence[str]) -> dict[str, str]:
        """The text of each of ``ids`` the index holds now; ids it lacks are left out."""
        ...


@dataclass(frozen=True)
class Capabilities:
    """What a search backend can do, asked by its callers instead of its name."""

    searches: bool = True
    """It answers queries; False for ``question_set``, whose candidates are each question's
    ``retrieved_contexts``."""
    embedded: bool = False
    """It runs in this process over a folder (no server): searched at a fixed concurrency, its
    emptiness checked (and filled from ``collect.corpus``) before the first search."""
    indexable: bool = False
    """``ragaudit index`` and the ablation can write a corpus into it."""
    embeds: bool = False
    """In ``collect.mode`` vector or hybrid it embeds its queries and chunks through the gateway."""
    embed_batch: int = 64
    """Texts per embedding request when it embeds chunks (what the dry run counts calls by)."""
    index_setting: str | None = None
    """The config path naming the index it searches (``collect.table``), which ``ragaudit index
    --index`` and the ablation set."""
    template_section: str | None = None
    """The ``collect`` sub-section holding the query template it renders (``opensearch`` for
    ``collect.opensearch.query_template``), whose ``template_params`` a tune's variants set;
    None: it reads no template."""


NO_CAPABILITIES = Capabilities()

BackendClass = Any
"""A registered backend class: built by ``from_config(config, options, *, embed)`` (a classmethod
taking the run config and the options validated by its options model), and described by its
class attribute ``capabilities`` (:class:`Capabilities`; none when absent)."""


def register_backend(
    name: str, *, options: type[BaseModel] | None = None
) -> Callable[[BackendClass], BackendClass]:
    """Class decorator: make a backend constructible by ``name`` (built-in or a plugin's).

    ``options`` is the backend's options model; ``collect.options`` is checked against it when
    the config loads.
    """
    return SEARCH_BACKENDS.register(name, options=options)


def backend_names() -> Sequence[str]:
    """Names the config may use."""
    return sorted(SEARCH_BACKENDS.names())


def capabilities(name: str) -> Capabilities:
    """What backend ``name`` can do.

    Raises:
        KeyError: no such backend; the message lists the known ones.
    """
    return getattr(SEARCH_BACKENDS.get(name), "capabilities", NO_CAPABILITIES)


def make_backend(name: str, **options: Any) -> SearchBackend:
    """Build backend ``name`` from its constructor's arguments (tests, the dry run's scratch index).

    Raises:
        KeyError: no such backend; the message lists the known ones.
    """
    backend: SearchBackend = SEARCH_BACKENDS.get(name)(**options)
    return backend
