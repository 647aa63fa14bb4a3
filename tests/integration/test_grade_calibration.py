"""Per-grade calibration: a judge that over-rates by one grade 30 % of the time is measured so."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from typer.testing import CliRunner

from ragaudit.calibration import load_grade_labels
from ragaudit.cli import app
from ragaudit.errors import InputError
from ragaudit.runfolder import RunFolder

OVER_RATE = 0.3
PER_GRADE = 150
CONTEXTS_PER_QUESTION = 10


def _unit(text: str) -> float:
    """A number in [0, 1) fixed by ``text``: the scripted judge's coin, per candidate."""
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big") / 2**64


def write_labels(path: Path) -> dict[str, int]:
    """600 human grades (150 per grade) over 60 questions; context text → human grade."""
    truth: dict[str, int] = {}
    rows = []
    for i in range(4 * PER_GRADE):
        human = i % 4
        q = i // CONTEXTS_PER_QUESTION
        context = f"Passage {i} on subject {q}: notes on the harbour records of year {1800 + i}."
        truth[context] = human
        rows.append(
            {
                "question_id": f"q{q}",
                "question": f"What do the harbour records of subject {q} say?",
                "context": context,
                "grade": human,
                "rank": i % CONTEXTS_PER_QUESTION + 1,
            }
        )
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return truth


def over_rating_judge(truth: dict[str, int]):
    """The human's grade, one grade higher for 30 % of the candidates (never above 3)."""

    def respond(req: Any) -> dict[str, Any] | None:
        if req.title != "RelevanceGrade":
            return None
        context = req.payload["context"]
        human = truth[context]
        over = human < 3 and _unit(context) < OVER_RATE
        return {"grade": human + 1 if over else human, "reason": "scripted"}

    return respond


@pytest.fixture
def labels(tmp_path: Path) -> tuple[Path, dict[str, int]]:
    path = tmp_path / "grades.jsonl"
    return path, write_labels(path)


def _calibrate(tmp_path: Path, labels: Path) -> Any:
    args = ["calibrate", "--judge", "fake/judge", "--embedder", "fake/embed"]
    args += ["--grade-labels", str(labels), "--runs-root", str(tmp_path / "runs")]
    args += ["--run-id", "grades", "--set", f"cache_dir={tmp_path / 'cache'}"]
    return CliRunner().invoke(app, args)


def test_over_rating_by_one_grade_is_recovered_within_its_ci(fake, tmp_path, labels) -> None:
    path, truth = labels
    with fake.script(over_rating_judge(truth)):
        result = _calibrate(tmp_path, path)
    assert result.exit_code == 0, result.output
    assert "human grade → judge over-/under-rating" in " ".join(result.output.split())
    run = RunFolder(tmp_path / "runs", "grades")

    items = pl.from_arrow(run.read("calibration_grades"))
    assert items.height == 4 * PER_GRADE and set(items["status"]) == {"ok"}
    # Every judge grade in the table is the scripted judge's answer to that context.
    expected = {c: h + 1 if h < 3 and _unit(c) < OVER_RATE else h for c, h in truth.items()}
    assert sorted(items["judge_grade"].to_list()) == sorted(expected.values())

    figures = pl.from_arrow(run.read("calibration")).filter(pl.col("kind") == "grade_calibration")
    over = {r["family"]: r for r in figures.filter(pl.col("statistic") == "over_rated").to_dicts()}
    for grade in (0, 1, 2):
        row = over[f"human grade {grade}"]
        actual = [_unit(c) < OVER_RATE for c, h in truth.items() if h == grade]
        assert row["n"] == PER_GRADE
        assert row["value"] == pytest.approx(sum(actual) / len(actual))
        assert row["ci_low"] < OVER_RATE < row["ci_high"]
        # Informative: the interval rules out both an honest judge and one that always over-rates.
        assert row["ci_low"] > 0.15 and row["ci_high"] < 0.45
    assert over["human grade 3"]["value"] == 0.0
    under = figures.filter(pl.col("statistic") == "under_rated")
    assert under["value"].to_list() == [0.0] * 4

    # Judge grade → P(human relevant): grade 1 holds over-rated 0s, never a relevant item;
    # grade 2 mixes true 2s with over-rated 1s; grade 3 is always relevant to the human.
    meta = json.loads((run.path / "calibration.json").read_text(encoding="utf-8"))
    given = meta["grade_calibration"]["human_relevant_given_judge_grade"]
    assert given["1"]["share"] == 0.0 and given["3"]["share"] == 1.0
    twos = [c for c, g in expected.items() if g == 2]
    assert given["2"]["share"] == pytest.approx(sum(truth[c] >= 2 for c in twos) / len(twos))
    # Equal counts per human grade: a true 2 stays 2 with 1 − p, a true 1 becomes 2 with p.
    low, high = given["2"]["ci"]
    assert low < 1 - OVER_RATE < high
    assert meta["items"]["grade_labels"] == 4 * PER_GRADE

    # The engine's NDCG: the same 60 ranked questions under each gain; over-rating moves
    # the judge-based figure away from the human one.
    ndcg = {r["statistic"]: r for r in figures.to_dicts() if r["statistic"].startswith("ndcg")}
    assert set(ndcg) == {"ndcg_human", "ndcg_judge", "ndcg_calibrated"}
    assert {r["n"] for r in ndcg.values()} == {4 * PER_GRADE // CONTEXTS_PER_QUESTION}
    human = ndcg["ndcg_human"]["value"]
    assert ndcg["ndcg_judge"]["value"] > human
    # Calibration undoes the inflation: the calibrated figure sits nearer the human one.
    assert abs(ndcg["ndcg_calibrated"]["value"] - human) < ndcg["ndcg_judge"]["value"] - human
    assert all(0 <= r["ci_low"] <= r["value"] <= r["ci_high"] <= 1 for r in ndcg.values())
    assert "engine NDCG@10 over 60 ranked question(s)" in " ".join(result.output.split())

    page = (run.path / "report.html").read_text(encoding="utf-8")
    assert 'id="grade-calibration"' in page and "judge over-rated" in page
    assert f"{4 * PER_GRADE} human grades" in page


def test_a_second_calibration_asks_the_judge_nothing(fake, tmp_path, labels) -> None:
    path, truth = labels
    with fake.script(over_rating_judge(truth)):
        assert _calibrate(tmp_path, path).exit_code == 0
        first = fake.stats.calls
        result = _calibrate(tmp_path, path)
    assert result.exit_code == 0, result.output
    assert first >= 4 * PER_GRADE and fake.stats.calls == first


def test_grade_labels_files_csv_and_errors(tmp_path: Path) -> None:
    csv = tmp_path / "grades.csv"
    csv.write_text(
        "question,context,human_grade\nWhat is a quay?,A quay is a landing place.,3\n"
        "What is a quay?,Ships sail.,0\n",
        encoding="utf-8",
    )
    got = load_grade_labels(csv)
    assert [g.human for g in got] == [3, 0]
    assert got[0].question_id == got[1].question_id and got[0].context_id != got[1].context_id

    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"question": "q", "context": "c", "grade": 4}) + "\n")
    with pytest.raises(InputError, match="line 1: human grade 4 is not one of 0, 1, 2, 3"):
        load_grade_labels(bad)
    clash = tmp_path / "clash.jsonl"
    rows = [{"question_id": "a", "question": q, "context": "c", "grade": 1} for q in "xy"]
    clash.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(InputError, match="names two different questions"):
        load_grade_labels(clash)
    rows = [{"question": "q", "context_id": "c1", "context": t, "grade": 1} for t in "xy"]
    clash.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(InputError, match="context id 'c1' names two different texts"):
        load_grade_labels(clash)
    result = CliRunner().invoke(
        app, ["calibrate", "--judge", "fake/judge", "--grade-labels", str(tmp_path / "no.csv")]
    )
    assert result.exit_code == 2 and "grade labels file not found" in result.output


def test_an_honest_judge_gives_the_humans_ndcg(fake, tmp_path, labels) -> None:
    """With the human's own grades, the judge-gain NDCG is the human-gain NDCG exactly."""
    path, truth = labels

    def honest(req: Any) -> dict[str, Any] | None:
        if req.title != "RelevanceGrade":
            return None
        return {"grade": truth[req.payload["context"]], "reason": "scripted"}

    with fake.script(honest):
        result = _calibrate(tmp_path, path)
    assert result.exit_code == 0, result.output
    figures = pl.from_arrow(RunFolder(tmp_path / "runs", "grades").read("calibration"))
    value = dict(zip(figures["statistic"], figures["value"], strict=True))
    assert value["ndcg_judge"] == pytest.approx(value["ndcg_human"])
    assert set(figures.filter(pl.col("statistic") == "over_rated")["value"]) == {0.0}


@pytest.mark.skipif(
    not Path("/usr/bin/chromium").exists(), reason="no Chromium at /usr/bin/chromium"
)
def test_grade_calibration_page_in_chromium(fake, tmp_path, labels) -> None:
    """The grades-only calibration page: its section drawn, counts it holds, nothing repeated."""
    from support.html_runs import UNREADABLE, browse

    path, truth = labels
    with fake.script(over_rating_judge(truth)):
        result = _calibrate(tmp_path, path)
    assert result.exit_code == 0, result.output
    assert "0 items scored" not in result.output  # it scored no items: it says what it did
    page_path = tmp_path / "runs" / "grades" / "report.html"
    found = browse(page_path, screenshot=page_path.with_name("report.png"))
    assert found["errors"] == [] and found["requests"] == [page_path.as_uri()]
    text = found["text"]
    assert sorted({m.group(0) for m in UNREADABLE.finditer(text)}) == []
    lines = text.splitlines()
    # The header counts only what this calibration holds.
    assert f"{4 * PER_GRADE} human grades · threshold 0.5" in text
    assert "0 labelled items" not in text and "0 scenario rows" not in text
    assert not any(line.startswith("·") for line in lines)
    # The judge and data set are said once over the table, not on each of its 15 rows.
    assert "data: grade_labels · metric: relevance@3 · judge: fake/judge" in text
    assert text.count("fake/judge") < 5
    assert "judge over-rated" in text and "NDCG, calibrated judge grades" in text


def _many_labels(path: Path, n: int) -> Path:
    rows = [
        {"question": f"Q{i // 10}?", "context": f"context {i}", "grade": i % 4} for i in range(n)
    ]
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    return path


def test_calibrate_dry_run_counts_and_a_paid_judge_over_the_bound_is_not_started(
    tmp_path: Path,
) -> None:
    from ragaudit.cli._calibrate import CONFIRM_ABOVE

    path = _many_labels(tmp_path / "many.jsonl", CONFIRM_ABOVE + 500)
    base = ["calibrate", "--grade-labels", str(path), "--runs-root", str(tmp_path / "runs")]
    base += ["--set", f"cache_dir={tmp_path / 'cache'}", "--embedder", "fake/embed"]
    dry = CliRunner().invoke(app, [*base, "--judge", "openai/gpt-4o-mini", "--dry-run"])
    assert dry.exit_code == 0, dry.output
    said = " ".join(dry.output.split())
    assert f"{CONFIRM_ABOVE + 500:,}" in said and "no model was called" in said
    paid = CliRunner().invoke(app, [*base, "--judge", "openai/gpt-4o-mini"])
    assert paid.exit_code == 2
    assert "pass --yes" in " ".join(paid.output.split())
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())


def test_calibrate_prints_a_progress_line_per_stage(fake, tmp_path, labels) -> None:
    path, truth = labels
    with fake.script(over_rating_judge(truth)):
        result = _calibrate(tmp_path, path)
    assert result.exit_code == 0, result.output
    assert "relevance: started, 0/" in result.output
    assert "relevance: done, " in result.output
