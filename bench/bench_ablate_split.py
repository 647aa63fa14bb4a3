"""Could worker processes beat one event loop on this machine? The sweep split over 2 processes.

``bench_ablate.py`` runs the demo's 12 points 4 at once in the flow's one event loop. This
bench asks what the cores allow at all: the sweep split in two halves (file size and chunk
size: 7 points; context and top-k: 6, the baseline in both), each half an ablation of its own
in its own process with its own Prefect server, 2 points at once, both started together. That
is 4 points at once over 2 interpreters with no orchestration cost at all (no task runner, no
serialisation, each process already warm), so it is a lower bound for any task runner that
spreads the points over processes (Dask, Ray, Prefect's process pool). Beside it, in the same
run, the same 12 points one after another in one process, and the 4-at-once run in one loop.

Run from the repository root: ``python bench/bench_ablate_split.py [--latency 0.2]``.

Measured (November 2026, 2 cores, load average 1-2, fake models at 0.2 s): sequential
9.3-9.5 s; 4 at once in one loop 3.8-4.2 s (0.405-0.439); split over 2 processes 3.8-5.8 s
(0.40-0.62, the longer half; the halves' walls differ from run to run by up to 2.5 s, as three
Prefect servers and two flows share the 2 cores). So at 0.2 s a call the points are bound by
the machine's CPU, not by how they are scheduled: a second interpreter takes away the queue
for the one GIL and adds as much CPU as it saves.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
os.environ.setdefault("RAGAUDIT_HOME", str(REPO / "data" / "bench-home"))
sys.path.insert(0, str(REPO / "bench"))

from bench_ablate import LATENCY_S, config, with_indexes  # noqa: E402

from ragaudit._server import ephemeral_server  # noqa: E402
from ragaudit.flows.ablate import run_ablation  # noqa: E402

HALVES = {
    "sizes": {"file_size": ["80KB", "400KB", "800KB"], "chunk_size": [100, 300, 500, 700, 1000]},
    "retrieval": {"context": [True, False], "top_k": [3, 5, 7, 10, 15]},
}
"""The two halves of the demo's sweeps (the baseline point is in both)."""


def half_config(root: Path, name: str, half: str, latency: float):
    """The demo's config with only ``half``'s sweeps, 2 points at once, its own memo."""
    cfg = config(root, name, 2, f"cache-{name}", 128, latency)
    data = cfg.model_dump()
    data["ablate"]["sweeps"] = HALVES[half]
    return type(cfg).model_validate(data)


def child(root: Path, half: str, latency: float) -> None:
    """One half, in this process: warm up once, say ready, wait for go, run, print the wall."""
    warm = config(root, "indexes", 4, "cache-warm", latency=latency)
    run_ablation(with_indexes(warm, half_config(root, f"warm-{half}", half, latency)))
    cfg = with_indexes(warm, half_config(root, f"timed-{half}", half, latency))
    (root / f"{half}.ready").touch()
    while not (root / "go").exists():
        time.sleep(0.005)
    started = time.perf_counter()
    out = run_ablation(cfg)
    print(f"{half} {out['points']} {time.perf_counter() - started:.3f}", flush=True)


def timed(root: Path, warm, name: str, parallel: int, latency: float) -> float:
    """The whole sweep in this process, ``parallel`` points at once; its wall."""
    cfg = with_indexes(warm, config(root, name, parallel, f"cache-{name}", 128, latency))
    started = time.perf_counter()
    run_ablation(cfg)
    return time.perf_counter() - started


def main() -> None:
    """Print the walls and their ratios to the sequential one."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--latency", type=float, default=LATENCY_S, help="seconds a fake call")
    parser.add_argument("--child", nargs=2, metavar=("ROOT", "HALF"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        # Its own server, as the parent has: two flow runs writing to one server's database
        # wait on each other, which a task runner (one flow run for all points) never pays.
        with ephemeral_server():
            child(Path(args.child[0]), args.child[1], args.latency)
        return
    root = Path(tempfile.mkdtemp(prefix="bench-ablate-split-"))
    try:
        with ephemeral_server():
            warm = config(root, "indexes", 4, "cache-warm", latency=args.latency)
            run_ablation(warm)
            run_ablation(with_indexes(warm, config(root, "w", 4, "cache-w", 128, args.latency)))
            print(f"fake models at {args.latency} s a call; load average {os.getloadavg()[0]:.1f}")
            seq = timed(root, warm, "sequential", 1, args.latency)
            loop = timed(root, warm, "one-loop", 4, args.latency)
            children = [
                subprocess.Popen(
                    [sys.executable, __file__, "--latency", str(args.latency), "--child"]
                    + [str(root), half],
                    stdout=subprocess.PIPE,
                    text=True,
                )
                for half in HALVES
            ]
            while not all((root / f"{h}.ready").exists() for h in HALVES):
                if any(c.poll() is not None for c in children):
                    sys.exit("a half failed before it was ready")
                time.sleep(0.05)
            time.sleep(1.0)  # both processes idle before the start
            (root / "go").touch()
            outs = [c.communicate()[0].split() for c in children]
            # Each half's own wall from the go (they poll for it every 5 ms): the parent's wait
            # would also count each child stopping its server.
            split = max(float(o[2]) for o in outs)
            halves = ", ".join(f"{o[0]} {o[1]} points {float(o[2]):.1f} s" for o in outs)
            print(
                f"sequential (1 at once, one loop): {seq:.1f} s\n"
                f"4 at once in one loop: {loop:.1f} s ({loop / seq:.3f} of sequential)\n"
                f"split over 2 processes, 2 at once each: {split:.1f} s "
                f"({split / seq:.3f}; {halves})"
            )
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
