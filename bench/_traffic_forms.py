"""The same traffic in the audit's other source forms: OTLP trace lines and UBI documents.

The writers take requests in the normalised shape (``requests.parquet``'s rows: request id,
time, session, query, filters, docs with id/text/score, answer, feedback), so whatever wrote the
JSONL log (``bench/_traffic.py``'s simulated service), its day read by ``read_day`` can be
written again as the service would have traced it (OpenInference spans: a CHAIN root, a
RETRIEVER and an LLM child) and as OpenSearch UBI would have recorded it (``ubi_queries`` with
the served ids, ``ubi_events`` with a click for each positive feedback).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from google.protobuf import json_format
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span

_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


def _id(request_id: str, salt: str, size: int) -> bytes:
    return hashlib.sha256(f"{salt}:{request_id}".encode()).digest()[:size]


def _attrs(values: Mapping[str, Any]) -> list[KeyValue]:
    out = []
    for key, value in values.items():
        if value is None:
            continue
        if isinstance(value, bool):
            av = AnyValue(bool_value=value)
        elif isinstance(value, int):
            av = AnyValue(int_value=value)
        elif isinstance(value, float):
            av = AnyValue(double_value=value)
        else:
            av = AnyValue(string_value=str(value))
        out.append(KeyValue(key=key, value=av))
    return out


def _span(rid: str, name: str, parent: bytes, start: int, attrs: Mapping[str, Any]) -> Span:
    return Span(
        trace_id=_id(rid, "trace", 16),
        span_id=_id(rid, name, 8),
        parent_span_id=parent,
        name=name,
        kind=Span.SPAN_KIND_INTERNAL,
        start_time_unix_nano=start,
        end_time_unix_nano=start + 1_000_000,
        attributes=_attrs(attrs),
    )


def otlp_line(row: Mapping[str, Any]) -> str:
    """One request as one OTLP/JSON line (ids in hex, as the OTLP file exporter writes them)."""
    rid = row["request_id"]
    # Integer nanoseconds: a float timestamp would lose the microseconds the log carried.
    start = (row["time"] - _EPOCH) // dt.timedelta(microseconds=1) * 1000 if row.get("time") else 0
    root_id = _id(rid, "request", 8)
    docs: dict[str, Any] = {"openinference.span.kind": "RETRIEVER", "input.value": row["query"]}
    for i, d in enumerate(row.get("docs") or ()):
        docs[f"retrieval.documents.{i}.document.id"] = d["id"]
        docs[f"retrieval.documents.{i}.document.content"] = d.get("text")
        docs[f"retrieval.documents.{i}.document.score"] = d.get("score")
    spans = [
        _span(rid, "retrieve", root_id, start + 1000, docs),
        _span(
            rid,
            "llm",
            root_id,
            start + 2000,
            {
                "openinference.span.kind": "LLM",
                "llm.input_messages.0.message.role": "user",
                "llm.input_messages.0.message.content": row["query"],
                "llm.output_messages.0.message.role": "assistant",
                "llm.output_messages.0.message.content": row.get("answer"),
            },
        ),
        # The root last: the SDK exports a span when it ends, and the root ends last.
        _span(
            rid,
            "request",
            b"",
            start,
            {
                "openinference.span.kind": "CHAIN",
                "input.value": row["query"],
                "output.value": row.get("answer"),
                "session.id": row.get("session"),
                "metadata": row.get("filters"),
            },
        ),
    ]
    msg = ExportTraceServiceRequest(
        resource_spans=[ResourceSpans(scope_spans=[ScopeSpans(spans=spans)])]
    )
    obj = json_format.MessageToDict(msg)
    for rs in obj["resourceSpans"]:
        for ss in rs["scopeSpans"]:
            for span in ss["spans"]:
                for key in ("traceId", "spanId", "parentSpanId"):
                    if key in span:
                        span[key] = base64_to_hex(span[key])
    return json.dumps(obj, separators=(",", ":"))


def base64_to_hex(value: str) -> str:
    """A protobuf-JSON bytes field (base64) as OTLP/JSON writes ids (hex)."""
    import base64

    return base64.b64decode(value).hex()


def ubi_documents(row: Mapping[str, Any]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """One request as a ``ubi_queries`` document and its ``ubi_events`` (a click per thumb up)."""
    when = row["time"].isoformat().replace("+00:00", "Z") if row.get("time") else None
    ids = [d["id"] for d in row.get("docs") or ()]
    query = {
        "query_id": row["request_id"],
        "user_query": row["query"],
        "query_response_hit_ids": ids,
        "client_id": row.get("session"),
        "timestamp": when,
        "application": "bench",
        "query_attributes": json.loads(row["filters"]) if row.get("filters") else {},
    }
    events = []
    if row.get("feedback") == "up" and ids:
        events.append(
            {
                "action_name": "click",
                "query_id": row["request_id"],
                "session_id": row.get("session"),
                "client_id": row.get("session"),
                "timestamp": when,
                "event_attributes": {
                    "object": {"object_id": ids[0], "object_id_field": "_id"},
                    "position": {"ordinal": 1},
                },
            }
        )
    return query, events


def write_otlp(rows: Iterable[Mapping[str, Any]], path: Path) -> int:
    """Every request of ``rows`` as OTLP/JSON lines in ``path``; returns the lines written."""
    n = 0
    with path.open("w", encoding="utf-8") as fh:
        for row in rows:
            fh.write(otlp_line(row) + "\n")
            n += 1
    return n


def write_ubi(rows: Iterable[Mapping[str, Any]], queries: Path, events: Path) -> int:
    """Every request of ``rows`` as UBI export lines (queries and events); returns the queries."""
    n = 0
    with queries.open("w", encoding="utf-8") as qf, events.open("w", encoding="utf-8") as ef:
        for row in rows:
            query, evs = ubi_documents(row)
            qf.write(json.dumps(query, ensure_ascii=False) + "\n")
            for ev in evs:
                ef.write(json.dumps(ev, ensure_ascii=False) + "\n")
            n += 1
    return n


def parquet_rows(path: Path, batch_size: int = 4096) -> Iterator[dict[str, Any]]:
    """The rows of a ``requests.parquet``, a batch at a time."""
    import pyarrow.parquet as pq

    for batch in pq.ParquetFile(path).iter_batches(batch_size=batch_size):
        yield from batch.to_pylist()
