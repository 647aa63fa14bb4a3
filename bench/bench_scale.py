"""Scale-out benchmarks, measured side by side in one run.

1. Latency-bound score stage (fake judge at 0.5 s, per-worker concurrency 4, 400 judge calls)
   on 1, 2 and 4 Dask workers, and on Ray: speed-up, and Prefect's share of the stage's wall
   (the time workers were not running stage code: dispatch, bookkeeping, imbalance).
2. Four Dask workers (16 calls possible at once) under a global judge limit of 8: the peak the
   fake provider saw across processes, and the wall against calls x latency / 8.
3. The cost of one global-limit slot (acquire + release against the Prefect API).
4. Growth: collect + score (sort off, gold labels) on 100 and 1,000 questions of 200
   candidates (fake judge at 0 latency, two non-LLM metrics and faithfulness), each run in its
   own process: stage time and peak RSS.

Run: ``.venv/bin/python bench/bench_scale.py [--skip-ray] [--only latency,limit,slot,growth]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from _util import scratch, table
from synthetic import write_questions

LATENCY = 0.5
QUESTIONS = 200  # faithfulness asks twice per question: 400 judge calls


def _config(root: Path, questions: Path, name: str, **scale: Any) -> Any:
    from ragaudit.config import load_config

    models = {"judge": f"fake/judge?latency={LATENCY}", "embedder": "fake/embed"}
    models.update(scale.pop("models", {}))
    return load_config(
        None,
        {
            "questions": str(questions),
            "runs_root": str(root / "runs"),
            "cache_dir": str(root / f"cache-{name}"),
            "collect": {"backend": "question_set"},
            "sort": {"enabled": False},
            "ground_truth": {"enabled": False},
            "models": {"concurrency": 4, "backoff_s": 0.0, **models},
            "score": {"metrics": ["faithfulness"], "top_k": 3},
            "scale": {"batch_size": 25, **scale},
        },
        environ={},
    )


def _run(config: Any, run_id: str) -> dict[str, Any]:
    from ragaudit.flows.evaluate import flow_for

    started = time.perf_counter()
    manifest = asyncio.run(flow_for(config)(config.model_dump_json(), run_id))
    manifest["wall_s"] = time.perf_counter() - started
    parts = {k: v for k, v in manifest["stages"].items() if k.startswith("score:")}
    stage_wall = max(v["task_s"] for v in parts.values())
    # From submission until the first batch began its own work: worker warm-up and dispatch.
    manifest["first_start_s"] = min(v["task_s"] - v["seconds"] for v in parts.values())
    busy = sum(v["seconds"] for v in parts.values())
    workers = config.scale.workers if config.scale.task_runner != "default" else 1
    manifest["score_wall_s"] = stage_wall
    manifest["overhead"] = max(0.0, 1 - busy / (workers * stage_wall))
    return manifest


def latency(root: Path, questions: Path, ray: bool) -> None:
    rows = []
    base = base_flow = base_warm = None
    runners = [("dask", n) for n in (1, 2, 4)] + ([("ray", n) for n in (1, 2, 4)] if ray else [])
    for runner, n in runners:
        config = _config(root, questions, f"{runner}{n}", task_runner=runner, workers=n)
        try:
            m = _run(config, f"{runner}{n}")
        except Exception as exc:  # a runner that does not work here is reported, not hidden
            rows.append((runner, n, "failed", f"{type(exc).__name__}: {exc}"[:80], "", ""))
            continue
        calls = m["llm"]["provider_calls"]
        if n == 1:
            base = m["score_wall_s"]
        warm = m["score_wall_s"] - m["first_start_s"]
        if n == 1:
            base_flow, base_warm = m["wall_s"], warm
        rows.append(
            (
                runner,
                n,
                calls,
                f"{m['score_wall_s']:.1f}",
                f"{base / m['score_wall_s']:.2f}x" if base else "",
                f"{m['first_start_s']:.1f}",
                f"{warm:.1f}",
                f"{base_warm / warm:.2f}x" if base else "",
                f"{m['wall_s']:.1f}",
                f"{base_flow / m['wall_s']:.2f}x" if base else "",
                f"{100 * m['overhead']:.1f} %",
                " ".join(f"{x:.1f}" for x in os.getloadavg()),
            )
        )
    print("\nLatency-bound score stage (0.5 s per call, concurrency 4 per worker, 8 batches)")
    print(
        "score wall: submission of the 8 batches to the last one done (Dask workers import "
        "the heavy libraries as the cluster starts, before it); first start: submission to "
        "the first batch starting its own work (each worker's first-task warm-up, dispatch); "
        "after it: score wall minus first start, i.e. warm-up excluded; flow wall: the whole "
        f"flow, cluster start included. A fresh process imports them in {_import_s():.1f} s."
    )
    print(
        table(
            rows,
            (
                "runner",
                "workers",
                "calls",
                "score wall s",
                "speed-up",
                "first start s",
                "after it s",
                "speed-up",
                "flow wall s",
                "speed-up",
                "overhead",
                "load avg",
            ),
        )
    )


def _import_s() -> float:
    """Seconds a fresh process takes to import what a worker needs (median of three)."""
    from ragaudit.flows.evaluate import WORKER_PRELOAD

    code = "import time; t = time.perf_counter(); import " + ", ".join(WORKER_PRELOAD)
    code += "; print(time.perf_counter() - t)"
    runs = [
        float(
            subprocess.run(
                [sys.executable, "-c", code], capture_output=True, text=True, check=True
            ).stdout
        )
        for _ in range(3)
    ]
    return sorted(runs)[1]


def limit(root: Path, questions: Path) -> None:
    from ragaudit.cache._fake import SHARED_ENV, SharedCount

    counter = root / "inflight.json"
    os.environ[SHARED_ENV] = str(counter)  # set before the workers start: they inherit it
    try:
        config = _config(
            root,
            questions,
            "limit",
            task_runner="dask",
            workers=4,
            models={"judge": f"fake/judge?latency={LATENCY}&capacity=8", "global_limit": 8},
        )
        m = _run(config, "limit")
    finally:
        del os.environ[SHARED_ENV]
    seen = SharedCount(counter).read()
    ideal = seen["calls"] * LATENCY / 8
    print("\n4 Dask workers x concurrency 4 under a global judge limit of 8 (provider cap 8)")
    print(
        table(
            [
                (
                    seen["calls"],
                    seen["peak"],
                    seen["refused"],
                    f"{m['score_wall_s']:.1f}",
                    f"{m['first_start_s']:.1f}",
                    f"{ideal:.1f}",
                    f"{m['score_wall_s'] / ideal:.2f}",
                    f"{(m['score_wall_s'] - m['first_start_s']) / ideal:.2f}",
                    " ".join(f"{x:.1f}" for x in os.getloadavg()),
                )
            ],
            (
                "calls",
                "peak in flight",
                "refused",
                "score wall s",
                "first start s",
                "calls x 0.5/8",
                "ratio",
                "ratio after warm-up",
                "load avg",
            ),
        )
    )


def slot_cost() -> None:
    from ragaudit.cache._global import ensure_global_limit, global_slot, leases_taken

    n = 200

    async def go(size: int, parallel: int) -> tuple[float, int]:
        name = f"ragaudit-bench-{size}"
        await ensure_global_limit(1000, name)
        gate = asyncio.Semaphore(parallel)

        async def one() -> None:
            async with gate, global_slot(name, size=size):
                pass

        started = time.perf_counter()
        await asyncio.gather(*(one() for _ in range(n)))
        return (time.perf_counter() - started) / n, leases_taken(name)

    rows = []
    for size, parallel in ((1, 1), (4, 4), (8, 8)):
        cpu0 = time.process_time()
        per, leases = asyncio.run(go(size, parallel))
        cpu = (time.process_time() - cpu0) / n
        rows.append((size, parallel, n, leases, f"{per * 1e3:.2f}", f"{cpu * 1e3:.2f}"))
    print("\nGlobal limit slot cost (empty calls; a lease serves 4 x size calls)")
    print(table(rows, ("lease size", "in parallel", "calls", "leases", "ms wall", "ms CPU")))


_GROWTH_CHILD = """
import asyncio, json, resource, sys, time
from ragaudit.config import load_config
from ragaudit.flows.evaluate import evaluate
cfg = load_config(None, json.loads(sys.argv[1]), environ={})
t = time.perf_counter()
m = asyncio.run(evaluate(cfg.model_dump_json(), "growth"))
wall = time.perf_counter() - t
stages = {k: v["seconds"] for k, v in m["stages"].items()}
print(json.dumps({"wall": wall, "stages": stages,
                  "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def growth(root: Path, sizes: tuple[int, ...], candidates: int) -> None:
    rows, first = [], None
    for n in sizes:
        questions = write_questions(root / f"growth-{n}.jsonl", n, candidates=candidates, seed=1)
        cfg = {
            "questions": str(questions),
            "runs_root": str(root / f"growth-runs-{n}"),
            "cache_dir": str(root / f"growth-cache-{n}"),
            "collect": {"backend": "question_set", "top_n": candidates},
            "sort": {"enabled": False},
            "ground_truth": {"enabled": False},
            "models": {"judge": "fake/judge", "embedder": "fake/embed", "backoff_s": 0.0},
            "score": {
                "metrics": ["nonllm_context_recall", "nonllm_context_precision", "faithfulness"],
                "top_k": 10,
            },
        }
        out = subprocess.run(
            [sys.executable, "-c", _GROWTH_CHILD, json.dumps(cfg)],
            capture_output=True,
            text=True,
            check=True,
        )
        res = json.loads(out.stdout.strip().splitlines()[-1])
        work = sum(v for k, v in res["stages"].items() if k != "report")
        first = first or (work, res["rss_mb"])
        rows.append(
            (
                n,
                f"{work:.1f}",
                f"{res['wall']:.1f}",
                f"{res['rss_mb']:.0f}",
                f"{work / first[0]:.1f}x",
                f"{res['rss_mb'] / first[1]:.2f}x",
            )
        )
    print(
        f"\nGrowth: collect + score (two non-LLM metrics on gold, faithfulness), {candidates} "
        "candidates per question, "
        f"judge at 0 s (load {' '.join(f'{x:.1f}' for x in os.getloadavg())})"
    )
    print(table(rows, ("questions", "stages s", "flow wall s", "peak RSS MB", "time", "memory")))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--skip-ray", action="store_true")
    parser.add_argument("--only", default="latency,limit,slot,growth")
    parser.add_argument("--growth-sizes", default="100,1000")
    parser.add_argument("--growth-candidates", type=int, default=200)
    args = parser.parse_args()
    only = set(args.only.split(","))
    root = scratch("scale")
    questions = write_questions(root / "questions.jsonl", QUESTIONS, candidates=6)
    from prefect.testing.utilities import prefect_test_harness

    # A Prefect API the Dask and Ray workers (other processes) report to, as the tests have.
    with prefect_test_harness(server_startup_timeout=120):
        if "latency" in only:
            latency(root, questions, ray=not args.skip_ray)
        if "limit" in only:
            limit(root, questions)
        if "slot" in only:
            slot_cost()
    if "growth" in only:
        sizes = tuple(int(n) for n in args.growth_sizes.split(","))
        growth(root, sizes, args.growth_candidates)


if __name__ == "__main__":
    main()
