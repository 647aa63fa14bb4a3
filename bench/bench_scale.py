"""Scale-out benchmarks, measured side by side in one run.

1. Latency-bound score stage (fake judge at 0.5 s, per-worker concurrency 4, 400 judge calls)
   on 1, 2 and 4 Dask workers, and on Ray: speed-up of the stage (workers started and warm)
   and of the whole run with the cluster's start and the forkserver's one-off preparation,
   and Prefect's share of the stage's wall (the time workers were not running stage code:
   dispatch, bookkeeping, imbalance). ``cold``: the flow starts the cluster; ``warm``: the
   bench starts it first and passes its address.
2. Four Dask workers (16 calls possible at once) under a global judge limit of 8: the peak the
   fake provider saw across processes, and the wall against calls x latency / 8.
3. The cost of one global-limit slot (acquire + release against the Prefect API).
4. Growth: collect + sort + score on 100 and 1,000 questions of 200 candidates (fake judge at
   0 latency: sort judges every candidate, 200 calls a question; two non-LLM metrics and
   faithfulness), each run in its own process (own memo, own Prefect home): stage time, the
   flow process's CPU and peak RSS. Side by side by default: the 100-question run is repeated
   afresh for as long as the 1,000-question one runs, and the ratios are against the median
   of its runs (``--growth-alone``: one run after the other).

Measured on a quiet machine (load 0.6-1.3), November 2026: warm Dask with batches of 50,
stage speed-up 2.00x / 3.81x at 2 / 4 workers, Prefect 4.7 % at 4; Ray 1.97x / 3.76x, 3.8 %;
global limit 8 (batches of 25): peak 8, refused 0, stage wall 1.10-1.13x calls x latency / 8
(1.10x with batches of 50). Growth 100 -> 1,000 questions with sort, one after the other:
12.8x (58.9 -> 754.4 s) and 10.6x on two days; on 2026-11-23 12.4x, then 12.0x wall and 11.4x
CPU (59.5 -> 725.7 s of sort); the same 100-question run took 49-60 s of sort over that one
evening, so one pair of runs minutes apart measures the machine as much as the code. Side by
side (8 runs of 100 beside one of 1,000, load 2-3): 100 questions 63-83 s of stages (median
72.8), 1,000 questions 717.1 s: time 9.9x, CPU 9.4x, peak RSS 877 -> 1,507 MB (1.72x).

Run: ``.venv/bin/python bench/bench_scale.py [--skip-ray] [--only latency,limit,slot,growth]
[--modes cold,warm] [--workers 1,2,4] [--questions 200] [--batch 25]``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from _util import scratch, table
from support.synthetic import write_questions

LATENCY = 0.5
QUESTIONS = 200  # faithfulness asks twice per question: 400 judge calls
BATCH = 25


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
            "scale": {"batch_size": BATCH, **scale},
        },
        environ={},
    )


def _run(config: Any, run_id: str) -> dict[str, Any]:
    from ragaudit.flows.evaluate import flow_for

    started = time.perf_counter()
    manifest = asyncio.run(flow_for(config)(config.model_dump_json(), run_id))
    manifest["wall_s"] = time.perf_counter() - started
    parts = {k: v for k, v in manifest["stages"].items() if k.startswith("score:")}
    # The stage's wall: submission of its batches until the last one is done (the workers were
    # started and warmed before it, timed apart in the manifest's "workers").
    stage_wall = max(v["task_s"] for v in parts.values())
    busy: dict[str, float] = {}
    for v in parts.values():
        busy[v["worker"]] = busy.get(v["worker"], 0.0) + v["seconds"]
    workers = config.scale.workers if config.scale.task_runner != "default" else 1
    manifest["score_wall_s"] = stage_wall
    manifest["batches_on"] = sorted(
        sum(1 for v in parts.values() if v["worker"] == w) for w in busy
    )
    # Prefect's share: the stage's wall not spent in stage code by the busiest worker (whose
    # batches set the wall): dispatch, task-run bookkeeping, results, waiting between batches.
    manifest["prefect_share"] = 1 - max(busy.values()) / stage_wall
    # Idle share: worker time not spent in stage code, Prefect's share plus the imbalance of
    # batches over workers.
    manifest["idle_share"] = max(0.0, 1 - sum(busy.values()) / (workers * stage_wall))
    return manifest


@contextlib.contextmanager
def _cluster(runner: str, n: int) -> Iterator[tuple[str | None, float]]:
    """A cluster started outside the flow (its address, its start seconds), as a team runs."""
    started = time.perf_counter()
    if runner == "dask":
        from distributed import Client, LocalCluster

        from ragaudit.flows._workers import use_forkserver

        use_forkserver()  # as the flow does for a cluster it starts
        with LocalCluster(
            n_workers=n,
            threads_per_worker=1,
            host="127.0.0.1",
            dashboard_address=None,
            preload=["ragaudit.flows._workers"],
        ) as cluster:
            with Client(cluster) as client:
                client.wait_for_workers(n)
            yield cluster.scheduler_address, time.perf_counter() - started
    else:
        import ray

        from ragaudit.flows._workers import warm_ray

        # The flow's runner uses a Ray instance already running in the process; its workers
        # are started and warm.
        ray.init(num_cpus=n, include_dashboard=False)
        try:
            warm_ray()
            yield None, time.perf_counter() - started
        finally:
            ray.shutdown()


def latency(
    root: Path,
    questions: Path,
    runners: list[str],
    modes: list[str],
    counts: list[int],
    prep: float,
) -> None:
    rows = []
    for runner in runners:
        for mode in modes:
            base: dict[str, float] = {}
            for n in counts:
                name = f"{runner}-{mode}-{n}"
                config = _config(root, questions, name, task_runner=runner, workers=n)
                try:
                    if mode == "cold":
                        m = _run(config, name)
                        start = m.get("workers", {}).get("ready_s", 0.0)
                        total = m["wall_s"]
                    else:
                        with _cluster(runner, n) as (address, start):
                            if address:
                                scale = config.scale.model_copy(update={"address": address})
                                config = config.model_copy(update={"scale": scale})
                            m = _run(config, name)
                        total = start + m["wall_s"]
                except Exception as exc:  # a runner that does not work here is reported
                    rows.append((runner, mode, n, "failed", f"{type(exc).__name__}: {exc}"[:90]))
                    continue
                # The forkserver's preparation is paid once per process that starts clusters:
                # charged to every configuration, as a run in a fresh process pays it.
                total += prep if runner == "dask" else 0.0
                if not base:
                    base = {"stage": m["score_wall_s"], "total": total, "n": n}
                rows.append(
                    (
                        runner,
                        mode,
                        n,
                        m["llm"]["provider_calls"],
                        f"{start:.1f}",
                        f"{m['score_wall_s']:.1f}",
                        f"{base['stage'] / m['score_wall_s']:.2f}x",
                        f"{total:.1f}",
                        f"{base['total'] / total:.2f}x",
                        f"{100 * m['prefect_share']:.1f} %",
                        f"{100 * m['idle_share']:.1f} %",
                        "/".join(str(b) for b in m["batches_on"]),
                        " ".join(f"{x:.1f}" for x in os.getloadavg()),
                    )
                )
    print(
        f"\nLatency-bound score stage ({LATENCY} s per call, concurrency 4 per worker, "
        f"{QUESTIONS // BATCH} batches of {BATCH} questions, 2 judge calls per question)"
    )
    print(
        "cold: the flow starts the cluster; warm: the bench started it before the run "
        "(scale.address), as a team with a cluster runs. start: the cluster's start with every "
        "worker forked and warmed, before the first batch. stage: submission of the batches "
        "to the last one done (speed-up against the first row of the mode). total: the flow "
        f"with the cluster's start and the forkserver's preparation ({prep:.1f} s, paid once "
        "per process and charged to every Dask row). Prefect: the stage's wall not spent in "
        "stage code by the busiest worker (dispatch, task-run bookkeeping, results). idle: all "
        "workers' time not in stage code (Prefect plus the imbalance of batches over workers). "
        "batches: how many each worker ran. A fresh process imports the heavy libraries in "
        f"{_import_s():.1f} s."
    )
    print(
        table(
            rows,
            (
                "runner",
                "mode",
                "workers",
                "calls",
                "start s",
                "stage s",
                "speed-up",
                "total s",
                "speed-up",
                "Prefect",
                "idle",
                "batches",
                "load avg",
            ),
        )
    )


def _import_s() -> float:
    """Seconds a fresh process takes to import what a worker needs (median of three)."""
    from ragaudit.flows._workers import WORKER_PRELOAD

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


def limit(root: Path, questions: Path, modes: list[str], prep: float) -> None:
    import dask
    from support.shared_count import SharedCount, shared_env

    rows = []
    for mode in modes:
        counter = root / f"inflight-{mode}.json"
        # Workers forked from the forkserver keep the environment it started with: Dask's
        # nanny sets this one in each worker it starts.
        with dask.config.set({"distributed.nanny.environ": shared_env(counter)}):
            config = _config(
                root,
                questions,
                f"limit-{mode}",
                task_runner="dask",
                workers=4,
                models={"judge": f"fake/judge?latency={LATENCY}&capacity=8", "global_limit": 8},
            )
            if mode == "cold":
                m = _run(config, f"limit-{mode}")
                start = m.get("workers", {}).get("ready_s", 0.0)
            else:
                with _cluster("dask", 4) as (address, start):
                    scale = config.scale.model_copy(update={"address": address})
                    m = _run(config.model_copy(update={"scale": scale}), f"limit-{mode}")
        seen = SharedCount(counter).read()
        ideal = seen["calls"] * LATENCY / 8
        total = m["wall_s"] + (start if mode == "warm" else 0.0) + prep
        rows.append(
            (
                mode,
                seen["calls"],
                seen["peak"],
                seen["refused"],
                f"{ideal:.1f}",
                f"{start:.1f}",
                f"{m['score_wall_s']:.1f}",
                f"{m['score_wall_s'] / ideal:.2f}",
                f"{total:.1f}",
                f"{total / ideal:.2f}",
                " ".join(f"{x:.1f}" for x in os.getloadavg()),
            )
        )
    print("\n4 Dask workers x concurrency 4 under a global judge limit of 8 (provider cap 8)")
    print(
        "peak in flight and refused: as the fake provider saw them across the workers. stage: "
        "submission of the batches to the last one done; total: the flow with the cluster's "
        "start and the forkserver's preparation. ratio: against calls x latency / 8."
    )
    print(
        table(
            rows,
            (
                "mode",
                "calls",
                "peak in flight",
                "refused",
                f"calls x {LATENCY}/8 s",
                "start s",
                "stage s",
                "ratio",
                "total s",
                "ratio",
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
    print("\nGlobal limit slot cost (empty calls; a lease is held while calls keep coming)")
    print(table(rows, ("lease size", "in parallel", "calls", "leases", "ms wall", "ms CPU")))


_GROWTH_CHILD = """
import asyncio, json, resource, sys, time
from ragaudit.config import load_config
from ragaudit.flows.evaluate import evaluate
cfg = load_config(None, json.loads(sys.argv[1]), environ={})
t, c = time.perf_counter(), time.process_time()
m = asyncio.run(evaluate(cfg.model_dump_json(), "growth"))
wall, cpu = time.perf_counter() - t, time.process_time() - c
stages = {k: v["seconds"] for k, v in m["stages"].items()}
print(json.dumps({"wall": wall, "cpu": cpu, "stages": stages,
                  "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def _growth_child(root: Path, n: int, candidates: int, tag: str) -> subprocess.Popen[str]:
    """One growth run of ``n`` questions in its own process, memo and Prefect home."""
    questions = root / f"growth-{n}.jsonl"
    if not questions.exists():
        write_questions(questions, n, candidates=candidates, seed=1)
    cfg = {
        "questions": str(questions),
        "runs_root": str(root / f"growth-runs-{tag}"),
        "cache_dir": str(root / f"growth-cache-{tag}"),
        "collect": {"backend": "question_set", "top_n": candidates},
        # Sort judges every candidate's relevance (200 calls a question here: the fake
        # judge finds none relevant, so no pair is asked).
        "sort": {"enabled": True},
        "ground_truth": {"enabled": False},
        "models": {"judge": "fake/judge", "embedder": "fake/embed", "backoff_s": 0.0},
        "score": {
            "metrics": ["nonllm_context_recall", "nonllm_context_precision", "faithfulness"],
            "top_k": 10,
        },
    }
    # Its own Prefect home: two runs at once must not share one SQLite database.
    env = {**os.environ, "RAGAUDIT_HOME": str(root / f"growth-home-{tag}")}
    return subprocess.Popen(
        [sys.executable, "-c", _GROWTH_CHILD, json.dumps(cfg)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=env,
    )


def _growth_result(child: subprocess.Popen[str]) -> dict[str, Any]:
    out, _ = child.communicate()
    if child.returncode:
        raise RuntimeError(f"a growth run failed (exit {child.returncode})")
    res = json.loads(out.strip().splitlines()[-1])
    res["work"] = sum(v for k, v in res["stages"].items() if k != "report")
    return res


def growth(root: Path, sizes: tuple[int, ...], candidates: int, alone: bool) -> None:
    """The large run against the small one, side by side unless ``alone``.

    Side by side: the small run is repeated, each time afresh, for as long as the large one
    runs, and the large run is compared with the median of them. Both share the machine's
    other load over the same minutes, which one run after the other did not: the same
    100-question run took 49 to 60 s of sort alone over one evening on this shared machine.
    """
    small, large = sizes
    if alone:
        runs = {small: [_growth_result(_growth_child(root, small, candidates, "s0"))]}
        runs[large] = [_growth_result(_growth_child(root, large, candidates, "l0"))]
    else:
        big = _growth_child(root, large, candidates, "l0")
        runs = {small: [], large: []}
        while big.poll() is None or not runs[small]:
            runs[small].append(
                _growth_result(_growth_child(root, small, candidates, f"s{len(runs[small])}"))
            )
        runs[large].append(_growth_result(big))
    base = {k: statistics.median(r[k] for r in runs[small]) for k in ("work", "cpu", "rss_mb")}
    rows = []
    for n in sizes:
        for res in runs[n]:
            rows.append(
                (
                    n,
                    f"{res['stages']['sort']:.1f}",
                    f"{res['work']:.1f}",
                    f"{res['wall']:.1f}",
                    f"{res['cpu']:.1f}",
                    f"{res['rss_mb']:.0f}",
                    f"{res['work'] / base['work']:.1f}x",
                    f"{res['cpu'] / base['cpu']:.1f}x",
                    f"{res['rss_mb'] / base['rss_mb']:.2f}x",
                )
            )
    how = "one after the other" if alone else f"side by side ({len(runs[small])} small runs)"
    print(
        f"\nGrowth: collect + sort + score (two non-LLM metrics, faithfulness), {candidates} "
        f"candidates per question, judge at 0 s, {how}; ratios against the median "
        f"{small}-question run (load {' '.join(f'{x:.1f}' for x in os.getloadavg())})"
    )
    # The flow process's CPU beside the wall: the judge answers at once, so the run is CPU-bound
    # and the CPU ratio is the growth with less of the machine's other load in it.
    print(
        table(
            rows,
            (
                "questions",
                "sort s",
                "stages s",
                "flow wall s",
                "flow CPU s",
                "peak RSS MB",
                "time",
                "CPU",
                "memory",
            ),
        )
    )
    large_run = runs[large][0]
    print(
        f"growth {small} -> {large} questions: time {large_run['work'] / base['work']:.1f}x "
        f"(target <= 11x), CPU {large_run['cpu'] / base['cpu']:.1f}x, peak RSS "
        f"{large_run['rss_mb'] / base['rss_mb']:.2f}x and {large_run['rss_mb']:.0f} MB "
        "(targets <= 3x, < 2,048 MB)"
    )


def main() -> None:
    global QUESTIONS, BATCH
    parser = argparse.ArgumentParser()
    parser.add_argument("--skip-ray", action="store_true")
    parser.add_argument("--modes", default="cold,warm")
    parser.add_argument("--workers", default="1,2,4")
    parser.add_argument("--questions", type=int, default=QUESTIONS)
    parser.add_argument("--batch", type=int, default=BATCH)
    parser.add_argument("--only", default="latency,limit,slot,growth")
    parser.add_argument("--growth-sizes", default="100,1000")
    parser.add_argument("--growth-candidates", type=int, default=200)
    parser.add_argument(
        "--growth-alone", action="store_true", help="the growth runs one after the other"
    )
    args = parser.parse_args()
    QUESTIONS, BATCH = args.questions, args.batch
    only = set(args.only.split(","))
    root = scratch("scale")
    questions = write_questions(root / "questions.jsonl", QUESTIONS, candidates=6)
    from prefect.testing.utilities import prefect_test_harness

    runners = ["dask"]
    if not args.skip_ray:
        try:
            import prefect_ray  # noqa: F401
        except ImportError as exc:
            print(f"Ray: not measured, prefect-ray does not import here ({exc})")
        else:
            runners.append("ray")
    # A Prefect API the Dask and Ray workers (other processes) report to, as the tests have.
    with prefect_test_harness(server_startup_timeout=120):
        prep = 0.0
        if only & {"latency", "limit"}:
            from ragaudit.flows._workers import start_forkserver

            prep = start_forkserver()
            print(f"Forkserver prepared (imports, Prefect collections, token tables): {prep:.1f} s")
        if "latency" in only:
            counts = [int(n) for n in args.workers.split(",")]
            latency(root, questions, runners, args.modes.split(","), counts, prep)
        if "limit" in only:
            limit(root, questions, args.modes.split(","), prep)
        if "slot" in only:
            slot_cost()
    if "growth" in only:
        sizes = tuple(int(n) for n in args.growth_sizes.split(","))
        growth(root, sizes, args.growth_candidates, args.growth_alone)


if __name__ == "__main__":
    main()
