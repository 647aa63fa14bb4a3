"""A run folder's guards: run ids are names, and one process at a time writes a run."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from support.cli import cli_command, cli_env, run_args
from typer.testing import CliRunner

from ragaudit.cli import app
from ragaudit.config import load_config
from ragaudit.errors import ConfigError
from ragaudit.runfolder import RunFolder
from ragaudit.runlock import RunLock, RunLocked, check_run_id

BAD_IDS = ["../escaped", "a/b", "/tmp/absolute", "..", ".", "", "x\\y", "tab\there", ".hidden"]


@pytest.mark.parametrize("run_id", BAD_IDS)
def test_a_run_id_that_is_a_path_is_refused_everywhere(tmp_path: Path, run_id: str) -> None:
    with pytest.raises(ConfigError, match="run id"):
        check_run_id(run_id)
    with pytest.raises(ConfigError, match="run id"):
        RunFolder(tmp_path / "runs", run_id)
    with pytest.raises(ConfigError, match="run_id: .*run id"):
        load_config(None, {"run_id": run_id}, environ={})


@pytest.mark.parametrize(
    "run_id", ["demo", "2026-11-25_a.b", "评测-1", "x" * 200, "nightly 01", "a+b"]
)
def test_a_plain_name_is_a_run_id(run_id: str) -> None:
    assert check_run_id(run_id) == run_id


def test_a_huge_run_id_is_not_echoed_whole() -> None:
    with pytest.raises(ConfigError) as caught:
        check_run_id("y" * 1_000_000)
    assert len(str(caught.value)) < 300


@pytest.mark.parametrize("run_id", ["../escaped", "a/b"])
def test_the_cli_refuses_a_path_run_id_before_writing(tmp_path: Path, run_id: str) -> None:
    result = CliRunner().invoke(app, run_args(tmp_path, "--run-id", run_id))
    assert result.exit_code == 2, result.output
    assert "run id" in result.output and "Traceback" not in result.output
    # Nothing written, inside the runs root or beside it.
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def _holder_script(run_dir: Path, ready: Path) -> str:
    return textwrap.dedent(
        f"""
        import time
        from pathlib import Path
        from ragaudit.runlock import RunLock
        lock = RunLock({str(run_dir)!r})
        lock.acquire()
        Path({str(ready)!r}).write_text("held")
        time.sleep(600)
        """
    )


def _hold_in_another_process(tmp_path: Path, run_dir: Path) -> subprocess.Popen[bytes]:
    ready = tmp_path / "ready"
    proc = subprocess.Popen(
        [sys.executable, "-c", _holder_script(run_dir, ready)], start_new_session=True
    )
    deadline = time.monotonic() + 60
    while not ready.exists():
        assert proc.poll() is None, "the holder died"
        assert time.monotonic() < deadline, "the holder never took the lock"
        time.sleep(0.05)
    return proc


def test_a_second_process_is_refused_naming_the_first(tmp_path: Path) -> None:
    run_dir = tmp_path / "runs" / "r1"
    holder = _hold_in_another_process(tmp_path, run_dir)
    try:
        with pytest.raises(RunLocked) as caught:
            RunLock(run_dir).acquire()
        message = str(caught.value)
        assert f"pid {holder.pid}" in message and "already running" in message
    finally:
        holder.kill()
        holder.wait()
    # Its holder killed (as kill -9 would), the lock is stale and a resume takes it over.
    with RunLock(run_dir):
        assert f'"pid": {os.getpid()}' in (run_dir / ".lock").read_text()


def test_the_lock_is_reentrant_in_one_process(tmp_path: Path) -> None:
    run_dir = str(tmp_path / "r")
    lock = RunLock(run_dir)
    with lock, RunLock(tmp_path / "r"):
        pass
    # Released: another process may take it now.
    probe = subprocess.run(
        [
            sys.executable,
            "-c",
            f"from ragaudit.runlock import RunLock; RunLock({run_dir!r}).acquire()",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert probe.returncode == 0, probe.stderr


def test_the_cli_refuses_a_run_id_that_is_running(tmp_path: Path) -> None:
    holder = _hold_in_another_process(tmp_path, tmp_path / "runs" / "busy")
    try:
        proc = subprocess.run(
            [*cli_command(), *run_args(tmp_path, "--run-id", "busy")],
            capture_output=True,
            text=True,
            env=cli_env(tmp_path),
            cwd=tmp_path,
            timeout=300,
        )
    finally:
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait()
    assert proc.returncode == 2, proc.stderr
    assert f"pid {holder.pid}" in proc.stderr and "Traceback" not in proc.stderr
    # Refused before the Prefect server started or anything was written to the run.
    assert not (tmp_path / "runs" / "busy" / "manifest.json").exists()
    assert not list((tmp_path / "home").rglob("*.db")), "a Prefect server was started"


@pytest.mark.parametrize(
    ("name", "marker", "words"),
    [
        ("tune-demo", "tune.json", "a tune folder"),
        ("judgments", None, "the judgment store's folder"),
        ("battles-1", "leaderboard.parquet", "a battles folder"),
        ("audit-weekly", None, "an audit folder"),
    ],
)
def test_a_run_id_of_another_kinds_folder_is_refused_before_writing(
    tmp_path: Path, name: str, marker: str | None, words: str
) -> None:
    """Round 5 #8: ``--run-id <a tune's name>`` overwrote the tune's report and mixed its
    files in; ``--run-id judgments`` wrote a run into the store."""
    folder = tmp_path / "runs" / name
    if marker is not None:
        folder.mkdir(parents=True)
        (folder / marker).write_text("{}")
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    result = CliRunner().invoke(app, run_args(tmp_path, "--run-id", name))
    assert result.exit_code == 2, result.output
    assert words in result.output and "Traceback" not in result.output
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before


def test_every_kind_refuses_the_others_folders(tmp_path: Path) -> None:
    from ragaudit.runfolder import RunsRoot

    root = RunsRoot(tmp_path)
    (tmp_path / "night-1").mkdir()
    (tmp_path / "night-1" / "manifest.json").write_text("{}")
    for kind in ("tune", "battles", "audit"):
        with pytest.raises(ConfigError, match="a run folder"):
            root.claim("night-1", kind)
    assert root.claim("night-1", "run") == tmp_path / "night-1"
    with pytest.raises(ConfigError, match="audit folder"):
        root.claim("audit-x", "tune")
    assert root.claim("audit-x", "audit") == tmp_path / "audit-x"
    with pytest.raises(ConfigError, match="judgment store"):
        root.claim("judgments", "audit")
