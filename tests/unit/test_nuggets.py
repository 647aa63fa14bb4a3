"""Nuggets from many contexts (ground_truth stage) on a judge that knows the planted facts."""

from __future__ import annotations

import random
from typing import Any

import polars as pl

from ragaudit.cache import Gateway
from ragaudit.judging import Judge
from ragaudit.nuggets import PlantedFact, PlantedTruth, extract_nuggets
from ragaudit.runfolder import RunFolder
from ragaudit.schemas import CANDIDATES, QUESTIONS, TABLES, to_table
from ragaudit.tasks._common import StageContext, gateway_for
from ragaudit.tasks.ground_truth import ground_truth

_FILLER = (
    "the annual report covers storage and network services in several regions while the "
    "costs of hardware and staff changed during the year under review"
)
FILLER = _FILLER.split()


def planted(n_facts: int, n_contexts: int, seed: int = 0) -> tuple[list[PlantedFact], list]:
    """Facts in 1-4 contexts each, in another wording each time, amid filler of mixed length."""
    rng = random.Random(seed)
    facts = [
        PlantedFact(
            f"f{i}",
            "vital" if i % 3 else "okay",
            [
                f"Widget {i} weighs {7 * i + 3} grams",
                f"the mass of widget {i} is {7 * i + 3} g",
                f"widget number {i} has a weight of {7 * i + 3} grams",
                f"{7 * i + 3} grams is what widget {i} weighs",
            ],
        )
        for i in range(n_facts)
    ]
    texts = [
        " ".join(rng.choice(FILLER) for _ in range(rng.randint(10, 200))) + "."
        for _ in range(n_contexts)
    ]
    truth: dict[str, set[str]] = {}
    for f in facts:
        for k, c in enumerate(rng.sample(range(n_contexts), rng.randint(1, 4))):
            texts[c] += f" {f.forms[k]}."
            truth.setdefault(f.key, set()).add(f"c{c:03d}")
    return facts, [(f"c{i:03d}", t) for i, t in enumerate(texts)], truth


def judge_at(gateway: Gateway, model: str, window: int) -> Judge:
    """The judge ``model`` with a ``window`` of its own (its answer budget is the writer's)."""
    return Judge(gateway=gateway, model=model, window=window, max_tokens=1024)


async def test_every_planted_fact_is_one_nugget_with_its_sources(config_factory, fake) -> None:
    config = config_factory()
    window = 4096
    facts, contexts, truth = planted(20, 150)
    judge = PlantedTruth(facts)
    with fake.script(judge):
        result = await extract_nuggets(
            judge_at(gateway_for(config), f"fake/judge?window={window}", window),
            "How heavy is each widget?",
            "en",
            contexts,
            answer_tokens=512,
            max_nuggets=50,
        )
    assert result.status == "ok", result.notes
    keys = [judge.fact_of(n.text).key for n in result.nuggets]
    assert sorted(keys) == sorted(truth)  # each fact exactly once
    for n, key in zip(result.nuggets, keys, strict=True):
        assert set(n.context_ids) == truth[key]  # the union of its sources, no stray one
        assert n.importance == next(f.importance for f in facts if f.key == key)
    assert result.map_calls > 1 and result.merge_calls >= 1
    assert result.extracted > len(facts)  # duplicates across groups were merged away
    assert 0 < result.max_prompt_tokens <= window


async def test_the_cap_keeps_vital_nuggets_first(config_factory, fake) -> None:
    facts, contexts, _ = planted(12, 30, seed=1)
    with fake.script(PlantedTruth(facts)):
        result = await extract_nuggets(
            judge_at(gateway_for(config_factory()), "fake/judge", 8192),
            "How heavy is each widget?",
            "en",
            contexts,
            max_nuggets=5,
        )
    assert [n.importance for n in result.nuggets] == ["vital"] * 5
    assert result.capped == 7 and "cap of 5" in "; ".join(result.notes)


async def test_no_fact_is_insufficient_and_no_context_is_said(config_factory, fake) -> None:
    gw = gateway_for(config_factory())
    with fake.script(PlantedTruth([])):
        judge = judge_at(gw, "fake/judge", 8192)
        none = await extract_nuggets(judge, "Q?", "en", [("a", "text")])
        empty = await extract_nuggets(judge, "Q?", "en", [])
    assert (none.status, none.nuggets) == ("insufficient", [])
    assert empty.notes == ["no relevant context"]


async def test_the_stage_writes_the_nuggets_table(config_factory, fake) -> None:
    config = config_factory(judge="fake/judge?window=8192")
    run = RunFolder(config.runs_root, "n")
    ctx = StageContext(config=config, run=run, gateway=gateway_for(config))
    facts, contexts, truth = planted(6, 20, seed=2)
    base = {"run_id": "n", "language": "zh", "filters": "{}", "metadata": "{}"}
    run.write(
        "questions",
        to_table(
            [
                {**base, "question_id": "q1", "question": "每个部件有多重？"},
                {**base, "question_id": "q2", "question": "Nothing here?", "language": "en"},
            ],
            QUESTIONS,
        ),
    )
    cands: list[dict[str, Any]] = [
        {"run_id": "n", "question_id": "q1", "context_id": c, "text": t, "engine_rank": k}
        for k, (c, t) in enumerate(contexts)
    ]
    run.write("candidates", to_table(cands, CANDIDATES))
    with fake.script(PlantedTruth(facts)):
        await ground_truth(ctx)
    table = run.read("nuggets")
    assert table.schema.equals(TABLES["nuggets"], check_metadata=False)
    rows = pl.from_arrow(table).to_dicts()
    q1 = [r for r in rows if r["question_id"] == "q1"]
    assert len(q1) == len(truth) and {r["status"] for r in q1} == {"ok"}
    assert [r["nugget_index"] for r in q1] == list(range(len(truth)))
    assert all(r["calls"] > 0 for r in q1)
    (q2,) = [r for r in rows if r["question_id"] == "q2"]
    assert (q2["status"], q2["text"], q2["reason"]) == ("insufficient", None, "no relevant context")
    # The Chinese question was asked with the Chinese prompt.
    assert any("要点" in m["content"] for r in fake.stats.requests for m in r.messages)


async def test_a_failed_merge_keeps_its_inputs_and_a_failed_group_is_partial(
    config_factory, fake
) -> None:
    facts, contexts, truth = planted(8, 60, seed=3)
    planted_judge = PlantedTruth(facts)

    def broken_merges(req: Any) -> Any:
        return "not json" if req.title == "MergedNuggets" else planted_judge(req)

    gw = gateway_for(config_factory())
    ask = {"answer_tokens": 256, "max_nuggets": 100}
    judge = judge_at(gw, "fake/judge?window=2048", 2048)
    with fake.script(broken_merges):
        kept = await extract_nuggets(judge, "Q?", "en", contexts, **ask)
    # Every extracted nugget survives the failed merges: duplicates, but no fact lost.
    assert kept.failed_merges > 0 and kept.status == "ok"
    assert len(kept.nuggets) == kept.extracted
    assert {planted_judge.fact_of(n.text).key for n in kept.nuggets} == set(truth)

    first = contexts[0][1]

    def broken_group(req: Any) -> Any:
        if req.title == "ExtractedNuggets" and first in req.payload.get("contexts", []):
            return "not json"
        return planted_judge(req)

    with fake.script(broken_group):
        part = await extract_nuggets(judge, "Q2?", "en", contexts, **ask)
    assert part.status == "partial" and part.failed_groups == 1
    assert "not extracted" in "; ".join(part.notes)
