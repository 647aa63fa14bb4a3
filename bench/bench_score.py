"""The score stage's judge throughput: every judged metric on 200 rows, fake judge at 200 ms.

All metrics run together in one event loop as the flow runs them (one task per metric, rows
concurrent within each), through one gateway limited to 16 calls in flight. The ideal wall
time is the judge calls made times the latency over the concurrency: what a perfectly packed
schedule would take. ragas's metrics call the judge several times one after another per row
(statements, then verdicts), so staying near the ideal needs enough rows in flight.

    python bench/bench_score.py [--rows 200] [--latency 0.2] [--concurrency 16] [--k 3]
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections import Counter

from _util import scratch, table

import ragaudit  # noqa: F401  (offline environment first)
from ragaudit.cache import Gateway
from ragaudit.cache._fake import FAKE
from ragaudit.metrics import METRICS, Deps, Sample
from ragaudit.tasks.score import score_rows

ZH_CONTEXT = "北京是中华人民共和国的首都，是全国的政治、文化和国际交往中心。第{i}段补充说明历史。"
EN_CONTEXT = "Paris is the capital of France and its largest city. Paragraph {i} adds its history."


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


async def measure(
    rows: int, latency: float, concurrency: int, k: int
) -> tuple[list[tuple], dict[str, int]]:
    gateway = Gateway(scratch("score") / "memo", concurrency=concurrency, backoff_s=0.0)
    judge = f"fake/judge?latency={latency}"
    deps = Deps(
        gateway=gateway,
        judge=judge,
        embedder="fake/embed",
        options={"answer_relevancy_strictness": 3},
        max_output_tokens=512,
    )
    metrics = [m for m in METRICS.values() if m.needs_llm]
    batch = samples(rows, k)
    FAKE.reset()
    started, cpu = time.perf_counter(), time.process_time()
    results = await asyncio.gather(
        *(score_rows(m, batch, deps, window=32_000, limit=max(8, 4 * concurrency)) for m in metrics)
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=200)
    parser.add_argument("--latency", type=float, default=0.2)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--k", type=int, default=3)
    args = parser.parse_args()
    lines, statuses = asyncio.run(measure(args.rows, args.latency, args.concurrency, args.k))
    print(
        f"Score stage: all judged metrics, fake judge at {args.latency * 1000:.0f} ms, "
        f"concurrency {args.concurrency}, top-k {args.k} (one run)"
    )
    print(
        table(
            lines, ("metrics", "rows", "judge calls", "wall s", "ideal s", "wall / ideal", "cpu s")
        )
    )
    print(f"row statuses: {statuses}   target: wall / ideal <= 1.2")


if __name__ == "__main__":
    main()
