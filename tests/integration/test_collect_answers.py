"""Answer sources: the live system over HTTP (a real server on loopback), entrypoints, columns."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from support.servers import AnswerServer

from ragaudit.answers import answer_one, json_path, make_source
from ragaudit.config import AnswerConfig, load_config
from ragaudit.dataset import Question
from ragaudit.errors import ConfigError
from ragaudit.runfolder import RunFolder
from ragaudit.schemas import ANSWERS, to_table
from ragaudit.tasks._common import make_context
from ragaudit.tasks.collect import collect

API_KEY = "qa-service-key-7f3a9c"
SEED_PARAMS = {"message": "{{ question }}", "company_name": "{{ filters.collection }}"}


@pytest.fixture
def service() -> Iterator[AnswerServer]:
    server = AnswerServer()
    yield server
    server.close()


def q(collection: str, text: str = "主营业务是什么", qid: str | None = None) -> Question:
    return Question(
        question_id=qid or f"q-{collection}", question=text, filters={"collection": collection}
    )


def http_config(url: str, **kw: Any) -> AnswerConfig:
    http = {"url": url, "params": SEED_PARAMS, **kw.pop("http", {})}
    return AnswerConfig.model_validate(
        {"source": "http", "http": http, "retries": 2, "backoff_s": 0.0, **kw}
    )


def ask(config: AnswerConfig, *questions: Question) -> list[dict[str, Any]]:
    async def go() -> list[dict[str, Any]]:
        source = make_source(config)
        try:
            return list(
                await asyncio.gather(*(answer_one(source, x, config, "r") for x in questions))
            )
        finally:
            await source.aclose()

    return asyncio.run(go())


def test_streamed_lines_give_the_last_non_empty_line(service: AnswerServer) -> None:
    (row,) = ask(http_config(f"{service.url}/qa"), q("东方航空"))
    assert row["status"] == "ok" and row["source"] == "http"
    assert row["response"] == "An answer about 主营业务是什么 for 东方航空"
    assert service.attempts["东方航空"] == 1


def test_json_post_with_a_body_template_and_json_path(service: AnswerServer) -> None:
    config = http_config(
        f"{service.url}/json",
        http={
            "method": "POST",
            "params": {},
            "response": "json",
            "json_path": "$.data.choices[0].text",
            "body": {"question": "{{ question }}", "collection": "{{ filters.collection }}"},
        },
    )
    nasty = 'say "hi" }} {{ 7*7 }} {% raw %}'
    (row,) = ask(config, q("acme", nasty))
    # The question travels as data: quotes and template syntax arrive untouched.
    assert row["status"] == "ok" and row["response"] == f"An answer about {nasty} for acme"


def test_json_path_reads_nested_values() -> None:
    doc = {"data": {"choices": [{"text": "a"}, {"text": "b"}]}, "x.y": 1}
    assert json_path(doc, "data.choices[1].text") == "b"
    assert json_path(doc, '$["x.y"]') == 1
    with pytest.raises(KeyError, match="no value at 'data.answer'"):
        json_path(doc, "data.answer")


def test_transient_failures_are_retried_with_a_bound(service: AnswerServer) -> None:
    service.plan = {"flaky": ["fail", "throttle", "ok"], "down": ["fail"]}
    flaky, down, fine = ask(http_config(f"{service.url}/qa"), q("flaky"), q("down"), q("fine"))
    assert flaky["status"] == "ok" and service.attempts["flaky"] == 3
    assert down["status"] == "failed" and service.attempts["down"] == 3  # 1 + retries, never more
    assert down["error"].startswith("after 3 attempts: HTTP 500 from ")
    assert "the model backend is down" in down["error"]
    assert fine["status"] == "ok"


def test_a_slow_service_times_out_per_attempt(service: AnswerServer) -> None:
    service.slow_s = 1.5
    service.plan = {"slow": ["slow"]}
    (row,) = ask(http_config(f"{service.url}/qa", timeout_s=0.3, retries=1), q("slow"))
    assert row["status"] == "failed"
    assert row["error"] == "after 2 attempts: no complete answer within 0.3 s"
    # The client gives up after 0.3 s whether or not the server's thread has read the second
    # request yet (on a loaded machine it may not have): wait for the server to see it.
    deadline = time.monotonic() + 10
    while service.attempts["slow"] < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert service.attempts["slow"] == 2


def test_client_errors_fail_at_once_and_say_what_to_check(service: AnswerServer) -> None:
    service.plan = {"gone": ["missing"], "quiet": ["empty"]}
    gone, quiet = ask(http_config(f"{service.url}/qa"), q("gone"), q("quiet"))
    assert gone["status"] == "failed" and service.attempts["gone"] == 1
    assert (
        gone["error"].startswith("after 1 attempt: HTTP 404 from ")
        and "check collect.answers.http.url" in gone["error"]
    )
    # An empty stream is what the seed looped on forever: here it is retried, then failed.
    assert (
        quiet["status"] == "failed"
        and service.attempts["quiet"] == 3
        and "not an answer" in quiet["error"]
    )


def test_unreachable_service_is_named(tmp_path: Path) -> None:
    (row,) = ask(http_config("http://127.0.0.1:9/qa", retries=0), q("x"))
    assert row["status"] == "failed" and "cannot reach http://127.0.0.1:9/qa" in row["error"]


def test_api_key_header_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    server = AnswerServer(api_key=API_KEY)
    try:
        monkeypatch.setenv("QA_SERVICE_TOKEN", API_KEY)
        config = http_config(
            f"{server.url}/qa", http={"secret_headers": {"X-API-Key": {"env": "QA_SERVICE_TOKEN"}}}
        )
        (ok,) = ask(config, q("acme"))
        assert ok["status"] == "ok" and server.headers_seen["acme"][0]["x-api-key"] == API_KEY
        monkeypatch.setenv("QA_SERVICE_TOKEN", "wrong-key-123456")
        (refused,) = ask(config, q("globex"))
        assert refused["status"] == "failed" and server.attempts["globex"] == 1
        assert (
            "HTTP 401" in refused["error"]
            and "collect.answers.http.secret_headers" in refused["error"]
        )
        assert (
            API_KEY not in json.dumps([ok, refused]) and "wrong-key-123456" not in refused["error"]
        )
        monkeypatch.delenv("QA_SERVICE_TOKEN")
        with pytest.raises(
            ConfigError,
            match="secret_headers.X-API-Key: environment variable QA_SERVICE_TOKEN is not set",
        ):
            make_source(config)
    finally:
        server.close()


def test_template_that_does_not_render_fails_that_question_only(service: AnswerServer) -> None:
    config = http_config(
        f"{service.url}/qa",
        http={"params": {"message": "{{ question }}", "c": "{{ filters.company }}"}},
    )
    (row,) = ask(config, q("acme"))
    assert row["status"] == "failed" and row["error"].startswith(
        "after 1 attempt: collect.answers.http.params"
    )
    assert "has no attribute 'company'" in row["error"] and service.attempts["acme"] == 0


def test_entrypoint_sync_and_async_and_column(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "my_chain.py").write_text(
        "import asyncio\n"
        "def invoke(question, filters):\n    return f'sync {question} {filters[\"collection\"]}'\n"
        "async def ainvoke(question, filters):\n"
        "    await asyncio.sleep(0)\n    return f'async {question}'\n"
        "class Chain:\n    @staticmethod\n    def run(question, filters):\n        return None\n",
        encoding="utf-8",
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    base = {"retries": 0, "backoff_s": 0.0}
    (row,) = ask(
        AnswerConfig(source="entrypoint", entrypoint="my_chain:invoke", **base), q("acme", "hi")
    )
    assert row["response"] == "sync hi acme"
    (row,) = ask(
        AnswerConfig(source="entrypoint", entrypoint="my_chain:ainvoke", **base), q("acme", "hi")
    )
    assert row["response"] == "async hi"
    (row,) = ask(
        AnswerConfig(source="entrypoint", entrypoint="my_chain:Chain.run", **base), q("acme", "hi")
    )
    assert row["status"] == "failed" and "the source returned None, not an answer" in row["error"]
    with pytest.raises(ConfigError, match="cannot load 'my_chain:nothing'"):
        make_source(AnswerConfig(source="entrypoint", entrypoint="my_chain:nothing"))
    stored = Question(
        question_id="s", question="x", response="kept", metadata={"live": "from metadata"}
    )
    assert ask(AnswerConfig(), stored)[0]["response"] == "kept"
    assert ask(AnswerConfig(column="live"), stored)[0]["response"] == "from metadata"
    (skipped,) = ask(AnswerConfig(column="other"), stored)
    assert skipped["status"] == "skipped" and "no other" in skipped["error"]


@pytest.mark.parametrize(
    ("answers", "field", "says"),
    [
        ({"source": "http"}, "collect.answers.source", "needs collect.answers.http.url"),
        ({"source": "entrypoint"}, "collect.answers.source", "needs collect.answers.entrypoint"),
        (
            {"source": "http", "http": {"url": "http://u:p@qa.internal/qa"}},
            "collect.answers.http.url",
            "must not hold credentials",
        ),
        (
            {"http": {"secret_headers": {"X-Key": {"env": "A", "secret": "b"}}}},
            "collect.answers.http.secret_headers.X-Key",
            "exactly one of env",
        ),
        (
            {"source": "grpc"},
            "collect.answers.source",
            "unknown answer source 'grpc' (known: column, entrypoint, http)",
        ),
    ],
)
def test_answer_config_errors_name_the_field(
    answers: dict[str, Any], field: str, says: str
) -> None:
    with pytest.raises(ConfigError) as info:
        load_config(None, {"collect": {"answers": answers}}, environ={})
    assert str(info.value).startswith(f"config: {field}: ") and says in str(info.value)


def test_collect_stage_limits_concurrency_and_isolates_failures(
    service: AnswerServer, config_factory: Any, tmp_path: Path
) -> None:
    service.slow_s = 0.15
    rows = [
        {
            "question_id": f"q{i}",
            "question": f"question {i}",
            "filters": {"collection": f"c{i}"},
            "retrieved_contexts": [f"context of {i}"],
        }
        for i in range(9)
    ]
    service.plan = {f"c{i}": ["slow"] for i in range(9)} | {"c4": ["fail"]}
    path = tmp_path / "q.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows), encoding="utf-8")
    config = config_factory(
        questions=str(path),
        collect__backend="question_set",
        collect__answers={
            "source": "http",
            "http": {"url": f"{service.url}/qa", "params": SEED_PARAMS},
            "concurrency": 3,
            "retries": 1,
            "backoff_s": 0.0,
        },
    )
    ctx = make_context(config.model_dump_json(), str(config.runs_root), "a")
    asyncio.run(collect(ctx))
    answers = pl.from_arrow(ctx.run.read("answers")).sort("question_id")
    assert answers.filter(pl.col("status") == "failed")["question_id"].to_list() == ["q4"]
    assert answers.filter(pl.col("status") == "ok").height == 8
    assert 1 < service.max_inflight <= 3
    retrieval = pl.from_arrow(ctx.run.read("retrieval"))
    assert set(retrieval["backend"]) == {"question_set"} and set(retrieval["status"]) == {"ok"}


def test_the_cited_documents_keep_their_places_through_the_run_folder(
    service: AnswerServer, tmp_path: Path
) -> None:
    # What the service lists as cited: nothing at all (an explicit empty list), an entry
    # without an id between two with ids, or no list (the answer cites nothing either).
    service.references = {
        "empty": [],
        "holes": [{"doc_id": "c0"}, {"doc_id": None}, {"doc_id": "c2"}, {}],
    }
    config = http_config(
        f"{service.url}/json",
        http={
            "method": "POST",
            "params": {},
            "response": "json",
            "json_path": "data.choices[0].text",
            "citations_path": "references",
            "citation_id_field": "doc_id",
            "body": {"question": "{{ question }}", "collection": "{{ filters.collection }}"},
        },
    )
    rows = ask(config, q("empty", qid="empty"), q("holes", qid="holes"), q("none", qid="none"))
    assert [r["status"] for r in rows] == ["ok"] * 3
    # Marker [3] names the third listed entry (c2) and [2] an unknown one: nothing shifts.
    expected = {"empty": [], "holes": ["c0", "", "c2", ""], "none": []}
    assert {r["question_id"]: r["citation_ids"] for r in rows} == expected
    # The score stage reads them back as written: an empty list stays a list (cites
    # nothing), it never becomes null (which numbers the retrieved contexts instead).
    folder = RunFolder(tmp_path, "r")
    folder.write("answers", to_table(rows, ANSWERS))
    assert {k: v["citation_ids"] for k, v in folder.answers().items()} == expected
    assert ask(http_config(f"{service.url}/qa"), q("plain"))[0]["citation_ids"] is None
