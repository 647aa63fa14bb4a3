"""The CLI's errors: one line naming the field, no traceback, found before any work."""

from __future__ import annotations

import socket
import subprocess
from pathlib import Path

import pytest
from support.cli import DEMO_CORPUS, cli_command, cli_env, run_args
from typer.testing import CliRunner

from ragaudit.cli import app
from ragaudit.search import make_backend, read_corpus


def test_a_missing_corpus_is_an_error_even_when_the_index_exists(tmp_path: Path) -> None:
    backend = make_backend("local", path=tmp_path / "index", table="contexts", mode="bm25")
    backend.index(read_corpus(DEMO_CORPUS))  # an index that needs no corpus
    missing = tmp_path / "moved" / "corpus.jsonl"
    result = CliRunner().invoke(app, run_args(tmp_path, "--set", f"collect.corpus={missing}"))
    assert result.exit_code == 2, result.output
    assert f"collect.corpus: no such file or folder: {missing}" in result.output
    assert "Traceback" not in result.output
    # Found before any work: no run folder (how fast: bench/bench_stop.py).
    assert not (tmp_path / "runs").exists()


def test_a_long_error_message_is_not_wrapped_when_piped(tmp_path: Path) -> None:
    # 150 characters of path: a console 80 columns wide would break the line.
    missing = tmp_path / ("x" * 150) / "questions.jsonl"
    proc = subprocess.run(
        [*cli_command(), *run_args(tmp_path)[:1], "--questions", str(missing)],
        capture_output=True,
        text=True,
        env={k: v for k, v in cli_env(tmp_path).items() if k != "COLUMNS"},
        timeout=120,
        cwd=tmp_path,
    )
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and str(missing) in lines[0], proc.stderr


def refused_port() -> int:
    """A loopback port nobody listens on (bound, then closed)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.slow  # a CLI subprocess starting its own Prefect server
def test_an_unreachable_opensearch_prints_one_line_and_no_client_traceback(
    tmp_path: Path,
) -> None:
    url = f"http://127.0.0.1:{refused_port()}"
    proc = subprocess.run(
        [
            *cli_command(),
            *run_args(tmp_path),
            "--set",
            "collect.backend=opensearch",
            "--set",
            f"collect.opensearch.hosts=[{url}]",
            "--set",
            "collect.opensearch.backoff_s=0",
        ],
        capture_output=True,
        text=True,
        env=cli_env(tmp_path),
        timeout=300,
        cwd=tmp_path,
    )
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr
    problems = [line for line in proc.stderr.splitlines() if "127.0.0.1" in line]
    assert len(problems) == 1 and problems[0].startswith("error: "), proc.stderr
    assert f"cannot reach opensearch at {url}" in problems[0]
