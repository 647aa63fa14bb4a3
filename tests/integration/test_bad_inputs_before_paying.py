"""Problems found before anything is paid, each one line with no traceback: a tune budget below
the baseline's need (in the flow and in the dry run), ``battles --out`` that cannot be written,
and battles over too few questions to ever show a regression."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from support.cli import cli_command, cli_env
from support.reporting_runs import write_answers, write_run
from support.runs import make_config
from typer.testing import CliRunner

from ragaudit.cli import app


def _budget_yaml(tmp_path: Path) -> Path:
    config = make_config(
        tmp_path,
        collect__top_n=10,
        tune={"depth": 5, "max_judge_tokens": 1, "variants": {"short": {"top_n": 3}}},
    )
    path = tmp_path / "tune.yaml"
    path.write_text(yaml.safe_dump(config.model_dump(mode="json")), encoding="utf-8")
    return path


def test_the_dry_run_flags_a_budget_below_the_baselines_need(tmp_path: Path, fake: Any) -> None:
    result = CliRunner().invoke(app, ["tune", "-c", str(_budget_yaml(tmp_path)), "--dry-run"])
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert lines[-1].startswith("error: tune.max_judge_tokens: 1 tokens cannot grade even the ")
    assert fake.stats.calls == 0


@pytest.mark.slow  # a CLI subprocess starting its own Prefect server
def test_an_error_inside_the_tune_flow_is_one_line_without_prefects_traceback(
    tmp_path: Path,
) -> None:
    proc = subprocess.run(
        [*cli_command(), "tune", "-c", str(_budget_yaml(tmp_path))],
        capture_output=True,
        text=True,
        env=cli_env(tmp_path),
        timeout=600,
        cwd=tmp_path,
    )
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr and "ERROR" not in proc.stderr, proc.stderr
    errors = [line for line in proc.stderr.splitlines() if "max_judge_tokens" in line]
    assert len(errors) == 1 and errors[0].startswith("error: tune.max_judge_tokens: "), proc.stderr


def _answered(root: Path, run_id: str, ids: list[str], good: bool) -> None:
    write_run(root, run_id, {"faithfulness": [0.5] * len(ids)}, question_ids=ids)
    write_answers(root, run_id, ids, good)


def test_battles_out_that_cannot_be_written_is_refused_before_any_battle(
    tmp_path: Path, fake: Any
) -> None:
    ids = [f"q{i}" for i in range(4)]
    _answered(tmp_path, "A", ids, good=False)
    _answered(tmp_path, "B", ids, good=True)
    a_file = tmp_path / "taken"
    a_file.write_text("not a folder", encoding="utf-8")
    for out in (a_file, a_file / "below"):
        result = CliRunner().invoke(
            app, ["battles", "A", "B", "--runs-root", str(tmp_path), "--out", str(out)]
        )
        assert result.exit_code == 2, result.output
        [line] = [x for x in result.output.splitlines() if x.strip()]
        assert line.startswith(f"error: battles --out {out}: cannot write there ("), line
    assert fake.stats.calls == 0


def test_battles_b_loses_on_too_few_questions_says_the_gate_cannot_see_it(
    tmp_path: Path, fake: Any
) -> None:
    # B loses all 10 verdicts (5 questions, both orders): the permutation test over 5 questions
    # cannot go below p 0.0625, so "no difference" is all it can say at α 0.05.
    ids = [f"q{i}" for i in range(5)]
    _answered(tmp_path, "A", ids, good=True)
    _answered(tmp_path, "B", ids, good=False)
    result = CliRunner().invoke(
        app,
        ["compare", "A", "B", "--runs-root", str(tmp_path), "--battles", "--fail-on-regression"],
    )
    assert "B won 0, tied 0, lost 10" in result.output, result.output
    assert "no difference" in result.output
    note = "5 paired question(s) can never move at α = 0.05"
    assert f"WARNING: battles: {note}" in result.output
    assert f"gate passed without the battles: {note}" in result.output
    assert result.exit_code == 0, result.output
