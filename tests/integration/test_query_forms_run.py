"""Query forms through the collect stage, the dry run and a tune, on the local backend and the
fake judge: a standalone set's candidates are the same bytes under every form, a turn searches
its rewrite (the set's or the judge's) and the row says what it searched, the dry run counts
the rewrites, and a tune over forms pays each shared (history, document) pair once.
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow.parquet as pq
import pytest
from support.runs import REPO, make_config

from ragaudit.cache import hold_gateway
from ragaudit.dryrun import estimate_collect, start_plan
from ragaudit.runfolder import RunFolder
from ragaudit.tasks._common import make_context
from ragaudit.tasks.collect import collect
from ragaudit.tuning import (
    BASELINE,
    TURNS,
    dry_run,
    judgment_store,
    run_tune,
    shared_texts,
    write_outputs,
)

DEMO = REPO / "data" / "demo"
CONVERSATIONS = DEMO / "conversations.jsonl"
FOLLOW_UPS = 6
"""Turns of the bundled conversations with a history (and no rewrite given)."""


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One local index of the demo corpus, filled by the first search and shared after."""
    return tmp_path_factory.mktemp("index") / "index"


def _collect(tmp: Path, index: Path, **overrides: Any) -> RunFolder:
    config = make_config(tmp, collect__index_path=str(index), **overrides)
    ctx = make_context(config.model_dump_json(), str(config.runs_root), "forms")
    asyncio.run(collect(ctx))
    return ctx.run


def test_a_standalone_set_gets_the_same_candidates_under_every_form(
    tmp_path: Path, index: Path, fake: Any
) -> None:
    today = _collect(tmp_path / "default", index)
    files = {"default": (today.table_path("candidates")).read_bytes()}
    for form in ("last", "history", "rewrite"):
        run = _collect(tmp_path / form, index, collect__query_form=form)
        files[form] = run.table_path("candidates").read_bytes()
        rows = run.rows("retrieval")
        questions = {r["question_id"]: r["question"] for r in run.rows("questions")}
        assert all(r["query"] == questions[r["question_id"]] for r in rows)
        assert {(r["query_form"], r["query_source"], r["query_error"]) for r in rows} == {
            (form, "utterance", None)
        }
    # The same bytes (one run id, so one run_id column): `last` is what collect always did,
    # and the other forms change nothing for questions that stand alone. No judge was asked.
    assert len(set(files.values())) == 1
    assert fake.stats.calls == 0


def test_turns_search_the_judges_rewrite_and_the_row_says_so(
    tmp_path: Path, index: Path, fake: Any
) -> None:
    run = _collect(tmp_path, index, questions=str(CONVERSATIONS), collect__query_form="rewrite")
    rows = {r["question_id"]: r for r in run.rows("retrieval")}
    first, follow_up = rows["gecko-zh::1"], rows["gecko-zh::2"]
    assert (first["query"], first["query_source"]) == ("壁虎是益虫吗", "utterance")
    # The fake judge's rewrite names the conversation's first question after the turn.
    assert (follow_up["query"], follow_up["query_source"]) == (
        "它主要吃什么？ (壁虎是益虫吗)",
        "judge",
    )
    assert all(r["status"] == "ok" and r["query_error"] is None for r in rows.values())
    asked = [r for r in fake.stats.requests if r.title == "StandaloneQuestion"]
    assert len(asked) == FOLLOW_UPS
    assert {r.stage for r in asked} == {""}  # outside a stage scope here; collect's in a run
    # The judge still sees the turn in its context: the questions table keeps the utterance.
    stored = {r["question_id"]: r["question"] for r in run.rows("questions")}
    assert stored["gecko-zh::2"] == "它主要吃什么？"


def test_a_failed_rewrite_is_marked_on_its_row_and_searches_the_history(
    tmp_path: Path, index: Path, fake: Any
) -> None:
    def refuse_one(req: Any) -> str | None:
        if req.title == "StandaloneQuestion" and req.payload.get("question") == "它主要吃什么？":
            return "no"
        return None

    with fake.script(refuse_one):
        run = _collect(tmp_path, index, questions=str(CONVERSATIONS), collect__query_form="rewrite")
    rows = {r["question_id"]: r for r in run.rows("retrieval")}
    failed = rows["gecko-zh::2"]
    assert failed["status"] == "ok" and failed["query_source"] == "history"
    assert failed["query"] == "壁虎是益虫吗\n它主要吃什么？"
    assert failed["query_error"].startswith("rewrite failed (")
    assert failed["query_error"].endswith("searched the history form instead")
    others = [r for qid, r in rows.items() if qid != "gecko-zh::2"]
    assert all(r["query_error"] is None for r in others)


def test_the_dry_run_counts_each_rewrite_the_run_asks(tmp_path: Path, fake: Any) -> None:
    config = make_config(tmp_path, questions=str(CONVERSATIONS), collect__query_form="rewrite")
    plan = start_plan(config)
    asyncio.run(estimate_collect(plan))
    assert fake.stats.calls == 0
    [line] = [x for x in plan.lines if x.step == "query rewrites"]
    assert line.calls == FOLLOW_UPS and line.tokens_in > 0 and line.model == "fake/judge"
    # Searched from the stored turn (its history form standing in), not the judge's text.
    assert plan.queries["gecko-zh::2"] == "壁虎是益虫吗\n它主要吃什么？"
    assert plan.queries["gecko-zh::1"] == "壁虎是益虫吗"
    # Under `last` nothing is counted and the utterance is searched.
    last = start_plan(make_config(tmp_path, questions=str(CONVERSATIONS)))
    asyncio.run(estimate_collect(last))
    assert not [x for x in last.lines if x.step == "query rewrites"]
    assert last.queries["gecko-zh::2"] == "它主要吃什么？"


def _tune_config(tmp_path: Path) -> Any:
    return make_config(
        tmp_path,
        questions=str(CONVERSATIONS),
        collect__top_n=6,
        report={"compare_resamples": 999, "bootstrap_samples": 200},
        tune={
            "name": "forms",
            "depth": 4,
            "variants": {
                "history": {"query_form": "history"},
                "rewrite": {"query_form": "rewrite"},
            },
        },
    )


def test_a_tune_over_query_forms_pays_each_shared_pair_once(tmp_path: Path, fake: Any) -> None:
    config = _tune_config(tmp_path)
    with hold_gateway(config) as gateway:
        # The dry run counts the rewrites once, at the variant of that form, and asks nothing.
        lines, _, _, _ = asyncio.run(dry_run(config, gateway))
        assert fake.stats.calls == 0
        assert {line.variant: line.rewrites for line in lines} == {
            "baseline": 0,
            "history": 0,
            "rewrite": FOLLOW_UPS,
        }
        assert next(line for line in lines if line.variant == "rewrite").rewrite_tokens > 0
        out = asyncio.run(run_tune(config, gateway))
    grades = [r for r in fake.stats.requests if r.title == "RelevanceGrade"]
    rewrites = [r for r in fake.stats.requests if r.title == "StandaloneQuestion"]
    assert len(rewrites) == FOLLOW_UPS
    # Every graded (turn in its context, document) pair was asked once, and only pooled ones.
    asked = Counter((r.payload["question"], r.payload["context"]) for r in grades)
    assert set(asked.values()) == {1}
    pooled = {
        (out.questions[qid].question, text)
        for qid, docs in out.pool.texts.items()
        for text in docs.values()
    }
    assert set(asked) == pooled
    assert len(grades) == out.pool.size - shared_texts(out) == out.grading.graded
    # Not vacuous: the forms found documents in common, and each was graded once for all.
    tops = [
        {(qid, cid) for qid, got in run.questions.items() for cid in got.ids} for run in out.runs
    ]
    assert sum(len(t) for t in tops) > out.pool.size
    assert any("\n" in out.queries["history"][q].text for q in out.queries["history"])
    # A second tune of the same forms pays nothing: the store has every pair, the memo the
    # rewrites.
    fake.reset(keep_requests=True)
    with hold_gateway(config) as gateway:
        again = asyncio.run(run_tune(config, gateway))
    assert fake.stats.calls == 0
    assert again.grading.found_in_store == out.pool.size
    assert len(judgment_store(config)) == len(grades)
    assert again.rewrite_calls["calls"] == FOLLOW_UPS and again.rewrite_calls["provider_calls"] == 0

    folder = write_outputs(out)
    turns = pl.read_parquet(folder / TURNS)
    assert set(turns["variant"]) == {"history", "rewrite"} and BASELINE not in set(turns["variant"])
    bands = turns.filter((pl.col("breakdown") == "turn_band") & (pl.col("variant") == "rewrite"))
    # The bundled conversations: four first turns, four second ones, two third ones (all
    # questions, tuning and held out, that have a relevant pooled document).
    assert bands["group"].to_list() == sorted(
        bands["group"].to_list(), key=["1", "2", "3-5", "6+"].index
    )
    assert set(bands["group"]) <= {"1", "2", "3-5"} and bands["n"].min() >= 1
    for row in bands.iter_rows(named=True):
        assert row["gain"] == pytest.approx(row["mean"] - row["baseline"])
        if row["n"] >= 2:
            assert row["ci_low"] <= row["gain"] <= row["ci_high"] and row["p_value"] is not None
    # A first turn has no history: every form searches its text, so its gain is exactly 0.
    first = bands.filter(pl.col("group") == "1").row(0, named=True)
    assert first["gain"] == 0 and first["ci_low"] == first["ci_high"] == 0
    kinds = turns.filter(pl.col("breakdown") == "turn_kind")
    assert set(kinds["group"]) == {"standalone", "non-standalone"}
    assert kinds["labelled"].to_list() == [0] * kinds.height  # no turn_kind in the set
    summary = json.loads((folder / "tune.json").read_text())
    assert summary["query_forms"] == {
        "baseline": "last",
        "history": "history",
        "rewrite": "rewrite",
    }
    assert summary["queries"]["rewrite"]["sources"] == {"utterance": 4, "judge": FOLLOW_UPS}
    assert len(summary["turn_gains"]) == turns.height
    page = (folder / "report.html").read_text(encoding="utf-8")
    assert 'id="by-turn"' in page and "rewrite (query_form rewrite) by turn position" in page
    table = pq.read_table(folder / TURNS)
    assert table.schema.metadata[b"table"] == b"tune_turns"
