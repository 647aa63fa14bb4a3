"""OpenSearch User Behavior Insights: ``ubi_queries`` with ``ubi_events`` for clicks.

A UBI query (``query_id``, ``user_query``, ``query_response_hit_ids``, ``client_id``,
``timestamp``, ``query_attributes``) is one served request whose documents are ids only (their
texts are fetched by id later, ``_content``); its events (``action_name``, ``session_id``,
``event_attributes.object.object_id``, ``event_attributes.position.ordinal``) become the
request's feedback, a JSON list in time order. Read from the indexes through opensearch-py (the
day's queries by ``timestamp``, their events a page of queries at a time), or from export files
of the two indexes (one document a line, bare or as a search hit with ``_source``).
"""

from __future__ import annotations

import datetime as dt
import json
from collections import defaultdict
from collections.abc import Iterator, Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict

from ragaudit._section import operational
from ragaudit.audit._records import (
    Bad,
    Partition,
    Request,
    Unmappable,
    as_docs,
    as_object,
    as_text,
    as_time,
    day_paths,
    json_records,
    reader,
)
from ragaudit.errors import ConfigError, InputError, TransientError, clip

_PAGE = 1000  # queries per page read from the index, and whose events are fetched together


class UbiOptions(BaseModel):
    """Options of the ``ubi`` reader: the engine and its indexes, or the events' export."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    hosts: tuple[str, ...] = ("http://127.0.0.1:9200",)
    """Engine URLs holding the UBI indexes (read when ``source.path`` is not set)."""
    queries_index: str = "ubi_queries"
    """The index of UBI queries (``query_id``, ``user_query``, ``query_response_hit_ids``…)."""
    events_index: str = "ubi_events"
    """The index of UBI events (``action_name``, ``query_id``, ``event_attributes``…)."""
    events_path: str | None = None
    """With ``source.path`` (an export of the queries): an export of the events, one JSON
    object a line; ``{day}`` as in ``source.path``."""
    timeout_s: float = operational(30.0, gt=0)
    """Per-request timeout against the engine."""


def _event(source: Mapping[str, Any]) -> dict[str, Any]:
    attrs = source.get("event_attributes") or {}
    obj = attrs.get("object") or {} if isinstance(attrs, Mapping) else {}
    pos = attrs.get("position") or {} if isinstance(attrs, Mapping) else {}
    return {
        "action": source.get("action_name"),
        "object_id": obj.get("object_id") if isinstance(obj, Mapping) else None,
        "position": pos.get("ordinal") if isinstance(pos, Mapping) else None,
        "time": source.get("timestamp"),
        "session": source.get("session_id"),
    }


def ubi_request(source: Any, origin: str, events: list[dict[str, Any]]) -> Request | Bad:
    """One ``ubi_queries`` document and its events as a request, or why it does not map."""
    if not isinstance(source, Mapping):
        return Bad(origin, f"a {type(source).__name__}, not a UBI query")
    if isinstance(source.get("_source"), Mapping):
        source = source["_source"]  # a search hit, as an export of the index writes it
    try:
        events = sorted(events, key=lambda e: str(e["time"] or ""))
        session = next((e["session"] for e in events if e["session"]), None)
        feedback = [{k: e[k] for k in ("action", "object_id", "position")} for e in events]
        return Request(
            request_id=as_text(source.get("query_id"), "query_id", required=True) or "",
            query=as_text(source.get("user_query"), "user_query", required=True) or "",
            origin=origin,
            time=as_time(source.get("timestamp")),
            session=as_text(session, "session_id") or as_text(source.get("client_id"), "client_id"),
            filters=as_object(source.get("query_attributes"), "query_attributes"),
            docs=as_docs(source.get("query_response_hit_ids")),
            feedback=json.dumps(feedback, ensure_ascii=False) if feedback else None,
        )
    except Unmappable as exc:
        return Bad(origin, str(exc))


# ------------------------------------------------------------------------------ export files


def _from_files(ubi: UbiOptions, part: Partition) -> Iterator[Request | Bad]:
    events: dict[str, list[dict[str, Any]]] = defaultdict(list)
    if ubi.events_path:
        event_files = day_paths(ubi.events_path, part.day)
        if not event_files:
            raise InputError(
                f"audit.source.options.events_path: no file matches for {part.day.isoformat()}"
            )
        for origin, obj in json_records(event_files, max_line_bytes=part.max_record_bytes):
            src = obj.get("_source", obj) if isinstance(obj, Mapping) else None
            if isinstance(src, Mapping) and src.get("query_id"):
                events[str(src["query_id"])].append(_event(src))
            else:
                # An event that names no query cannot be joined: reported, never dropped.
                yield obj if isinstance(obj, Bad) else Bad(origin, "an event without query_id")
    for origin, obj in json_records(part.files, max_line_bytes=part.max_record_bytes):
        if isinstance(obj, Bad):
            yield obj
            continue
        src = obj.get("_source", obj) if isinstance(obj, Mapping) else obj
        qid = src.get("query_id") if isinstance(src, Mapping) else None
        yield ubi_request(obj, origin, events.pop(str(qid), []) if qid else [])


# ------------------------------------------------------------------------------ the indexes


def _client(ubi: UbiOptions) -> Any:
    try:
        from opensearchpy import OpenSearch
    except ImportError:
        raise ConfigError(
            "audit.source.format 'ubi' reads the indexes with opensearch-py: "
            "pip install 'ragaudit[search]', or point source.path at an export"
        ) from None

    return OpenSearch(
        hosts=list(ubi.hosts), timeout=ubi.timeout_s, max_retries=2, retry_on_timeout=True
    )


def _scan(client: Any, index: str, query: dict[str, Any]) -> Iterator[dict[str, Any]]:
    from opensearchpy import helpers
    from opensearchpy.exceptions import ConnectionError as OsConnectionError
    from opensearchpy.exceptions import NotFoundError, TransportError

    try:
        yield from helpers.scan(client, index=index, query={"query": query}, size=_PAGE)
    except NotFoundError:
        raise InputError(f"audit.source (ubi): index '{index}' does not exist") from None
    except OsConnectionError as exc:
        raise TransientError(
            f"audit.source (ubi): cannot reach the engine ({clip(str(exc), 160)})"
        ) from None
    except TransportError as exc:
        raise InputError(
            f"audit.source (ubi): reading '{index}' failed ({clip(str(exc), 160)})"
        ) from None


def _page_events(client: Any, ubi: UbiOptions, ids: list[str]) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = defaultdict(list)
    if not ids:
        return out
    try:
        found = list(_scan(client, ubi.events_index, {"terms": {"query_id": ids}}))
    except InputError:
        return out  # no events index: queries without feedback, as UBI installs start out
    for hit in found:
        src = hit.get("_source") or {}
        out[str(src.get("query_id"))].append(_event(src))
    return out


def _utc(t: dt.datetime) -> str:
    return t.astimezone(dt.UTC).isoformat().replace("+00:00", "Z")


def _from_index(ubi: UbiOptions, part: Partition) -> Iterator[Request | Bad]:
    client = _client(ubi)
    window = {"range": {"timestamp": {"gte": _utc(part.start), "lt": _utc(part.end)}}}
    try:
        page: list[dict[str, Any]] = []
        for hit in _scan(client, ubi.queries_index, window):
            page.append(hit)
            if len(page) >= _PAGE:
                yield from _emit(client, ubi, page)
                page = []
        yield from _emit(client, ubi, page)
    finally:
        client.close()


def _emit(client: Any, ubi: UbiOptions, page: list[dict[str, Any]]) -> Iterator[Request | Bad]:
    ids = [str(h["_source"]["query_id"]) for h in page if (h.get("_source") or {}).get("query_id")]
    events = _page_events(client, ubi, ids)
    for hit in page:
        src = hit.get("_source") or {}
        qid = src.get("query_id")
        yield ubi_request(src, f"ubi:{qid or hit.get('_id')}", events.get(str(qid), []))


@reader("ubi", options=UbiOptions, needs_path=False)
def read_ubi(options: UbiOptions, part: Partition) -> Iterator[Request | Bad]:
    """The day's UBI queries as requests, from export files or from the indexes.

    From the export files when ``source.path`` names them, else from the indexes: the queries
    timestamped within the day.
    """
    if part.files:
        return _from_files(options, part)
    return _from_index(options, part)


__all__ = ["UbiOptions", "read_ubi", "ubi_request"]
