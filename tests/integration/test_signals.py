"""A run through the CLI: quiet when it succeeds, stopped in order by a signal, and never
leaving Prefect's ephemeral server behind (subprocesses: these need a process to kill)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
from support.cli import cli_command, cli_env, run_args
from support.paths import REPO_ROOT

pytestmark = pytest.mark.slow  # each starts a CLI process and its own Prefect server

DEMO_CORPUS = REPO_ROOT / "data" / "demo" / "corpus.jsonl"


def start(tmp_path: Path, judge: str = "fake/judge") -> subprocess.Popen[str]:
    args = run_args(tmp_path, "--run-id", "sig", "--limit", "2")
    args[args.index("fake/judge")] = judge
    return subprocess.Popen(
        [*cli_command(), *args, "--set", f"collect.corpus={DEMO_CORPUS}"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=cli_env(tmp_path),
        cwd=tmp_path,
        start_new_session=True,  # its own group: a signal to it reaches no test process
    )


def children(pid: int) -> list[int]:
    """Every descendant of ``pid`` still alive."""
    out = subprocess.run(["ps", "-eo", "pid=,ppid="], capture_output=True, text=True).stdout
    parent = {int(c): int(p) for c, p in (line.split() for line in out.splitlines())}
    found, frontier = [], {pid}
    while frontier:
        frontier = {c for c, p in parent.items() if p in frontier}
        found += frontier
    return found


def uvicorn_servers(home: Path) -> list[int]:
    """Prefect API servers whose Prefect home is under ``home`` (this test's only)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            env = (entry / "environ").read_bytes()
        except OSError:
            continue
        ours = str(home).encode() in env
        if "prefect.server.api.server:create_app" in cmd and ours:
            found.append(int(entry.name))
    return found


def wait_for_server(proc: subprocess.Popen[str], home: Path, timeout: float = 240) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if uvicorn_servers(home) and (home.parent / "runs" / "sig" / "manifest.json").exists():
            return
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.2)
    raise AssertionError("the run never started")


def gone_within(home: Path, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not uvicorn_servers(home):
            return True
        time.sleep(0.2)
    return False


def test_a_successful_run_prints_no_traceback(tmp_path: Path) -> None:
    proc = start(tmp_path)
    out, errors = proc.communicate(timeout=600)
    assert proc.returncode == 0, errors
    assert "Traceback" not in errors and "Error flushing" not in errors, errors
    assert "Traceback" not in out
    assert gone_within(tmp_path / "home", 10)


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_stops_the_run_and_its_server(tmp_path: Path, signum: int) -> None:
    proc = start(tmp_path, judge="fake/judge?latency=1.0")
    wait_for_server(proc, tmp_path / "home")
    time.sleep(1.0)  # mid-flight: judge calls are out
    proc.send_signal(signum)
    # The timeout only tells "stops" from "runs on" (before the fix a signal took minutes and
    # two dozen connection errors): how fast it stops is measured in bench/bench_stop.py.
    out, errors = proc.communicate(timeout=180)
    assert proc.returncode == 128 + signum, errors  # 130 for SIGINT, 143 for SIGTERM
    assert "Traceback" not in errors, errors
    assert f"stopped by {signal.Signals(signum).name}" in errors
    assert "interrupted; re-run to resume" in errors
    manifest = json.loads((tmp_path / "runs" / "sig" / "manifest.json").read_text())
    assert manifest["status"] == "interrupted"
    assert gone_within(tmp_path / "home", 5)


def test_kill_9_of_the_cli_takes_its_server_down(tmp_path: Path) -> None:
    proc = start(tmp_path, judge="fake/judge?latency=1.0")
    home = tmp_path / "home"
    wait_for_server(proc, home)
    servers = uvicorn_servers(home)
    assert set(servers) <= set(children(proc.pid))
    os.kill(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=30)
    assert gone_within(home, 10), f"server {servers} outlived its CLI"
