"""``ragaudit view``: from the process start to the runs list's first page, 2,000 runs against 200.

One small run (20 questions, three metrics, the fake judge's shapes, its summary written) is
copied under new run ids, each with its own start time. Each trial starts ``python -m ragaudit
view ROOT --port 0 --no-browser`` in a fresh process and times from the start to the first page
of the runs list (``GET /``: the newest 50 folders) fully answered; it also times that request
alone (the server started: what listing costs), the second page, and ``GET /`` again (the
folders kept while unchanged). The same is done over a root of 200 runs in the same rounds,
taking turns: the ratio is what ten times the folders cost the first page. Each size is timed
twice a round: with no index in the root (the first server ever to list it reads every
folder's manifest) and with the heads' index the previous server left there.

    python bench/bench_view.py [--trials 3] [--runs 2000] [--small 200]

The goal: the first page within 2 s of the process start at 2,000 runs (the median of the
trials). Figures depend on the machine's load: the load average is printed with them, and so is
the CPU time the server process used up to its first page.
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

from ragaudit.viewer._listing import INDEX_FILE

GOAL_S = 2.0
PAGE = 50


def _root(base: Path, n: int) -> Path:
    """A runs root with ``n`` copies of one small run, started a minute apart."""
    from support.viewer_runs import write_runs

    root = base / f"root-{n}"
    source = base / "source" / "run-0"
    if not source.exists():
        write_runs(base / "source", 1, questions=20)
    start = datetime(2026, 11, 1, tzinfo=UTC)
    for i in range(n):
        run_id = f"copy-{i:04d}"
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


def _first_page(root: Path, indexed: bool) -> dict[str, float]:
    """One fresh server over ``root``: the seconds (and CPU) to its pages.

    Without ``indexed``, the heads' index an earlier server left in the root is removed first:
    the first server ever to list the root.
    """
    if not indexed:
        (root / INDEX_FILE).unlink(missing_ok=True)
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
        base_url = url.rstrip("/")
        with httpx.Client(timeout=120) as client:
            # The socket listens before the address is printed: this waits for the server.
            client.get(f"{base_url}/favicon.ico").raise_for_status()
            ready = time.perf_counter() - t0
            cpu_ready = _cpu_s(proc.pid)
            t1 = time.perf_counter()
            first = client.get(url)
            answered = time.perf_counter() - t0
            request = time.perf_counter() - t1
            cpu = _cpu_s(proc.pid)
            first.raise_for_status()
            t2 = time.perf_counter()
            client.get(url, params={"page": 2}).raise_for_status()
            second = time.perf_counter() - t2
            t3 = time.perf_counter()
            client.get(url).raise_for_status()
            again = time.perf_counter() - t3
        rows = first.text.count("data-run=")
    finally:
        proc.terminate()
        proc.wait(timeout=15)
    return {
        "printed": printed,
        "answered": answered,
        "request": request,
        "second": second,
        "again": again,
        "rows": rows,
        "cpu": cpu,
        "ready": ready,
        "page_cpu": cpu - cpu_ready,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=3)
    parser.add_argument("--runs", type=int, default=2000)
    parser.add_argument("--small", type=int, default=200)
    args = parser.parse_args()
    base = _util.scratch("view")
    big, small = args.runs, args.small
    roots = {small: _root(base, small), big: _root(base, big)}
    # One start first, not timed: bytecode written, the folders in the page cache.
    _first_page(roots[big], indexed=False)
    cases = [(n, indexed) for indexed in (False, True) for n in (big, small)]
    found: dict[tuple[int, bool], list[dict[str, float]]] = {c: [] for c in cases}
    for _ in range(args.trials):
        for case in cases:  # taking turns: a change of the machine's load falls on all
            found[case].append(_first_page(roots[case[0]], indexed=case[1]))

    def med(case: tuple[int, bool], key: str) -> float:
        return statistics.median(t[key] for t in found[case])

    rows = []
    for case, trials in found.items():
        n = case[0]
        assert all(t["rows"] == min(n, PAGE) for t in trials), f"showed {trials[0]['rows']}"
        rows.append(
            (
                n,
                "kept" if case[1] else "none",
                f"{med(case, 'printed'):.2f}",
                f"{med(case, 'answered'):.2f}",
                f"{max(t['answered'] for t in trials):.2f}",
                f"{med(case, 'ready'):.2f}",
                f"{med(case, 'request'):.2f}",
                f"{med(case, 'page_cpu'):.2f}",
                f"{med(case, 'second') * 1000:.0f}",
                f"{med(case, 'again') * 1000:.0f}",
                f"{med(case, 'cpu'):.2f}",
            )
        )
    print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores; {args.trials} trials")
    print(
        _util.table(
            rows,
            (
                "runs",
                "index",
                "address printed s",
                "first page s (median)",
                "max s",
                "server up s",
                "first GET / alone s",
                "its CPU s",
                "page 2 ms",
                "page 1 again ms",
                "server CPU s to first page",
            ),
        )
    )
    for indexed in (False, True):
        big_case, small_case = (big, indexed), (small, indexed)
        ratio = med(big_case, "answered") / med(small_case, "answered")
        kept = "kept from an earlier server" if indexed else "none (the first server ever)"
        print(f"first page with {big} runs / with {small} runs, index {kept}: {ratio:.2f}x")
    for indexed in (False, True):
        case = (big, indexed)
        verdict = "met" if med(case, "answered") <= GOAL_S else "not met"
        why = (
            ""
            if verdict == "met"
            else f" (the server itself used {med(case, 'cpu'):.2f} s of CPU to its first page; "
            "the rest is time off the CPU, waiting for a core or the disk: see the load average)"
        )
        goal = f"goal: first page within {GOAL_S:.0f} s of the start with {big} runs"
        which = "index kept" if indexed else "no index"
        print(f"{goal} ({which}): {med(case, 'answered'):.2f} s: {verdict}{why}")
    for indexed in (False, True):
        # The page's own cost, the server up: what a user waits on a server already running.
        case = (big, indexed)
        alone = med(case, "request")
        verdict = "met" if alone <= GOAL_S else "not met"
        why = (
            ""
            if verdict == "met"
            else f" (the request itself used {med(case, 'page_cpu'):.2f} s of CPU; the rest is "
            "time off the CPU: see the load average)"
        )
        which = "index kept" if indexed else "no index"
        goal = f"goal: the first GET / within {GOAL_S:.0f} s of asking, server up, {big} runs"
        print(f"{goal} ({which}): {alone:.2f} s: {verdict}{why}")
    shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
