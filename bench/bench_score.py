"""The score stage's judge throughput: every judged metric on 200 rows, fake judge at 200 ms.

All metrics run together in one event loop as the flow runs them (one task per metric, rows
concurrent within each), through one gateway limited to 16 calls in flight. The ideal wall
time is the judge calls made times the latency over the concurrency: what a perfectly packed
schedule would take. ragas's metrics call the judge several times one after another per row
(statements, then verdicts), so staying near the ideal needs enough rows in flight.

Then the client's CPU per judge call, measured against an OpenAI-compatible server on
loopback in another process (bench/_openai_server.py: schema-valid answers after a fixed
latency), so that only our side's work counts: litellm's ``openai/`` provider, the gateway,
ragas, the metrics. The process CPU time (``time.process_time``) of a score run over the
calls the server answered, then a profile of a smaller run, summed by package.

The metrics get what the score stage gives them: the judge's window (so the gateway checks
every prompt against its budget) and a gateway scope writing the call log in parts as a run
does. ``--bare`` leaves both out (how this bench measured before the gateway learnt budgets
and incremental call logs), to see what they cost side by side.

    python bench/bench_score.py [--rows 200] [--latency 0.2] [--concurrency 16] [--k 3]
                                [--server-rows 100] [--server-latency 0.05] [--bare]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import cProfile
import os
import pstats
import subprocess
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Iterator
from pathlib import Path

import httpx
from _util import scratch, table

import ragaudit  # noqa: F401  (offline environment first)
from ragaudit.cache import Gateway
from ragaudit.cache._fake import FAKE
from ragaudit.metrics import METRICS, Deps, Sample
from ragaudit.scoring import score_rows

ZH_CONTEXT = "北京是中华人民共和国的首都，是全国的政治、文化和国际交往中心。第{i}段补充说明历史。"
EN_CONTEXT = "Paris is the capital of France and its largest city. Paragraph {i} adds its history."
WINDOW = 32_000
BARE = False  # --bare: no window in Deps, no call log (the bench before budgets and parts)


def samples(rows: int, k: int) -> list[Sample]:
    out = []
    for n in range(rows):
        if n % 2:
            out.append(
                Sample(
                    f"q{n}",
                    f"第{n}个问题：北京是哪个国家的首都？",
                    "zh",
                    f"北京是中国的首都（{n}）。",
                    f"北京是中华人民共和国的首都（{n}）。",
                    [ZH_CONTEXT.format(i=i) + str(n) for i in range(k)],
                    [f"c{i}" for i in range(k)],
                    None,
                    None,
                )
            )
        else:
            out.append(
                Sample(
                    f"q{n}",
                    f"Question {n}: what is the capital of France?",
                    "en",
                    f"Paris is the capital of France ({n}).",
                    f"The capital of France is Paris ({n}).",
                    [EN_CONTEXT.format(i=i) + str(n) for i in range(k)],
                    [f"c{i}" for i in range(k)],
                    None,
                    None,
                )
            )
    return out


def stage_deps(gateway: Gateway, judge: str, embedder: str) -> Deps:
    """The metrics' dependencies as the score stage builds them (``make_deps``)."""
    return Deps.of(
        gateway=gateway,
        judge=judge,
        embedder=embedder,
        options={"answer_relevancy_strictness": 3},
        max_output_tokens=512,
        window=None if BARE else WINDOW,
    )


def stage_scope(gateway: Gateway, folder: Path) -> contextlib.AbstractContextManager:
    """The gateway scope a stage runs in: its call log written to ``llm_calls/`` in parts."""
    if BARE:
        return contextlib.nullcontext()
    return gateway.scope("score", run_id="bench", calls_dir=folder / "llm_calls")


async def measure(
    rows: int, latency: float, concurrency: int, k: int
) -> tuple[list[tuple], dict[str, int]]:
    folder = scratch("score")
    gateway = Gateway(folder / "memo", concurrency=concurrency, backoff_s=0.0)
    deps = stage_deps(gateway, f"fake/judge?latency={latency}", "fake/embed")
    metrics = [m for m in METRICS.values() if m.needs_llm]
    batch = samples(rows, k)
    FAKE.reset()
    started, cpu = time.perf_counter(), time.process_time()
    with stage_scope(gateway, folder):
        results = await asyncio.gather(
            *(
                score_rows(m, batch, deps, window=WINDOW, limit=max(8, 4 * concurrency))
                for m in metrics
            )
        )
    wall, cpu = time.perf_counter() - started, time.process_time() - cpu
    calls = FAKE.stats.calls
    statuses = Counter(r["status"] for rs in results for r in rs)
    ideal = calls * latency / concurrency
    gateway.close()
    line = (
        len(metrics),
        rows,
        calls,
        f"{wall:.1f}",
        f"{ideal:.1f}",
        f"{wall / ideal:.3f}",
        f"{cpu:.1f}",
    )
    return [line], dict(statuses)


@contextlib.contextmanager
def openai_server(latency: float) -> Iterator[str]:
    """The loopback OpenAI-compatible server in its own process; yields its base URL."""
    script = Path(__file__).with_name("_openai_server.py")
    proc = subprocess.Popen(
        [sys.executable, str(script), "--latency", str(latency)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        line = proc.stdout.readline() if proc.stdout else ""
        if not line.startswith("PORT "):
            raise RuntimeError(f"the benchmark server did not start: {line!r}")
        base = f"http://127.0.0.1:{int(line.split()[1])}"
        for _ in range(100):  # listening, but uvicorn may still be starting the app
            with contextlib.suppress(httpx.HTTPError):
                httpx.get(f"{base}/stats", timeout=1.0)
                break
            time.sleep(0.1)
        yield base
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def server_calls(base: str) -> int:
    """Chat completions the server has answered."""
    return int(httpx.get(f"{base}/stats", timeout=5.0).json()["chat"])


async def score_against(base: str, rows: int, concurrency: int, k: int) -> tuple[int, float]:
    """Every judged metric over ``rows`` against the server: (judge calls, process CPU s)."""
    # litellm's openai provider reads its endpoint from here: loopback only, a dummy key.
    os.environ["OPENAI_API_BASE"] = os.environ["OPENAI_BASE_URL"] = f"{base}/v1"
    os.environ["OPENAI_API_KEY"] = "sk-bench-loopback"
    folder = scratch("score-cpu")
    gateway = Gateway(folder / "memo", concurrency=concurrency, backoff_s=0.0)
    deps = stage_deps(gateway, "openai/bench-judge", "openai/bench-embed")
    metrics = [m for m in METRICS.values() if m.needs_llm]
    batch = samples(rows, k)
    before, cpu = server_calls(base), time.process_time()
    with stage_scope(gateway, folder):
        await asyncio.gather(
            *(
                score_rows(m, batch, deps, window=WINDOW, limit=max(8, 4 * concurrency))
                for m in metrics
            )
        )
    cpu = time.process_time() - cpu
    gateway.close()
    return server_calls(base) - before, cpu


def package(path: str) -> str:
    """The top-level package a profiled function's file belongs to."""
    if path == "~":
        return "builtins (C)"
    parts = Path(path).parts
    if "site-packages" in parts:
        return parts[parts.index("site-packages") + 1].split(".")[0]
    for mark in ("tasks", "cache", "ragaudit"):
        if mark in parts:
            return "ragaudit"
    return "stdlib/other" if path.startswith(("/", "<")) else path


def profile_summary(stats: pstats.Stats, top: int = 12) -> tuple[list[tuple], list[tuple]]:
    """Own time summed by package, and the functions with the most own time."""
    by_pkg: dict[str, float] = defaultdict(float)
    funcs = []
    total = 0.0
    for (path, line, name), (_, _, tottime, _, _) in stats.stats.items():  # type: ignore[attr-defined]
        by_pkg[package(path)] += tottime
        total += tottime
        funcs.append((tottime, f"{package(path)}:{Path(path).name}:{line}({name})"))
    pkgs = sorted(by_pkg.items(), key=lambda kv: -kv[1])[:top]
    funcs.sort(reverse=True)
    return (
        [(p, f"{t / total:.1%}") for p, t in pkgs],
        [(f, f"{t / total:.1%}") for t, f in funcs[:top]],
    )


def client_cpu(rows: int, latency: float, concurrency: int, k: int) -> None:
    """Print the client CPU per judge call against the loopback server, and its profile."""
    with openai_server(latency) as base:
        calls, cpu = asyncio.run(score_against(base, rows, concurrency, k))
        print(
            f"\nClient CPU per judge call against an OpenAI-compatible server on loopback "
            f"(another process, {latency * 1000:.0f} ms), {rows} rows x all judged metrics:"
        )
        print(
            f"  {calls} judge calls, {cpu:.1f} s process CPU: {cpu / calls * 1000:.2f} ms per call"
        )
        profiler = cProfile.Profile()
        profiler.enable()
        asyncio.run(score_against(base, max(10, rows // 4), concurrency, k))
        profiler.disable()
    pkgs, funcs = profile_summary(pstats.Stats(profiler))
    print(f"  where it goes (cProfile own time, {max(10, rows // 4)} rows):")
    print(table(pkgs, ("package", "share of CPU")))
    print(table(funcs, ("function", "share of CPU")))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=200)
    parser.add_argument("--latency", type=float, default=0.2)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--k", type=int, default=3)
    parser.add_argument("--server-rows", type=int, default=100)
    parser.add_argument("--server-latency", type=float, default=0.05)
    parser.add_argument("--bare", action="store_true", help="no window, no call log")
    args = parser.parse_args()
    global BARE
    BARE = args.bare
    lines, statuses = asyncio.run(measure(args.rows, args.latency, args.concurrency, args.k))
    print(
        f"Score stage: all judged metrics, fake judge at {args.latency * 1000:.0f} ms, "
        f"concurrency {args.concurrency}, top-k {args.k} (one run; "
        f"{'bare: no window, no call log' if BARE else f'window {WINDOW}, call log in parts'})"
    )
    print(
        table(
            lines, ("metrics", "rows", "judge calls", "wall s", "ideal s", "wall / ideal", "cpu s")
        )
    )
    print(f"row statuses: {statuses}   target: wall / ideal <= 1.2")
    client_cpu(args.server_rows, args.server_latency, args.concurrency, args.k)


if __name__ == "__main__":
    main()
