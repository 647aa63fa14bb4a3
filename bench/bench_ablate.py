"""The default sweep (12 distinct points, 8 indexes) on the bundled DuReader demo with the fake
judge and generator at 0.2 s a call: points 4 at once vs one after another, indexes built once
per (subset, chunking), and a second run with no provider call.

Run from the repository root: ``python bench/bench_ablate.py``. Indexes are built once first
(their time printed apart) and copied into both timed ablations, so the two timings compare the
points alone; each timed ablation starts from an empty memo.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
os.environ.setdefault("RAGAUDIT_HOME", str(REPO / "data" / "test-home"))

import ragaudit  # noqa: E402,F401
from ragaudit.ablation import ablation_dir, plan  # noqa: E402
from ragaudit.cache._fake import FAKE  # noqa: E402
from ragaudit.config import load_config  # noqa: E402
from ragaudit.flows.ablate import run_ablation  # noqa: E402


def config(root: Path, name: str, parallel: int, cache: str):
    """The demo's sweep under ``root`` with the fake models at 0.2 s."""
    return load_config(
        REPO / "data" / "ablation" / "ablate.yaml",
        {
            "questions": str(REPO / "data" / "ablation" / "questions.jsonl"),
            "runs_root": str(root / "runs"),
            "cache_dir": str(root / cache),
            "models": {"judge": "fake/judge?latency=0.2", "embedder": "fake/embed"},
            "ablate": {
                "corpus": str(REPO / "data" / "ablation" / "corpus.jsonl"),
                "name": name,
                "parallel": parallel,
            },
        },
        environ={},
    )


def main() -> None:
    """Print the figures."""
    root = Path(tempfile.mkdtemp(prefix="bench-ablate-"))
    try:
        warm = config(root, "indexes", 4, "cache-warm")
        points = plan(warm.ablate)
        print(f"points: {len(points)} distinct")
        t = time.perf_counter()
        out = run_ablation(warm)
        print(
            f"first run (indexes built + points, 4 at once): {time.perf_counter() - t:.1f} s; "
            f"indexes built {out['indexes_built']} of {out['indexes']} distinct "
            f"(subset, chunking) pairs"
        )
        walls = {}
        for name, parallel in (("sequential", 1), ("parallel", 4)):
            cfg = config(root, name, parallel, f"cache-{name}")
            shutil.copytree(ablation_dir(warm) / "indexes", ablation_dir(cfg) / "indexes")
            FAKE.reset()
            t = time.perf_counter()
            out = run_ablation(cfg)
            walls[name] = time.perf_counter() - t
            print(
                f"{name} ({parallel} at once): {walls[name]:.1f} s, "
                f"{FAKE.stats.calls} provider calls, {out['indexes_built']} indexes built"
            )
        print(f"parallel / sequential wall: {walls['parallel'] / walls['sequential']:.3f}")
        FAKE.reset()
        t = time.perf_counter()
        out = run_ablation(config(root, "parallel", 4, "cache-parallel"))
        print(
            f"second run of the sweep: {time.perf_counter() - t:.1f} s, "
            f"{FAKE.stats.calls} provider calls (logged {out['llm']['provider_calls']}), "
            f"{out['llm']['cache_hits']} memo hits, {out['indexes_built']} indexes built"
        )
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
