"""What the Elasticsearch and OpenSearch backends share: paging, retries, errors, indexing.

The two backends differ only in their client library and in a handful of calls (opening a
point in time, the names of exceptions); everything that decides *what* is asked and *how
the answer is read* lives here and in :mod:`ragaudit.search._query`, so the wiring tested
against one engine is the wiring used with the other.

Paging: up to ``page_size`` candidates come from one request. Beyond it, either
``search_after`` over a point in time (``pit``: a consistent snapshot, the engines'
recommended way) or a scroll (``scroll``: every OpenSearch version has it; PIT arrived in
OpenSearch 2.4). Ranks run on across pages. A page that repeats a hit already seen stops
the search with an error instead of looping or returning duplicates.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

from ragaudit.concurrency import PerLoop
from ragaudit.errors import ConfigError
from ragaudit.search._base import Document, Hit
from ragaudit.search._query import (
    FieldMap,
    QueryBuilder,
    SearchError,
    TemplateRenderError,
    get_path,
)
from ragaudit.secrets import redact, register, register_basic_auth

log = logging.getLogger(__name__)

PAGING = ("auto", "pit", "scroll")
_BULK_CHUNK = 500
# The clients log every failed request as a WARNING carrying the whole traceback, before they
# raise; the failure is then reported once, as a SearchError naming the config field. Below
# ERROR their records only repeat it (22 tracebacks for one unreachable host), so they are
# kept for RAGAUDIT_DEBUG.
_CLIENT_LOGGERS = ("opensearch", "elasticsearch", "elastic_transport")


def quiet_client_loggers() -> None:
    """Keep the engine clients' per-request failure records off the console."""
    if os.environ.get("RAGAUDIT_DEBUG"):
        return
    for name in _CLIENT_LOGGERS:
        logger = logging.getLogger(name)
        if logger.level < logging.ERROR:
            logger.setLevel(logging.ERROR)


class EngineBackend:
    """Base of the engine backends: subclasses supply the client and a few raw calls."""

    name = "engine"
    product = "a search engine"
    default_paging = "pit"

    @classmethod
    def from_config(cls, config: Any, options: Any, *, embed: Any = None) -> EngineBackend:
        """The engine configured in the run's ``collect.<name>`` section, credentials resolved.

        Raises:
            ConfigError: a credential cannot be read, or the section's settings are invalid.
        """
        from ragaudit.search._indexing import engine_options

        options = engine_options(cls.name, getattr(config.collect, cls.name))
        try:
            return cls(**options)
        except ValueError as exc:
            raise ConfigError(f"collect.{cls.name}: {exc}") from None

    def __init__(
        self,
        *,
        hosts: Sequence[str] = ("http://127.0.0.1:9200",),
        index: str = "contexts",
        fields: FieldMap | Mapping[str, Any] | None = None,
        query_template: Mapping[str, Any] | str | None = None,
        template_params: Mapping[str, Any] | None = None,
        source_excludes: Sequence[str] = (),
        username: str | None = None,
        password: str | None = None,
        api_key: str | None = None,
        bearer: str | None = None,
        ca_certs: str | None = None,
        verify_certs: bool = True,
        timeout_s: float = 30.0,
        retries: int = 2,
        backoff_s: float = 0.5,
        page_size: int = 1000,
        paging: str = "auto",
        keep_alive: str = "2m",
        pit_tiebreaker: str = "_shard_doc",
        concurrency: int = 8,
        analyzer: str | None = None,
        index_settings: Mapping[str, Any] | None = None,
        where: str | None = None,
        auth_hint: str = "",
    ) -> None:
        """Configure the backend; no connection is made until the first call.

        Args:
            hosts: Engine URLs (``https://host:9200``), without credentials.
            index: Index (or alias) searched and written.
            fields: Where id, text and metadata live (:class:`FieldMap` or its fields).
            query_template: Search body template; None is the default bool query.
            template_params: Values the template reads as ``params``.
            source_excludes: ``_source`` fields never fetched (embeddings).
            username: Basic-auth user name.
            password: Basic-auth password (a value; configs name an env var or block).
            api_key: API key (Elasticsearch's encoded ``id:key``).
            bearer: Bearer token.
            ca_certs: CA bundle that signed the engine's certificate.
            verify_certs: Verify TLS certificates (turn off only for a lab cluster).
            timeout_s: Per-request timeout.
            retries: Retries of a transient failure (unreachable, timeout, 429, 5xx).
            backoff_s: First retry delay; doubles per retry.
            page_size: Most hits per request; more than this pages.
            paging: ``pit``, ``scroll`` or ``auto`` (the backend's default).
            keep_alive: How long the engine keeps a point in time or scroll between pages.
            pit_tiebreaker: Sort field that breaks score ties under a point in time.
            concurrency: Searches in flight at once.
            analyzer: Analyzer of the text field when ``index`` creates the index.
            index_settings: Full index-creation body, replacing the generated mappings.
            where: Config section named in errors (``collect.opensearch``).
            auth_hint: How the credentials were configured (names only), for auth errors.
        """
        if isinstance(hosts, str):
            hosts = [hosts]
        if not hosts:
            raise ValueError("hosts: at least one engine URL is needed")
        if paging not in PAGING:
            raise ValueError(f"paging must be one of {', '.join(PAGING)}, not '{paging}'")
        self.where = where or f"collect.{self.name}"
        self.hosts = [str(h).rstrip("/") for h in hosts]
        self.index_name = index
        self.fields = fields if isinstance(fields, FieldMap) else FieldMap(**dict(fields or {}))
        self.builder = QueryBuilder(
            query_template,
            self.fields,
            tuple(source_excludes),
            where=f"{self.where}.query_template",
            params=template_params,
        )
        quiet_client_loggers()
        for value in (api_key, bearer):
            register(value)  # also when a caller passes values directly, not through a config
        register_basic_auth(username, password)
        self.auth = {
            "username": username,
            "password": password,
            "api_key": api_key,
            "bearer": bearer,
        }
        self.ca_certs = ca_certs
        self.verify_certs = verify_certs
        self.timeout_s = timeout_s
        self.retries = retries
        self.backoff_s = backoff_s
        self.page_size = page_size
        self.paging = self.default_paging if paging == "auto" else paging
        self.keep_alive = keep_alive
        self.pit_tiebreaker = pit_tiebreaker
        self.concurrency = concurrency
        self.analyzer = analyzer
        self.index_settings = dict(index_settings) if index_settings else None
        self.auth_hint = auth_hint
        self._sync: Any = None
        # An async client and a semaphore belong to the event loop that made them.
        self._async: PerLoop[tuple[Any, asyncio.Semaphore]] = PerLoop(self._new_async_state)

    # ------------------------------------------------------------------ for subclasses

    def _client(self, *, asynchronous: bool) -> Any:
        raise NotImplementedError

    def _classify(self, exc: BaseException) -> tuple[str, int | None, str] | None:
        """``(kind, status, detail)`` of a client exception, or None for a foreign one."""
        raise NotImplementedError

    async def _asearch(
        self, client: Any, body: dict[str, Any], *, index: str | None, scroll: str | None = None
    ) -> Mapping[str, Any]:
        raise NotImplementedError

    async def _ascroll(self, client: Any, scroll_id: str) -> Mapping[str, Any]:
        raise NotImplementedError

    async def _aclear_scroll(self, client: Any, scroll_id: str) -> None:
        raise NotImplementedError

    async def _aopen_pit(self, client: Any) -> str:
        raise NotImplementedError

    async def _aclose_pit(self, client: Any, pit_id: str) -> None:
        raise NotImplementedError

    def _create(self, client: Any, body: dict[str, Any]) -> None:
        raise NotImplementedError

    def _helpers(self) -> Any:
        """The client library's ``helpers`` module (bulk writes)."""
        raise NotImplementedError

    # The two official clients share these calls word for word.

    def _exists(self, client: Any) -> bool:
        return bool(client.indices.exists(index=self.index_name))

    def _delete(self, client: Any) -> None:
        client.indices.delete(index=self.index_name)

    def _bulk(self, client: Any, actions: list[dict[str, Any]]) -> list[Mapping[str, Any]]:
        """Write ``actions``; returns the per-document errors."""
        _, errors = self._helpers().bulk(
            client, actions, raise_on_error=False, raise_on_exception=True
        )
        return list(errors) if isinstance(errors, list) else []

    def _refresh(self, client: Any) -> None:
        client.indices.refresh(index=self.index_name)

    def _count(self, client: Any) -> int:
        return int(client.count(index=self.index_name)["count"])

    # ------------------------------------------------------------------ errors

    def error(self, exc: BaseException) -> SearchError:
        """A client exception as a :class:`SearchError` with one message meant for people."""
        if isinstance(exc, SearchError):
            return exc
        where, hosts = self.where, ", ".join(self.hosts)
        found = self._classify(exc)
        if found is None:
            return SearchError(
                "engine", redact(f"{self.name} at {hosts}: {type(exc).__name__}: {exc}")
            )
        kind, status, detail = found
        code = f"{status} " if status else ""
        messages = {
            "unreachable": f"cannot reach {self.name} at {hosts} ({detail}); check {where}.hosts",
            "timeout": f"{self.name} at {hosts} did not answer within {self.timeout_s:g} s "
            f"({detail}); raise {where}.timeout_s or lower {where}.concurrency",
            "auth": f"{self.name} at {hosts} refused the credentials ({code}{detail}); check "
            f"{where} {self.auth_hint or 'username/password_env/api_key_env/bearer_env'}",
            "forbidden": f"the credentials may not read index '{self.index_name}' on {self.name} "
            f"at {hosts} ({code}{detail}); check the user's privileges or {where}.index",
            "missing_index": f"index '{self.index_name}' does not exist on {self.name} at "
            f"{hosts}; check {where}.index or load a corpus with 'ragaudit index'",
            "rejected": f"{self.name} rejected the query ({code}{detail}); check "
            f"{where}.query_template and {where}.fields",
            "throttled": f"{self.name} at {hosts} is throttling requests ({code}{detail}); "
            f"lower {where}.concurrency",
            "engine": f"{self.name} at {hosts} failed ({code}{detail})",
            "protocol": f"{self.name} at {hosts} answered something the client cannot read "
            f"({detail})",
            "not_engine": f"the server at {hosts} is not {self.product} ({detail})",
        }
        return SearchError(kind, redact(messages.get(kind, f"{self.name}: {detail}")))

    async def _call(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """One engine request with bounded retries of transient failures, with backoff."""
        for attempt in range(self.retries + 1):
            try:
                return await fn(*args, **kwargs)
            except Exception as exc:
                err = self.error(exc)
                if not err.transient or attempt >= self.retries:
                    raise err from None
                log.debug("retrying %s after %s", self.name, err.kind)
                await asyncio.sleep(self.backoff_s * 2**attempt)
        raise AssertionError("unreachable")  # the loop always returns or raises

    def _sync_call(self, fn: Callable[..., Any], *args: Any) -> Any:
        try:
            return fn(*args)
        except Exception as exc:
            raise self.error(exc) from None

    # ------------------------------------------------------------------ clients

    def _sync_client(self) -> Any:
        if self._sync is None:
            self._sync = self._client(asynchronous=False)
        return self._sync

    def _new_async_state(self) -> tuple[Any, asyncio.Semaphore]:
        return self._client(asynchronous=True), asyncio.Semaphore(self.concurrency)

    def _async_state(self) -> tuple[Any, asyncio.Semaphore]:
        return self._async.get()

    async def aclose(self) -> None:
        """Close the clients (the async one of the running loop, and the sync one)."""
        state = self._async.pop()
        if state is not None:
            try:
                await state[0].close()
            except Exception:  # closing must never hide the stage's own outcome
                log.debug("closing the async %s client failed", self.name, exc_info=True)
        self.close()

    def close(self) -> None:
        """Close the sync client."""
        if self._sync is not None:
            try:
                self._sync.close()
            except Exception:
                log.debug("closing the %s client failed", self.name, exc_info=True)
            self._sync = None

    # ------------------------------------------------------------------ writing

    def index(self, docs: Iterable[Document]) -> int:
        """Add or replace documents by id (idempotent), creating the index when missing.

        Returns:
            How many distinct documents were written.

        Raises:
            SearchError: The engine is unreachable, refuses the credentials, or refuses
                documents (the message names the first refused id and the reason).
        """
        unique: dict[str, Document] = {}
        for doc in docs:
            if not isinstance(doc.id, str) or not doc.id:
                raise ValueError(f"document id must be a non-empty string, got {doc.id!r}")
            unique[doc.id] = doc
        if not unique:
            return 0
        client = self._sync_client()
        self.ensure_index()
        actions = [
            {
                "_op_type": "index",
                "_index": self.index_name,
                "_id": d.id,
                "_source": self.builder.document(d.id, d.text, d.metadata),
            }
            for d in unique.values()
        ]
        for i in range(0, len(actions), _BULK_CHUNK):
            errors = self._sync_call(self._bulk, client, actions[i : i + _BULK_CHUNK])
            if errors:
                first = errors[0]
                raise SearchError(
                    "rejected",
                    redact(
                        f"{self.name} refused {len(errors)} of {len(actions[i : i + _BULK_CHUNK])} "
                        f"documents written to '{self.index_name}'; first: {first}"
                    ),
                )
        self._sync_call(self._refresh, client)
        return len(unique)

    def ensure_index(self) -> bool:
        """Create the index with the configured mappings unless it exists; True if created."""
        client = self._sync_client()
        if self._sync_call(self._exists, client):
            return False
        body = self.index_settings or {"mappings": self.builder.mappings(self.analyzer)}
        try:
            self._create(client, body)
        except Exception as exc:
            if "resource_already_exists" in str(exc):
                return False  # another process created it a moment ago
            raise self.error(exc) from None
        return True

    def describe(self) -> str:
        """Where this backend reads and writes, in words."""
        return f"{self.name} index '{self.index_name}' at {', '.join(self.hosts)}"

    def drop(self) -> None:
        """Delete the index if it exists."""
        client = self._sync_client()
        if self._sync_call(self._exists, client):
            self._sync_call(self._delete, client)

    def count(self) -> int:
        """Documents in the index; 0 when it does not exist yet."""
        client = self._sync_client()
        try:
            return int(self._count(client))
        except Exception as exc:
            err = self.error(exc)
            if err.kind == "missing_index":
                return 0
            raise err from None

    # ------------------------------------------------------------------ reading

    async def search(
        self, query: str, *, filters: Mapping[str, Any] | None = None, top_n: int = 10
    ) -> list[Hit]:
        """The engine's top ``top_n`` hits for ``query`` under ``filters``, in engine order.

        Raises:
            SearchError: With ``kind`` saying what failed (see :class:`SearchError`).
        """
        if top_n <= 0:
            return []
        try:
            body = self.builder.body(query, filters or {}, top_n)
        except TemplateRenderError as exc:
            raise SearchError("template", str(exc)) from None
        client, sem = self._async_state()
        async with sem:
            if top_n <= self.page_size:
                resp = await self._call(
                    self._asearch, client, {**body, "size": top_n}, index=self.index_name
                )
                raws = list(_hits(resp))[:top_n]
            elif self.paging == "scroll":
                raws = await self._scroll_pages(client, body, top_n)
            else:
                raws = await self._pit_pages(client, body, top_n)
        return [self.builder.hit(raw, rank) for rank, raw in enumerate(raws, 1)]

    def scan(self, query: Mapping[str, Any] | None = None) -> Iterator[Mapping[str, Any]]:
        """Every hit (``_id``, ``_source``) of the index matching ``query`` (all by default).

        Scrolled by the client's own helper with this backend's client, so credentials, TLS
        and errors are as every other call's (another tool's index: SRW's judgments).

        Raises:
            SearchError: With ``kind`` saying what failed.
        """
        helpers = self._helpers()
        client = self._sync_client()
        body = dict(query or {"query": {"match_all": {}}})
        try:
            yield from helpers.scan(
                client,
                index=self.index_name,
                query=body,
                scroll=self.keep_alive,
                size=self.page_size,
            )
        except Exception as exc:
            raise self.error(exc) from None

    async def fetch_texts(self, ids: Sequence[str]) -> dict[str, str]:
        """The current text of each of ``ids`` in the index (ids it lacks are left out).

        Raises:
            SearchError: With ``kind`` saying what failed.
        """
        fields = self.fields
        client, sem = self._async_state()
        out: dict[str, str] = {}
        unique = list(dict.fromkeys(ids))
        for i in range(0, len(unique), self.page_size):
            chunk = unique[i : i + self.page_size]
            # The engine's own _id, or the _source field the corpus keeps its ids in.
            query = {"terms": {fields.id: chunk}} if fields.id else {"ids": {"values": chunk}}
            body = {"query": query, "size": len(chunk)}
            async with sem:
                resp = await self._call(self._asearch, client, body, index=self.index_name)
            for raw in _hits(resp):
                source = raw.get("_source") or {}
                cid = get_path(source, fields.id) if fields.id else raw.get("_id")
                text = get_path(source, fields.text)
                if cid is not None and isinstance(text, str):
                    out[str(cid)] = text
        return out

    async def _scroll_pages(self, client: Any, body: dict[str, Any], top_n: int) -> list[Any]:
        size = min(self.page_size, top_n)
        resp = await self._call(
            self._asearch,
            client,
            {**body, "size": size},
            index=self.index_name,
            scroll=self.keep_alive,
        )
        scroll_id = resp.get("_scroll_id")
        out: list[Any] = []
        seen: set[tuple[Any, Any]] = set()
        try:
            while True:
                page = list(_hits(resp))
                self._add_page(out, seen, page, "scroll")
                if len(out) >= top_n or len(page) < size or not scroll_id:
                    break
                resp = await self._call(self._ascroll, client, scroll_id)
                scroll_id = resp.get("_scroll_id") or scroll_id
        finally:
            if scroll_id:
                await self._quietly(self._aclear_scroll(client, scroll_id))
        return out[:top_n]

    async def _pit_pages(self, client: Any, body: dict[str, Any], top_n: int) -> list[Any]:
        pit_id = await self._call(self._aopen_pit, client)
        sort = list(body.get("sort") or [{"_score": "desc"}]) + [{self.pit_tiebreaker: "asc"}]
        out: list[Any] = []
        seen: set[tuple[Any, Any]] = set()
        after: Any = None
        try:
            while len(out) < top_n:
                size = min(self.page_size, top_n - len(out))
                page_body = {
                    **body,
                    "size": size,
                    "sort": sort,
                    "pit": {"id": pit_id, "keep_alive": self.keep_alive},
                }
                if after is not None:
                    page_body["search_after"] = after
                resp = await self._call(self._asearch, client, page_body, index=None)
                pit_id = resp.get("pit_id") or pit_id  # the engine may hand on a new id
                page = list(_hits(resp))
                self._add_page(out, seen, page, "pit")
                if len(page) < size:
                    break
                after = page[-1].get("sort")
                if after is None:
                    raise SearchError(
                        "paging", f"{self.name} returned PIT hits without sort values"
                    )
        finally:
            await self._quietly(self._aclose_pit(client, pit_id))
        return out[:top_n]

    def _add_page(
        self, out: list[Any], seen: set[tuple[Any, Any]], page: list[Any], how: str
    ) -> None:
        for raw in page:
            key = (raw.get("_index"), raw.get("_id"))
            if key in seen:
                other = "scroll" if how == "pit" else "pit"
                raise SearchError(
                    "paging",
                    f"{self.name} repeated hit {raw.get('_id')!r} on a later {how} page, so paging "
                    f"does not advance on this server; set {self.where}.paging to '{other}' or "
                    f"raise {self.where}.page_size to at least collect.top_n",
                )
            seen.add(key)
            out.append(raw)

    async def _quietly(self, awaitable: Any) -> None:
        # Releasing a PIT or scroll is a courtesy (both expire by keep_alive): it must not
        # turn a finished search into a failure.
        try:
            await awaitable
        except Exception:
            log.debug("releasing %s paging context failed", self.name, exc_info=True)


def short_reason(info: Any) -> str:
    """The innermost line of a connection error's description."""
    text = str(info or "")
    # urllib3/aiohttp wrap the OS reason in layers of repr; the innermost line says it.
    return text.splitlines()[-1][:300] if text else ""


def error_reason(info: Any) -> str:
    """``reason`` of the first root cause of an engine error body."""
    if isinstance(info, Mapping):
        err = info.get("error")
        if isinstance(err, Mapping):
            causes = err.get("root_cause") or []
            first = causes[0] if causes and isinstance(causes[0], Mapping) else err
            return str(first.get("reason") or err.get("reason") or "")[:500]
        if err:
            return str(err)[:500]
    return str(info or "")[:500]


def by_status(status: int, etype: Any, info: Any) -> tuple[str, int | None, str]:
    """The error kind of an HTTP status, with ``type: reason`` from an engine error body."""
    reason = error_reason(info)
    detail = f"{etype}: {reason}" if reason and reason != str(etype) else str(etype)
    if status == 401:
        return "auth", status, detail
    if status == 403:
        return "forbidden", status, detail
    if status == 404 and "index_not_found" in str(etype) + str(info):
        return "missing_index", status, detail
    if status == 429:
        return "throttled", status, detail
    if status >= 500:
        return "engine", status, detail
    return "rejected", status, detail


def _hits(resp: Mapping[str, Any]) -> list[Any]:
    hits = resp.get("hits") or {}
    return list(hits.get("hits") or [])


__all__ = ["PAGING", "EngineBackend", "by_status", "error_reason", "short_reason"]
