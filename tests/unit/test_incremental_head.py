"""The incremental head order: when the sort stage reuses, inserts into or re-orders a head.

Each test runs the sort stage twice on run folders under one runs root (night 1, then night 2
with something changed) with a scripted judge that knows each passage's quality, and reads
what night 2's ``ranking`` table says: the order, where each head came from, the calls paid.
"""

from __future__ import annotations

from typing import Any

import pyarrow.parquet as pq
import pytest
from support.runs import context, table

from ragaudit.cache._fake import FakeRequest
from ragaudit.config import RunConfig
from ragaudit.errors import StageError
from ragaudit.judging import PreviousHead, incremental_head
from ragaudit.reevaluation import ordering_manifest
from ragaudit.reporting import judge_cost
from ragaudit.runfolder import RunFolder
from ragaudit.schemas import CANDIDATES, QUESTIONS, RANKING, to_table
from ragaudit.tasks.sort import sort

K = 4


def passage(cid: str, version: int = 0) -> str:
    return f"Passage {cid} (edition {version}) about the harbour and its trade in grain."


def write_run(
    run: RunFolder, pools: dict[str, dict[str, str]], asked: dict[str, str] | None = None
) -> None:
    """Questions ``pools``'s keys, each with its candidates (id → text) in engine order.

    ``asked``: a question's text where it is not the default one.
    """
    run.write(
        "questions",
        to_table(
            [
                {
                    "run_id": run.run_id,
                    "question_id": qid,
                    "question": (asked or {}).get(qid, f"What does {qid} ask?"),
                    "language": "en",
                    "filters": "{}",
                    "metadata": "{}",
                }
                for qid in pools
            ],
            QUESTIONS,
        ),
    )
    run.write(
        "candidates",
        to_table(
            [
                {
                    "run_id": run.run_id,
                    "question_id": qid,
                    "context_id": cid,
                    "text": text,
                    "engine_rank": i + 1,
                    "engine_score": float(len(texts) - i),
                    "gold_relevant": None,
                    "source": "{}",
                }
                for qid, texts in pools.items()
                for i, (cid, text) in enumerate(texts.items())
            ],
            CANDIDATES,
        ),
    )


class Judge:
    """Grades every passage 3; orders listwise by a quality per text (higher first)."""

    def __init__(self, quality: dict[str, float]) -> None:
        self.quality = quality

    def __call__(self, req: FakeRequest) -> dict[str, Any] | None:
        p = req.payload
        if req.title == "RelevanceGrade":
            return {"grade": 3, "reason": "scripted"}
        if req.title == "ListwiseRanking":
            shown = p["passages"]
            ranked = sorted(shown, key=lambda x: -self.quality[x["text"]])
            return {"ranking": [x["id"] for x in ranked], "reason": "scripted"}
        return None


def quality_of(pools: dict[str, dict[str, str]]) -> dict[str, float]:
    """Engine order is the reverse of quality: the judge's order differs from the engine's."""
    out = {}
    for texts in pools.values():
        for i, text in enumerate(texts.values()):
            out[text] = float(i)
    return out


async def night(
    config: RunConfig,
    run_id: str,
    pools: dict[str, dict[str, str]],
    fake: Any,
    quality: dict[str, float],
    started: str,
    asked: dict[str, str] | None = None,
) -> dict[str, dict[str, Any]]:
    """One run of the sort stage; its manifest then says it completed. Ranking by question."""
    ctx = context(config, run_id)
    write_run(ctx.run, pools, asked)
    manifest = {
        "config": config.model_dump(mode="json"),
        "status": "running",
        "started_at": started,
    }
    ctx.run.write_manifest(manifest)
    with fake.script(Judge(quality)):
        await sort(ctx)
    ctx.run.write_manifest(
        {**manifest, "status": "completed", "ordering": ordering_manifest(config, ctx.run)}
    )
    ctx.gateway.close()
    return {r["question_id"]: r for r in table(ctx.run, "ranking")}


def pools_of(n_questions: int = 1, n: int = 8) -> dict[str, dict[str, str]]:
    return {f"q{j}": {f"c{i}": passage(f"{j}-{i}") for i in range(n)} for j in range(n_questions)}


@pytest.fixture
def head_config(config_factory):
    def make(**kw: Any) -> RunConfig:
        return config_factory(sort__order="head", sort__head_k=K, sort__head_votes=0, **kw)

    return make


async def test_nothing_changed_reuses_every_head_with_no_call(head_config, fake) -> None:
    config = head_config()
    pools = pools_of(2)
    quality = quality_of(pools)
    first = await night(config, "n1", pools, fake, quality, "2026-11-01T00:00:00")
    second = await night(config, "n2", pools, fake, quality, "2026-11-02T00:00:00")
    for qid in pools:
        assert first[qid]["head_source"] == "fresh"
        assert second[qid]["head_source"] == "reused"
        assert second[qid]["ordering_calls"] == 0
        assert second[qid]["ordered_ids"] == first[qid]["ordered_ids"]
        assert second[qid]["tie_group"] == first[qid]["tie_group"]
        assert second[qid]["exact_k"] == first[qid]["exact_k"] == K
    # The judge's order, not the engine's: the best quality (last in engine order) first.
    assert first["q0"]["ordered_ids"][:K] == ["c7", "c6", "c5", "c4"]
    manifest = RunFolder(config.runs_root, "n2").read_manifest()["ordering"]
    assert manifest["head_source"] == {"reused": 2}
    assert manifest["reused_share"] == 1.0
    line = judge_cost(RunFolder(config.runs_root, "n2")).line()  # the report's sort-stage line
    assert "heads reused from the previous run 2 of 2 (100%)" in line
    first_line = judge_cost(RunFolder(config.runs_root, "n1")).line()
    assert "heads reused from the previous run 0 of 2 (0%), inserted into 0, ordered afresh 2" in (
        first_line
    )


def test_a_ranking_table_of_version_2_still_reads(tmp_path) -> None:
    """Written before head_source: read as it is, and the report line says nothing of reuse."""
    run = RunFolder(tmp_path, "old")
    run.path.mkdir(parents=True)
    row = {"run_id": "old", "question_id": "q0", "ordered_ids": ["a"], "tie_group": [0]}
    row |= {"method": "head:window", "relevance_calls": 3, "ordering_calls": 1, "status": "ok"}
    v3 = to_table([row], RANKING)
    v2 = v3.drop_columns(["head_source"]).replace_schema_metadata(
        {"schema_version": "2", "table": "ranking"}
    )
    pq.write_table(v2, run.table_path("ranking"))
    assert run.ranking()["q0"]["ordered_ids"] == ["a"]
    cost = judge_cost(run)
    assert cost is not None and cost.reused_share is None
    assert "heads" not in cost.line()


async def test_a_changed_text_is_new_and_inserted_by_one_call(head_config, fake) -> None:
    config = head_config()
    pools = pools_of(1)
    quality = quality_of(pools)
    first = await night(config, "n1", pools, fake, quality, "2026-11-01T00:00:00")
    changed = {"q0": dict(pools["q0"])}
    # c1 (low before) gets a new text that the judge now finds second best.
    changed["q0"]["c1"] = passage("0-1", version=1)
    quality[changed["q0"]["c1"]] = 6.5
    second = await night(config, "n2", changed, fake, quality, "2026-11-02T00:00:00")
    row = second["q0"]
    assert row["head_source"] == "inserted"
    assert row["ordering_calls"] == 1
    # Kept members keep their order; the changed one goes where the judge put it; the head
    # stays K long, so the last kept member falls out of it.
    assert first["q0"]["ordered_ids"][:K] == ["c7", "c6", "c5", "c4"]
    assert row["ordered_ids"][:K] == ["c7", "c1", "c6", "c5"]
    assert row["exact_k"] == K


async def test_a_changed_judge_orders_afresh(head_config, fake) -> None:
    pools = pools_of(1)
    quality = quality_of(pools)
    await night(head_config(), "n1", pools, fake, quality, "2026-11-01T00:00:00")
    # Named explicitly (auto would not even pick a run of another configuration).
    other = head_config(models__judge="fake/judge?latency=0", sort__previous="n1")
    second = await night(other, "n2", pools, fake, quality, "2026-11-02T00:00:00")
    assert second["q0"]["head_source"] == "fresh"
    assert second["q0"]["ordering_calls"] > 0
    # And auto does not pick it: no earlier run of this configuration.
    third = await night(
        head_config(models__judge="fake/judge?latency=0"),
        "n3",
        pools,
        fake,
        quality,
        "2026-11-03T00:00:00",
    )
    assert third["q0"]["head_source"] == "reused"  # n2 is its like, judged by this judge


async def test_a_failed_previous_ranking_is_not_reused(head_config, fake) -> None:
    config = head_config()
    pools = pools_of(2)
    quality = quality_of(pools)
    await night(config, "n1", pools, fake, quality, "2026-11-01T00:00:00")
    run1 = RunFolder(config.runs_root, "n1")
    rows = table(run1, "ranking")
    for r in rows:
        if r["question_id"] == "q1":
            r["status"], r["error"] = "partial", "1 of 2 ordering calls failed"
    run1.write("ranking", to_table(rows, RANKING))
    second = await night(config, "n2", pools, fake, quality, "2026-11-02T00:00:00")
    assert second["q0"]["head_source"] == "reused"
    assert second["q1"]["head_source"] == "fresh"
    assert second["q1"]["ordering_calls"] > 0


async def test_a_question_new_on_night_two_is_ordered_afresh(head_config, fake) -> None:
    pools = pools_of(1)
    quality = quality_of(pools_of(2))
    await night(head_config(), "n1", pools, fake, quality, "2026-11-01T00:00:00")
    # Another question set: auto finds no baseline, a named run gives the questions it has.
    config = head_config(sort__previous="n1")
    second = await night(config, "n2", pools_of(2), fake, quality, "2026-11-02T00:00:00")
    assert second["q0"]["head_source"] == "reused"
    assert second["q0"]["ordering_calls"] == 0
    assert second["q1"]["head_source"] == "fresh"
    auto = await night(head_config(), "n3", pools_of(2), fake, quality, "2026-11-03T00:00:00")
    assert auto["q1"]["head_source"] == "reused"  # n2 is the same question set


async def test_a_previous_run_that_does_not_exist_is_refused_before_any_call(
    head_config, fake
) -> None:
    config = head_config(sort__previous="nowhere")
    ctx = context(config, "n1")
    write_run(ctx.run, pools_of(1))
    with pytest.raises(StageError, match="sort.previous: run 'nowhere'"):
        await sort(ctx)
    assert fake.stats.requests == []


async def test_a_head_that_lost_members_is_filled_from_the_kept_pool_below_it() -> None:
    """Two kept candidates below the old head compete for the two places left; none jumps
    above a kept member, whatever the answer says."""

    class Listwise:
        rows: list[Any] = []

        async def rank(self, ids: list[str], salt: str = "") -> list[str]:
            # Says d is best of all: it still may only take a place at the bottom.
            return sorted(ids, key=lambda c: {"d": 0, "a": 1, "b": 2, "e": 3}.get(c, 9))

    previous = PreviousHead(
        head=("a", "b", "x", "y"),
        ordered=("a", "b", "x", "y", "e", "d"),
        texts={c: c for c in "abxyde"},
        grades=dict.fromkeys("abxyde", 3),
    )
    texts = {c: c for c in "abde"}
    grades = dict.fromkeys("abde", 3)
    judge: Any = Listwise()
    placed = await incremental_head(
        previous, list("abde"), list("abde"), texts, grades, judge, 4, 20
    )
    assert placed.source == "inserted"
    assert placed.head == ["a", "b", "d", "e"]


async def test_more_than_one_call_holds_is_ordered_afresh() -> None:
    """Three kept head members and two new candidates do not fit a window of four."""

    class Listwise:
        async def rank(self, ids: list[str], salt: str = "") -> list[str]:
            raise AssertionError("no insertion call when it cannot hold them")

    previous = PreviousHead(
        head=("a", "b", "c"),
        ordered=("a", "b", "c"),
        texts={c: c for c in "abc"},
        grades=dict.fromkeys("abc", 3),
    )
    texts = {c: c for c in "abcxy"}
    grades = dict.fromkeys("abcxy", 3)
    judge: Any = Listwise()
    placed = await incremental_head(
        previous, list("abcxy"), list("abcxy"), texts, grades, judge, 3, window=4
    )
    assert placed.head is None
    assert placed.reason is not None and "one listwise call holds (4)" in placed.reason


def test_a_night_that_reused_every_head_still_compares_like_for_like(tmp_path) -> None:
    """A night that asked no ordering prompt (every head reused) is like the night before;
    the same prompt at another version is not."""
    from support.reporting_runs import write_run

    from ragaudit.reporting import compare_runs

    def calls(*versions: str) -> list[dict[str, Any]]:
        return [
            {"stage": "sort", "model": "fake/judge", "cache_hit": False, "prompt_version": v}
            for v in versions
        ]

    values = {"faithfulness": [0.5, 0.6, 0.7, 0.8]}
    a = write_run(tmp_path, "a", values, calls=calls("RelevanceGrade@1", "ListwiseRanking@1"))
    b = write_run(tmp_path, "b", values, calls=calls("RelevanceGrade@1"))
    c = write_run(tmp_path, "c", values, calls=calls("RelevanceGrade@1", "ListwiseRanking@2"))
    assert compare_runs(a, b, resamples=99).comparable
    unlike = compare_runs(a, c, resamples=99)
    assert not unlike.comparable
    assert [d.what for d in unlike.differences] == ["prompt versions of sort"]


async def test_a_question_whose_text_changed_is_ordered_afresh_saying_why(
    head_config, fake, caplog
) -> None:
    """Round 5 #11: one question's words reversed, same id: all 5 heads reused with 0 calls."""
    pools = pools_of(2)
    quality = quality_of(pools)
    await night(head_config(), "n1", pools, fake, quality, "2026-11-01T00:00:00")
    reversed_q0 = " ".join(reversed(["What", "does", "q0", "ask?"]))
    with caplog.at_level("WARNING"):
        second = await night(
            head_config(sort__previous="n1"),
            "n2",
            pools,
            fake,
            quality,
            "2026-11-02T00:00:00",
            asked={"q0": reversed_q0},
        )
    assert second["q0"]["head_source"] == "fresh" and second["q0"]["ordering_calls"] > 0
    assert second["q0"]["head_note"] == "its text changed since run n1"
    assert second["q1"]["head_source"] == "reused" and second["q1"]["head_note"] is None
    assert "question q0" in caplog.text and "its text changed since run n1" in caplog.text


async def test_why_a_night_orders_every_head_afresh_reaches_log_manifest_and_report(
    head_config, fake, caplog
) -> None:
    """Round 5 #15: ordering_baseline's reason was dropped by the sort stage."""
    config = head_config()
    pools = pools_of(2)
    why = "no earlier completed run of this question set and configuration"
    with caplog.at_level("WARNING"):
        first = await night(config, "n1", pools, fake, quality_of(pools), "2026-11-01T00:00:00")
    assert {r["head_note"] for r in first.values()} == {why}
    assert why in caplog.text
    run = RunFolder(config.runs_root, "n1")
    assert ordering_manifest(config, run)["fresh_because"] == {why: 2}
    cost = judge_cost(run)
    assert cost is not None and f"ordered afresh because {why} (2)" in cost.line()
    from ragaudit.reporting import build_report, render_html

    assert why in render_html(build_report(run.path))
