"""Reports, ``compare`` and the viewer broken down by turn, on run folders written by hand.

A conversational run's metrics split by turn position (1, 2, 3–5, 6+), by standalone /
follow-up / clarification and by answerability, each cell with its n and the one bootstrap
interval; ``compare``'s cells one adjusted family per breakdown, never gating; the viewer's
pages showing each turn's conversation as text; a set of lone questions reporting as before.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import openpyxl
import pyarrow.parquet as pq
import pytest
from fastapi.testclient import TestClient
from support.chat_runs import write_chat_run
from support.reporting_runs import write_run
from support.runs import context, make_config
from typer.testing import CliRunner

from ragaudit.cli import app
from ragaudit.reporting import (
    build_report,
    compare_runs,
    render_compare_html,
    render_html,
    write_compare_xlsx,
    write_xlsx,
)
from ragaudit.reporting._html import unpack
from ragaudit.stats import adjust, bootstrap_ci
from ragaudit.tasks.report import write_summary

HOSTILE = "<script>alert(1)</script>"
SAMPLES = 200  # the report config's bootstrap samples in these runs


def _value(metric: str, k: int, turn: int) -> float | None:
    """A score falling with the turn, conversation 5's turn 7 failed."""
    if k == 5 and turn == 7:
        return None
    return round(1.0 / turn + 0.01 * k, 6)


def _summarised(run_dir: Path, tmp_path: Path) -> None:
    """``summary.parquet`` as the report stage writes it (``tasks/report.write_summary``)."""
    config = make_config(tmp_path, runs_root=str(run_dir.parent), report__bootstrap_samples=SAMPLES)
    write_summary(context(config, run_dir.name))


@pytest.fixture
def chat(tmp_path: Path) -> Path:
    path = write_chat_run(
        tmp_path / "runs",
        "chat",
        _value,
        conversations=6,
        turns=7,
        summary=False,
        kinds=lambda turn: "clarification" if turn == 4 else None,
        answerability=lambda k, turn: (
            ("unanswerable" if k == 0 else "answerable") if k < 3 else None
        ),
        cut=lambda turn: max(0, turn - 4),
        said=lambda k, turn: HOSTILE if turn == 1 else f"and what about point {turn}?",
    )
    _summarised(path, tmp_path)
    return path


def _cell(values: list[float | None]) -> tuple[float, float | None, float | None, int]:
    found = np.array(values, dtype=float)
    low, high = bootstrap_ci(found, SAMPLES, 0)
    return float(found.mean()), low, high, len(found)


def test_each_cell_is_the_mean_n_and_bootstrap_interval_of_its_questions(chat: Path) -> None:
    report = build_report(chat)
    by = {b.name: b for b in report.breakdowns}
    assert list(by) == ["turn_band", "turn_kind", "answerability"]
    bands = by["turn_band"]
    assert bands.cells == ("1", "2", "3-5", "6+")
    assert [bands.size(c) for c in bands.cells] == [6, 6, 18, 12]
    expected: dict[str, list[float | None]] = {
        "1": [_value("", k, 1) for k in range(6)],
        "2": [_value("", k, 2) for k in range(6)],
        "3-5": [_value("", k, t) for k in range(6) for t in (3, 4, 5)],
        "6+": [v for k in range(6) for t in (6, 7) if (v := _value("", k, t)) is not None],
    }
    for cell, values in expected.items():
        s = bands.summary(cell, "faithfulness")
        assert s is not None
        assert (s.mean, s.ci_low, s.ci_high, s.n_ok) == pytest.approx(_cell(values))
        assert None not in (s.ci_low, s.mean, s.ci_high)
        assert s.ci_low < s.mean < s.ci_high  # type: ignore[operator]
    assert bands.summary("6+", "rouge_l").n_failed == 1  # type: ignore[union-attr]
    # Turn kind: given for turn 4 (clarification), read from the position elsewhere, said so.
    kinds = by["turn_kind"]
    assert kinds.cells == ("standalone", "follow-up", "clarification")
    assert [kinds.size(c) for c in kinds.cells] == [6, 30, 6]
    assert "no turn_kind for 36 of 42" in (kinds.note or "")
    assert "first turn counts as standalone" in (kinds.note or "")
    clarification = kinds.summary("clarification", "faithfulness")
    assert clarification is not None and clarification.mean == pytest.approx(
        np.mean([_value("", k, 4) for k in range(6)])
    )
    # Answerability where labelled: conversations 0-2 are, the rest are "not labelled".
    labels = by["answerability"]
    assert labels.cells == ("answerable", "unanswerable", "not labelled")
    assert [labels.size(c) for c in labels.cells] == [14, 7, 21]
    unanswerable = labels.summary("unanswerable", "faithfulness")
    assert unanswerable is not None and unanswerable.n_ok == 7


def test_the_summary_table_stores_the_cells_and_every_output_reads_them(
    chat: Path, tmp_path: Path
) -> None:
    table = pq.read_table(chat / "summary.parquet")
    assert table.schema.metadata[b"schema_version"] == b"4"
    rows = table.to_pylist()
    metric_rows = [r for r in rows if r["kind"] == "metric"]
    cells = [r for r in rows if r["kind"] == "breakdown"]
    assert all(r["breakdown"] is None and r["cell"] is None for r in metric_rows)
    assert {(r["breakdown"], r["cell"]) for r in cells} >= {("turn_band", "6+")}
    assert len(cells) == 2 * (4 + 3 + 3)  # two metrics in every cell of the three breakdowns
    stored = next(
        r
        for r in cells
        if (r["breakdown"], r["cell"], r["metric"]) == ("turn_band", "3-5", "faithfulness")
    )
    report = build_report(chat)
    shown = report.breakdowns[0].summary("3-5", "faithfulness")
    assert shown is not None and (shown.mean, shown.ci_low, shown.n_ok) == (
        stored["mean"],
        stored["ci_low"],
        stored["n_ok"],
    )
    # report.html: one table per breakdown, the cell's mean, interval and n.
    page = render_html(report)
    band = page[page.index('id="breakdown-turn_band"') :]
    band = band[: band.index("</table>")]
    assert f"{shown.mean:.3f}" in band and f"n {shown.n_ok}" in band
    assert "first turn counts as standalone" in page
    # report.xlsx: the breakdowns sheet holds the same figures.
    write_xlsx(report, tmp_path / "report.xlsx")
    sheet = openpyxl.load_workbook(tmp_path / "report.xlsx")["breakdowns"]
    head = [c.value for c in sheet[1]]
    found = [dict(zip(head, [c.value for c in row], strict=True)) for row in sheet.iter_rows(2)]
    row = next(
        r
        for r in found
        if (r["breakdown"], r["cell"], r["metric"]) == ("turn_band", "3-5", "faithfulness")
    )
    assert row["mean"] == stored["mean"] and row["n_ok"] == 18 and row["questions"] == 18
    # The console summary.
    from ragaudit.cli._app import console
    from ragaudit.cli._run import _print_report

    with console.capture() as cap:
        _print_report(chat)
    text = cap.get()
    assert "By turn position" in text and "3-5 (18 q)" in text and "n=18" in text
    assert "first turn counts as standalone" in text


def test_a_summary_written_before_breakdowns_gets_them_from_the_scores(
    chat: Path, tmp_path: Path
) -> None:
    table = pq.read_table(chat / "summary.parquet")
    kept = table.filter(table["kind"].to_numpy(zero_copy_only=False) != "breakdown")
    pq.write_table(kept.drop(["breakdown", "cell"]), chat / "summary.parquet")
    again = build_report(chat).breakdowns
    fresh = build_report(chat).breakdowns
    assert again and again[0].summary("6+", "faithfulness") == fresh[0].summary(
        "6+", "faithfulness"
    )


def test_labels_rewriting_the_summary_keep_its_breakdown_rows(chat: Path) -> None:
    from support.labelled_runs import label_row

    from ragaudit import labels
    from ragaudit.ppi import write_corrected_summary

    def cells() -> list[dict]:
        rows = pq.read_table(chat / "summary.parquet").to_pylist()
        return [r for r in rows if r["kind"] == "breakdown"]

    before = cells()
    found = [
        label_row("faithfulness", f"c{k}::{t}", None, "ann", float(t <= 2 or k == 1))
        for k in range(6)
        for t in range(1, 5)
    ]
    labels.append_labels(chat, found)
    assert write_corrected_summary(chat) is True
    rows = pq.read_table(chat / "summary.parquet").to_pylist()
    assert any(r["kind"] == "metric" and r["n_labels"] for r in rows)
    assert cells() == before


def test_a_set_of_lone_questions_reports_as_before(tmp_path: Path) -> None:
    values: dict[str, list[float | None]] = {
        "faithfulness": [0.2, 0.9, None, 0.4, 0.7],
        "rouge_l": [0.1, 0.3, 0.5, 0.7, 0.9],
    }
    lone = write_run(tmp_path / "runs", "lone", values)
    _summarised(lone, tmp_path)
    rows = pq.read_table(lone / "summary.parquet").to_pylist()
    assert [r["kind"] for r in rows] == ["metric", "metric"]
    assert all(r["breakdown"] is None and r["cell"] is None for r in rows)
    report = build_report(lone)
    assert report.breakdowns == () and all(q.conversation is None for q in report.questions)
    page = render_html(report)
    assert 'id="breakdowns"' not in page and ".turn" not in page
    drill = unpack(re.search(r'id="drill">(.*?)</script>', page, re.S).group(1))  # type: ignore[union-attr]
    assert all(set(d) == set(drill[0]) and "cv" not in d for d in drill)
    write_xlsx(report, tmp_path / "report.xlsx")
    assert "breakdowns" not in openpyxl.load_workbook(tmp_path / "report.xlsx").sheetnames
    other = write_run(tmp_path / "runs", "other", values)
    cmp = compare_runs(lone, other, resamples=99)
    assert cmp.breakdowns == () and not any("by turn" in n for n in cmp.notes)
    write_compare_xlsx(cmp, tmp_path / "c.xlsx")
    assert openpyxl.load_workbook(tmp_path / "c.xlsx").sheetnames == ["compare", "run"]


def _shifted(turn: int, k: int) -> float:
    """Run B: the later turns (6+) lose 0.3, the first two gain it back, the rest unchanged."""
    base = 0.5 + 0.02 * ((k * 7 + turn) % 5)
    if turn >= 6:
        return base - 0.3
    return base + 0.3 if turn <= 2 else base


def test_compare_adjusts_each_breakdown_as_one_family_and_never_gates_on_it(
    tmp_path: Path,
) -> None:
    root = tmp_path / "runs"
    a = write_chat_run(
        root, "A", lambda m, k, t: 0.5 + 0.02 * ((k * 7 + t) % 5), conversations=16, turns=7
    )
    b = write_chat_run(root, "B", lambda m, k, t: _shifted(t, k), conversations=16, turns=7)
    cmp = compare_runs(a, b, resamples=999)
    by = {x.name: x for x in cmp.breakdowns}
    bands = by["turn_band"]
    assert len(bands.changes) == 2 * 4  # two metrics × four bands: one family
    # The family's p-values adjusted together, BH as report.adjustment says.
    raw = [c.change.p_value for c in bands.changes]
    assert [c.change.p_adjusted for c in bands.changes] == pytest.approx(adjust(raw, "bh"))
    verdicts = {(c.change.metric, c.cell): c.change.verdict for c in bands.changes}
    assert verdicts[("faithfulness", "6+")] == "regressed"
    assert verdicts[("faithfulness", "1")] == "improved"
    assert verdicts[("faithfulness", "3-5")] == "no change beyond noise"
    six = next(c for c in bands.changes if (c.change.metric, c.cell) == ("faithfulness", "6+"))
    assert six.change.n_paired == 32 and six.change.diff == pytest.approx(-0.3)
    # Overall the gains and losses cancel: the gate reads the overall metrics alone.
    assert cmp.regressed == ()
    gated = CliRunner().invoke(
        app, ["compare", "A", "B", "--runs-root", str(root), "--fail-on-regression"]
    )
    assert gated.exit_code == 0, gated.output
    assert "B - A by turn position" in gated.output and "regressed" in gated.output
    # BY when asked: each family adjusted by it.
    by_cmp = compare_runs(a, b, resamples=999, adjustment="by")
    family = by_cmp.breakdowns[0].changes
    assert [c.change.p_adjusted for c in family] == pytest.approx(
        adjust([c.change.p_value for c in family], "by")
    )
    # compare.html and compare.xlsx show the families.
    page = render_compare_html(cmp)
    table = page[page.index('id="breakdown-turn_band"') :]
    assert "regressed" in table[: table.index("</table>")]
    write_compare_xlsx(cmp, tmp_path / "compare.xlsx")
    sheet = openpyxl.load_workbook(tmp_path / "compare.xlsx")["breakdowns"]
    head = [c.value for c in sheet[1]]
    rows = [dict(zip(head, [c.value for c in r], strict=True)) for r in sheet.iter_rows(2)]
    assert {(r["breakdown"], r["cell"], r["verdict"]) for r in rows} >= {
        ("turn_band", "6+", "regressed"),
        ("turn_kind", "standalone", "improved"),
    }
    assert json.loads(json.dumps(cmp.to_dict()))["breakdowns"][0]["name"] == "turn_band"


def test_a_cell_too_small_to_move_says_so(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    a = write_chat_run(root, "A", lambda m, k, t: 0.5, conversations=3, turns=2)
    b = write_chat_run(root, "B", lambda m, k, t: 0.1, conversations=3, turns=2)
    cmp = compare_runs(a, b, resamples=99)
    cells = cmp.breakdowns[0].changes
    assert all(not c.can_move and not c.change.moved for c in cells)


@pytest.fixture
def client(chat: Path) -> TestClient:
    from ragaudit.viewer.app import create_app

    return TestClient(create_app(chat.parent), base_url="http://127.0.0.1")


def test_the_question_page_shows_the_conversation_as_text_and_what_was_left_out(
    client: TestClient,
) -> None:
    page = client.get("/runs/chat/questions/c1::6")
    assert page.status_code == 200
    text = page.text
    assert HOSTILE not in text and "&lt;script&gt;alert(1)&lt;/script&gt;" in text
    conversation = text[text.index('id="conversation"') : text.index("This turn")]
    # Turn 6 left out its 2 oldest exchanges (history_cut): their turns dimmed and said so.
    assert "left out the 2 oldest exchange(s)" in conversation
    assert conversation.count('class="turn user cut"') == 2
    assert conversation.count('class="turn user"') == 3
    assert conversation.index("&lt;script&gt;") < conversation.index("point 5")
    assert "follow-up (by its position" in text and "answerability answerable" in text
    first = client.get("/runs/chat/questions/c1::1").text
    assert "nothing before it" in first


def test_the_run_page_holds_the_breakdowns_and_each_turns_history_as_data(
    client: TestClient,
) -> None:
    page = client.get("/runs/chat")
    assert page.status_code == 200
    assert 'id="breakdown-turn_band"' in page.text and 'id="breakdown-answerability"' in page.text
    # The drill-down is data the page puts in with textContent: the history's markup never
    # reaches the document as markup.
    assert HOSTILE not in page.text
    drill = unpack(re.search(r'id="drill">(.*?)</script>', page.text, re.S).group(1))  # type: ignore[union-attr]
    turn = next(d for d in drill if d["id"] == "c2::3")
    assert turn["cv"]["h"][0] == ["user", HOSTILE, False]
    assert turn["cv"]["t"] == 3 and turn["cv"]["k"] == "follow-up" and not turn["cv"]["kg"]
    assert "textContent" in page.text and "innerHTML" not in page.text
