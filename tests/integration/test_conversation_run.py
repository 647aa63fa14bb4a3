"""A conversation set through ``ragaudit run`` with the fake judge: every judge prompt of a
follow-up holds the turns before it, a first turn's prompts are a lone question's, the run's
questions table keeps each turn's history and what its prompts left out."""

from __future__ import annotations

import json
from typing import Any

import pyarrow.parquet as pq
import pytest
from support.cli import DEMO_CORPUS
from support.paths import REPO_ROOT
from support.servers import ragaudit

CONVERSATIONS = REPO_ROOT / "data" / "demo" / "conversations.jsonl"


@pytest.fixture(scope="module")
def chat_run(tmp_path_factory: pytest.TempPathFactory, prefect_harness: None) -> dict[str, Any]:
    from ragaudit.cache._fake import FAKE

    tmp = tmp_path_factory.mktemp("chat")
    FAKE.reset(keep_requests=True)
    out = ragaudit(
        "run",
        "--questions",
        str(CONVERSATIONS),
        "--runs-root",
        str(tmp / "runs"),
        "--run-id",
        "chat",
        "--judge",
        "fake/judge",
        "--embedder",
        "fake/embed",
        "--set",
        f"cache_dir={tmp / 'cache'}",
        "--set",
        f"collect.index_path={tmp / 'index'}",
        "--set",
        f"collect.corpus={DEMO_CORPUS}",
        "--set",
        "conversation.max_history_turns=1",
    )
    requests = list(FAKE.stats.requests)
    FAKE.reset()
    return {"out": out, "folder": tmp / "runs" / "chat", "requests": requests}


def _prompts(requests: list[Any], needle: str) -> list[str]:
    texts = ["\n".join(str(m.get("content")) for m in r.messages) for r in requests]
    return [t for t in texts if needle in t]


def test_every_judge_prompt_of_a_follow_up_holds_the_turns_before_it(
    chat_run: dict[str, Any],
) -> None:
    requests = chat_run["requests"]
    # Turn 2 of the gecko conversation ("what does it eat") is asked with turn 1 beside it.
    follow_up = [p for p in _prompts(requests, "它主要吃什么") if "会咬人吗" not in p]
    assert follow_up, "no judge prompt of the follow-up"
    assert all("壁虎是益虫吗" in p for p in follow_up)
    stages = {
        r.stage.split(":", 1)[0]
        for r in requests
        if "它主要吃什么" in "".join(str(m.get("content")) for m in r.messages)
    }
    # Grades and reference answers at least (the fake judge's scores need no more).
    assert {"sort", "ground_truth"} <= stages, stages
    # max_history_turns 1: turn 3 shows turn 2, not turn 1, and says one exchange was cut.
    third = _prompts(requests, "会咬人吗")
    assert third and all("它主要吃什么" in p and "壁虎是益虫吗" not in p for p in third)
    assert all("省略了更早的 1 轮对话" in p for p in third)
    # A first turn is a lone question: no conversation block at all.
    first = [
        p
        for p in _prompts(requests, "Who is the Managing Director of FoodFutureCo")
        if "her accomplishments" not in p
    ]
    assert first and not any("conversation so far" in p for p in first)


def test_the_questions_table_keeps_each_turns_history_and_its_cut(
    chat_run: dict[str, Any],
) -> None:
    rows = {
        r["question_id"]: r
        for r in pq.read_table(chat_run["folder"] / "questions.parquet").to_pylist()
    }
    assert rows["gecko-zh::1"]["question"] == "壁虎是益虫吗"
    third = json.loads(rows["gecko-zh::3"]["conversation"])
    assert third["turn"] == 3 and len(third["history"]) == 4 and third["history_cut"] == 1
    assert json.loads(rows["pageant-en::1"]["conversation"])["history_cut"] == 0
    manifest = json.loads((chat_run["folder"] / "manifest.json").read_text())
    assert manifest["status"] in ("completed", "completed_with_failures")


def test_the_report_breaks_the_metrics_down_by_turn(chat_run: dict[str, Any]) -> None:
    from ragaudit.reporting import build_report

    rows = pq.read_table(chat_run["folder"] / "summary.parquet").to_pylist()
    cells = {(r["breakdown"], r["cell"]) for r in rows if r["kind"] == "breakdown"}
    assert {("turn_band", "1"), ("turn_band", "2"), ("turn_kind", "standalone")} <= cells
    report = build_report(chat_run["folder"])
    bands = report.breakdowns[0]
    assert bands.name == "turn_band" and bands.size("1") == 4  # the four conversations' first
    third = next(q for q in report.questions if q.question_id == "gecko-zh::3")
    assert third.conversation is not None and third.conversation.history_cut == 1
    assert [t.left_out for t in third.conversation.history] == [True, True, False, False]
    assert "By turn position" in chat_run["out"]
