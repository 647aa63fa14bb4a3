"""Judge-noise warnings where the user reads them: compare's power note, the circularity flag."""

from __future__ import annotations

from pathlib import Path

from support.reporting_runs import write_run
from support.runs import make_config
from typer.testing import CliRunner

from ragaudit.cli import app
from ragaudit.manifest import judge_warnings
from ragaudit.reporting import compare_runs


def test_five_questions_are_too_few_to_move_and_compare_says_so(tmp_path: Path) -> None:
    write_run(tmp_path, "A", {"faithfulness": [0.5, 0.6, 0.7, 0.6, 0.5]})
    write_run(tmp_path, "B", {"faithfulness": [0.9, 0.95, 0.99, 0.9, 0.92]})
    cmp = compare_runs(tmp_path / "A", tmp_path / "B", resamples=999)
    (change,) = cmp.metrics
    assert change.p_value >= 0.0625 and change.verdict == "no change beyond noise"
    (note,) = [n for n in cmp.notes if n.startswith("faithfulness:")]
    assert "5 paired question(s) can never move at α = 0.05" in note and "0.0625" in note
    result = CliRunner().invoke(app, ["compare", "A", "B", "--runs-root", str(tmp_path)])
    assert "can never move" in result.output, result.output


def test_enough_questions_get_no_power_note(tmp_path: Path) -> None:
    a = [0.1 * (i % 7) for i in range(40)]
    write_run(tmp_path, "A", {"faithfulness": a})
    write_run(tmp_path, "B", {"faithfulness": [v + 0.3 for v in a]})
    cmp = compare_runs(tmp_path / "A", tmp_path / "B", resamples=999)
    assert cmp.metrics[0].verdict == "improved"
    assert not [n for n in cmp.notes if "never move" in n or "too few" in n]


def test_a_system_judged_by_its_own_model_is_flagged(tmp_path: Path) -> None:
    config = make_config(
        tmp_path, judge="openai/gpt-4o-mini", collect__answers__model="gpt-4o-mini"
    )
    (flag,) = [w for w in judge_warnings(config) if "also a judge" in w]
    assert "gpt-4o-mini" in flag
    other = make_config(tmp_path, judge="openai/gpt-4o-mini", collect__answers__model="qwen2.5:7b")
    assert not [w for w in judge_warnings(other) if "also a judge" in w]


def test_identical_runs_of_five_questions_still_say_they_can_never_move(tmp_path: Path) -> None:
    """All paired differences zero (no spread at all): the floor 2/2^n still binds and is said."""
    same = {"faithfulness": [0.5, 0.6, 0.7, 0.6, 0.5]}
    write_run(tmp_path, "A", same)
    write_run(tmp_path, "B", same)
    cmp = compare_runs(tmp_path / "A", tmp_path / "B", resamples=999)
    (change,) = cmp.metrics
    assert change.verdict == "no change beyond noise"
    (note,) = [n for n in cmp.notes if n.startswith("faithfulness:")]
    assert "5 paired question(s) can never move at α = 0.05" in note and "0.0625" in note
    # No spread: no "would need about N questions" estimate to make.
    assert "would need" not in note
    result = CliRunner().invoke(app, ["compare", "A", "B", "--runs-root", str(tmp_path)])
    assert "can never move" in result.output, result.output
