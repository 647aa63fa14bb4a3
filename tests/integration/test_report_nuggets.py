"""The report shows each question's nuggets, the vital facts the answer missed and citations."""

from __future__ import annotations

import json
from pathlib import Path

import openpyxl
from support.reporting_runs import write_run

from ragaudit.reporting import build_report, write_xlsx
from ragaudit.reporting._html import _drill
from ragaudit.runfolder import RunFolder
from ragaudit.schemas import NUGGETS, SCORES, to_table


def test_nuggets_and_citations_reach_the_report_and_the_sheet(tmp_path: Path) -> None:
    run_dir = write_run(tmp_path, "r", {"rouge_l": [0.5, 0.4]})
    run = RunFolder(tmp_path, "r")
    base = {"run_id": "r", "status": "ok", "calls": 2, "tokens_in": 10, "tokens_out": 5}
    run.write(
        "nuggets",
        to_table(
            [
                {
                    **base,
                    "question_id": "q0000",
                    "nugget_index": 0,
                    "text": "A is 1",
                    "importance": "vital",
                    "context_ids": ["c1", "c7"],
                },
                {
                    **base,
                    "question_id": "q0000",
                    "nugget_index": 1,
                    "text": "B is 2",
                    "importance": "okay",
                    "context_ids": ["c2"],
                },
                {
                    **base,
                    "question_id": "q0001",
                    "status": "insufficient",
                    "reason": "no relevant context",
                },
            ],
            NUGGETS,
        ),
    )
    judged = [
        {
            "text": "A is 1",
            "importance": "vital",
            "context_ids": ["c1", "c7"],
            "verdict": "not_support",
            "reason": "absent",
        },
        {
            "text": "B is 2",
            "importance": "okay",
            "context_ids": ["c2"],
            "verdict": "support",
            "reason": "stated",
        },
    ]
    cited = {
        "sentences": [
            {"sentence": "B is 2.", "cited": ["c2"], "support": "full", "each": {"c2": "full"}}
        ]
    }
    rows = run.rows("scores") + [
        {
            "run_id": "r",
            "question_id": "q0000",
            "metric": "nugget_recall_vital",
            "value": 0.0,
            "status": "ok",
            "reason": json.dumps({"metric": {"nuggets": judged}, "steps": []}),
        },
        {
            "run_id": "r",
            "question_id": "q0000",
            "metric": "citation_recall",
            "value": 1.0,
            "status": "ok",
            "reason": json.dumps({"metric": cited, "steps": []}),
        },
    ]
    run.write("scores", to_table(rows, SCORES))
    report = build_report(run_dir)
    q0, q1 = report.questions
    assert [(n.text, n.verdict, n.context_ids) for n in q0.nuggets] == [
        ("A is 1", "not_support", ("c1", "c7")),
        ("B is 2", "support", ("c2",)),
    ]
    assert (q1.nuggets, q1.nuggets_status, q1.nuggets_note) == (
        (),
        "insufficient",
        "no relevant context",
    )
    drill = _drill(q0, report.metrics, {})
    assert drill["ng"][0] == ["A is 1", "vital", ["c1", "c7"], "not_support"]
    path = write_xlsx(report, tmp_path / "r.xlsx")
    book = openpyxl.load_workbook(path)
    nuggets = list(book["nuggets"].values)
    assert nuggets[0][:7] == (
        "question_id",
        "question",
        "rank",
        "importance",
        "nugget",
        "context_ids",
        "verdict",
    )
    assert nuggets[1][4:7] == ("A is 1", "c1, c7", "not_support")
    citations = list(book["citations"].values)
    assert citations[1][:5] == ("q0000", 1, "B is 2.", "c2", "full")
