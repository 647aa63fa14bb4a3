"""The report's NDCG@k chart and the agreement table: one figure, graded gains (judge-free)."""

from __future__ import annotations

import re

import pytest
from support.runs import context, graded_set, make_config, table

from ragaudit.agreement import ALL_QUESTIONS, ENGINE_VS_GOLD, JUDGE_VS_ENGINE, JUDGE_VS_GOLD
from ragaudit.reporting import build_report, render_html
from ragaudit.reporting._html import unpack
from ragaudit.tasks.collect import collect
from ragaudit.tasks.sort import sort

K = 5


async def test_the_ndcg_chart_at_agreement_k_is_the_agreement_tables_ndcg(tmp_path, fake) -> None:
    questions, qrels, grades_of = graded_set(tmp_path)
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
    means = {
        r["comparison"]: r
        for r in table(ctx.run, "agreement")
        if r["question_id"] == ALL_QUESTIONS and r["metric"] == "ndcg"
    }
    report = build_report(ctx.run.path)
    curve = {p.comparison: p for p in report.ndcg_curve if p.k == K}
    for comparison in (ENGINE_VS_GOLD, JUDGE_VS_GOLD, JUDGE_VS_ENGINE):
        row, point = means[comparison], curve[comparison]
        assert row["status"] == "ok" and row["value"] is not None
        assert point.mean == pytest.approx(row["value"], abs=1e-12), comparison
        assert point.n_questions == row["n_questions"]
    # The drill-down: each candidate's judge grade (the verdict's) and gold grade (the qrels').
    verdicts = {(v["question_id"], v["context_id"]): v["grade"] for v in table(ctx.run, "verdicts")}
    shown = [(q.question_id, c) for q in report.questions for c in q.contexts]
    assert shown
    for qid, c in shown:
        assert c.gold_grade == grades_of[qid].get(c.context_id, 0)
        assert c.grade == verdicts[(qid, c.context_id)]
    assert {c.gold_grade for _, c in shown} >= {0, 2, 3}
    # The page's drill-down carries both grades for each context it shows.
    page = render_html(report)
    records = unpack(re.search(r'id="drill">([^<]*)<', page).group(1))
    on_page = {(r["id"], c["id"]): (c["gr"], c["gg"]) for r in records for c in r["ctx"]}
    assert on_page == {(qid, c.context_id): (c.grade, c.gold_grade) for qid, c in shown}
