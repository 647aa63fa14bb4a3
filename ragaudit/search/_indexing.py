"""A search backend from the run config, and loading a corpus into it (``ragaudit index``).

Credentials are resolved by reference (environment variable or Prefect Secret block) when the
backend is built, never stored in the config. Indexing into the ``local`` backend in vector or
hybrid mode embeds every chunk through the gateway, so those calls are memoised and logged like
every other: the call log is flushed when indexing ends, whether it succeeded or not.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ragaudit.config import EngineConfig, RunConfig
from ragaudit.errors import ConfigError, RagauditError
from ragaudit.registry import SEARCH_BACKENDS
from ragaudit.search._base import (
    IndexableBackend,
    SearchBackend,
    backend_names,
    capabilities,
)
from ragaudit.search._corpus import (
    Chunking,
    batches,
    chunk_documents,
    iter_corpus,
    read_corpus,
)
from ragaudit.search._query import SearchError
from ragaudit.secrets import resolve_secret

Embed = Callable[[list[str]], Awaitable[list[list[float]]]]


def engine_options(name: str, cfg: EngineConfig) -> dict[str, Any]:
    """Constructor options of engine backend ``name``, credentials resolved by reference.

    Raises:
        ConfigError: A referenced variable or Secret block cannot be read.
    """
    where = f"collect.{name}"
    password = resolve_secret(cfg.password_env, cfg.password_secret, field=f"{where}.password")
    api_key = resolve_secret(cfg.api_key_env, cfg.api_key_secret, field=f"{where}.api_key")
    bearer = resolve_secret(cfg.bearer_env, cfg.bearer_secret, field=f"{where}.bearer")
    refs = [
        f"{label} {ref}"
        for label, ref in (
            ("username", cfg.username),
            ("password_env", cfg.password_env),
            ("password_secret", cfg.password_secret),
            ("api_key_env", cfg.api_key_env),
            ("api_key_secret", cfg.api_key_secret),
            ("bearer_env", cfg.bearer_env),
            ("bearer_secret", cfg.bearer_secret),
        )
        if ref
    ]
    return {
        "hosts": list(cfg.hosts),
        "index": cfg.index,
        "fields": cfg.fields.model_dump(),
        "query_template": cfg.query_template,
        "template_params": dict(cfg.template_params),
        "source_excludes": tuple(cfg.source_excludes),
        "username": cfg.username,
        "password": password,
        "api_key": api_key,
        "bearer": bearer,
        "ca_certs": str(cfg.ca_certs) if cfg.ca_certs else None,
        "verify_certs": cfg.verify_certs,
        "timeout_s": cfg.timeout_s,
        "retries": cfg.retries,
        "backoff_s": cfg.backoff_s,
        "page_size": cfg.page_size,
        "paging": cfg.paging,
        "keep_alive": cfg.keep_alive,
        "pit_tiebreaker": cfg.pit_tiebreaker,
        "concurrency": cfg.concurrency,
        "analyzer": cfg.analyzer,
        "index_settings": cfg.index_settings,
        "where": where,
        "auth_hint": ", ".join(refs) if refs else "(no credentials configured)",
    }


def make_search_backend(config: RunConfig, *, embed: Any = None) -> SearchBackend:
    """The configured search backend, built with its options (``collect.options``).

    Args:
        config: The run configuration (``collect.backend`` and its section).
        embed: Async text → vectors function for a backend that embeds (local vector/hybrid).

    Raises:
        ConfigError: Unknown backend, one that does not search (``question_set``), a
            credential that cannot be read, or invalid options.
    """
    name = config.collect.backend
    try:
        factory = SEARCH_BACKENDS.get(name)
        options = SEARCH_BACKENDS.build_options(name, config.collect.options)
    except (KeyError, ValueError) as exc:
        raise ConfigError(f"collect.backend: {exc.args[0]}") from None
    if not capabilities(name).searches:
        raise ConfigError(f"collect.backend: '{name}' is not a search backend")
    backend: SearchBackend = factory.from_config(config, options, embed=embed)
    return backend


def ready_backend(config: RunConfig, *, embed: Any = None) -> SearchBackend:
    """The configured search backend, filled from ``collect.corpus`` when it is empty.

    An embedded backend is always asked whether it is empty; an engine only when there is a
    corpus to fill it with (without one, the first search says what is wrong).

    Raises:
        ConfigError: What :func:`make_search_backend` raises; an empty backend without
            ``collect.corpus``; a corpus that does not index.
    """
    cfg = config.collect
    backend = make_search_backend(config, embed=embed)
    if not (capabilities(cfg.backend).embedded or cfg.corpus is not None):
        return backend
    try:
        empty = backend.count() == 0
    except SearchError as exc:
        raise ConfigError(f"collect: {exc}") from None
    if empty:
        if cfg.corpus is None:
            describe = getattr(backend, "describe", None)
            where = describe() if describe is not None else f"backend '{cfg.backend}'"
            raise ConfigError(f"collect.corpus: {where} is empty and collect.corpus is not set")
        try:
            backend.index(read_corpus(Path(cfg.corpus)))
        except SearchError as exc:
            raise ConfigError(f"collect.corpus: indexing {cfg.corpus} failed: {exc}") from None
    return backend


def index_target(cfg: RunConfig) -> str:
    """Where ``ragaudit index`` writes, in words (backend, index or table, location)."""
    store = make_search_backend(cfg)
    try:
        describe = getattr(store, "describe", None)
        return str(describe()) if describe is not None else f"backend '{cfg.collect.backend}'"
    finally:
        close = getattr(store, "close", None)
        if close is not None:
            close()


@dataclass(frozen=True)
class IndexReport:
    """What one indexing run did."""

    documents: int
    chunks: int
    written: int
    total: int
    target: str
    size_bytes: int | None = None
    """Bytes the index takes on disk, where the backend can tell (the local one)."""


def index_corpus(
    cfg: RunConfig,
    corpus: Path,
    chunking: Chunking,
    *,
    metadata: dict[str, str] | None = None,
    id_field: str = "id",
    text_field: str = "text",
    recreate: bool = False,
    batch_size: int = 500,
    make_gateway: Callable[[], Any] | None = None,
    calls_dir: Path | None = None,
    on_start: Callable[[int], None] | None = None,
    on_batch: Callable[[int], None] | None = None,
) -> IndexReport:
    """Read, chunk and write ``corpus`` into the configured backend; idempotent by chunk id.

    Args:
        cfg: The run configuration (``collect.backend`` and its section, ``models.embedder``).
        corpus: A JSONL or Parquet file, or a folder of ``.txt``/``.md`` files.
        chunking: How documents are cut into chunks.
        metadata: Added to every document.
        id_field: Id field of a JSONL or Parquet corpus.
        text_field: Text field of a JSONL or Parquet corpus.
        recreate: Drop the index first.
        batch_size: Documents per write.
        make_gateway: Builds the gateway that embeds chunks (local backend, vector or hybrid
            mode only: the others never build one).
        calls_dir: Where the gateway writes the call log (``index-<ns>-<n>.parquet`` parts).
        on_start: Called with the number of documents before writing.
        on_batch: Called with the number of documents of each batch written.

    Raises:
        RagauditError: The backend cannot be indexed into, or a setting is invalid.
    """
    name = cfg.collect.backend
    try:
        can = capabilities(name)
    except KeyError as exc:
        raise RagauditError(f"--backend: {exc.args[0]}") from None
    if not can.indexable:
        indexable = [n for n in backend_names() if capabilities(n).indexable]
        raise RagauditError(
            f"--backend: '{name}' cannot be indexed into (use {', '.join(indexable)})"
        )
    # A first pass reads the whole corpus: a bad line is reported before anything is embedded,
    # and the count gives the progress its total. Then the corpus streams through in batches,
    # so memory holds one batch, not the corpus.
    documents = sum(1 for _ in iter_corpus(corpus, id_field=id_field, text_field=text_field))
    gateway: Any = None
    if can.embeds and cfg.collect.mode != "bm25":
        if make_gateway is None:
            raise RagauditError(f"collect.mode {cfg.collect.mode}: indexing needs an embedder")
        gateway = make_gateway()

    async def embed(texts: list[str]) -> list[list[float]]:
        return await gateway.aembed(texts, model=cfg.models.embedder_model)

    store = make_search_backend(cfg, embed=embed if gateway is not None else None)
    if not isinstance(store, IndexableBackend):
        raise RagauditError(f"--backend: '{name}' says it is indexable but has no drop/describe")
    try:
        # The scope writes the embedding calls' rows under calls_dir as they are made, and the
        # rest when it ends: they were paid for, so they are logged even when indexing fails.
        scope = (
            gateway.scope("index", run_id="index", calls_dir=calls_dir)
            if gateway is not None
            else contextlib.nullcontext()
        )
        with scope:
            if recreate:
                store.drop()
            if on_start is not None:
                on_start(documents)
            chunks = written = 0
            # Each batch is written before the next is read: an interrupted run keeps what it
            # wrote, and the next run skips those documents unembedded (stored by digest).
            stream = iter_corpus(corpus, id_field=id_field, text_field=text_field)
            for batch in batches(stream, batch_size):
                pieces = chunk_documents(batch, chunking, metadata or {})
                written += store.index(pieces) if pieces else 0
                chunks += len(pieces)
                if on_batch is not None:
                    on_batch(len(batch))
            total = store.count()
        size = getattr(store, "size_bytes", None)
        return IndexReport(
            documents, chunks, written, total, store.describe(), size() if size else None
        )
    finally:
        close = getattr(store, "close", None)
        if close is not None:
            close()


__all__ = [
    "IndexReport",
    "engine_options",
    "index_corpus",
    "index_target",
    "make_search_backend",
]
