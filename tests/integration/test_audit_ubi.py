"""The audit's UBI reader through a real OpenSearch-compatible engine (osmem-server on loopback).

The day's ``ubi_queries`` are read by timestamp with their ``ubi_events`` (clicks become the
request's feedback); the served ids' texts are then fetched from the engine's corpus index by
the opensearch backend's ``fetch_texts``; an export file of the same indexes reads alike.
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow.parquet as pq
from opensearchpy import OpenSearch

from ragaudit.audit import RedactOptions, SourceOptions, read_day
from ragaudit.audit._content import content_digest, resolve_texts
from ragaudit.search import Document, make_backend

DAY = dt.date(2026, 11, 26)

QUERIES = [
    {
        "query_id": "q1",
        "user_query": "refund policy for bob@example.net",
        "query_response_hit_ids": ["kb-1", "kb-2", "kb-3"],
        "client_id": "c1",
        "timestamp": "2026-11-26T08:00:00Z",
        "application": "shop",
        "query_attributes": {"collection": "acme"},
    },
    {
        "query_id": "q2",
        "user_query": "warranty",
        "query_response_hit_ids": ["kb-3"],
        "client_id": "c2",
        "timestamp": "2026-11-26T21:15:00Z",
        "application": "shop",
    },
    {  # the day before: another partition
        "query_id": "q0",
        "user_query": "old question",
        "query_response_hit_ids": ["kb-1"],
        "client_id": "c1",
        "timestamp": "2026-11-25T23:59:00Z",
    },
    {  # no user_query: does not map, named by its id
        "query_id": "q3",
        "query_response_hit_ids": ["kb-2"],
        "client_id": "c3",
        "timestamp": "2026-11-26T12:00:00Z",
    },
]
EVENTS = [
    {
        "action_name": "click",
        "query_id": "q1",
        "session_id": "sess-1",
        "client_id": "c1",
        "timestamp": "2026-11-26T08:00:09Z",
        "event_attributes": {
            "object": {"object_id": "kb-2", "object_id_field": "_id"},
            "position": {"ordinal": 2},
        },
    },
    {
        "action_name": "impression",
        "query_id": "q1",
        "session_id": "sess-1",
        "client_id": "c1",
        "timestamp": "2026-11-26T08:00:01Z",
        "event_attributes": {"object": {"object_id": "kb-1"}, "position": {"ordinal": 1}},
    },
]


def seed(url: str) -> None:
    # A generous timeout: the test machine is shared, and a slow answer is not what is tested.
    client = OpenSearch(hosts=[url], timeout=120)
    client.indices.create(
        index="ubi_queries",
        body={
            "mappings": {
                "properties": {
                    "query_id": {"type": "keyword"},
                    "timestamp": {"type": "date"},
                    "query_response_hit_ids": {"type": "keyword"},
                }
            }
        },
    )
    client.indices.create(
        index="ubi_events",
        body={
            "mappings": {
                "properties": {"query_id": {"type": "keyword"}, "timestamp": {"type": "date"}}
            }
        },
    )
    for doc in QUERIES:
        client.index(index="ubi_queries", body=doc, id=doc["query_id"])
    for i, doc in enumerate(EVENTS):
        client.index(index="ubi_events", body=doc, id=f"e{i}")
    client.indices.refresh(index="ubi_queries,ubi_events")
    client.close()


def read(src: SourceOptions, out: Path) -> Any:
    return read_day(
        src, RedactOptions(), DAY, segment="filters.collection", out=out, max_bad_share=0.5
    )


def check(rows: list[dict[str, Any]]) -> None:
    by_id = {r["request_id"]: r for r in rows}
    assert set(by_id) == {"q1", "q2"}
    q1 = by_id["q1"]
    assert q1["query"] == "refund policy for [email]"
    assert q1["time"] == dt.datetime(2026, 11, 26, 8, 0, tzinfo=dt.UTC)
    assert q1["session"] == "sess-1"  # the events' session; the client id without events
    assert q1["segment"] == "acme" and by_id["q2"]["segment"] == "(none)"
    assert [(d["rank"], d["id"], d["text"]) for d in q1["docs"]] == [
        (1, "kb-1", None),
        (2, "kb-2", None),
        (3, "kb-3", None),
    ]
    assert json.loads(q1["feedback"]) == [
        {"action": "impression", "object_id": "kb-1", "position": 1},
        {"action": "click", "object_id": "kb-2", "position": 2},
    ]
    assert by_id["q2"]["session"] == "c2" and by_id["q2"]["feedback"] is None


async def test_ubi_indexes_read_through_opensearch(osmem_url: str, tmp_path: Path) -> None:
    seed(osmem_url)
    out = tmp_path / "requests.parquet"
    report = read(SourceOptions(format="ubi", ubi={"hosts": [osmem_url]}), out)
    assert (report.records, report.bad) == (2, 1)
    assert report.bad_samples == [("ubi:q3", "no user_query")]
    assert report.redactions == {"email": 1}
    rows = pq.read_table(out).to_pylist()
    check(rows)
    assert {r["origin"] for r in rows} == {"ubi:q1", "ubi:q2"}

    # The served ids' texts from the corpus index, by the opensearch backend.
    backend = make_backend("opensearch", hosts=[osmem_url], index="kb")
    backend.index(
        [
            Document("kb-1", "Refunds within 30 days.", {"collection": "acme"}),
            Document("kb-2", "Write to refunds@example.net.", {"collection": "acme"}),
            Document("kb-3", "Two-year warranty.", {"collection": "acme"}),
        ]
    )
    try:
        requests = pl.read_parquet(out)
        resolved = await resolve_texts(requests, backend.fetch_texts)  # type: ignore[attr-defined]
        texts = {d["id"]: d["text"] for ds in resolved["docs"].to_list() for d in ds}
        assert texts == {
            "kb-1": "Refunds within 30 days.",
            "kb-2": "Write to [email].",
            "kb-3": "Two-year warranty.",
        }
        assert await backend.fetch_texts(["kb-9"]) == {}  # type: ignore[attr-defined]
    finally:
        await backend.aclose()  # type: ignore[attr-defined]
    assert content_digest("x")  # the helper the changed flag compares with


def test_ubi_export_files_read_alike(tmp_path: Path) -> None:
    exports = tmp_path / "ubi"
    exports.mkdir()
    day_queries = [q for q in QUERIES if q["timestamp"].startswith("2026-11-26")]
    # One bare document and the rest as search hits, as an index export writes them.
    lines = [json.dumps(day_queries[0])] + [json.dumps({"_source": q}) for q in day_queries[1:]]
    (exports / "queries-2026-11-26.jsonl").write_text("\n".join(lines) + "\n")
    (exports / "events-2026-11-26.jsonl").write_text(
        "\n".join(json.dumps(e) for e in EVENTS) + "\n"
    )
    out = tmp_path / "requests.parquet"
    report = read(
        SourceOptions(
            format="ubi",
            path=str(exports / "queries-{day}.jsonl"),
            ubi={"events_path": str(exports / "events-{day}.jsonl")},
        ),
        out,
    )
    assert (report.records, report.bad) == (2, 1)
    assert report.bad_samples[0][0].endswith("queries-2026-11-26.jsonl:3")
    check(pq.read_table(out).to_pylist())
