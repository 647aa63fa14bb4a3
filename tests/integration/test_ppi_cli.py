"""``ragaudit report RUN`` and ``ragaudit compare`` on labelled runs: the corrected figures reach
summary.parquet, report.html and the compare output, through the CLI as a user runs it."""

from __future__ import annotations

import json
from pathlib import Path

import openpyxl
import pyarrow as pa
import pyarrow.parquet as pq
from support.labelled_runs import labelled_run
from support.servers import ragaudit

from ragaudit import ppi
from ragaudit.runfolder import RunFolder
from ragaudit.schemas import SUMMARY, schema_version

# The columns summary.parquet gained in schema version 3: kept out of an older table.
_V3 = ("kind", "ppi_note")


def _v1_summary(run: Path) -> None:
    """A summary as ragaudit wrote it before its PPI columns (schema version 1)."""
    rows = [
        {
            "run_id": run.name,
            "metric": "faithfulness",
            "mean": 0.5,
            "ci_low": 0.4,
            "ci_high": 0.6,
            "n_ok": 30,
            "n_failed": 0,
            "n_skipped": 0,
            "threshold": None,
            "flagged": False,
        }
    ]
    v1 = pa.schema(
        [SUMMARY.field(n) for n in SUMMARY.names if n not in (*ppi.SUMMARY_COLUMNS, *_V3)],
        metadata={"schema_version": "1", "table": "summary"},
    )
    pq.write_table(pa.Table.from_pylist(rows, schema=v1), run / "summary.parquet")


def test_report_and_compare_of_labelled_runs(tmp_path: Path) -> None:
    a, _ = labelled_run(tmp_path, "A", questions=30, grade_labels=3, answer_labels=15, seed=1)
    b, _ = labelled_run(tmp_path, "B", questions=30, grade_labels=3, answer_labels=15, seed=2)
    for run in (a, b):
        _v1_summary(run)
    out = ragaudit("report", str(a))
    assert "report.html" in out and "Traceback" not in out
    table = RunFolder(tmp_path, "A").read("summary")
    assert schema_version(table.schema) == 4
    (row,) = [r for r in table.to_pylist() if r["kind"] == "metric"]
    # The grade labels' corrected figures follow the metric's row (schema version 3).
    assert [r["metric"] for r in table.to_pylist() if r["kind"] == "figure"] == [
        ppi.RELEVANT_SHARE,
        ppi.NDCG,
    ]
    assert row["mean"] == 0.5  # the judge's own figures are kept as they were
    assert row["n_labels"] == 15 and row["ppi_ci_low"] <= row["ppi_mean"] <= row["ppi_ci_high"]
    page = (a / "report.html").read_text(encoding="utf-8")
    assert 'id="people-ppi"' in page and 'id="people-agreement"' in page
    out = ragaudit("compare", str(a), str(b), "--html", "--xlsx")
    assert "PPI" in out
    found = json.loads((b / "compare.json").read_text(encoding="utf-8"))
    assert found["metrics"][0]["noise"] == "questions and people's labels (PPI)"
    assert any("corrected by them (PPI" in n for n in found["notes"])
    # The judged candidates' figures, corrected by both runs' grade labels, beside the metric.
    figures = [ppi.RELEVANT_SHARE, ppi.NDCG]
    assert "corrected by people's labels (PPI): faithfulness, relevant share, NDCG@10" in out
    rows = {m["metric"]: m for m in found["metrics"]}
    for figure in figures:
        assert rows[figure]["noise"] == "questions and people's labels (PPI)"
        assert rows[figure]["ci_low"] <= rows[figure]["diff"] <= rows[figure]["ci_high"]
    assert found["corrected"] == ["faithfulness", *figures] and found["labels_unused"] == []
    page = (b / "compare.html").read_text(encoding="utf-8")
    assert 'id="labels-corrected"' in page and "NDCG@10" in page
    sheet = openpyxl.load_workbook(b / "compare.xlsx")["compare"]
    header, *cells = list(sheet.iter_rows(values_only=True))
    book = {r[0]: dict(zip(header, r, strict=True)) for r in cells}
    for figure in figures:
        assert book[figure]["labels"] == "corrected"
        assert book[figure]["diff"] == rows[figure]["diff"]  # numbers stay numbers
    # Both summaries corrected: `runs --trend` shows the corrected figure beside the judge's.
    ragaudit("report", str(b))
    trend = ragaudit("runs", "--runs-root", str(tmp_path), "--trend", ppi.NDCG)
    assert "corrected by people's labels" in trend and trend.count("PPI") == 2, trend
