"""Text from a run folder is text in every workbook we write: no cell becomes a formula."""

from __future__ import annotations

from pathlib import Path

import openpyxl
import polars as pl
from support.reporting_runs import write_run

from ragaudit.ablation import write_xlsx as write_ablation_xlsx
from ragaudit.ablation._results import OBJECTIVE, Findings
from ragaudit.reporting import build_report, write_calibration_xlsx, write_xlsx
from ragaudit.reporting._calibration import CalibrationSection

# What a planted document or question could start with (OWASP's CSV-injection list).
PAYLOADS = [
    "=1+1 ",
    '=HYPERLINK("http://evil.example/x","click") ',
    "+1+1 ",
    "-1+1 ",
    "@SUM(1,1) ",
    "\t=1+1 ",
    "\r=1+1 ",
    "http://evil.example/ ",
]


def _cells(path: Path) -> list[openpyxl.cell.cell.Cell]:
    book = openpyxl.load_workbook(path)
    return [c for ws in book.worksheets for row in ws.iter_rows() for c in row]


def _assert_inert(path: Path) -> None:
    cells = _cells(path)
    formulas = [(c.parent.title, c.coordinate, c.value) for c in cells if c.data_type == "f"]
    assert formulas == []
    assert [c.coordinate for c in cells if c.hyperlink is not None] == []
    # xlsxwriter stores a carriage return as the OOXML escape _x000D_, which openpyxl keeps.
    texts = {c.value.replace("_x000D_", "\r") for c in cells if isinstance(c.value, str)}
    # Each payload reached the sheet verbatim, as a string.
    for p in PAYLOADS:
        assert any(t.startswith(p) for t in texts), (p, sorted(texts))


def test_report_xlsx_writes_hostile_text_as_strings(tmp_path: Path) -> None:
    n = len(PAYLOADS)
    run = write_run(
        tmp_path,
        "A",
        {"faithfulness": [0.5] * (n - 2) + [None, None], "answer_relevancy": [0.7] * n},
        prefixes=PAYLOADS,
        warnings=[f"{p}warning" for p in PAYLOADS],
    )
    path = write_xlsx(build_report(run), tmp_path / "report.xlsx")
    _assert_inert(path)


def test_calibration_xlsx_writes_hostile_text_as_strings(tmp_path: Path) -> None:
    section = CalibrationSection(
        run_id="cal",
        judge=PAYLOADS[1] + "judge",
        embedder=None,
        warnings=tuple(f"{p}warning" for p in PAYLOADS),
        figures=(),
    )
    _assert_inert(write_calibration_xlsx(section, tmp_path / "calibration.xlsx"))


def test_ablation_xlsx_writes_hostile_text_as_strings(tmp_path: Path) -> None:
    n = len(PAYLOADS)
    table = pl.DataFrame(
        {
            "point": [f"{p}point" for p in PAYLOADS],
            "metric": [OBJECTIVE] * n,
            "mean": [0.5] * n,
            "ci_low": [0.4] * n,
            "ci_high": [0.6] * n,
        }
    )
    outliers = pl.DataFrame({"question": [f"{p}question" for p in PAYLOADS], "spread": [0.1] * n})
    found = Findings(table=table, best=None, outliers=outliers, weights={}, results=(), left_out={})
    path = tmp_path / "ablation.xlsx"
    write_ablation_xlsx(found, path)
    _assert_inert(path)
