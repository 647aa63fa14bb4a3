"""A juror that fails its calls is named, even while the rows stay ``ok`` on the others."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from support.cli import cli_command, cli_env, run_args
from support.paths import REPO_ROOT


def test_a_juror_failing_every_call_is_named_and_the_run_exits_3(tmp_path: Path) -> None:
    args = run_args(
        tmp_path,
        "--run-id",
        "jury",
        "--set",
        f"collect.corpus={REPO_ROOT / 'data' / 'demo' / 'corpus.jsonl'}",
        "--set",
        'models.jury=["fake/judge", "fake/judge?errors=1.0"]',
    )
    env = {**cli_env(tmp_path), "COLUMNS": "300"}
    out = subprocess.run(
        [*cli_command(), *args], capture_output=True, text=True, env=env, timeout=600
    )
    assert out.returncode == 3, out.stdout[-3000:] + out.stderr[-3000:]
    console = out.stdout + out.stderr
    named = "juror fake/judge?errors=1.0 (sample 2 of each row) failed on"
    assert f"{named} 20 of 20 scores samples (100%)" in console
    run = tmp_path / "runs" / "jury"
    manifest = json.loads((run / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["status"] == "completed_with_failures"
    assert any(w.startswith(named) and "scores samples" in w for w in manifest["warnings"])
    assert any(w.startswith(named) and "verdicts samples" in w for w in manifest["warnings"])
    # The healthy juror is not named.
    assert not any(w.startswith("juror fake/judge (") for w in manifest["warnings"])
    html = (run / "report.html").read_text(encoding="utf-8")
    assert "juror fake/judge?errors=1.0 (sample 2 of each row)" in html
