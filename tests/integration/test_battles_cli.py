"""``ragaudit compare A B --battles`` on two small runs, judged by the offline fake judge."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from support.html_runs import CHROMIUM, UNREADABLE, offline_page
from support.reporting_runs import write_answers, write_run
from typer.testing import CliRunner

from ragaudit.cli import app
from ragaudit.cli._app import ERROR_EXIT
from ragaudit.runfolder import RunFolder
from ragaudit.schemas import ANSWERS, BATTLES, schema_version, to_table


def _runs(root: Path, b_good: bool, extra: list[str]) -> None:
    ids = [f"q{i:04d}" for i in range(24)]
    write_run(root, "A", {"faithfulness": [0.5] * 24}, question_ids=ids)
    write_run(root, "B", {"faithfulness": [0.5] * (24 + len(extra))}, question_ids=ids + extra)
    write_answers(root, "A", ids, not b_good)
    write_answers(root, "B", ids + extra, b_good)


def test_compare_battles_finds_the_better_run_and_writes_battles(tmp_path: Path) -> None:
    _runs(tmp_path, b_good=True, extra=["q9999"])
    runner = CliRunner()
    counted = runner.invoke(
        app, ["compare", "A", "B", "--runs-root", str(tmp_path), "--battles", "--dry-run"]
    )
    assert counted.exit_code == 0, counted.output
    assert "24 shared question(s)" in counted.output and "48 judge call(s)" in counted.output
    assert not (tmp_path / "B" / "battles.parquet").exists()
    result = runner.invoke(
        app,
        ["compare", "A", "B", "--runs-root", str(tmp_path), "--battles", "--fail-on-regression"],
    )
    assert result.exit_code == 0, result.output
    assert "1 only in B" in result.output
    assert "B better" in result.output
    table = pq.read_table(tmp_path / "B" / "battles.parquet")
    assert schema_version(table.schema) == schema_version(BATTLES)
    assert table.num_rows == 48
    assert set(table.column("order").to_pylist()) == {"AB", "BA"}
    assert set(table.column("verdict").to_pylist()) == {"B"}
    saved = json.loads((tmp_path / "B" / "compare.json").read_text())
    assert saved["battles"]["verdict"] == "B better"
    assert saved["battles"]["n"] == 24 and saved["battles"]["consistency"] == 1.0


def test_a_regression_by_battles_fails_the_gate(tmp_path: Path) -> None:
    # Same questions: comparable runs, so the gate applies (as it does to a metric).
    _runs(tmp_path, b_good=False, extra=[])
    result = CliRunner().invoke(
        app,
        ["compare", "A", "B", "--runs-root", str(tmp_path), "--battles", "--fail-on-regression"],
    )
    assert result.exit_code == 1, result.output
    assert "B worse" in result.output and "battles" in result.output


def test_battles_command_ranks_three_runs(tmp_path: Path) -> None:
    ids = [f"q{i:04d}" for i in range(20)]
    for run_id, words in (
        ("good", "the question {q} is answered"),
        ("mid", "question only"),
        ("bad", "no idea at all"),
    ):
        write_run(tmp_path, run_id, {"faithfulness": [0.5] * 20}, question_ids=ids)
        rows = [
            {"run_id": run_id, "question_id": q, "response": words.format(q=q), "status": "ok"}
            for q in ids
        ]
        RunFolder(tmp_path, run_id).write("answers", to_table(rows, ANSWERS))
    result = CliRunner().invoke(
        app, ["battles", "bad", "good", "mid", "--runs-root", str(tmp_path), "--resamples", "50"]
    )
    assert result.exit_code == 0, result.output
    board = result.output[result.output.index("Leaderboard") :]
    ranked = [c.strip() for line in board.splitlines() for c in line.split("│")[2:3] if c.strip()]
    assert ranked == ["good", "mid", "bad"], result.output
    # The fake judge is decisive: good never loses and bad never wins, so no finite fit exists,
    # for mid either (it sits between two gaps that both grow without end).
    assert "note: good, mid, bad: no finite strength fits" in result.output
    # The leaderboard and every verdict are kept on disk, in the order the console printed.
    out = Path(result.output.split("leaderboard and verdicts: ")[1].split()[0])
    assert out.parent == tmp_path and out.name.startswith("battles-")
    board_rows = pq.read_table(out / "leaderboard.parquet").to_pylist()
    assert [r["run"] for r in board_rows] == ["good", "mid", "bad"]
    assert [r["unbounded"] for r in board_rows] == [True, True, True]
    verdicts = pq.read_table(out / "battles.parquet")
    # Three pairs of runs, 20 questions, both orders.
    assert verdicts.num_rows == 3 * 20 * 2 and board_rows[0]["verdicts"] == 120


def test_compare_page_with_battles_in_chromium(tmp_path: Path) -> None:
    if not CHROMIUM.exists():
        pytest.skip("no Chromium at /usr/bin/chromium (apt-get install chromium)")
    _runs(tmp_path, b_good=False, extra=[])
    result = CliRunner().invoke(
        app, ["compare", "A", "B", "--runs-root", str(tmp_path), "--battles", "--html"]
    )
    assert result.exit_code == 0, result.output
    with offline_page(tmp_path / "B" / "compare.html") as (page, found):
        row = page.inner_text("#battles")
        text = page.inner_text("body")
        duels = page.locator("details.duel")
        count = duels.count()
        first = duels.first
        first.locator("summary").click()
        sides = first.locator(".grid2 pre").all_inner_texts()
        verdicts = first.locator("table.verdicts tbody tr").all_inner_texts()
    assert found["errors"] == []
    assert "B worse" in row and "lost 48" in row and "position consistency 1.000" in row
    # The drill-down: every shared question, both answers side by side, both orders' verdicts.
    assert count == 24
    assert sides[0].startswith("the question q") and sides[1] == "no idea at all"
    assert len(verdicts) == 2 and all("\tA\t" in v for v in verdicts)
    assert page_is_readable(text)


def page_is_readable(text: str) -> bool:
    return UNREADABLE.search(text) is None


def test_battles_out_refuses_a_run_folder_before_any_battle(tmp_path: Path) -> None:
    _runs(tmp_path, b_good=True, extra=[])
    result = CliRunner().invoke(
        app, ["battles", "A", "B", "--runs-root", str(tmp_path), "--out", str(tmp_path / "B")]
    )
    assert result.exit_code == ERROR_EXIT, result.output
    assert "a run folder; give a folder of its own" in result.output
    assert not (tmp_path / "B" / "battles.parquet").exists()
