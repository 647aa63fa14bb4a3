"""Every kind of folder is a run: killed, it shows as interrupted and resumes; a second
process on it is refused before it pays anything.

For each kind (an evaluation run, a tune, an ablation, a round robin of battles, a calibration,
an audit day) the real command runs in a subprocess whose fake judge calls are held by a gate
(``support.hold_gate``) while a file exists: the first process is caught in the middle of its
work, its folder locked and its manifest ``running``, whatever the machine's speed. A second
process of the same command is refused in one line and its gate counts no call; the first is
killed with SIGKILL, the folder reads ``interrupted`` (``ragaudit show``), and the command run
again with the gate open completes it.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from support.audit_days import FIRST, audit_config, write_logs
from support.cli import DEMO_CORPUS, cli_command, cli_env, run_args
from support.hold_gate import calls, hold_env
from support.paths import REPO_ROOT
from support.prefect_server import PrefectServer

from ragaudit.runfolder import RunsRoot


@dataclass
class Kind:
    """A command writing one folder of a kind, and that folder's name under the runs root."""

    name: str
    folder: str
    args: Callable[[Path], list[str]]
    setup: Callable[[Path, dict[str, str]], None] | None = None


def _fake(tmp: Path) -> list[str]:
    return [
        "--judge",
        "fake/judge",
        "--embedder",
        "fake/embed",
        "--runs-root",
        str(tmp / "runs"),
        "--set",
        f"cache_dir={tmp / 'cache'}",
    ]


def _tune(tmp: Path) -> list[str]:
    demo = REPO_ROOT / "data" / "demo"
    return [
        "tune",
        "-c",
        str(demo / "tune.yaml"),
        "--run-id",
        "t1",
        *_fake(tmp),
        "--set",
        f"questions={demo / 'questions.jsonl'}",
        "--set",
        f"collect.corpus={demo / 'corpus.jsonl'}",
        "--set",
        f"collect.index_path={tmp / 'index'}",
    ]


def _ablation(tmp: Path) -> list[str]:
    demo = REPO_ROOT / "data" / "ablation"
    config = yaml.safe_load((demo / "ablate.yaml").read_text(encoding="utf-8"))
    config.update(questions=str(demo / "questions.jsonl"), limit=2)
    config["ablate"].update(
        name="a1",
        corpus=str(demo / "corpus.jsonl"),
        baseline={"file_size": "80KB", "chunk_size": 300, "top_k": 3},
        sweeps={"top_k": [1, 3]},
        parallel=1,
    )
    path = tmp / "ablate.yaml"
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    return ["ablate", "-c", str(path), *_fake(tmp)]


def _run(tmp: Path, run_id: str) -> list[str]:
    return run_args(tmp, "--run-id", run_id, "--set", f"collect.corpus={DEMO_CORPUS}")


def _two_runs(tmp: Path, env: dict[str, str]) -> None:
    for run_id in ("ra", "rb"):
        done = subprocess.run(
            [*cli_command(), *_run(tmp, run_id)],
            env=env,
            cwd=tmp,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert done.returncode == 0, done.stderr[-3000:]


def _audit_setup(tmp: Path, env: dict[str, str]) -> None:
    corpus = write_logs(tmp)
    audit_config(tmp, corpus)


KINDS = [
    Kind("run", "r1", lambda tmp: _run(tmp, "r1")),
    Kind("tune", "t1", _tune),
    Kind("ablation", "a1", _ablation),
    Kind(
        "battles",
        "b1",
        lambda tmp: [
            "battles",
            "ra",
            "rb",
            "--runs-root",
            str(tmp / "runs"),
            "--out",
            str(tmp / "runs" / "b1"),
            "--resamples",
            "20",
        ],
        _two_runs,
    ),
    Kind(
        "calibration",
        "cal",
        lambda tmp: ["calibrate", "--limit", "2", "--run-id", "cal", *_fake(tmp)],
    ),
    Kind(
        "audit",
        f"audit-bot/{FIRST.isoformat()}",
        lambda tmp: ["audit", "-c", str(tmp / "audit.yaml"), "--day", FIRST.isoformat()],
        _audit_setup,
    ),
]


@pytest.fixture(scope="module")
def prefect_api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """One Prefect server for every command of the module (none starts its own)."""
    server = PrefectServer(tmp_path_factory.mktemp("prefect"))
    try:
        server.start()
        yield {k: v for k, v in server.env.items() if k.startswith("PREFECT_")}
    finally:
        server.stop()


def _start(cmd: list[str], env: dict[str, str], cwd: Path, log: Path) -> subprocess.Popen[bytes]:
    with log.open("wb") as out:
        return subprocess.Popen(
            cmd, env=env, cwd=cwd, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )


def _wait_held(proc: subprocess.Popen[bytes], count: Path, log: Path) -> None:
    deadline = time.monotonic() + 300
    while calls(count) < 1:
        if proc.poll() is not None:
            raise AssertionError(f"the first process ended ({proc.returncode}):\n{log.read_text()}")
        assert time.monotonic() < deadline, f"no judge call was held:\n{log.read_text()}"
        time.sleep(0.2)


@pytest.mark.parametrize("kind", KINDS, ids=[k.name for k in KINDS])
def test_a_killed_folder_is_interrupted_and_resumes_and_a_second_process_pays_nothing(
    kind: Kind, tmp_path: Path, prefect_api: dict[str, str]
) -> None:
    env = {**cli_env(tmp_path), **prefect_api}
    if kind.setup is not None:
        kind.setup(tmp_path, env)
    command = [*cli_command(), *kind.args(tmp_path)]
    folder = tmp_path / "runs" / kind.folder
    hold = tmp_path / "hold"
    hold.write_text("held")
    first_count, second_count = tmp_path / "first.json", tmp_path / "second.json"
    log = tmp_path / "first.log"
    first = _start(command, {**env, **hold_env(first_count, hold)}, tmp_path, log)
    try:
        _wait_held(first, first_count, log)
        manifest = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
        assert manifest["status"] == "running" and manifest.get("kind", "run") == kind.name
        second = subprocess.run(
            command,
            env={**env, **hold_env(second_count, hold)},
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=300,
        )
        output = second.stdout + second.stderr
        assert second.returncode != 0, output
        assert "already running" in output and f"pid {first.pid}" in output, output
        assert "Traceback" not in output
        # Refused before a single judge call.
        assert calls(second_count) == 0
    finally:
        if first.poll() is None:
            os.killpg(first.pid, signal.SIGKILL)
        first.wait()
    state = RunsRoot(tmp_path / "runs").entry(folder).state
    assert state.status == "interrupted" and not state.complete
    shown = subprocess.run(
        [*cli_command(), "show", kind.folder, "--runs-root", str(tmp_path / "runs")],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert "interrupted" in shown.stdout, shown.stdout + shown.stderr
    hold.unlink()
    again = subprocess.run(
        command, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=900
    )
    assert again.returncode == 0, (again.stdout + again.stderr)[-4000:]
    resumed = RunsRoot(tmp_path / "runs").entry(folder)
    assert resumed.state.complete, resumed.state
    assert resumed.kind == kind.name
    shutil.rmtree(tmp_path / "runs", ignore_errors=True)
