"""Agreement with graded gold relevance, held against trec_eval (pytrec_eval), judge-free."""

from __future__ import annotations

import json
import math
import random
from typing import Any

import pytest
import pytrec_eval
from support.runs import context, graded_set, make_config

from ragaudit.agreement import (
    ALL_QUESTIONS,
    ENGINE_VS_GOLD,
    JUDGE_VS_ENGINE,
    JUDGE_VS_GOLD,
    JudgeOrder,
    aggregate,
    question_rows,
)
from ragaudit.dataset import load_qrels, load_questions
from ragaudit.errors import InputError
from ragaudit.tasks.collect import collect
from ragaudit.tasks.sort import gold

TOL = 1e-9
K = 5
# Our metric name → trec_eval's measure (at k where it takes one).
TREC = {
    "ndcg": f"ndcg_cut_{K}",
    "precision": f"P_{K}",
    "recall": f"recall_{K}",
    "mrr": "recip_rank",
    "hit": f"success_{K}",
}
MEASURES = {f"ndcg_cut.{K}", f"P.{K}", f"recall.{K}", "recip_rank", f"success.{K}"}


def trec_eval(order: list[str], grades: dict[str, int]) -> dict[str, float]:
    """trec_eval's figures of one ranked list.

    trec_eval sorts a run by score, breaking ties by docid; descending scores from the rank
    give it exactly the order we evaluate, whatever the engine's own (tied) scores were.
    """
    run = {"q": {doc: float(len(order) - i) for i, doc in enumerate(order)}}
    result = pytrec_eval.RelevanceEvaluator({"q": grades}, MEASURES).evaluate(run)["q"]
    return {ours: result[theirs] for ours, theirs in TREC.items()}


def by_metric(rows: list[dict[str, Any]], comparison: str) -> dict[str, dict[str, Any]]:
    return {r["metric"]: r for r in rows if r["comparison"] == comparison}


async def test_gold_agreement_without_a_judge_equals_trec_eval(tmp_path, fake) -> None:
    questions, qrels, grades_of = graded_set(tmp_path)
    config = make_config(
        tmp_path,
        questions=str(questions),
        collect__backend="question_set",
        sort__enabled=False,
        sort__agreement_k=K,
        gold__qrels=str(qrels),
    )
    ctx = context(config)
    await collect(ctx)
    await gold(ctx)
    assert fake.stats.calls == 0  # no judge, no embedder: gold alone
    rows = ctx.run.rows("agreement")
    assert {r["comparison"] for r in rows} == {ENGINE_VS_GOLD}
    candidates = ctx.run.candidates()
    checked = 0
    for qid, grades in grades_of.items():
        engine = [c["context_id"] for c in candidates[qid]]
        assert all(math.isnan(c["engine_score"]) for c in candidates[qid])  # every score tied
        ours = by_metric([r for r in rows if r["question_id"] == qid], ENGINE_VS_GOLD)
        assert set(ours) == set(TREC)
        if not any(grades.values()):
            # trec_eval reports 0 for a query with nothing relevant; we say it is undefined.
            assert all(r["status"] == "skipped" and r["reason"] for r in ours.values())
            continue
        for name, value in trec_eval(engine, grades).items():
            assert ours[name]["status"] == "ok", (qid, name)
            assert ours[name]["value"] == pytest.approx(value, abs=TOL), (qid, name)
            checked += 1
    assert checked == 5 * (len(grades_of) - 1)
    means = by_metric([r for r in rows if r["question_id"] == ALL_QUESTIONS], ENGINE_VS_GOLD)
    assert means["ndcg"]["n_questions"] == len(grades_of) - 1


def test_judge_and_engine_against_graded_gold_equal_trec_eval() -> None:
    rng = random.Random(11)
    checked = 0
    for q in range(40):
        ids = [f"d{i:02d}" for i in range(rng.randint(3, 15))]
        engine = rng.sample(ids, len(ids))
        grades = {d: rng.choice([0, 0, 1, 2, 4]) for d in rng.sample(ids, rng.randint(1, len(ids)))}
        grades["never-retrieved"] = rng.choice([0, 1, 3])
        if not any(grades.values()):
            continue
        shuffled = rng.sample(ids, len(ids))
        cut = rng.randint(0, len(ids))
        judge = JudgeOrder(shuffled[:cut], list(range(cut)), shuffled[cut:])
        rows = question_rows("r", f"q{q}", engine, K, judge=judge, gold=grades)
        for comparison, order in ((ENGINE_VS_GOLD, engine), (JUDGE_VS_GOLD, judge.judged)):
            ours = by_metric(rows, comparison)
            for name, value in trec_eval(order, grades).items():
                assert ours[name]["value"] == pytest.approx(value, abs=TOL), (q, comparison, name)
                checked += 1
    assert checked >= 300


def test_figures_resting_on_no_judgement_are_failed() -> None:
    judge = JudgeOrder([], [], [], unjudged=["a", "b", "c"])
    rows = question_rows("r", "q", ["a", "b", "c"], 3, judge=judge, gold={"a": 1, "b": 0})
    for comparison in (JUDGE_VS_ENGINE, JUDGE_VS_GOLD):
        for r in by_metric(rows, comparison).values():
            assert r["status"] == "failed" and r["value"] is None
            assert "every relevance verdict failed (3)" in r["reason"]
    # The engine against gold rests on no judge: still computed.
    assert all(r["status"] == "ok" for r in by_metric(rows, ENGINE_VS_GOLD).values())
    means = aggregate("r", rows)
    judged = [m for m in means if m["comparison"] != ENGINE_VS_GOLD]
    assert judged and all(m["status"] == "failed" and m["value"] is None for m in judged)
    assert all(m["n_questions"] == 0 for m in judged)


def test_graded_gold_from_the_question_set(tmp_path) -> None:
    path = tmp_path / "q.jsonl"
    path.write_text(
        json.dumps({"question": "a?", "reference_context_grades": {"x": 2, "y": 0}})
        + "\n"
        + json.dumps({"question": "b?", "reference_context_grades": '{"z": 1}'})
        + "\n",
        encoding="utf-8",
    )
    qs = load_questions(path)
    assert [q.reference_context_grades for q in qs] == [{"x": 2, "y": 0}, {"z": 1}]
    csv = tmp_path / "q.csv"
    csv.write_text('question,reference_context_grades\na?,"{""x"": 1.5}"\n', encoding="utf-8")
    with pytest.raises(InputError, match=r"q.csv: line 2, column 'reference_context_grades'"):
        load_questions(csv)
    import polars as pl

    parquet = tmp_path / "q.parquet"
    pl.DataFrame({"question": ["a?"], "reference_context_grades": ['{"x": 3}']}).write_parquet(
        parquet
    )
    assert load_questions(parquet)[0].reference_context_grades == {"x": 3}


def test_qrels_errors_name_the_line(tmp_path) -> None:
    path = tmp_path / "bad.qrels"
    path.write_text("q1 0 d1 1\nq1 0 d2 high\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"bad.qrels: line 2: grade 'high' is not an integer"):
        load_qrels(path)
    path.write_text("q1 0 d1\n", encoding="utf-8")  # read as BEIR: its score is "d1"
    with pytest.raises(InputError, match="line 1: grade 'd1' is not an integer"):
        load_qrels(path)
    path.write_text("q1 d1\n", encoding="utf-8")
    with pytest.raises(InputError, match="line 1: expected 'qid iteration docid grade'"):
        load_qrels(path)
