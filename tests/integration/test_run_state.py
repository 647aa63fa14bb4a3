"""A run that did not complete, or whose folder is damaged, is named as such by every command."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from support.cli import cli_command, cli_env
from support.reporting_runs import write_run

from ragaudit.runfolder import run_state
from ragaudit.runlock import hold_run

OK = {"faithfulness": [0.8, 0.9, 0.7, 0.85, 0.9], "rouge_l": [0.5, 0.4, 0.6, 0.5, 0.45]}


def _cli(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = cli_env(tmp_path)
    env["COLUMNS"] = "300"
    return subprocess.run(
        [*cli_command(), *args], capture_output=True, text=True, env=env, timeout=300
    )


def _killed(root: Path, run_id: str, values: dict[str, list[float | None]]) -> Path:
    """A run as ``kill -9`` during score leaves it: manifest ``running``, a lock nobody holds."""
    path = write_run(root, run_id, values)
    manifest = json.loads((path / "manifest.json").read_text(encoding="utf-8"))
    manifest["status"] = "running"
    (path / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    (path / ".lock").write_text(json.dumps({"pid": 999999, "host": "gone"}), encoding="utf-8")
    return path


@pytest.fixture
def runs(tmp_path: Path) -> Path:
    root = tmp_path / "runs"
    write_run(root, "OK", OK)
    # Killed during score: faithfulness never reached its table.
    _killed(root, "KILLED", {"rouge_l": OK["rouge_l"]})
    return root


def test_the_completion_rule(runs: Path) -> None:
    assert run_state(runs / "OK").complete
    killed = run_state(runs / "KILLED")
    assert (killed.complete, killed.status) == (False, "interrupted")
    # The same manifest while a live process holds the lock is a run still going.
    with hold_run(runs / "KILLED"):
        assert run_state(runs / "KILLED").status == "running"
    for status in ("failed", "interrupted"):
        manifest = json.loads((runs / "OK" / "manifest.json").read_text(encoding="utf-8"))
        (runs / "OK" / "manifest.json").write_text(
            json.dumps({**manifest, "status": status}), encoding="utf-8"
        )
        assert not run_state(runs / "OK").complete and run_state(runs / "OK").status == status


def test_a_gate_fails_on_a_killed_run_naming_it(runs: Path, tmp_path: Path) -> None:
    out = _cli(
        tmp_path, "compare", "OK", "KILLED", "--runs-root", str(runs), "--fail-on-regression"
    )
    assert out.returncode == 1, out.stdout + out.stderr
    assert "run KILLED is INCOMPLETE (interrupted" in out.stderr
    assert "metric faithfulness was scored in run OK but not in run KILLED" in out.stderr
    assert "Traceback" not in out.stderr
    # Either way round: an incomplete run A fails the gate too.
    back = _cli(
        tmp_path, "compare", "KILLED", "OK", "--runs-root", str(runs), "--fail-on-regression"
    )
    assert back.returncode == 1 and "run KILLED is INCOMPLETE" in back.stderr


def test_a_metric_lost_between_complete_runs_fails_the_gate(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    write_run(root, "A", OK)
    write_run(root, "B", {"rouge_l": OK["rouge_l"]})
    out = _cli(tmp_path, "compare", "A", "B", "--runs-root", str(root), "--fail-on-regression")
    assert out.returncode == 1
    assert "metric faithfulness was scored in run A but not in run B" in out.stderr
    same = _cli(tmp_path, "compare", "A", "A", "--runs-root", str(root), "--fail-on-regression")
    assert same.returncode == 0, same.stdout + same.stderr


def test_runs_report_and_export_name_the_killed_run(runs: Path, tmp_path: Path) -> None:
    listed = _cli(tmp_path, "runs", "--runs-root", str(runs))
    assert listed.returncode == 0
    (line,) = [x for x in listed.stdout.splitlines() if "KILLED" in x]
    assert "interrupted" in line and "running" not in line
    for command in (
        ["report", str(runs / "KILLED")],
        ["export-trec", "KILLED"],
        ["show", "KILLED"],
    ):
        out = _cli(tmp_path, *command, "--runs-root", str(runs))
        assert "run KILLED is INCOMPLETE (interrupted" in out.stderr, command
    html = (runs / "KILLED" / "report.html").read_text(encoding="utf-8")
    assert "run KILLED is INCOMPLETE" in html
    ok = _cli(tmp_path, "report", str(runs / "OK"))
    assert ok.returncode == 0 and "INCOMPLETE" not in ok.stderr


@pytest.mark.parametrize("damage", ["scores.parquet", "questions.parquet", "manifest.json"])
def test_a_damaged_run_file_is_one_line_naming_it(runs: Path, tmp_path: Path, damage: str) -> None:
    target = runs / "OK" / damage
    os.truncate(target, 100 if target.stat().st_size > 100 else 5)
    for command in (
        ["report", str(runs / "OK")],
        ["compare", "OK", "KILLED", "--runs-root", str(runs)],
        ["compare", "KILLED", "OK", "--runs-root", str(runs)],
    ):
        out = _cli(tmp_path, *command)
        assert out.returncode != 0, command
        assert "Traceback" not in out.stderr, out.stderr
        (line,) = [x for x in out.stderr.splitlines() if x.strip()]
        assert str(target) in line and "damaged" in line and "re-run" in line
    listed = _cli(tmp_path, "runs", "--runs-root", str(runs))
    (row,) = [x for x in listed.stdout.splitlines() if " OK " in x or "│ OK" in x]
    assert "damaged" in row
