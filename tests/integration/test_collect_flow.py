"""A whole evaluation against live components on loopback, under the session's Prefect harness.

Candidates come from a real OpenSearch-compatible engine (osmem-server, seeded by
``ragaudit index``) behind a front that demands basic auth; answers from a real HTTP QA
service that demands an API key and fails for some questions. The password comes from a
Prefect Secret block, the API key from an environment variable; neither may appear in the
run folder, the LLM cache, or anything logged.
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from support.servers import DEMO_CORPUS, AnswerServer, EsFront, index_into

from ragaudit.flows.evaluate import evaluate
from ragaudit.runfolder import RunFolder

pytestmark = pytest.mark.usefixtures("prefect_harness")

PASSWORD = "os-Secret-Passw0rd-41d8"
API_KEY = "qa-api-key-9b2e4f7c1d"
BLOCK = "ragaudit-test-os-password"


@pytest.fixture(scope="module")
def engine(osmem_server: Any) -> Iterator[Any]:
    clone = osmem_server.clone()
    try:
        index_into(clone.url, DEMO_CORPUS, "demo")
        yield clone
    finally:
        clone.close()


def files_holding(root: Path, *secrets: str) -> list[str]:
    hits = []
    for path in root.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            hits += [f"{path}: {s[:3]}…" for s in secrets if s.encode() in data]
    return hits


def test_live_run_with_failing_answers_completes_and_leaks_no_secret(
    engine: Any,
    config_factory: Any,
    fake: Any,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    capfd: pytest.CaptureFixture[str],
) -> None:
    from prefect.blocks.system import Secret

    Secret(value=PASSWORD).save(BLOCK, overwrite=True)
    monkeypatch.setenv("RAGAUDIT_TEST_QA", API_KEY)  # a name the redactor would not guess
    basic = "Basic " + base64.b64encode(f"admin:{PASSWORD}".encode()).decode()
    front = EsFront(engine.url)
    front.accepted_auth = {basic}
    service = AnswerServer(api_key=API_KEY)
    service.plan = {"we000": ["fail"], "we001": ["fail"]}  # the English questions' answers fail
    caplog.set_level(logging.DEBUG)
    try:
        config = config_factory(
            # Ranking and reference writing add nothing to what is checked here: skipped for time.
            sort__enabled=False,
            ground_truth__enabled=False,
            score__metrics=["faithfulness", "rouge_l"],
            collect__backend="opensearch",
            collect__corpus=None,
            collect__opensearch={
                "hosts": [front.url],
                "index": "demo",
                "username": "admin",
                "password_secret": BLOCK,
                "retries": 0,
            },
            collect__answers={
                "source": "http",
                "retries": 1,
                "backoff_s": 0.0,
                "http": {
                    "url": f"{service.url}/qa",
                    "params": {
                        "message": "{{ question }}",
                        "company_name": "{{ filters.collection }}",
                    },
                    "secret_headers": {"X-API-Key": {"env": "RAGAUDIT_TEST_QA"}},
                },
            },
        )
        manifest = asyncio.run(evaluate(config.model_dump_json(), "live", None))
    finally:
        front.close()
        service.close()
    run = RunFolder(config.runs_root, "live")
    assert manifest["status"] == "completed"

    answers = pl.from_arrow(run.read("answers"))
    failed = answers.filter(pl.col("status") == "failed")
    assert sorted(failed["question_id"]) == ["we000", "we001"]
    assert all(e.startswith("after 2 attempts: HTTP 500 from ") for e in failed["error"])
    ok = answers.filter(pl.col("status") == "ok")
    assert sorted(ok["question_id"]) == ["dr181577", "dr181589", "dr181601"]
    assert all(r.startswith("An answer about ") for r in ok["response"])

    retrieval = pl.from_arrow(run.read("retrieval"))
    assert set(retrieval["status"]) == {"ok"} and set(retrieval["backend"]) == {"opensearch"}
    candidates = pl.from_arrow(run.read("candidates"))
    per_question = dict(candidates.group_by("question_id").len().iter_rows())
    assert per_question == dict(
        zip(retrieval["question_id"], retrieval["n_candidates"], strict=True)
    )
    assert len(per_question) == 5 and all(1 <= n <= 6 for n in per_question.values())
    assert all(
        json.loads(src)["collection"] == qid
        for qid, src in candidates.select("question_id", "source").iter_rows()
    )
    scores = pl.from_arrow(run.read("scores")).filter(pl.col("metric") == "faithfulness")
    status = dict(zip(scores["question_id"], scores["status"], strict=True))
    assert status == {
        "dr181577": "ok",
        "dr181589": "ok",
        "dr181601": "ok",
        "we000": "skipped",
        "we001": "skipped",
    }

    # Both secrets were really used ...
    assert front.requests and {r["headers"].get("authorization") for r in front.requests} == {basic}
    assert service.headers_seen["dr181577"][0]["x-api-key"] == API_KEY
    assert manifest["config"]["collect"]["opensearch"]["password_secret"] == BLOCK
    # ... and are nowhere: run folder (tables, manifest, call logs), LLM cache, logs, output.
    assert files_holding(run.path, PASSWORD, API_KEY, basic) == []
    assert files_holding(Path(config.cache_dir), PASSWORD, API_KEY, basic) == []
    out, err = capfd.readouterr()
    for secret in (PASSWORD, API_KEY, basic):
        assert secret not in caplog.text and secret not in out and secret not in err
    assert any("we000" in r.getMessage() and "no answer" in r.getMessage() for r in caplog.records)
