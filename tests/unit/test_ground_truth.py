"""Reference answers (stage 3) on a fake judge that lists the facts it was shown.

Each context holds a unique fact token (``FACT-0042``); the scripted judge answers a group by
listing every fact in its contexts and a merge by listing every fact in its partial answers,
stops at its ``max_tokens`` like a real model (the reply is cut mid-JSON), and records every
prompt that would not fit its window. So "every fact reaches the reference" means nothing was
lost anywhere in the merge tree, and "no overflow" is checked where the provider receives it.
"""

from __future__ import annotations

import json
import random
from typing import Any

import litellm
import polars as pl
import pytest
from support.fact_judge import FACT, WORDS, FactJudge

from ragaudit.cache import count_tokens
from ragaudit.cache._fake import FakeRequest
from ragaudit.prompts.reference import ANSWER_GROUP, UNKNOWN
from ragaudit.runfolder import RunFolder
from ragaudit.schemas import CANDIDATES, QUESTIONS, RANKING, TABLES, to_table
from ragaudit.tasks._common import StageContext, gateway_for
from ragaudit.tasks.ground_truth import ground_truth, reference_answer
from ragaudit.windowing import pack, split_text


def make_contexts(
    n: int, seed: int = 0, long_every: int = 0, window: int = 4096
) -> list[tuple[str, str]]:
    """``n`` contexts of mixed length, one unique fact each at a random place."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        kind = rng.random()
        words = rng.randint(3, 12) if kind < 0.5 else rng.randint(20, 300)
        if long_every and i % long_every == long_every - 1:
            words = int(window * 2.5)  # longer than the whole window
        text = [rng.choice(WORDS) for _ in range(words)]
        for k in range(0, len(text), 40):
            text[k] += "." if rng.random() < 0.7 else ".\n"
        text.insert(rng.randint(0, len(text)), f"FACT-{i:04d}")
        out.append((f"c{i:04d}", " ".join(text)))
    return out


def stage_context(
    config_factory: Any, window: int = 4096, run_id: str = "t", options: str = "", **kw: Any
) -> StageContext:
    judge = f"fake/judge?window={window}{options}"
    config = config_factory(judge=judge, models__concurrency=64, **kw)
    return StageContext(
        config=config, run=RunFolder(config.runs_root, run_id), gateway=gateway_for(config)
    )


def call_nodes(tree: dict[str, Any]) -> list[dict[str, Any]]:
    return [n for n in tree["nodes"] if n["kind"] in {"answer", "merge"}]


def assert_lossless(
    answer: str | None, contexts: list[tuple[str, str]], judge: FactJudge, writer: Any, window: int
) -> None:
    expected = {f for _, t in contexts for f in FACT.findall(t)}
    assert answer is not None
    assert expected - set(FACT.findall(answer)) == set()
    assert judge.overflows == []
    tree = writer.tree()
    for node in call_nodes(tree):
        assert node["prompt_tokens"] + node["max_tokens"] <= window, node
    assert tree["max_prompt_tokens"] <= window
    assert tree["root"] is not None


# -- text splitting and packing -----------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        " ".join(WORDS * 60),
        ("优刻得科技股份有限公司主营业务是自主研发并提供云计算服务。" * 120) + "最后一句没有标点",
        "x" * 5000,  # no break point at all
        "para one.\n\npara two\nline " * 200,
    ],
    ids=["en", "zh", "no-breaks", "paragraphs"],
)
def test_split_text_is_lossless_and_every_piece_fits(text: str) -> None:
    pieces = split_text(text, 100, "fake/judge")
    assert "".join(pieces) == text
    assert len(pieces) > 1
    assert all(count_tokens("fake/judge", p) <= 100 for p in pieces)
    # Pieces are filled, not crumbs: few more than the volume bound.
    assert len(pieces) <= 1.3 * count_tokens("fake/judge", text) / 100 + 2


def test_pack_first_fit_decreasing_fills_within_ten_percent() -> None:
    rng = random.Random(7)
    sizes = [rng.randint(50, 3000) for _ in range(200)]
    groups = pack(sizes, 7000)
    assert sorted(i for g in groups for i in g) == list(range(200))
    assert all(sum(sizes[i] for i in g) <= 7000 for g in groups)
    assert all(g == sorted(g) for g in groups)  # input (shuffled) order within a prompt
    assert len(groups) <= 1.1 * -(-sum(sizes) // 7000)
    assert pack([9000, 10], 7000) == [[0], [1]]


# -- nothing lost, nothing over the window ------------------------------------------------


@pytest.mark.parametrize("mode", ["fast", "slow"])
@pytest.mark.parametrize("n", [50, 200, 1000])
async def test_every_fact_reaches_the_reference(config_factory, fake, n: int, mode: str) -> None:
    fake.reset()  # requests are not kept: 1,000-context runs would hold every prompt
    window = 4096
    ctx = stage_context(
        config_factory, window, ground_truth__mode=mode, ground_truth__answer_tokens=512
    )
    contexts = make_contexts(n, seed=n, long_every=97 if n >= 200 else 0, window=window)
    judge = FactJudge()
    with fake.script(judge):
        answer, status, support, writer = await reference_answer(
            ctx, "What did the company report?", "en", contexts
        )
    assert status == "ok"
    assert_lossless(answer, contexts, judge, writer, window)
    assert support == [cid for cid, _ in contexts]  # every context answered, in relevance order
    tree = writer.tree()
    assert tree["map_calls"] + tree["merge_calls"] == writer.spent.calls == judge.calls
    if mode == "slow":
        pieces = sum(1 for node in tree["nodes"] if node["kind"] == "context")
        assert tree["map_calls"] >= pieces
    if n >= 200:  # the long contexts were split, not truncated
        parts = [
            int(node.get("part", "1/1").split("/")[1])
            for node in tree["nodes"]
            if node["kind"] == "context"
        ]
        assert max(parts) >= 3


async def test_default_window_and_budget_need_few_calls(config_factory, fake) -> None:
    ctx = stage_context(config_factory, 8192)
    contexts = make_contexts(200, seed=3)
    judge = FactJudge()
    with fake.script(judge):
        answer, status, _, writer = await reference_answer(
            ctx, "What did the company report?", "en", contexts
        )
    assert status == "ok"
    assert_lossless(answer, contexts, judge, writer, 8192)
    total = sum(writer.cost(t) for _, t in contexts)
    assert writer.spent.map_calls <= 1.1 * -(-total // writer.usable) + 1


async def test_redundant_answers_merge_over_several_levels(config_factory, fake) -> None:
    # 300 contexts repeat 60 facts: merges shrink, so merged answers are merged again.
    window = 2048
    ctx = stage_context(
        config_factory, window, ground_truth__mode="slow", ground_truth__answer_tokens=256
    )
    rng = random.Random(4)
    contexts = [
        (f"c{i:03d}", " ".join(rng.choice(WORDS) for _ in range(30)) + f" FACT-{i % 60:04d}.")
        for i in range(300)
    ]
    judge = FactJudge()
    with fake.script(judge):
        answer, status, _, writer = await reference_answer(
            ctx, "What did the company report?", "en", contexts
        )
    assert status == "ok"
    assert_lossless(answer, contexts, judge, writer, window)
    nodes = writer.tree()["nodes"]
    assert nodes[writer.root]["kind"] == "merge"
    assert any(
        nodes[c]["kind"] == "merge" for n in nodes if n["kind"] == "merge" for c in n["children"]
    )


async def test_a_context_longer_than_the_window_is_split_not_truncated(
    config_factory, fake
) -> None:
    window = 2048
    ctx = stage_context(config_factory, window, ground_truth__answer_tokens=256)
    body = [" ".join(WORDS)] * 600
    body[0] += " FACT-0001"
    body[300] += " FACT-0002"
    body[-1] += " FACT-0003"
    contexts = [("long", ".\n".join(body))]
    judge = FactJudge()
    with fake.script(judge):
        answer, status, support, writer = await reference_answer(
            ctx, "What happened?", "en", contexts
        )
    assert status == "ok" and support == ["long"]
    assert_lossless(answer, contexts, judge, writer, window)
    parts = [n for n in writer.tree()["nodes"] if n["kind"] == "context"]
    assert len(parts) >= 10 and all(n["tokens"] <= writer.usable for n in parts)


@pytest.mark.parametrize("mode", ["fast", "slow"])
async def test_merge_failures_keep_every_answer(config_factory, fake, mode: str) -> None:
    window = 4096
    ctx = stage_context(
        config_factory, window, ground_truth__mode=mode, ground_truth__answer_tokens=512
    )
    contexts = make_contexts(60, seed=11)
    judge = FactJudge(fail_merges=True)
    with fake.script(judge):
        answer, status, _, writer = await reference_answer(
            ctx, "What did the company report?", "en", contexts
        )
    assert status == "ok"
    assert_lossless(answer, contexts, judge, writer, window)
    tree = writer.tree()
    assert tree["nodes"][tree["root"]]["kind"] == "join"
    assert any(n["kind"] == "merge" and n["status"] == "failed" for n in tree["nodes"])
    assert {n["status"] for n in tree["nodes"] if n["kind"] == "join"} == {"merge_failed"}
    assert "a merge failed" in " ".join(writer.notes)


async def test_malformed_replies_are_repaired_within_the_window(config_factory, fake) -> None:
    window = 4096
    ctx = stage_context(config_factory, window, options="&malformed=0.3", ground_truth__mode="slow")
    contexts = make_contexts(150, seed=8)
    judge = FactJudge()
    with fake.script(judge):
        answer, status, _, writer = await reference_answer(
            ctx, "What did the company report?", "en", contexts
        )
    nodes = writer.tree()["nodes"]
    repaired = [n for n in nodes if "repair_prompt_tokens" in n]
    assert repaired and all(n["repair_prompt_tokens"] + n["max_tokens"] <= window for n in repaired)
    assert judge.overflows == []
    assert any(n["status"] == "ok" for n in repaired)
    # A reply malformed twice loses its context (recorded); every other fact arrives.
    failed = {
        i
        for n in nodes
        if n["kind"] == "answer" and n["status"] == "failed"
        for i in n["context_ids"]
    }
    expected = {f for cid, t in contexts if cid not in failed for f in FACT.findall(t)}
    assert expected <= set(FACT.findall(answer))
    assert status == ("partial" if failed else "ok")
    assert len(writer.lost) == len(
        [n for n in nodes if n["kind"] == "answer" and n["status"] == "failed"]
    )


async def test_answers_close_to_their_budget_are_never_cut(config_factory, fake) -> None:
    # Each answer fills 95% of a large budget: two of them cannot be merged losslessly in this
    # window, so they stay side by side rather than being squeezed.
    window = 3072
    ctx = stage_context(config_factory, window, ground_truth__answer_tokens=900)
    contexts = make_contexts(120, seed=5)
    judge = FactJudge(pad_to=0.95)
    with fake.script(judge):
        answer, status, _, writer = await reference_answer(
            ctx, "What did the company report?", "en", contexts
        )
    assert status == "ok"
    assert_lossless(answer, contexts, judge, writer, window)
    nodes = writer.tree()["nodes"]
    assert (
        nodes[writer.root]["kind"] == "join"
        and nodes[writer.root]["status"] == "too_large_to_merge"
    )


async def test_a_provider_that_counts_more_tokens_gets_smaller_prompts(
    config_factory, fake
) -> None:
    # The provider's tokenizer disagrees with ours and rejects prompts with many contexts.
    ctx = stage_context(config_factory, 8192, ground_truth__answer_tokens=512)
    contexts = make_contexts(80, seed=9)
    judge = FactJudge()

    def strict(req: FakeRequest) -> str | None:
        if req.title == "GroupAnswer" and len(req.payload.get("contexts", [])) > 8:
            raise litellm.ContextWindowExceededError(
                message="too long", model="fake/judge", llm_provider="fake"
            )
        return judge(req)

    with fake.script(strict):
        answer, status, _, writer = await reference_answer(
            ctx, "What did the company report?", "en", contexts
        )
    assert status == "ok"
    assert_lossless(answer, contexts, judge, writer, 8192)
    assert any(
        n.get("status") == "split" and "context window" in (n["error"] or "")
        for n in writer.tree()["nodes"]
    )


# -- no invented answers; languages ---------------------------------------------------------


async def test_no_answer_anywhere_is_insufficient(config_factory, fake) -> None:
    ctx = stage_context(config_factory, ground_truth__mode="slow")
    contexts = [(f"c{i}", " ".join(WORDS)) for i in range(5)]
    judge = FactJudge()
    with fake.script(judge):
        answer, status, support, writer = await reference_answer(
            ctx, "What did the company report?", "en", contexts
        )
        empty = await reference_answer(ctx, "What did the company report?", "en", [])
    assert (answer, status, support) == (None, "insufficient", [])
    assert writer.spent.map_calls == 5 and writer.spent.merge_calls == 0
    assert all(n["status"] == "unknown" for n in call_nodes(writer.tree()))
    assert empty[:3] == (None, "insufficient", []) and empty[3].spent.calls == 0


async def test_chinese_question_uses_chinese_prompts_and_drops_unknowns(
    config_factory, fake
) -> None:
    ctx = stage_context(config_factory, ground_truth__mode="slow")
    contexts = [
        ("a", "优刻得的主营业务是云计算服务 FACT-0001。"),
        ("b", "今天天气很好。"),
        ("c", "公司还提供数据可信流通平台 FACT-0002。"),
    ]
    judge = FactJudge()
    with fake.script(judge):
        answer, status, support, writer = await reference_answer(
            ctx, "优刻得的主营业务是什么？", "zh", contexts
        )
    assert status == "ok" and support == ["a", "c"]
    assert set(FACT.findall(answer)) == {"FACT-0001", "FACT-0002"}
    assert UNKNOWN["zh"] not in answer
    assert all(s in {ANSWER_GROUP.instruction["zh"], *_merge_zh()} for s in judge.systems)
    unknown = [n for n in writer.tree()["nodes"] if n["status"] == "unknown"]
    assert [n["context_ids"] for n in unknown] == [["b"]] and unknown[0]["text"] == UNKNOWN["zh"]


def _merge_zh() -> set[str]:
    from ragaudit.prompts.reference import MERGE

    return {MERGE.instruction["zh"]}


# -- the stage: relevant set, table, memo ----------------------------------------------------


def _write_inputs(
    run: RunFolder, contexts: list[tuple[str, str]], relevant: list[str], unjudged: list[str]
) -> None:
    q = [
        {
            "run_id": run.run_id,
            "question_id": "q1",
            "question": "What did the company report?",
            "language": "en",
        },
        {
            "run_id": run.run_id,
            "question_id": "q2",
            "question": "Nothing relevant here?",
            "language": "en",
        },
        {
            "run_id": run.run_id,
            "question_id": "q3",
            "question": "Kept?",
            "language": "en",
            "reference": "given",
        },
    ]
    cands = [
        {
            "run_id": run.run_id,
            "question_id": qid,
            "context_id": cid,
            "text": text,
            "engine_rank": k + 1,
        }
        for qid in ("q1", "q2", "q3")
        for k, (cid, text) in enumerate(contexts)
    ]
    irrelevant = [c for c, _ in contexts if c not in relevant and c not in unjudged]
    ranking = [
        {
            "run_id": run.run_id,
            "question_id": "q1",
            "ordered_ids": relevant,
            "irrelevant_ids": irrelevant,
            "unjudged_ids": unjudged,
            "status": "ok",
        },
        {
            "run_id": run.run_id,
            "question_id": "q2",
            "ordered_ids": [],
            "irrelevant_ids": [c for c, _ in contexts],
            "unjudged_ids": [],
            "status": "ok",
        },
    ]
    run.write("questions", to_table(q, QUESTIONS))
    run.write("candidates", to_table(cands, CANDIDATES))
    run.write("ranking", to_table(ranking, RANKING))


async def test_stage_answers_from_the_relevant_set_and_writes_the_table(
    config_factory, fake
) -> None:
    ctx = stage_context(config_factory)
    contexts = make_contexts(40, seed=2)
    relevant = [c for c, _ in contexts[::3]][::-1]  # the sort stage's order, not the engine's
    unjudged = [contexts[1][0]]
    _write_inputs(ctx.run, contexts, relevant, unjudged)
    judge = FactJudge()
    with fake.script(judge):
        await ground_truth(ctx)
    table = ctx.run.read("ground_truth")
    assert table.schema.equals(TABLES["ground_truth"], check_metadata=False)
    rows = {r["question_id"]: r for r in pl.from_arrow(table).to_dicts()}
    q1 = rows["q1"]
    used = set(relevant) | set(unjudged)
    expected = {f for cid, t in contexts if cid in used for f in FACT.findall(t)}
    assert q1["status"] == "ok" and q1["mode"] == "fast" and q1["origin"] == "generated"
    assert set(FACT.findall(q1["reference"])) == expected  # irrelevant contexts never reach it
    assert q1["supporting_ids"] == [*relevant, *unjudged]
    tree = json.loads(q1["merge_tree"])
    assert q1["calls"] == tree["map_calls"] + tree["merge_calls"] > 0
    assert q1["tokens_in"] > 0 and q1["tokens_out"] > 0
    children = {c for n in tree["nodes"] for c in n["children"]}
    kept = [n for n in tree["nodes"] if n.get("status") not in {"unknown", "split", "failed"}]
    assert all(n["node"] in children for n in kept if n["node"] != tree["root"])  # one tree
    q2 = rows["q2"]
    assert (q2["status"], q2["reference"], q2["calls"]) == ("insufficient", None, 0)
    assert q2["error"] == "no relevant context"
    assert (rows["q3"]["reference"], rows["q3"]["origin"]) == ("given", "question_set")

    # The grouping depends only on the inputs: a re-run is answered by the memo.
    before = fake.stats.calls
    with fake.script(FactJudge()):
        await ground_truth(ctx)
    assert fake.stats.calls == before
    assert pl.from_arrow(ctx.run.read("ground_truth"))["reference"].to_list() == [
        r["reference"] for r in rows.values()
    ]
