"""A malformed question set through the installed ``ragaudit`` command: one clean message."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from support.cli import cli_command, cli_env


def test_cli_reports_a_malformed_question_set_cleanly(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    rows = [{"question": "fine"}, {"question": "fine too"}, {"question": ""}]
    bad.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    proc = subprocess.run(
        [
            *cli_command(),
            "run",
            "--questions",
            str(bad),
            "--runs-root",
            str(tmp_path / "runs"),
            "--judge",
            "fake/judge",
            "--embedder",
            "fake/embed",
            "--set",
            f"cache_dir={tmp_path / 'cache'}",
            "--set",
            f"collect.index_path={tmp_path / 'index'}",
        ],
        capture_output=True,
        text=True,
        # Wide enough that the message is not wrapped inside the phrase checked below.
        env={**cli_env(tmp_path), "COLUMNS": "200"},
        timeout=120,  # a hang guard only
        cwd=tmp_path,
    )
    assert proc.returncode != 0
    assert "line 3, column 'question': empty or missing" in proc.stderr
    assert str(bad) in proc.stderr.replace("\n", "")
    assert "Traceback" not in proc.stdout and "Traceback" not in proc.stderr
    # It failed before any stage ran: no run folder was started.
    assert not (tmp_path / "runs").exists()
