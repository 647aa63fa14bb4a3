"""``ragaudit view``: from the process start to the first page answered, 50 runs under the root.

One small run (20 questions, three metrics, the fake judge's shapes, its summary written) is
copied 49 times under new run ids. Each trial starts ``python -m ragaudit view ROOT --port 0
--no-browser`` in a fresh process and times from the start to the runs list (``GET /``) fully
answered, which reads every run folder (its manifest, summary and table footers). Beside it, in
the same rounds, the same start over a root with one run: the ratio is what listing 50 runs
costs over the server's own start. A second ``GET /`` shows the list kept while no folder
changed.

    python bench/bench_view.py [--trials 5]

The goal: the first page within 2 s of the start with 50 runs (the median of the trials).
Figures depend on the machine's load: the load average is printed with them, and so is the CPU
time the server process used up to its first page (what the start costs on an idle machine).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import _util
import httpx

GOAL_S = 2.0
RUNS = 50


def _root(base: Path, n: int) -> Path:
    """A runs root with ``n`` copies of one small run, started a minute apart."""
    from support.viewer_runs import write_runs

    root = base / f"root-{n}"
    source = base / "source" / "run-0"
    if not source.exists():
        write_runs(base / "source", 1, questions=20)
    start = datetime(2026, 11, 1, tzinfo=UTC)
    for i in range(n):
        run_id = f"copy-{i:03d}"
        target = root / run_id
        shutil.copytree(source, target)
        manifest = json.loads((target / "manifest.json").read_text(encoding="utf-8"))
        manifest.update(run_id=run_id, started_at=(start + timedelta(minutes=i)).isoformat())
        (target / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    return root


def _cpu_s(pid: int) -> float:
    """User + system CPU seconds the process has used so far (Linux ``/proc``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _first_page(root: Path) -> tuple[float, float, float, int, float]:
    """(s to the address printed, s to ``GET /`` answered, s of a second ``GET /``, rows, CPU s
    the server used up to its first page)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "ragaudit", "view", str(root), "--port", "0", "--no-browser"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        printed = time.perf_counter() - t0
        if " at http://" not in line:
            proc.kill()
            raise SystemExit(f"ragaudit view printed no address: {line!r} {proc.stderr.read()}")
        url = line.rsplit(" at ", 1)[1].strip()
        # The socket listens before the address is printed: this waits for the server.
        first = httpx.get(url, timeout=60)
        answered = time.perf_counter() - t0
        cpu = _cpu_s(proc.pid)
        first.raise_for_status()
        t1 = time.perf_counter()
        httpx.get(url, timeout=60).raise_for_status()
        again = time.perf_counter() - t1
        rows = first.text.count("data-run=")
    finally:
        proc.terminate()
        proc.wait(timeout=15)
    return printed, answered, again, rows, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=5)
    args = parser.parse_args()
    base = _util.scratch("view")
    roots = {1: _root(base, 1), RUNS: _root(base, RUNS)}
    # One start first, not timed: bytecode written, the files in the page cache.
    _first_page(roots[1])
    found: dict[int, list[tuple[float, float, float, int, float]]] = {1: [], RUNS: []}
    for _ in range(args.trials):
        for n in (RUNS, 1):  # taking turns: a change of the machine's load falls on both
            found[n].append(_first_page(roots[n]))
    rows = []
    for n, trials in found.items():
        assert all(t[3] == n for t in trials), f"the list showed {trials[0][3]} rows, not {n}"
        rows.append(
            (
                n,
                f"{statistics.median(t[0] for t in trials):.2f}",
                f"{statistics.median(t[1] for t in trials):.2f}",
                f"{max(t[1] for t in trials):.2f}",
                f"{statistics.median(t[2] for t in trials) * 1000:.0f}",
                f"{statistics.median(t[4] for t in trials):.2f}",
            )
        )
    print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores; {args.trials} trials")
    print(
        _util.table(
            rows,
            (
                "runs",
                "address printed s",
                "first page s (median)",
                "max s",
                "list again ms",
                "server CPU s to first page",
            ),
        )
    )
    median_50 = statistics.median(t[1] for t in found[RUNS])
    median_1 = statistics.median(t[1] for t in found[1])
    print(f"first page with {RUNS} runs / with 1 run: {median_50 / median_1:.2f}x")
    verdict = "met" if median_50 <= GOAL_S else "not met"
    cpu_50 = statistics.median(t[4] for t in found[RUNS])
    why = (
        ""
        if verdict == "met"
        else f" (the server itself used {cpu_50:.2f} s of CPU to its first page; the rest is "
        "time off the CPU, waiting for a core or the disk: see the load average)"
    )
    goal = f"goal: first page within {GOAL_S:.0f} s with {RUNS} runs"
    print(f"{goal}: {median_50:.2f} s: {verdict}{why}")
    shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
