"""Test sets from the demo corpus in Chinese and English: checked, distinct, and runnable as is."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from support.paths import REPO_ROOT

from ragaudit.cache import Gateway
from ragaudit.cache._fake import FakeRequest
from ragaudit.dataset import load_questions
from ragaudit.flows.evaluate import evaluate
from ragaudit.lang import sentences
from ragaudit.metrics import Deps
from ragaudit.runfolder import RunFolder
from ragaudit.testset import generate_testset, write_question_set

REPO = REPO_ROOT
CORPUS = [
    json.loads(line)
    for line in (REPO / "data" / "demo" / "corpus.jsonl").read_text(encoding="utf-8").splitlines()
]


def generator(req: FakeRequest) -> Any:
    """A scripted generator and checker: questions from the contexts' first sentences.

    The checker answers from the question's kind, which it reads back from the question text,
    except for one marked question it rejects: the check must drop it.
    """
    inp = req.payload
    if req.title == "GeneratedQuestion":
        first = [sentences(c)[0][:60] for c in inp["contexts"]]
        zh = any("\u4e00" <= ch <= "\u9fff" for ch in "".join(first))
        ask = "是什么？" if zh else "?"
        if inp["kind"] == "unanswerable":
            last = sentences(inp["contexts"][0])[-1][-40:]
            return {"question": f"[U] who denied, and when: {last} {ask}", "reference": "unknown"}
        return {"question": f"[A] {' / '.join(first)} {ask}", "reference": " ".join(first)}
    if req.title == "AnswerabilityVerdict":
        q = inp["question"]
        if "dr181601-reject" in q:
            return {"answerable": False, "reason": "scripted rejection"}
        return {"answerable": q.startswith("[A]"), "reason": "scripted"}
    return None


@pytest.fixture
def gateway(tmp_path: Path):
    gw = Gateway(tmp_path / "memo", concurrency=16, backoff_s=0.0, max_retries=1)
    yield gw
    gw.close()


def make(gateway: Gateway, corpus: list[dict[str, Any]], size: int) -> list[dict[str, Any]]:
    deps = Deps.of(gateway=gateway, judge="fake/judge", embedder="fake/embed", options={})
    return asyncio.run(generate_testset(corpus, deps, generator="fake/gen", size=size))


@pytest.mark.parametrize("language", ["zh", "en"])
def test_testset_of_twenty_checked_questions(fake, gateway, tmp_path, language) -> None:
    corpus = [c for c in CORPUS if c["id"].startswith("dr") == (language == "zh")]
    with fake.script(generator):
        rows = make(gateway, corpus, size=20)
    assert len(rows) == 20
    kinds = {r["metadata"]["testset"]["kind"] for r in rows}
    assert kinds == {"single_document", "multi_document", "unanswerable"}
    assert {r["language"] for r in rows} == {language}
    asked = [r for r in fake.stats.requests if r.title == "AnswerabilityVerdict"]
    checked = {r.payload["question"] for r in asked}
    for row in rows:
        assert row["question"] in checked  # every kept row passed the second call
        assert row["reference_context_ids"] and row["filters"]["collection"]
        meta = row["metadata"]["testset"]
        assert meta["generator"] == "fake/gen" and meta["checked_by"] == "fake/judge"
    assert len({r["question"] for r in rows}) == 20  # near-duplicates removed
    path = write_question_set(rows, tmp_path / "testset.jsonl")
    loaded = load_questions(path)
    assert [q.question_id for q in loaded] == [r["question_id"] for r in rows]


def test_a_question_failing_the_check_is_dropped(fake, gateway) -> None:
    corpus = [c for c in CORPUS if c["id"].startswith("we")]

    def reject_one(req: FakeRequest) -> Any:
        if req.title == "AnswerabilityVerdict" and req.payload["question"].startswith("[A]"):
            return {"answerable": False, "reason": "no"}
        return None

    with fake.script(generator), fake.script(reject_one):
        rows = make(gateway, corpus, size=50)
    assert rows and {r["metadata"]["testset"]["kind"] for r in rows} == {"unanswerable"}


def test_testset_command_reads_the_corpus_like_the_search_stages(fake, tmp_path) -> None:
    """``ragaudit testset`` takes any corpus ``read_corpus`` takes: here a folder of Markdown."""
    from typer.testing import CliRunner

    from ragaudit.cli import app

    folder = tmp_path / "docs"
    folder.mkdir()
    for c in CORPUS[:3]:
        (folder / f"{c['id']}.md").write_text(c["text"], encoding="utf-8")
    out = tmp_path / "testset.jsonl"
    args = ["testset", str(out), "--corpus", str(folder), "--size", "2"]
    args += ["--judge", "fake/judge", "--set", f"cache_dir={tmp_path / 'cache'}"]
    with fake.script(generator):
        result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert len(rows) == 2
    names = {f"{c['id']}.md" for c in CORPUS[:3]}
    assert all(set(r["reference_context_ids"]) <= names for r in rows)


@pytest.mark.usefixtures("prefect_harness")
def test_generated_testset_runs_through_run_unchanged(
    fake, gateway, tmp_path, config_factory
) -> None:
    with fake.script(generator):
        rows = make(gateway, CORPUS, size=20)
    path = write_question_set(rows, tmp_path / "testset.jsonl")
    config = config_factory(questions=str(path))
    manifest = asyncio.run(evaluate(config.model_dump_json(), "ts", None))
    assert manifest["status"] in {"completed", "completed_with_failures"}
    scores = pl.from_arrow(RunFolder(config.runs_root, "ts").read("scores"))
    assert scores["question_id"].n_unique() == 20
    assert scores.filter(pl.col("status") == "ok").height > 0
