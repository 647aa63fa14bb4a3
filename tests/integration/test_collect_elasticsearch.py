"""The elasticsearch backend's wiring with the official 9.x client.

No Elasticsearch installs here, and the 9.x client refuses servers that are not
Elasticsearch, so it talks to :class:`EsFront`: an HTTP server on loopback that answers like
Elasticsearch 9 (compatible-with=9 media types, ``X-Elastic-Product``, the ``_pit``
endpoints, security errors) in front of a real OpenSearch-compatible engine. What is checked
here is what the client sends (auth headers, paging requests) and how its errors are read;
ranking itself is the engine's and is checked in test_collect_search.py.
"""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.servers import EsFront, make_corpus, ragaudit, seeded_clone

from ragaudit.search import Hit, SearchError, make_backend

API_KEY = "VnVhQ2ZHY0JDZGJrUW0tZTVhT3g6dWkybHAyYXhUTm1zeWFrdzl0dk5udw=="
PASSWORD = "es-Pa55word-for-tests"
CONSTANT = {"query": {"constant_score": {"filter": {"bool": {"must": "{{ filter_clauses }}"}}}}}


@pytest.fixture(scope="module")
def engine(osmem_server: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    yield from seeded_clone(osmem_server, tmp_path_factory.mktemp("es-corpus"))


@pytest.fixture
def front(engine: Any) -> Iterator[EsFront]:
    f = EsFront(engine.url)
    yield f
    f.close()


def es(front: EsFront, **kw: Any) -> Any:
    options = {"hosts": [front.url], "index": "tests", "retries": 0, "backoff_s": 0.0, **kw}
    return make_backend("elasticsearch", **options)


def search(
    b: Any, query: str = "refund policy", filters: dict[str, Any] | None = None, top_n: int = 10
) -> list[Hit]:
    async def go() -> list[Hit]:
        try:
            return await b.search(
                query, filters={"collection": "acme"} if filters is None else filters, top_n=top_n
            )
        finally:
            await b.aclose()

    return asyncio.run(go())


def test_search_sends_the_users_query_with_compat_headers_and_reads_engine_order(
    front: EsFront, engine: Any
) -> None:
    excludes = ("content_embedding", "keywords_embedding")
    hits = search(es(front, api_key=API_KEY, source_excludes=excludes), top_n=20)
    same = search(make_backend("opensearch", hosts=[engine.url], index="tests"), top_n=20)
    assert [(h.id, h.rank, h.score) for h in hits] == [(h.id, h.rank, h.score) for h in same]
    (req,) = front.of("POST", "/tests/_search")
    assert "compatible-with=9" in req["headers"]["accept"]
    assert "compatible-with=9" in req["headers"]["content-type"]
    assert req["headers"]["authorization"] == f"ApiKey {API_KEY}"
    # A hand-written client's request, field for field.
    assert json.loads(req["body"]) == {
        "query": {
            "bool": {
                "must": [{"match_phrase": {"metadata.collection": "acme"}}],
                "should": [{"match": {"text": {"query": "refund policy", "boost": 8}}}],
            }
        },
        "_source": {"excludes": list(excludes)},
        "size": 20,
    }


def test_index_command_writes_through_the_official_client(front: EsFront, tmp_path: Path) -> None:
    corpus = make_corpus(tmp_path / "c.jsonl")
    out = ragaudit(
        "index",
        str(corpus),
        "--backend",
        "elasticsearch",
        "--index",
        "es-written",
        "--set",
        f"collect.elasticsearch.hosts=[{front.url}]",
    )
    assert "1080 in the index" in " ".join(out.split())
    assert front.of("PUT", "/es-written")  # created with the generated mappings
    mapping = json.loads(front.of("PUT", "/es-written")[0]["body"])["mappings"]
    assert mapping["properties"]["text"] == {"type": "text"}
    bulk = front.of("PUT", "/_bulk") + front.of("POST", "/_bulk")
    assert bulk and all("x-ndjson; compatible-with=9" in r["headers"]["content-type"] for r in bulk)
    hits = search(es(front, index="es-written"), "stock level", {"collection": "big"}, 5)
    assert len(hits) == 5 and all(h.metadata["collection"] == "big" for h in hits)


@pytest.mark.parametrize(
    ("credentials", "header"),
    [
        ({"api_key": API_KEY}, f"ApiKey {API_KEY}"),
        (
            {"username": "elastic", "password": PASSWORD},
            "Basic " + base64.b64encode(f"elastic:{PASSWORD}".encode()).decode(),
        ),
        ({"bearer": "bearer-token-123456"}, "Bearer bearer-token-123456"),
    ],
)
def test_each_kind_of_credential_reaches_the_server(
    front: EsFront, credentials: dict[str, str], header: str
) -> None:
    front.accepted_auth = {header}
    assert len(search(es(front, **credentials))) == 10
    assert {r["headers"].get("authorization") for r in front.requests} == {header}


def test_refused_credentials_are_one_clear_message_without_the_secret(front: EsFront) -> None:
    front.accepted_auth = {"ApiKey something-else"}
    with pytest.raises(SearchError) as info:
        search(es(front, api_key=API_KEY, auth_hint="api_key_env ES_API_KEY"))
    message = str(info.value)
    assert info.value.kind == "auth" and info.value.fatal
    assert (
        "refused the credentials (401 security_exception: unable to authenticate user)" in message
    )
    assert "api_key_env ES_API_KEY" in message and API_KEY not in message

    front.forbidden_auth = {"Basic " + base64.b64encode(f"reader:{PASSWORD}".encode()).decode()}
    with pytest.raises(SearchError) as info:
        search(es(front, username="reader", password=PASSWORD))
    assert info.value.kind == "forbidden" and "may not read index 'tests'" in str(info.value)
    assert "(403 security_exception" in str(info.value) and PASSWORD not in str(info.value)


def test_point_in_time_paging_requests(front: EsFront) -> None:
    hits = search(es(front, page_size=20, query_template=CONSTANT), "x", {"collection": "big"}, 50)
    assert len({h.id for h in hits}) == 50 and [h.rank for h in hits] == list(range(1, 51))
    (opened,) = front.of("POST", "/tests/_pit")
    assert opened["query"] == {"keep_alive": "2m"}
    pages = [json.loads(r["body"]) for r in front.of("POST", "/_search") if r["path"] == "/_search"]
    assert [p["size"] for p in pages] == [20, 20, 10]
    assert all(p["sort"] == [{"_score": "desc"}, {"_shard_doc": "asc"}] for p in pages)
    assert all(p["pit"]["keep_alive"] == "2m" and p["pit"]["id"] for p in pages)
    assert "search_after" not in pages[0] and pages[1]["search_after"] and pages[2]["search_after"]
    assert pages[1]["search_after"] != pages[2]["search_after"]
    (closed,) = front.of("DELETE", "/_pit")
    assert json.loads(closed["body"])["id"] == pages[-1]["pit"]["id"]
    single = search(es(front, query_template=CONSTANT), "x", {"collection": "big"}, 50)
    assert [h.id for h in hits] == [
        h.id for h in single
    ]  # pages continue exactly where they stopped


def test_scroll_paging_requests(front: EsFront) -> None:
    hits = search(
        es(front, page_size=40, paging="scroll"), "stock level", {"collection": "big"}, 100
    )
    assert len({h.id for h in hits}) == 100
    (first,) = front.of("POST", "/tests/_search")
    assert first["query"]["scroll"] == "2m" and json.loads(first["body"])["size"] == 40
    follow = front.of("POST", "/_search/scroll")
    assert len(follow) == 2 and all(json.loads(r["body"])["scroll_id"] for r in follow)
    assert len(front.of("DELETE", "/_search/scroll")) == 1
    single = search(es(front), "stock level", {"collection": "big"}, 100)
    assert [h.id for h in hits] == [h.id for h in single]


@pytest.mark.parametrize(
    ("options", "kind", "says"),
    [
        ({"index": "nope"}, "missing_index", "index 'nope' does not exist on elasticsearch"),
        (
            {"query_template": {"query": {"no_such_query": {}}}},
            "rejected",
            "rejected the query (400 parsing_exception",
        ),
        (
            {"hosts": ["http://127.0.0.1:9"]},
            "unreachable",
            "cannot reach elasticsearch at http://127.0.0.1:9",
        ),
    ],
)
def test_errors_are_mapped(front: EsFront, options: dict[str, Any], kind: str, says: str) -> None:
    with pytest.raises(SearchError) as info:
        search(es(front, **options))
    assert info.value.kind == kind and says in str(info.value)


def test_a_server_that_is_not_elasticsearch_is_named(front: EsFront, engine: Any) -> None:
    front.product_header = False
    with pytest.raises(SearchError) as info:
        search(es(front))
    message = str(info.value)
    assert info.value.kind == "not_engine"
    assert "is not Elasticsearch" in message and "collect.backend: opensearch" in message
    # The OpenSearch-compatible engine itself refuses the 9.x client's compatible-with=9 media type.
    with pytest.raises(SearchError) as info:
        search(make_backend("elasticsearch", hosts=[engine.url], index="tests", retries=0))
    message = str(info.value)
    assert info.value.kind == "not_engine" and info.value.fatal
    assert "refuses the client's compatible-with=9 media type (406" in message
    assert "collect.backend: opensearch" in message


def test_a_slow_engine_times_out_after_bounded_retries(front: EsFront) -> None:
    front.delay_s = 0.6
    with pytest.raises(SearchError) as info:
        search(es(front, timeout_s=0.2, retries=1, backoff_s=0.01))
    assert info.value.kind == "timeout" and not info.value.fatal
    assert "did not answer within 0.2 s" in str(info.value)
    assert "raise collect.elasticsearch.timeout_s" in str(info.value)
    assert len(front.of("POST", "/tests/_search")) == 2  # the first try and one retry, no more
