"""The sort stage: relevance filter, bias-cancelled pairwise ordering, top-k mode, agreement.

Stage tests run ``tasks.sort.sort`` directly on a run folder with the fake judge behind the real
gateway (no Prefect: the flow tests cover that). Strategy tests drive the ordering strategies
with in-memory comparators.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import math
import random
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from scipy.stats import kendalltau, spearmanr
from sklearn.metrics import ndcg_score
from support.runs import REPO, SHARED_DATA, context, make_config, table, write_question

from ragaudit.cache import canonical_json, count_prompt, count_tokens
from ragaudit.cache._fake import FakeRequest
from ragaudit.config import RunConfig
from ragaudit.ordering import STRATEGIES, _SampleSort, binary_insertion, options_for, sample_sort
from ragaudit.schemas import (
    AGREEMENT,
    COMPARISONS,
    RANKING,
    VERDICTS,
)
from ragaudit.tasks.collect import collect
from ragaudit.tasks.sort import ALL_QUESTIONS, sort

TOL = 1e-9
ALL = ("sample", "insertion", "merge", "quick")


# -- helpers --------------------------------------------------------------------------------


def ids_of(req: FakeRequest, texts: dict[str, str]) -> tuple[str, str]:
    by_text = {t: c for c, t in texts.items()}
    p = req.payload
    return by_text[p["context_1"]], by_text[p["context_2"]]


def noisy(values: dict[str, float], wrong: float, seed: int, counter: list[int] | None = None):
    """Both orders asked, each answer wrong with probability ``wrong``; disagreement is a tie."""

    def call(first: str, second: str) -> int:
        right = 1 if values[first] > values[second] else 2
        u = (
            int.from_bytes(hashlib.sha256(f"{seed}|{first}|{second}".encode()).digest()[:8], "big")
            / 2**64
        )
        return 3 - right if u < wrong else right

    async def compare(a: str, b: str) -> int:
        if counter is not None:
            counter.append(1)
        await asyncio.sleep(0)
        ab, ba = call(a, b), call(b, a)
        vote_ab, vote_ba = (-1 if ab == 1 else 1), (-1 if ba == 2 else 1)
        return vote_ab if vote_ab == vote_ba else 0

    return compare


def kendall_to_truth(ordered: list[str], groups: list[int], values: dict[str, float]) -> float:
    levels = {x: g for x, g in zip(ordered, groups, strict=True)}
    truth = sorted(values, key=lambda x: -values[x])
    return kendalltau(range(len(truth)), [levels[x] for x in truth]).statistic


# -- position bias ----------------------------------------------------------------------------


@pytest.mark.parametrize("strategy", ALL)
async def test_first_position_bias_cancels_out(config_factory, fake, strategy) -> None:
    """A judge that always prefers whichever context is shown first: asked both ways round, every
    pair is a tie, and the order stays the engine's instead of following the showing order."""
    texts = {
        f"c{i:02d}": f"Passage {i}: the harbour was founded in year {1000 + 37 * i}."
        for i in range(12)
    }
    config = config_factory(sort__strategy=strategy, sort__order="full")
    ctx = context(config)
    write_question(ctx.run, texts)

    def responder(req: FakeRequest) -> dict[str, Any] | None:
        if req.title == "RelevanceGrade":
            return {"grade": 3, "reason": "scripted"}
        if req.title == "PairwisePreference":
            return {"better": 1, "reason": "the first one"}  # whatever is shown first
        return None

    with fake.script(responder):
        await sort(ctx)
    rows = table(ctx.run, "comparisons")
    assert rows and {r["outcome"] for r in rows} == {"tie"}
    assert {(r["choice_ab"], r["choice_ba"]) for r in rows} == {("1", "1")}
    ranking = table(ctx.run, "ranking")[0]
    assert ranking["ordered_ids"] == list(texts)  # the engine order, kept
    assert len(set(ranking["tie_group"])) == 1  # and reported as one tie group

    # Control: asked one way only, a position bias decides the order (which bias shows depends
    # on which side a strategy puts the item it is placing).
    leaked = []
    for n, favourite in enumerate((1, 2)):

        def biased(req: FakeRequest, favourite: int = favourite) -> dict[str, Any] | None:
            if req.title == "PairwisePreference":
                return {"better": favourite, "reason": "position"}
            return responder(req)

        one_way = config_factory(
            sort__strategy=strategy,
            sort__both_orders=False,
            sort__order="full",
            cache_dir=f"{config.cache_dir}-{n}",
        )
        ctx1 = context(one_way, f"one-way-{n}")
        write_question(ctx1.run, texts)
        with fake.script(biased):
            await sort(ctx1)
        assert {r["outcome"] for r in table(ctx1.run, "comparisons")} <= {"first", "second"}
        leaked.append(table(ctx1.run, "ranking")[0]["ordered_ids"] != list(texts))
    assert any(leaked)


async def test_a_judge_that_only_ties_keeps_the_input_order() -> None:
    """What a purely position-biased judge (either side) amounts to once both orders are asked."""
    items = [f"c{i:02d}" for i in range(30)]

    async def always_tie(a: str, b: str) -> int:
        await asyncio.sleep(0)
        return 0

    for name in ALL:
        ordered, groups = await STRATEGIES[name](items, always_tie)
        assert ordered == items, name
        assert len(set(groups)) == 1, name


# -- strategies on a noisy judge --------------------------------------------------------------


async def test_sample_sort_beats_insertion_on_a_noisy_judge() -> None:
    """10 % wrong answers per call, both orders: a plain insertion sort loses items for good on a
    tie high in its search; the sample sort does not, for a bounded number of comparisons."""
    taus = {"sample": [], "insertion": []}
    pairs = {"sample": [], "insertion": []}
    for seed in range(6):
        rng = random.Random(seed)
        items = [f"c{i:02d}" for i in range(50)]
        values = {x: rng.random() for x in items}
        for name in taus:
            count: list[int] = []
            ordered, groups = await STRATEGIES[name](items, noisy(values, 0.1, seed, count))
            assert sorted(ordered) == sorted(items)
            taus[name].append(kendall_to_truth(ordered, groups, values))
            pairs[name].append(len(count))
    assert np.mean(taus["sample"]) >= np.mean(taus["insertion"]) + 0.1
    assert min(taus["sample"]) > 0.85
    assert sum(pairs["sample"]) <= 1.5 * sum(pairs["insertion"])


@pytest.mark.parametrize("visit", [False, True])
async def test_items_tied_with_their_last_pivot_are_placed_either_way(visit) -> None:
    """With 25 % wrong answers over a third of the comparisons tie, and searches often end tied
    with a pivot: the item joins the bucket on its input-order side (default) or visits both
    (``visit_ties``). Either way every item comes out once, far closer to the truth than the
    plain insertion sort gets."""
    taus: dict[str, list[float]] = {"sample": [], "insertion": []}
    for seed in range(3):
        rng = random.Random(seed)
        items = [f"c{i:02d}" for i in range(50)]
        values = {x: rng.random() for x in items}
        for name in taus:
            options = options_for(name, {"visit_ties": visit})
            ordered, groups = await STRATEGIES[name](items, noisy(values, 0.25, seed), **options)
            assert sorted(ordered) == sorted(items)
            taus[name].append(kendall_to_truth(ordered, groups, values))
    assert np.mean(taus["sample"]) >= np.mean(taus["insertion"]) + 0.2


async def test_sample_sort_asks_many_comparisons_at_once() -> None:
    values = {f"c{i:02d}": float(i) for i in range(50)}
    state = {"now": 0, "max": 0}

    async def compare(a: str, b: str) -> int:
        state["now"] += 1
        state["max"] = max(state["max"], state["now"])
        await asyncio.sleep(0)
        state["now"] -= 1
        return (values[a] < values[b]) - (values[a] > values[b])

    ordered, _ = await sample_sort(list(values), compare)
    assert ordered == sorted(values, key=lambda x: -values[x])
    assert state["max"] >= 40  # every non-pivot item's search starts at once


async def test_a_wrong_answer_high_in_the_search_is_repaired() -> None:
    """The best item gets one wrong answer, at the root of its search among the pivots: insertion
    loses it far down; the sample sort puts it back first."""
    items = [f"c{i:02d}" for i in range(60)]
    values = {x: float(len(items) - i) for i, x in enumerate(items)}  # c00 best
    values_shuffled = list(items)
    random.Random(1).shuffle(values_shuffled)
    best = items[0]

    def lying_about(victim: str, liar: str):
        async def compare(a: str, b: str) -> int:
            await asyncio.sleep(0)
            truth = (values[a] < values[b]) - (values[a] > values[b])
            return -truth if {a, b} == {victim, liar} else truth

        return compare

    async def first_opponent(sort, order: list[str]) -> str:
        met: list[str] = []

        async def compare(a: str, b: str) -> int:
            if best in (a, b) and not met:
                met.append(b if a == best else a)
            await asyncio.sleep(0)
            return (values[a] < values[b]) - (values[a] > values[b])

        await sort(order, compare)
        return met[0]

    # Not where the sample sort takes a pivot (those are ordered by a round robin, not searched).
    order = [x for x in values_shuffled if x != best]
    order.insert(3, best)
    liar = await first_opponent(sample_sort, order)
    ordered, _ = await sample_sort(order, lying_about(best, liar))
    assert ordered.index(best) == 0
    # The same single wrong answer, at the root of an insertion sort's binary search, loses it.
    order = [x for x in values_shuffled if x != best]
    order.insert(40, best)
    liar = await first_opponent(binary_insertion, order)
    ordered, _ = await binary_insertion(order, lying_about(best, liar))
    assert ordered.index(best) > 5


# -- top-k mode -----------------------------------------------------------------------------


@pytest.mark.parametrize("strategy", ALL)
async def test_top_k_orders_the_head_exactly_and_partitions_the_rest(strategy) -> None:
    rng = random.Random(3)
    items = [f"c{i:02d}" for i in range(60)]
    values = {x: rng.random() for x in items}
    truth = sorted(items, key=lambda x: -values[x])

    def exact(counter: list[int]):
        async def compare(a: str, b: str) -> int:
            counter.append(1)
            await asyncio.sleep(0)
            return (values[a] < values[b]) - (values[a] > values[b])

        return compare

    full: list[int] = []
    await STRATEGIES[strategy](items, exact(full))
    asked: list[int] = []
    ordered, groups = await STRATEGIES[strategy](items, exact(asked), top_k=8)
    assert ordered[:8] == truth[:8]
    assert sorted(ordered) == sorted(items)
    # The head is exact: one group per position.
    assert len(set(groups[:8])) == 8 and groups[8] != groups[7]
    # Behind it, blocks in order: everything in an earlier group beats everything in a later one.
    blocks: dict[int, list[str]] = {}
    for x, g in zip(ordered, groups, strict=True):
        blocks.setdefault(g, []).append(x)
    keys = sorted(blocks)
    for g1, g2 in zip(keys, keys[1:], strict=False):
        assert min(values[x] for x in blocks[g1]) > max(values[x] for x in blocks[g2])
    if strategy != "merge":  # merge rounds still merge the first k of every run
        assert len(asked) < 0.8 * len(full)


async def test_top_k_in_the_stage_writes_exact_k(config_factory, fake) -> None:
    texts = {f"c{i:02d}": f"Passage {i} " + "harbour " * (i % 7) for i in range(20)}
    config = config_factory(sort__top_k_exact=5, sort__order="full")
    ctx = context(config)
    write_question(ctx.run, texts, question="harbour")
    with fake.script(
        lambda r: {"grade": 3, "reason": "s"} if r.title == "RelevanceGrade" else None
    ):
        await sort(ctx)
    ranking = table(ctx.run, "ranking")[0]
    assert ranking["exact_k"] == 5
    assert sorted(ranking["ordered_ids"]) == sorted(texts)


@pytest.mark.parametrize(
    ("strategy", "visit"), [("sample", True), ("sample", False), ("quick", True)]
)
async def test_sort_visit_ties_config_reaches_the_sample_sort(
    config_factory, fake, monkeypatch, strategy, visit
) -> None:
    made: list[bool] = []
    real_init = _SampleSort.__init__

    def spy(self: _SampleSort, *args: Any, **kwargs: Any) -> None:
        real_init(self, *args, **kwargs)
        made.append(self.visit_ties)

    monkeypatch.setattr(_SampleSort, "__init__", spy)
    texts = {f"c{i:02d}": f"Passage {i} " + "harbour " * (i % 7) for i in range(12)}
    ctx = context(
        config_factory(sort__strategy=strategy, sort__visit_ties=visit, sort__order="full")
    )
    write_question(ctx.run, texts, question="harbour")
    with fake.script(
        lambda r: {"grade": 3, "reason": "s"} if r.title == "RelevanceGrade" else None
    ):
        await sort(ctx)
    # One sample sort for the one question, built with the setting; another strategy is never
    # handed an option it does not take (it would raise a TypeError).
    assert made == ([visit] if strategy == "sample" else [])


# -- the stage's tables ---------------------------------------------------------------------


async def test_stage_records_verdicts_comparisons_and_failures(config_factory, fake) -> None:
    texts = {f"c{i:02d}": f"Passage {i} about the harbour built in {1800 + i}." for i in range(10)}
    quality = {
        cid: float(i) for i, cid in enumerate(reversed(list(texts)))
    }  # engine order is worst first
    config = config_factory(models__max_retries=0, sort__order="full")
    ctx = context(config)
    write_question(ctx.run, texts)

    def responder(req: FakeRequest) -> Any:
        if req.title == "RelevanceGrade":
            cid = next(c for c, t in texts.items() if t == req.payload["context"])
            return {"grade": 0 if cid == "c09" else 3, "reason": f"{cid} judged"}
        if req.title == "PairwisePreference":
            a, b = ids_of(req, texts)
            if "c00" in (a, b):
                return "not json at all"  # unparseable, repair included: the comparison fails
            better = 1 if quality[a] > quality[b] else 2
            return {"better": better, "reason": f"{a} vs {b}"}
        return None

    with fake.script(responder):
        await sort(ctx)
    verdicts = table(ctx.run, "verdicts")
    assert [v["context_id"] for v in verdicts] == list(texts)
    assert all(v["status"] == "ok" and v["reason"].endswith("judged") for v in verdicts)
    ranking = table(ctx.run, "ranking")[0]
    assert ranking["irrelevant_ids"] == ["c09"] and ranking["unjudged_ids"] == []
    assert "c09" not in ranking["ordered_ids"]
    comparisons = table(ctx.run, "comparisons")
    assert ranking["comparisons"] == len(comparisons)
    assert ranking["judge_calls"] == len(texts) + 2 * len(comparisons)
    failed = [c for c in comparisons if "c00" in (c["first_id"], c["second_id"])]
    assert failed
    for c in comparisons:
        if c in failed:
            assert c["status"] == "failed" and c["outcome"] == "tie" and c["error"]
            assert c["choice_ab"] is None and c["choice_ba"] is None
        else:
            assert c["status"] == "ok" and c["error"] is None
            assert c["reason_ab"] == f"{c['first_id']} vs {c['second_id']}"
            assert c["reason_ba"] == f"{c['second_id']} vs {c['first_id']}"
            assert c["outcome"] == (
                "first" if quality[c["first_id"]] > quality[c["second_id"]] else "second"
            )
    # The judge's order is the reverse of the engine's; c00, never compared, may sit anywhere.
    rest = [c for c in ranking["ordered_ids"] if c != "c00"]
    assert rest == sorted(rest, key=lambda c: -quality[c])
    for name, schema in (
        ("verdicts", VERDICTS),
        ("comparisons", COMPARISONS),
        ("ranking", RANKING),
        ("agreement", AGREEMENT),
    ):
        written = ctx.run.read(name).schema
        assert written.names == schema.names and written.metadata == schema.metadata


async def test_contexts_over_the_judge_window_are_fitted_and_noted(config_factory, fake) -> None:
    # A 4,096-token judge keeping 512 for its answer; candidates of ~13k and ~200k tokens.
    window, answer = 4096, 512
    judge = f"fake/judge?window={window}"
    filler = "the weather report lists rainfall and wind speed for each coastal town. "
    texts = {
        "big": filler * 500 + "The harbour was built in 1850 by the city. " + filler * 500,
        "small": "The harbour was built in 1850, records say.",
        "huge": filler * 15_000,  # ~1 MB: more parts than are ever judged
    }
    config = config_factory(judge=judge, models__max_output_tokens=answer, sort__order="full")
    ctx = context(config)
    write_question(ctx.run, texts, question="When was the harbour built?")
    await sort(ctx)
    for req in fake.stats.requests:  # as the provider received them
        sent = count_prompt(judge, req.messages) + count_tokens(judge, canonical_json(req.schema))
        assert sent + answer <= window
    verdicts = {v["context_id"]: v for v in table(ctx.run, "verdicts")}
    assert verdicts["small"]["relevant"] and verdicts["small"]["note"] is None
    big = verdicts["big"]
    assert big["status"] == "ok" and big["relevant"] is True, big
    assert "graded in" in big["note"] and "the best part's grade" in big["note"]
    assert "its first" not in big["note"], big["note"]  # every part of it was graded
    huge = verdicts["huge"]
    assert huge["relevant"] is False and "(its first 16 only)" in huge["note"]
    assert huge["grade"] < 2 and "part grades: 1:" in huge["note"]
    (row,) = table(ctx.run, "comparisons")
    assert row["status"] == "ok" and "compared on fitted heads" in row["note"]
    assert "big to its first" in row["note"] and "small" not in row["note"]
    ranking = table(ctx.run, "ranking")[0]
    assert ranking["irrelevant_ids"] == ["huge"] and sorted(ranking["ordered_ids"]) == [
        "big",
        "small",
    ]


async def test_rerun_is_answered_from_the_memo_and_writes_the_same_tables(
    config_factory, fake
) -> None:
    texts = {f"c{i:02d}": f"harbour passage {i} " + "harbour " * (i % 5) for i in range(16)}
    config = config_factory()
    ctx = context(config)
    write_question(ctx.run, texts, question="harbour history")
    await sort(ctx)
    first = {
        n: ctx.run.table_path(n).read_bytes()
        for n in ("verdicts", "comparisons", "ranking", "agreement")
    }
    calls = fake.stats.calls
    ctx2 = context(config)
    await sort(ctx2)
    assert fake.stats.calls == calls  # every call answered from the memo
    assert {n: ctx2.run.table_path(n).read_bytes() for n in first} == first


# -- agreement metrics, exactly, on DuReader --------------------------------------------------


def _dureader_question_set(path: Path, n: int) -> None:
    """DuReader search questions with every paragraph of their documents as the candidates (in
    search rank order) and the answer documents' most related paragraphs as gold."""
    source = SHARED_DATA / "dureader" / "search.dev.jsonl"
    if not source.is_file():  # CI has ../shared beside the clone; a bare clone may not
        pytest.skip(f"{source} not present")
    rows = []
    with source.open(encoding="utf-8") as fh:
        for line in fh:
            rec = json.loads(line)
            docs = sorted(rec["documents"], key=lambda d: d.get("bs_rank_pos", 0))
            paragraphs = list(dict.fromkeys(p for d in docs for p in d["paragraphs"] if p.strip()))[
                :40
            ]
            gold = [
                rec["documents"][i]["paragraphs"][rec["documents"][i]["most_related_para"]]
                for i in rec.get("answer_docs", [])
                if i < len(rec["documents"])
            ]
            gold = [g for g in gold if g in paragraphs]
            if len(paragraphs) < 12 or not gold:
                continue
            rows.append(
                {
                    "question_id": f"dr{rec['question_id']}",
                    "question": rec["question"],
                    "retrieved_contexts": paragraphs,
                    "reference_contexts": gold,
                }
            )
            if len(rows) == n:
                break
    path.write_text(
        "\n".join(json.dumps(r, ensure_ascii=False) for r in rows) + "\n", encoding="utf-8"
    )


def _independent(
    ranking: dict[str, Any],
    candidates: list[dict[str, Any]],
    gold: set[str] | None,
    k: int,
    grades: dict[str, int],
):
    """Every agreement metric of one question, recomputed with scipy, scikit-learn and by hand.

    ``grades``: the judge's grades; the irrelevant candidates rank after the relevant ones,
    tied within a grade.
    """
    ordered, groups, irrelevant = (
        ranking["ordered_ids"],
        ranking["tie_group"],
        ranking["irrelevant_ids"],
    )
    engine = [c["context_id"] for c in sorted(candidates, key=lambda c: c["engine_rank"])]
    judged = ordered + irrelevant
    level = {x: float(g) for x, g in zip(ordered, groups, strict=True)}
    level.update({x: max(groups, default=-1) + 1 + (3 - grades[x]) for x in irrelevant})
    common = [e for e in engine if e in level]
    judge_levels = [level[x] for x in common]
    engine_pos = list(range(len(common)))
    out: dict[tuple[str, str], float] = {}
    both_vary = len(set(judge_levels)) > 1 and len(common) > 1
    out["judge_vs_engine", "spearman"] = (
        spearmanr(judge_levels, engine_pos).statistic if both_vary else math.nan
    )
    out["judge_vs_engine", "kendall_tau"] = (
        kendalltau(judge_levels, engine_pos).statistic if both_vary else math.nan
    )
    top_judge, top_engine = judged[:k], set(engine[:k])
    out["judge_vs_engine", "top_k_overlap"] = (
        len([x for x in top_judge if x in top_engine]) / k if ordered else math.nan
    )

    def ndcg(order: list[str], gains: dict[str, float]) -> float:
        if not any(gains.values()):
            return math.nan
        # The order's items with descending scores, then k empty positions, then any gained item
        # the order never shows: scikit-learn's ideal sees it, its DCG@k does not.
        missing = [x for x in gains if x not in order]
        y_true = [gains.get(x, 0.0) for x in order] + [0.0] * k + [gains[x] for x in missing]
        y_score = list(range(len(y_true), 0, -1))
        return ndcg_score(np.array([y_true]), np.array([y_score]), k=k)

    # TREC's graded NDCG: the judge's grades are the gains.
    gains = {x: float(g) for x, g in grades.items() if g > 0}
    out["judge_vs_engine", "ndcg"] = ndcg(engine, gains)

    def labels(order: list[str], relevant: set[str]) -> dict[str, float]:
        hits = [x in relevant for x in order]
        first = next((i for i, h in enumerate(hits) if h), None)
        return {
            "mrr": 0.0 if first is None else 1.0 / (first + 1),
            "hit": float(any(hits[:k])),
            "precision": sum(hits[:k]) / k,
            "recall": sum(hits[:k]) / len(relevant) if relevant else math.nan,
        }

    for name, value in labels(engine, set(ordered)).items():
        out["judge_vs_engine", name] = value if ordered else math.nan
    if gold is not None:
        for comparison, order in (("engine_vs_gold", engine), ("judge_vs_gold", judged)):
            out[comparison, "ndcg"] = ndcg(order, dict.fromkeys(gold, 1.0))
            for name, value in labels(order, gold).items():
                out[comparison, name] = value if gold else math.nan
    return out


@pytest.mark.parametrize("source", ["bundled demo", "search.dev.jsonl"])
async def test_agreement_metrics_equal_independent_implementations(tmp_path, fake, source) -> None:
    if source == "bundled demo":
        config = make_config(tmp_path, collect__top_n=40, sort__agreement_k=5)
    else:
        questions = tmp_path / "dureader.jsonl"
        _dureader_question_set(questions, 8)
        config = make_config(
            tmp_path,
            questions=str(questions),
            collect__backend="question_set",
            collect__top_n=40,
            sort__agreement_k=10,
        )
    ctx = context(config)
    await collect(ctx)
    await sort(ctx)
    question_rows = {q["question_id"]: q for q in table(ctx.run, "questions")}
    candidates: dict[str, list[dict[str, Any]]] = {}
    for c in table(ctx.run, "candidates"):
        candidates.setdefault(c["question_id"], []).append(c)
    rankings = {r["question_id"]: r for r in table(ctx.run, "ranking")}
    verdicts = table(ctx.run, "verdicts")
    rows = table(ctx.run, "agreement")
    per_question: dict[str, dict[tuple[str, str], dict[str, Any]]] = {}
    for r in rows:
        per_question.setdefault(r["question_id"], {})[r["comparison"], r["metric"]] = r

    gold_questions = [q for q in question_rows if any(c["gold_relevant"] for c in candidates[q])]
    assert len(gold_questions) >= (3 if source == "bundled demo" else 8)
    checked = 0
    for qid in gold_questions:
        refs = question_rows[qid]["reference_context_ids"]
        gold = {c["context_id"] for c in candidates[qid] if c["gold_relevant"]} | set(refs or [])
        grades = {v["context_id"]: v["grade"] for v in verdicts if v["question_id"] == qid}
        expected = _independent(rankings[qid], candidates[qid], gold, rows[0]["k"], grades)
        assert set(expected) == set(per_question[qid])
        for key, value in expected.items():
            row = per_question[qid][key]
            if math.isnan(value):
                assert row["status"] == "skipped" and row["value"] is None and row["reason"], (
                    qid,
                    key,
                )
            else:
                assert row["status"] == "ok", (qid, key)
                assert row["value"] == pytest.approx(value, abs=TOL), (qid, key)
                checked += 1
        overlap = per_question[qid]["judge_vs_engine", "top_k_overlap"]["overlap_ids"]
        k = rows[0]["k"]
        judged = rankings[qid]["ordered_ids"] + rankings[qid]["irrelevant_ids"]
        engine = [c["context_id"] for c in sorted(candidates[qid], key=lambda c: c["engine_rank"])]
        assert overlap == [x for x in judged[:k] if x in set(engine[:k])]
    assert checked >= 10 * len(gold_questions)
    # The mean over questions, per comparison and metric.
    for (comparison, metric), agg in per_question[ALL_QUESTIONS].items():
        values = [
            r["value"]
            for q, m in per_question.items()
            if q != ALL_QUESTIONS
            for key, r in m.items()
            if key == (comparison, metric) and r["status"] == "ok"
        ]
        assert agg["n_questions"] == len(values)
        if values:
            assert agg["value"] == pytest.approx(float(np.mean(values)), abs=TOL)


def test_strategies_and_default() -> None:
    assert set(ALL) <= set(STRATEGIES)
    assert RunConfig().sort.strategy == "sample"
    assert (REPO / "bench" / "bench_sort.py").is_file()
