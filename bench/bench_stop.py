"""How fast the CLI stops: a signal mid-run, and the refusals that must come before any work.

The tests check *that* a run stops in order on SIGINT/SIGTERM and *that* a missing corpus or
an unreachable Redis is one message before any stage; their timeouts only tell "stops" from
"hangs". How fast is measured here, each command in a fresh ``ragaudit`` process (fake judge
and embedder, the demo data), side by side with what a good run pays before its first stage.

- ``SIGINT`` / ``SIGTERM``: a 2-question run whose fake judge answers after 1 s is signalled
  once its run folder is started (its Prefect server up, its first stage running); the time
  from the process's start to that point ("to run start") and from the signal to its exit.
- ``missing corpus``: ``ragaudit run`` naming a corpus that is not there; the whole wall.
- ``unreachable redis``: ``ragaudit run`` with the memo on a Redis nobody listens to.
- ``ragaudit runs``: the CLI's fixed cost, for scale.

Goals: a signalled run exits within 30 s of the signal (before the fix it took minutes); each
refusal ends before a good run reaches its first stage (its wall below the faster run's "to
run start": nothing was started). Each printed met or not met with the figure and the
machine's load average.

    python bench/bench_stop.py
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from pathlib import Path

import _util
from support.cli import cli_command, cli_env, run_args

DEMO_CORPUS = _util.REPO / "data" / "demo" / "corpus.jsonl"
STOP_GOAL_S = 30.0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wall(args: list[str], folder: Path) -> tuple[float, int]:
    started = time.perf_counter()
    proc = subprocess.run(
        [*cli_command(), *args],
        capture_output=True,
        text=True,
        env=cli_env(folder),
        cwd=folder,
        timeout=600,
    )
    return time.perf_counter() - started, proc.returncode


def _stop(folder: Path, signum: int) -> tuple[float, float, int]:
    """(seconds to the run's start, seconds from the signal to the exit, exit status)."""
    args = run_args(folder, "--run-id", "stop", "--limit", "2")
    args[args.index("fake/judge")] = "fake/judge?latency=1.0"
    launched = time.perf_counter()
    proc = subprocess.Popen(
        [*cli_command(), *args, "--set", f"collect.corpus={DEMO_CORPUS}"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=cli_env(folder),
        cwd=folder,
        start_new_session=True,
    )
    manifest = folder / "runs" / "stop" / "manifest.json"
    deadline = time.monotonic() + 600
    while not manifest.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError("the run ended or hung before it started: nothing to stop")
        time.sleep(0.1)
    started = time.perf_counter() - launched
    time.sleep(1.0)  # mid-flight: judge calls are out
    sent = time.perf_counter()
    proc.send_signal(signum)
    code = proc.wait(timeout=600)
    return started, time.perf_counter() - sent, code


def main() -> None:
    root = _util.scratch("stop")
    rows: list[tuple] = []
    verdicts: list[str] = []
    to_start = []
    for signum in (signal.SIGINT, signal.SIGTERM):
        name = signal.Signals(signum).name
        folder = root / name
        folder.mkdir()
        started, took, code = _stop(folder, signum)
        to_start.append(started)
        rows.append((f"{name}: to run start", f"{started:.1f}", ""))
        rows.append((f"{name}: signal to exit", f"{took:.1f}", f"exit {code}"))
        verdicts.append(
            f"{name} stops a run within {STOP_GOAL_S:.0f} s: "
            + ("met" if took <= STOP_GOAL_S and code == 128 + signum else "not met")
            + f" ({took:.1f} s, exit {code})"
        )
    baseline = min(to_start)
    folder = root / "runs-cmd"
    folder.mkdir()
    runs_s, _ = _wall(["runs", "--runs-root", str(folder / "runs")], folder)
    rows.append(("ragaudit runs", f"{runs_s:.1f}", ""))
    for name, extra in (
        ("missing corpus", ["--set", f"collect.corpus={root / 'moved' / 'corpus.jsonl'}"]),
        (
            "unreachable redis",
            [
                "--set",
                "cache.backend=redis",
                "--set",
                f"cache.redis_url=redis://127.0.0.1:{_free_port()}/0",
            ],
        ),
    ):
        folder = root / name.replace(" ", "-")
        folder.mkdir()
        wall, code = _wall(run_args(folder, *extra), folder)
        ratio = wall / baseline
        rows.append((name, f"{wall:.1f}", f"exit {code}, {ratio:.2f}× to run start"))
        verdicts.append(
            f"{name} refused before a run's first stage: "
            + ("met" if ratio < 1 and code == 2 else "not met")
            + f" ({wall:.1f} s against {baseline:.1f} s, {ratio:.2f}×, exit {code})"
        )
    print(_util.table(rows, ("command", "seconds", "")))
    print(f"load average: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    for line in verdicts:
        print(line)


if __name__ == "__main__":
    main()
