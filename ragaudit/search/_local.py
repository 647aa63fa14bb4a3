"""The ``local`` backend: an embedded, persistent search index in a folder, no server.

Why LanceDB (measured in ``bench/bench_local_backend.py``, figures in docs/local_backend.md):
with the same tokens, LanceDB, SQLite FTS5, tantivy and bm25s rank DuReader's gold paragraphs
equally well (BM25 is BM25), and LanceDB's filtered query, the slowest of them, is still
negligible next to the LLM calls of a run. What decides is that
LanceDB alone also stores vectors and searches them under the same metadata prefilter, so
BM25, dense and hybrid ranking live in one on-disk table (Arrow/Lance files, versioned, safe
to reopen from another process).

Chinese: Lance's own tokenizers either need a jieba model folder outside the project
(``jieba/*``, and it reloaded its dictionary on every query) or cut text into character
n-grams, which also cuts English words into letters. So the analysis is done here, in Python,
and stored: every row keeps a ``tokens`` column of whitespace-joined terms (jieba search-mode
words, plus each CJK character on its own, lower-cased), and Lance's FTS index on that column
only splits on whitespace and stems English. Words give precision; the single characters give
recall when jieba segments a question differently from a paragraph. On DuReader it beat plain
jieba words in every library by 0.03-0.04 MRR, tied with bare characters and 1-2-grams under
the per-question filter, and was the best searching the whole corpus unfiltered. The
analyser's name is stamped into the table so an index built by a different analyser is
refused rather than silently queried with mismatched terms.

Metadata filters: metadata is kept verbatim as JSON for the hits, and also flattened into a
``labels`` list of ``["key", "value"]`` JSON strings with a LABEL_LIST index, so any
combination of ``key == value`` conditions becomes one indexed ``array_has_all`` prefilter
whatever keys the corpus uses, without schema changes. Values compare as text (``{"doc": 0}``
matches metadata ``"doc": 0`` and ``"doc": "0"``), as a keyword field in Elasticsearch would.

Hybrid ranking is reciprocal-rank fusion (``collect.rrf_k``, 60 by default as LanceDB's; each
list weighted, ``collect.vector_weight``) of the BM25 and the vector list, done here rather
than by LanceDB's hybrid builder: that one logs a deprecation warning from Rust on every query
and cannot fall back to vectors alone when the query has no terms.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import math
import re
import threading
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa

from ragaudit.errors import ConfigError
from ragaudit.search._base import Capabilities, Document, Hit, register_backend

Embedder = Callable[[list[str]], Awaitable[list[list[float]]]]

MODES = ("bm25", "vector", "hybrid")
# Bump when the analysis changes: indexes built with another one are refused on open.
ANALYZER = "jieba-search+cjk-chars/1"
_RRF_K = 60  # LanceDB's default, and collect.rrf_k's
_LOOKUP_BATCH = 500
_META_ANALYZER = b"ragaudit.analyzer"
# The embedding model a table's vectors came from: a query embedded by another model (or by
# another build of the same one) would be compared with vectors it never shared a space with.
_META_EMBEDDER = b"ragaudit.embedder"
# Optimizing (compacting the small file each write leaves, folding the new rows into the
# indexes) rewrites every small file of the table, so doing it after each write of a streamed
# corpus made the work, and with every version kept the disk, grow as the square of the
# corpus. Done once the rows written since the last time reach this share of the table, the
# rewrites form a geometric series: a constant number of times the corpus, whatever its size.
# Rows not yet folded into the indexes are still searched, only without them.
_OPTIMIZE_SHARE = 0.25
# Versions older than this are deleted when the table is optimized. Not zero: a query in
# another process that opened the previous version a moment ago must still find its files.
_KEEP_VERSIONS = timedelta(seconds=10)
# Lance's caches of index and manifest pages, shared by every table of the process: by
# default they may grow to gigabytes, and every optimize adds pages of new index files.
_INDEX_CACHE_BYTES = 128 * 2**20
_METADATA_CACHE_BYTES = 32 * 2**20
_session: Any = None
_session_lock = threading.Lock()

_CJK_CHAR = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
_WORDLIKE = re.compile(r"\w")

_jieba_lock = threading.Lock()
_jieba: Any = None

# One write lock per table folder, shared by every instance in the process: two instances
# merging into one table at once would make Lance retry or refuse a conflicting commit.
_write_locks: dict[tuple[str, str], threading.Lock] = {}
_write_locks_guard = threading.Lock()


def _write_lock_for(path: Path, table: str) -> threading.Lock:
    key = (str(path.resolve()), table)
    with _write_locks_guard:
        return _write_locks.setdefault(key, threading.Lock())


def _lance_session() -> Any:
    """One bounded cache for every LanceDB connection of the process."""
    global _session
    with _session_lock:
        if _session is None:
            from lancedb import Session

            _session = Session(
                index_cache_size_bytes=_INDEX_CACHE_BYTES,
                metadata_cache_size_bytes=_METADATA_CACHE_BYTES,
            )
        return _session


def _tokenizer() -> Any:
    """A private jieba tokenizer: others adding words to the global one must not shift our terms."""
    global _jieba
    if _jieba is None:
        with _jieba_lock:
            if _jieba is None:
                import jieba

                jieba.setLogLevel(logging.WARNING)  # it announces its dictionary load on stderr
                tok = jieba.Tokenizer()
                tok.initialize()
                _jieba = tok
    return _jieba


def analyze(text: str) -> list[str]:
    """The index terms of ``text``: jieba search-mode words plus single CJK characters.

    Args:
        text: Any text, Chinese, English or mixed.

    Returns:
        Lower-cased terms without punctuation; a query and a document go through the same path.
    """
    terms = [t.strip().lower() for t in _tokenizer().lcut_for_search(text)]
    terms = [t for t in terms if t and _WORDLIKE.search(t)]
    terms.extend(_CJK_CHAR.findall(text))
    return terms


def _value_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))  # 1.0 and 1 are the same filter value
    if value is None:
        return "null"
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def _label(key: str, value: Any) -> str:
    # JSON keeps key and value apart whatever characters they hold (no separator to collide).
    return json.dumps([key, _value_text(value)], ensure_ascii=False)


def labels_of(metadata: dict[str, Any], prefix: str = "") -> list[str]:
    """Filter labels of one document: scalars as they are, lists per element, dicts dotted.

    Args:
        metadata: The document's metadata.
        prefix: Dotted path of a nested dict (internal).

    Returns:
        Sorted distinct labels.
    """
    out: set[str] = set()
    for key, value in metadata.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(labels_of(value, prefix=f"{name}."))
        elif isinstance(value, list | tuple | set | frozenset):
            out.update(_label(name, v) for v in value)
        else:
            out.add(_label(name, value))
    return sorted(out)


def _sql_str(s: str) -> str:
    return "'" + s.replace("'", "''") + "'"


def filter_sql(filters: dict[str, Any] | None) -> str | None:
    """The prefilter for ``filters``: keys ANDed; a list, tuple or set value means any of them.

    Args:
        filters: Field → value (exact match on the value's text), or field → values.

    Returns:
        A LanceDB ``where`` clause, or None without filters.
    """
    if not filters:
        return None
    must: list[str] = []
    clauses: list[str] = []
    for key, value in filters.items():
        if isinstance(value, list | tuple | set | frozenset):
            if not value:
                return "false"  # "any of nothing" matches nothing
            labels = sorted({_label(str(key), v) for v in value})
            clauses.append(f"array_has_any(labels, [{', '.join(map(_sql_str, labels))}])")
        else:
            must.append(_label(str(key), value))
    if must:
        clauses.insert(0, f"array_has_all(labels, [{', '.join(map(_sql_str, must))}])")
    return " AND ".join(clauses)


def _run_coroutine(make: Callable[[], Coroutine[Any, Any, Any]]) -> Any:
    """Run a coroutine from sync code, also when this thread already runs an event loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(make())
    # Called from inside a loop (an async flow calling index()): a loop of its own elsewhere.
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(lambda: asyncio.run(make())).result()


@register_backend("local")
class LocalBackend:
    """Embedded LanceDB table with BM25, vector or hybrid search and metadata prefilters.

    Thread safety: searches run concurrently (each reads one consistent table version, also
    while a write goes on); writes to one table from this process are serialised by a lock.
    Another process sees committed writes on its next query; two processes writing the same
    table at once are left to Lance's optimistic commits.
    """

    name = "local"
    capabilities = Capabilities(
        embedded=True, indexable=True, embeds=True, embed_batch=64, index_setting="collect.table"
    )

    @classmethod
    def from_config(cls, config: Any, options: Any, *, embed: Embedder | None) -> LocalBackend:
        """The run's local index (``collect.index_path``, ``table``, ``mode``, fusion)."""
        cfg = config.collect
        return cls(
            cfg.index_path,
            cfg.table,
            cfg.mode,
            embed=embed if cfg.mode != "bm25" else None,
            rrf_k=cfg.rrf_k,
            vector_weight=cfg.vector_weight,
            # BM25 alone never compares vectors: any table serves it.
            embedder=config.models.embedder_model if cfg.mode != "bm25" and embed else None,
        )

    def __init__(
        self,
        path: Path | str,
        table: str = "contexts",
        mode: str = "bm25",
        embed: Embedder | None = None,
        rrf_k: int = _RRF_K,
        vector_weight: float = 0.5,
        embedder: str | None = None,
    ) -> None:
        """Open (or prepare to create) the index in folder ``path``.

        Args:
            path: Folder of the database; created on first write, reused when it exists.
            table: Table name inside the folder (several corpora can share one folder).
            mode: ``bm25``, ``vector`` or ``hybrid``.
            embed: Async function mapping texts to vectors; needed by ``vector`` and ``hybrid``
                and for indexing into a table that holds vectors.
            rrf_k: ``hybrid``: the fusion's k.
            vector_weight: ``hybrid``: the vector list's weight (BM25's is 1 minus it).
            embedder: The model behind ``embed``: recorded in a table it creates, and checked
                against the one recorded in an existing table that holds vectors.

        Raises:
            ValueError: On an unknown mode, a missing ``embed``, or an existing table built
                with another analyser or without the vectors ``mode`` needs.

        An existing table is opened and checked on first use (a search, a count, a write),
        so that :meth:`drop` can still clear one made with another embedder (a
        :class:`~ragaudit.errors.ConfigError` then).
        """
        import lancedb

        if mode not in MODES:
            raise ValueError(f"mode must be one of {', '.join(MODES)}, not '{mode}'")
        if mode != "bm25" and embed is None:
            raise ValueError(f"mode '{mode}' needs an embed function")
        self.path = Path(path)
        self.table_name = table
        self.mode = mode
        self.embed = embed
        self.rrf_k = rrf_k
        self.vector_weight = vector_weight
        self.embedder = embedder
        self._write_lock = _write_lock_for(self.path, table)
        # Interval 0: every query checks for a newer version, so writes from another process
        # show up at once; on a local folder that check costs about nothing.
        self._db = lancedb.connect(
            self.path, read_consistency_interval=timedelta(0), session=_lance_session()
        )
        self._table: Any = None
        self._unoptimized = 0  # rows written by this instance since its last optimize

    def drop(self) -> None:
        """Delete the table (a missing one is fine); the next write creates it afresh."""
        from lancedb.db import LanceDBConnection

        with self._write_lock:
            # A local path connects locally; only that connection's drop_table has ignore_missing.
            assert isinstance(self._db, LanceDBConnection)
            self._db.drop_table(self.table_name, ignore_missing=True)
            self._table = None
            self._unoptimized = 0

    def close(self) -> None:
        """Optimize what this instance wrote since it last did (see :meth:`index`)."""
        with self._write_lock:
            if self._unoptimized and self._table is not None:
                self._optimize(self._table)

    def describe(self) -> str:
        """Where this backend reads and writes, in words."""
        return f"local table '{self.table_name}' at {self.path}"

    def size_bytes(self) -> int:
        """Bytes the table's folder takes on disk (0 before the first write)."""
        folder = Path(self.path) / f"{self.table_name}.lance"
        return sum(f.stat().st_size for f in folder.rglob("*") if f.is_file())

    # ------------------------------------------------------------------ table handling

    def _open_existing(self) -> Any:
        if self._table is not None:
            return self._table
        try:
            table = self._db.open_table(self.table_name)
        except (FileNotFoundError, ValueError):
            return None
        self._check(table.schema)
        self._table = table
        return table

    def _check(self, schema: pa.Schema) -> None:
        built_with = (schema.metadata or {}).get(_META_ANALYZER, b"").decode()
        if built_with != ANALYZER:
            raise ValueError(
                f"{self.path}/{self.table_name} was indexed with analyser '{built_with}', "
                f"this version searches with '{ANALYZER}': rebuild the index"
            )
        recorded = (schema.metadata or {}).get(_META_EMBEDDER, b"").decode()
        if self.embedder and "vector" in schema.names and recorded != self.embedder:
            where = f"{self.path}/{self.table_name}"
            if recorded:
                raise ConfigError(
                    f"{where} was embedded by '{recorded}', not by '{self.embedder}': its "
                    "vectors and this embedder's do not compare; re-index it (ragaudit index "
                    f"--recreate) or set models.embedder to '{recorded}'"
                )
            # Built before tables recorded their embedder: which one made it is unknown.
            raise ConfigError(
                f"{where} records no embedder (it was indexed before indexes recorded theirs), "
                f"so its vectors may not compare with '{self.embedder}''s: re-index it "
                "(ragaudit index --recreate)"
            )
        if self.mode != "bm25" and "vector" not in schema.names:
            raise ValueError(
                f"{self.path}/{self.table_name} holds no vectors: re-index it with an embed "
                f"function to use mode '{self.mode}'"
            )

    def _create(self, dim: int | None) -> Any:
        from lancedb.index import FTS, BTree, LabelList

        fields = [
            pa.field("id", pa.string(), nullable=False),
            pa.field("text", pa.string()),
            pa.field("tokens", pa.string()),
            pa.field("metadata", pa.string()),
            pa.field("labels", pa.list_(pa.string())),
            pa.field("digest", pa.string()),
        ]
        if dim is not None:
            fields.append(pa.field("vector", pa.list_(pa.float32(), dim)))
        metadata = {_META_ANALYZER: ANALYZER.encode()}
        if dim is not None and self.embedder:
            metadata[_META_EMBEDDER] = self.embedder.encode()
        schema = pa.schema(fields, metadata=metadata)
        # exist_ok: another process may have created it a moment ago; then that one is used.
        table = self._db.create_table(self.table_name, schema=schema, exist_ok=True)
        self._check(table.schema)
        names = {ix.name for ix in table.list_indices()}
        if "tokens_idx" not in names:
            # Analysis happened in Python; Lance only splits on whitespace and stems English.
            # Stop words stay: BM25's IDF already discounts them, and the list drops "y", "s"…
            table.create_index(
                "tokens",
                config=FTS(base_tokenizer="whitespace", stem=True, remove_stop_words=False),
            )
        if "labels_idx" not in names:
            table.create_index("labels", config=LabelList())
        if "id_idx" not in names:
            table.create_index("id", config=BTree())  # merge_insert looks ids up
        return table

    # ------------------------------------------------------------------ writing

    def index(self, docs: Iterable[Document]) -> int:
        """Add or replace documents by id.

        Documents whose text and metadata are already stored unchanged are skipped, so
        re-indexing a corpus costs no embedding calls. The vectors are not compared: to
        re-embed with another model, index into a new table. Each call is one commit; the
        table is optimized once the rows written since the last time reach a quarter of it
        (the first write into an empty table always is), and :meth:`close` optimizes the rest.

        Args:
            docs: Documents; when an id repeats, its last version wins.

        Returns:
            How many distinct documents the index now holds as given (written or unchanged).

        Raises:
            ValueError: Vectors are needed (vector mode, or a table holding vectors) but no
                embed function was given, or the embedder returned the wrong shape.
            TypeError: Metadata that JSON cannot hold.
        """
        unique: dict[str, Document] = {}
        for doc in docs:
            if not isinstance(doc.id, str) or not doc.id:
                raise ValueError(f"document id must be a non-empty string, got {doc.id!r}")
            unique.pop(doc.id, None)  # re-insert so the order is that of last occurrence
            unique[doc.id] = doc
        if not unique:
            return 0
        metas = {d.id: _metadata_json(d) for d in unique.values()}
        digests = {d.id: _digest(d.text, metas[d.id]) for d in unique.values()}
        with self._write_lock:
            table = self._open_existing()
            # Re-indexing a corpus every run must not re-embed (or rewrite) what is unchanged.
            stored = self._stored_digests(table, list(unique)) if table is not None else {}
            changed = [d for d in unique.values() if stored.get(d.id) != digests[d.id]]
            if not changed:
                return len(unique)
            wants_vectors = (
                "vector" in table.schema.names if table is not None else self.embed is not None
            )
            vectors = self._embed_docs(changed) if wants_vectors else None
            if table is None:
                table = self._create(len(vectors[0]) if vectors else None)
                self._table = table
            rows = self._rows(changed, metas, digests, vectors, table.schema)
            (
                table.merge_insert("id")
                .when_matched_update_all()
                .when_not_matched_insert_all()
                .execute(rows)
            )
            self._unoptimized += len(changed)
            if self._unoptimized >= _OPTIMIZE_SHARE * table.count_rows():
                self._optimize(table)
        return len(unique)

    def _optimize(self, table: Any) -> None:
        """Compact the small files, fold new rows into the indexes, delete old versions."""
        table.optimize(cleanup_older_than=_KEEP_VERSIONS)
        self._unoptimized = 0

    @staticmethod
    def _stored_digests(table: Any, ids: list[str]) -> dict[str, str]:
        out: dict[str, str] = {}
        for i in range(0, len(ids), _LOOKUP_BATCH):
            chunk = ids[i : i + _LOOKUP_BATCH]
            where = f"id IN ({', '.join(map(_sql_str, chunk))})"
            rows = table.search().where(where).select(["id", "digest"]).limit(len(chunk))
            tbl = rows.to_arrow()
            out.update(
                zip(tbl.column("id").to_pylist(), tbl.column("digest").to_pylist(), strict=True)
            )
        return out

    def _embed_docs(self, docs: Sequence[Document]) -> list[list[float]]:
        if self.embed is None:
            raise ValueError(
                f"{self.path}/{self.table_name} holds vectors: pass embed= to add documents"
            )
        embed = self.embed
        texts = [d.text for d in docs]
        batch = self.capabilities.embed_batch

        async def all_batches() -> list[list[float]]:
            out: list[list[float]] = []
            for i in range(0, len(texts), batch):
                out.extend(await embed(texts[i : i + batch]))
            return out

        # Plain floats: embedders may hand back numpy arrays or float64.
        vectors = [[float(x) for x in v] for v in _run_coroutine(all_batches)]
        if len(vectors) != len(texts):
            raise ValueError(f"embed returned {len(vectors)} vectors for {len(texts)} texts")
        return vectors

    @staticmethod
    def _rows(
        docs: Sequence[Document],
        metas: dict[str, str],
        digests: dict[str, str],
        vectors: list[list[float]] | None,
        schema: pa.Schema,
    ) -> pa.Table:
        cols: dict[str, Any] = {
            "id": [d.id for d in docs],
            "text": [d.text for d in docs],
            "tokens": [" ".join(analyze(d.text)) for d in docs],
            "metadata": [metas[d.id] for d in docs],
            "labels": [labels_of(d.metadata) for d in docs],
            "digest": [digests[d.id] for d in docs],
        }
        if "vector" in schema.names:
            dim = schema.field("vector").type.list_size
            bad = [d.id for d, v in zip(docs, vectors or [], strict=True) if len(v) != dim]
            if bad:
                raise ValueError(f"embed returned vectors not of dimension {dim} for {bad[:3]}")
            cols["vector"] = vectors
        return pa.Table.from_pydict(cols, schema=schema)

    # ------------------------------------------------------------------ reading

    def count(self) -> int:
        """Documents in the index (0 before the first write)."""
        table = self._open_existing()
        return 0 if table is None else table.count_rows()

    async def search(
        self, query: str, *, filters: dict[str, Any] | None = None, top_n: int = 10
    ) -> list[Hit]:
        """The best ``top_n`` documents for ``query`` among those matching ``filters``.

        Args:
            query: Free text in any language.
            filters: Metadata field → value, all required (see :func:`filter_sql`).
            top_n: Most hits to return; fewer when fewer documents match.

        Returns:
            Hits in descending score order, ranks from 1. Scores: BM25 (``bm25``), cosine
            similarity (``vector``), reciprocal-rank-fusion score (``hybrid``).
        """
        if top_n <= 0:
            return []
        vector = None
        if self.mode != "bm25":
            assert self.embed is not None
            vectors = await self.embed([query])
            vector = [float(x) for x in vectors[0]]
        return await asyncio.to_thread(self._search_sync, query, vector, filters, top_n)

    async def fetch_texts(self, ids: Sequence[str]) -> dict[str, str]:
        """The stored text of each of ``ids`` (ids not in the table are left out)."""
        return await asyncio.to_thread(self._fetch_sync, list(ids))

    def _fetch_sync(self, ids: list[str]) -> dict[str, str]:
        table = self._open_existing()
        out: dict[str, str] = {}
        if table is None:
            return out
        for i in range(0, len(ids), _LOOKUP_BATCH):
            chunk = ids[i : i + _LOOKUP_BATCH]
            where = f"id IN ({', '.join(map(_sql_str, chunk))})"
            rows = table.search().where(where).select(["id", "text"]).limit(len(chunk)).to_arrow()
            out.update(
                zip(rows.column("id").to_pylist(), rows.column("text").to_pylist(), strict=True)
            )
        return out

    def _search_sync(
        self,
        query: str,
        vector: list[float] | None,
        filters: dict[str, Any] | None,
        top_n: int,
    ) -> list[Hit]:
        table = self._open_existing()
        if table is None:
            return []
        where = filter_sql(filters)
        terms = " ".join(analyze(query))
        if self.mode == "bm25":
            scored = self._bm25(table, terms, where, top_n)
        elif self.mode == "vector":
            scored = self._knn(table, vector, where, top_n)
        else:
            scored = _rrf(
                [self._bm25(table, terms, where, top_n), self._knn(table, vector, where, top_n)],
                top_n,
                k=self.rrf_k,
                # Doubled: at the default 0.5 both weigh 1, the plain fusion's very scores.
                weights=(2.0 * (1.0 - self.vector_weight), 2.0 * self.vector_weight),
            )
        return [
            Hit(
                id=row["id"],
                text=row["text"],
                rank=i,
                score=score,
                metadata=json.loads(row["metadata"]) if row["metadata"] else {},
            )
            for i, (score, row) in enumerate(scored, 1)
        ]

    @staticmethod
    def _bm25(table: Any, terms: str, where: str | None, top_n: int) -> list[tuple[float, dict]]:
        from lancedb.query import MatchQuery

        if not terms:
            return []  # nothing to match (only punctuation, say)
        # A MatchQuery, not the bare string: terms are ORed and nothing is parsed as syntax.
        # (mypy misreads the pydantic dataclass's defaults as required arguments.)
        match = MatchQuery(terms, "tokens")  # type: ignore[call-arg]
        q = table.search(match, query_type="fts")
        if where:
            q = q.where(where, prefilter=True)
        rows = q.select(["id", "text", "metadata", "_score"]).limit(top_n).to_list()
        # Lance returns best first already; the stable sort only makes it a guarantee.
        return sorted(((float(r["_score"]), r) for r in rows), key=lambda sr: -sr[0])

    @staticmethod
    def _knn(
        table: Any, vector: list[float] | None, where: str | None, top_n: int
    ) -> list[tuple[float, dict]]:
        assert vector is not None
        dim = table.schema.field("vector").type.list_size
        if len(vector) != dim:
            raise ValueError(f"query vector has dimension {len(vector)}, the index {dim}")
        if not any(vector) or any(math.isnan(x) for x in vector):
            return []  # cosine distance is undefined for a zero vector
        # No ANN index: the prefilter leaves few rows, and exact search on them is cheap.
        q = table.search(vector, vector_column_name="vector").distance_type("cosine")
        if where:
            q = q.where(where, prefilter=True)
        rows = q.select(["id", "text", "metadata", "_distance"]).limit(top_n).to_list()
        return sorted(((1.0 - float(r["_distance"]), r) for r in rows), key=lambda sr: -sr[0])


def _metadata_json(doc: Document) -> str:
    try:
        return json.dumps(doc.metadata, ensure_ascii=False)
    except TypeError as exc:
        raise TypeError(f"metadata of document '{doc.id}' is not JSON: {exc}") from exc


def _digest(text: str, metadata_json: str) -> str:
    return hashlib.sha256(json.dumps([text, metadata_json]).encode()).hexdigest()[:32]


def _rrf(
    lists: list[list[tuple[float, dict]]],
    top_n: int,
    k: int = _RRF_K,
    weights: Sequence[float] | None = None,
) -> list[tuple[float, dict]]:
    """Reciprocal-rank fusion: sum of weight / (k + rank) over the lists a document is in.

    Equal weights give the plain fusion's order (every score scaled alike).
    """
    fused: dict[str, list[Any]] = {}
    for ranked, weight in zip(lists, weights or [1.0] * len(lists), strict=True):
        for rank, (_, row) in enumerate(ranked, 1):
            entry = fused.setdefault(row["id"], [0.0, row, rank])
            entry[0] += weight / (k + rank)
            entry[2] = min(entry[2], rank)
    # Ties (same fused score) go to the better single-list rank, then the id: deterministic.
    order = sorted(fused.items(), key=lambda kv: (-kv[1][0], kv[1][2], kv[0]))
    return [(score, row) for _, (score, row, _) in order[:top_n]]


__all__ = [
    "ANALYZER",
    "MODES",
    "LocalBackend",
    "analyze",
    "filter_sql",
    "labels_of",
]
