"""Graded relevance, ordering only where it counts, TREC interchange, nightly re-runs."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
import pytrec_eval
from support.runs import context, graded_set, make_config, table, write_question

from ragaudit.agreement import ALL_QUESTIONS, ENGINE_VS_GOLD, JUDGE_VS_ENGINE
from ragaudit.cache._fake import FakeRequest
from ragaudit.dataset import load_qrels
from ragaudit.judging import shown_order
from ragaudit.tasks.collect import collect
from ragaudit.tasks.sort import sort
from ragaudit.trec import QRELS_GOLD, QRELS_JUDGE, RUN_ENGINE, export_trec

TOL = 1e-9


def _texts(n: int, prefix: str = "c") -> dict[str, str]:
    """Candidates whose token overlap with 'harbour built year history' falls as i grows."""
    words = ["harbour", "built", "year", "history"]
    return {
        f"{prefix}{i:02d}": " ".join(words[: 4 - i % 5] if i % 5 < 4 else ["weather"])
        + f" passage {prefix}{i}"
        for i in range(n)
    }


# -- the fake judge answers every new prompt ------------------------------------------------------


@pytest.mark.parametrize(
    "overrides",
    [
        {"sort__order": "head", "sort__head_method": "window"},
        {"sort__order": "head", "sort__head_method": "setwise", "sort__head_k": 3},
        {"sort__order": "none", "sort__grade_batch": 4},
        {"sort__order": "full"},
    ],
    ids=["window", "setwise", "none-batched", "full"],
)
async def test_the_fake_judge_answers_every_judging_prompt(config_factory, fake, overrides) -> None:
    ctx = context(config_factory(**overrides))
    write_question(ctx.run, _texts(12), question="harbour built year history")
    await sort(ctx)
    verdicts = table(ctx.run, "verdicts")
    assert all(v["status"] == "ok" and v["grade"] in (0, 1, 2, 3) for v in verdicts)
    assert {v["relevant"] for v in verdicts} == {True, False}
    assert all(v["relevant"] == (v["grade"] >= 2) for v in verdicts)
    ranking = table(ctx.run, "ranking")[0]
    assert ranking["status"] == "ok" and ranking["order_mode"] == overrides["sort__order"]
    assert ranking["relevance_calls"] >= 1 and ranking["relevance_tokens"] > 0
    comparisons = table(ctx.run, "comparisons")
    assert all(c["status"] == "ok" for c in comparisons)
    if overrides["sort__order"] == "none":
        assert ranking["ordering_calls"] == 0 and ranking["exact_k"] == 0
        assert ranking["relevance_calls"] == 3  # 12 candidates, 4 a call
    else:
        assert ranking["ordering_calls"] > 0 and ranking["ordering_tokens"] > 0
    # The fake grades by token overlap: the best-overlapping candidates lead.
    assert ranking["ordered_ids"][0] in {"c00", "c05", "c10"}


# -- head ordering ------------------------------------------------------------------------------


def test_a_prompts_layout_depends_on_its_ids_only() -> None:
    ids = [f"c{i}" for i in range(8)]
    assert shown_order(ids) == shown_order(list(reversed(ids)))
    assert shown_order(ids) != ids or shown_order(ids, "vote 0") != ids
    assert sorted(shown_order(ids)) == sorted(ids)
    assert shown_order(ids, "vote 0") != shown_order(ids, "vote 1")


@pytest.mark.parametrize("method", ["window", "setwise"])
async def test_head_orders_the_top_k_exactly_on_a_faithful_judge(
    config_factory, fake, method
) -> None:
    # 30 candidates all graded 3, quality by number; the ordering judge is always right.
    texts = {f"c{i:02d}": f"passage {i} on the harbour" for i in range(30)}
    quality = {t: -i for i, t in enumerate(texts.values())}
    engine = dict(reversed(list(texts.items())))  # the engine has it backwards

    def responder(req: FakeRequest) -> Any:
        p = req.payload
        if req.title == "RelevanceGrade":
            return {"grade": 3, "reason": "s"}
        if req.title == "SetwiseChoice":
            best = max(p["passages"], key=lambda x: quality[x["text"]])
            return {"best": best["id"], "reason": "s"}
        if req.title == "ListwiseRanking":
            ranked = sorted(p["passages"], key=lambda x: -quality[x["text"]])
            return {"ranking": [x["id"] for x in ranked], "reason": "s"}
        return None

    ctx = context(config_factory(sort__head_method=method, sort__head_k=5, sort__set_size=3))
    write_question(ctx.run, engine)
    with fake.script(responder):
        await sort(ctx)
    ranking = table(ctx.run, "ranking")[0]
    assert ranking["exact_k"] == 5 and ranking["method"] == f"head:{method}"
    assert ranking["ordered_ids"][:5] == ["c00", "c01", "c02", "c03", "c04"]
    assert ranking["tie_group"][:5] == [0, 1, 2, 3, 4]
    assert len(set(ranking["tie_group"][5:])) == 1  # the rest: one grade, tied
    assert sorted(ranking["ordered_ids"]) == sorted(texts)
    agreement = [r for r in table(ctx.run, "agreement") if r["question_id"] == "q0"]
    assert {r["exact_k"] for r in agreement if r["comparison"] == JUDGE_VS_ENGINE} == {5}
    # Every head call showed its candidates in an order that depends on their ids only.
    for c in table(ctx.run, "comparisons"):
        assert c["shown_ids"] == shown_order(c["shown_ids"]) or c["method"] == "listwise"


# -- nightly runs pay for what changed ---------------------------------------------------------


async def test_a_rerun_pays_only_for_new_candidates_whatever_their_order(
    config_factory, fake
) -> None:
    texts = _texts(20)
    config = config_factory()  # the default: graded one a call, head ordering
    ctx = context(config, "night-1")
    write_question(ctx.run, texts, question="harbour built year history")
    await sort(ctx)
    calls = fake.stats.calls
    assert calls > 20

    # Same candidates, the engine's order reversed: every call is a memo hit.
    ctx2 = context(config, "night-2")
    write_question(ctx2.run, dict(reversed(list(texts.items()))), "harbour built year history")
    await sort(ctx2)
    assert fake.stats.calls == calls
    first = table(ctx.run, "verdicts")
    second = {v["context_id"]: v["grade"] for v in table(ctx2.run, "verdicts")}
    assert {v["context_id"]: v["grade"] for v in first} == second

    # Two candidates replaced, order shuffled: two grading calls are paid, no other grade.
    changed = {k: v for k, v in list(texts.items())[2:]}
    changed.update({"n00": "harbour year passage new 0", "n01": "weather passage new 1"})
    order = sorted(changed, key=lambda c: shown_order(list(changed)).index(c))
    fake.stats.requests.clear()
    ctx3 = context(config, "night-3")
    write_question(ctx3.run, {c: changed[c] for c in order}, "harbour built year history")
    await sort(ctx3)
    graded = [r for r in fake.stats.requests if (r.schema or {}).get("title") == "RelevanceGrade"]
    assert sorted(r.payload["context"] for r in graded) == sorted([changed["n00"], changed["n01"]])


# -- a judgement that rests on nothing is not ok ------------------------------------------------


@pytest.mark.parametrize("order", ["head", "full"])
async def test_a_ranking_whose_ordering_calls_all_failed_is_failed(
    config_factory, fake, order
) -> None:
    texts = {f"c{i:02d}": f"passage {i} on the harbour" for i in range(8)}

    def responder(req: FakeRequest) -> Any:
        if req.title == "RelevanceGrade":
            return {"grade": 3, "reason": "s"}
        if req.title in ("ListwiseRanking", "SetwiseChoice", "PairwisePreference"):
            return "cut off {"  # unparseable, repair included
        return None

    ctx = context(config_factory(sort__order=order, models__max_retries=0))
    write_question(ctx.run, texts)
    with fake.script(responder):
        await sort(ctx)
    ranking = table(ctx.run, "ranking")[0]
    assert ranking["status"] == "failed"
    assert ranking["ordering_failed"] > 0
    assert f"{ranking['ordering_failed']} of " in ranking["error"]
    rows = {
        (r["question_id"], r["metric"]): r
        for r in table(ctx.run, "agreement")
        if r["comparison"] == JUDGE_VS_ENGINE
    }
    for metric in ("spearman", "kendall_tau", "top_k_overlap"):
        row = rows["q0", metric]
        assert row["status"] == "failed" and row["value"] is None
        assert "every ordering call failed" in row["reason"]
        agg = rows[ALL_QUESTIONS, metric]
        assert agg["status"] == "failed" and agg["value"] is None
    # The grades themselves were judged: NDCG from them stands.
    assert rows["q0", "ndcg"]["status"] in ("ok", "skipped")


async def test_partial_only_when_some_candidates_were_judged(config_factory, fake) -> None:
    texts = {f"c{i:02d}": f"passage {i} on the harbour" for i in range(6)}
    by_text = {t: c for c, t in texts.items()}

    def some(req: FakeRequest) -> Any:
        if req.title == "RelevanceGrade":
            cid = by_text[req.payload["context"]]
            return "garbage" if cid in ("c00", "c01") else {"grade": 2, "reason": "s"}
        return None

    ctx = context(config_factory(models__max_retries=0), "some")
    write_question(ctx.run, texts)
    with fake.script(some):
        await sort(ctx)
    ranking = table(ctx.run, "ranking")[0]
    assert ranking["status"] == "partial" and "2 relevance verdicts failed" in ranking["error"]

    # A fresh memo and a fresh runs root: the judgment store of the first root holds its grades.
    fresh = {"cache_dir": str(ctx.run.path / "c"), "runs_root": str(ctx.run.path / "r")}
    ctx = context(config_factory(models__max_retries=0, **fresh), "none")
    write_question(ctx.run, texts)
    with fake.script(lambda r: "garbage" if r.title == "RelevanceGrade" else None):
        await sort(ctx)
    ranking = table(ctx.run, "ranking")[0]
    assert ranking["status"] == "failed" and ranking["unjudged_ids"] == sorted(texts)


# -- TREC interchange ---------------------------------------------------------------------------

K = 5
MEASURES = {f"ndcg_cut.{K}", f"P.{K}", f"recall.{K}", "recip_rank"}
TREC = {
    "ndcg": f"ndcg_cut_{K}",
    "precision": f"P_{K}",
    "recall": f"recall_{K}",
    "mrr": "recip_rank",
}


def _read_run(path: Path) -> dict[str, dict[str, float]]:
    run: dict[str, dict[str, float]] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        qid, q0, doc, rank, score, tag = line.split()
        assert q0 == "Q0" and tag == "engine" and int(rank) >= 1
        run.setdefault(qid, {})[doc] = float(score)
    return run


async def test_pytrec_eval_over_the_exported_files_equals_the_agreement_table(
    tmp_path, fake
) -> None:
    questions, qrels, _ = graded_set(tmp_path)
    config = make_config(
        tmp_path,
        questions=str(questions),
        collect__backend="question_set",
        sort__agreement_k=K,
        gold__qrels=str(qrels),
    )
    ctx = context(config)
    await collect(ctx)
    await sort(ctx)
    folder = ctx.run.path
    assert {p.name for p in folder.glob("*.txt")} == {QRELS_JUDGE, QRELS_GOLD, RUN_ENGINE}
    run = _read_run(folder / RUN_ENGINE)
    rows = [r for r in table(ctx.run, "agreement") if r["question_id"] != ALL_QUESTIONS]
    checked = 0
    for qrels_file, comparison, level in (
        (QRELS_GOLD, ENGINE_VS_GOLD, 1),
        (QRELS_JUDGE, JUDGE_VS_ENGINE, config.sort.relevant_grade),
    ):
        qrels_of = load_qrels(folder / qrels_file)
        evaluator = pytrec_eval.RelevanceEvaluator(qrels_of, MEASURES, relevance_level=level)
        theirs = evaluator.evaluate(run)
        for r in rows:
            if r["comparison"] != comparison or r["metric"] not in TREC or r["status"] != "ok":
                continue
            value = theirs[r["question_id"]][TREC[r["metric"]]]
            assert r["value"] == pytest.approx(value, abs=TOL), (comparison, r)
            checked += 1
    assert checked >= 40
    # export_trec rewrites the same files for a run folder (older runs: ragaudit export-trec).
    before = {p.name: p.read_bytes() for p in folder.glob("*.txt")}
    for p in folder.glob("*.txt"):
        p.unlink()
    written = export_trec(folder)
    assert {p.name: p.read_bytes() for p in written} == before


def test_beir_tsv_and_trec_qrels_give_the_same_gold(tmp_path) -> None:
    _, trec_path, grades_of = graded_set(tmp_path)
    beir = tmp_path / "qrels.tsv"
    lines = ["query-id\tcorpus-id\tscore"] + [
        f"{qid}\t{doc}\t{g}" for qid, docs in grades_of.items() for doc, g in docs.items()
    ]
    beir.write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert load_qrels(beir) == load_qrels(trec_path) == grades_of
    headless = tmp_path / "headless.tsv"
    headless.write_text("\n".join(lines[1:]) + "\n", encoding="utf-8")
    assert load_qrels(headless) == grades_of


def test_ndcg_from_grades_is_trecs_graded_ndcg() -> None:
    from ragaudit.agreement import JudgeOrder, question_rows

    grades = {"a": 3, "b": 0, "c": 2, "d": 1}
    judge = JudgeOrder(["a", "c"], [0, 1], ["d", "b"], grades=grades, exact_k=2)
    rows = question_rows("r", "q", ["b", "c", "a", "d"], 3, judge=judge, gold=None)
    ndcg = next(r for r in rows if r["metric"] == "ndcg")
    run = {"q": {"b": 4.0, "c": 3.0, "a": 2.0, "d": 1.0}}
    theirs = pytrec_eval.RelevanceEvaluator({"q": grades}, {"ndcg_cut.3"}).evaluate(run)
    assert ndcg["value"] == pytest.approx(theirs["q"]["ndcg_cut_3"], abs=TOL)
    assert ndcg["exact_k"] == 2 and not math.isnan(ndcg["value"])


async def test_export_trec_command_and_the_judge_cost_per_question(config_factory, fake) -> None:
    from typer.testing import CliRunner

    from ragaudit.cli import app
    from ragaudit.reporting._build import judge_cost

    ctx = context(config_factory())
    write_question(ctx.run, _texts(12), question="harbour built year history")
    await sort(ctx)
    cost = judge_cost(ctx.run)
    ranking = table(ctx.run, "ranking")[0]
    assert cost is not None and cost.method == "head:window" and cost.questions == 1
    assert (cost.relevance_calls, cost.relevance_tokens) == (
        ranking["relevance_calls"],
        ranking["relevance_tokens"],
    )
    assert cost.relevance_calls == 12 and cost.ordering_calls == ranking["ordering_calls"] > 0
    assert "relevance 12 calls" in cost.line() and "ordering (head:window)" in cost.line()
    for p in ctx.run.path.glob("*.txt"):
        p.unlink()
    ctx.run.write_manifest({"run_id": ctx.run.run_id})
    result = CliRunner().invoke(app, ["export-trec", str(ctx.run.path)])
    assert result.exit_code == 0, result.output
    assert {p.name for p in ctx.run.path.glob("*.txt")} == {QRELS_JUDGE, RUN_ENGINE}
    # The qrels hold raw grades: the line tells the level that makes P@k/R@k/MRR agree.
    assert "trec_eval -l 2" in result.output and "relevance_level=2" in result.output
    ctx.run.write_manifest({"run_id": ctx.run.run_id, "config": {"sort": {"relevant_grade": 3}}})
    result = CliRunner().invoke(app, ["export-trec", str(ctx.run.path)])
    assert result.exit_code == 0 and "trec_eval -l 3" in result.output, result.output
    result = CliRunner().invoke(app, ["export-trec", str(ctx.run.path / "nowhere")])
    assert result.exit_code != 0


async def test_a_listwise_set_over_the_window_is_asked_on_each_passages_head(
    config_factory, fake
) -> None:
    judge = "fake/judge?window=4096"
    filler = "the harbour records list ships cargo and dues for every year of trade "
    texts = {f"c{i:02d}": f"passage {i} " + filler * 30 for i in range(12)}
    config = config_factory(judge=judge, models__max_output_tokens=512)
    ctx = context(config)
    write_question(ctx.run, texts, question="harbour records")
    with fake.script(
        lambda r: {"grade": 3, "reason": "s"} if r.title == "RelevanceGrade" else None
    ):
        await sort(ctx)
    rows = table(ctx.run, "comparisons")
    assert rows and all(r["status"] == "ok" for r in rows)
    assert all("each passage cut to" in (r["note"] or "") for r in rows)
    ranking = table(ctx.run, "ranking")[0]
    assert ranking["status"] == "ok" and ranking["exact_k"] == 10


@pytest.mark.parametrize("method", ["window", "setwise"])
async def test_head_ordering_progress_counts_questions_and_ends_at_its_total(
    config_factory, fake, method
) -> None:
    from ragaudit import progress
    from ragaudit.progress import LineReporter

    ctx = context(config_factory(sort__head_method=method, sort__head_k=5, sort__set_size=3))
    write_question(ctx.run, _texts(20), question="harbour built year history")
    lines: list[str] = []
    progress.set_reporter(LineReporter(lines.append))
    try:
        await sort(ctx)
    finally:
        progress.set_reporter(None)
    [done] = [line for line in lines if line.startswith("sort: order") and ": done," in line]
    # The question's head took several calls; the bar counts questions (it read "3/2").
    assert table(ctx.run, "ranking")[0]["ordering_calls"] > 2
    assert done.startswith(f"sort: order (head:{method}): done, 1/1 in"), done


def test_the_sort_stage_and_calibrate_build_one_judge_from_the_config(config_factory) -> None:
    from ragaudit.judging import Judge
    from ragaudit.tasks._common import in_flight
    from ragaudit.tasks.sort import judge_of

    config = config_factory(
        models__judge_context_window=6000, models__max_output_tokens=300, models__temperature=0.2
    )
    ctx = context(config)
    judge = Judge.from_config(config.models, ctx.gateway, 7)
    assert (judge.model, judge.window, judge.max_tokens, judge.temperature, judge.in_flight) == (
        "fake/judge",
        6000,
        300,
        0.2,
        7,
    )
    assert judge_of(ctx) == Judge.from_config(config.models, ctx.gateway, in_flight(ctx))
