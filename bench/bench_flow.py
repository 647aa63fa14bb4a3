"""First run vs cached re-run of the evaluate flow, and Prefect's overhead per stage.

The first run uses the fake judge with a simulated latency large enough that the run takes
over 60 s (a realistic share for orchestration to be measured against); the re-run with the
same run id must be answered from Prefect's task cache. Overhead per stage is the wall time
around the Prefect task call minus the stage's own time inside the task.
"""

from __future__ import annotations

import asyncio
import sys
import time

from _util import scratch, table
from support.runs import make_config

from ragaudit._server import ephemeral_server
from ragaudit.flows.evaluate import evaluate

LATENCY_S = float(sys.argv[1]) if len(sys.argv) > 1 else 1.2
CONCURRENCY = 2


def main() -> None:
    root = scratch("flow")
    config = make_config(
        root, judge=f"fake/judge?latency={LATENCY_S}", models__concurrency=CONCURRENCY
    )
    # The CLI's ephemeral server: tied to this process and quiet when it stops.
    with ephemeral_server():
        t = time.perf_counter()
        first = asyncio.run(evaluate(config.model_dump_json(), "bench"))
        first_wall = time.perf_counter() - t
        t = time.perf_counter()
        second = asyncio.run(evaluate(config.model_dump_json(), "bench"))
        second_wall = time.perf_counter() - t

    simulated = first["llm"]["provider_calls"] * LATENCY_S
    print(
        f"Evaluate flow on the demo set, fake judge latency {LATENCY_S}s, concurrency {CONCURRENCY}"
    )
    print(
        table(
            [
                (
                    "first run",
                    f"{first['timings']['total_s']:.2f}",
                    f"{first_wall:.2f}",
                    first["llm"]["calls"],
                    first["llm"]["provider_calls"],
                ),
                (
                    "same run id again",
                    f"{second['timings']['total_s']:.2f}",
                    f"{second_wall:.2f}",
                    second["llm"]["calls"],
                    second["llm"]["provider_calls"],
                ),
                (
                    "again / first",
                    f"{second['timings']['total_s'] / first['timings']['total_s']:.4f}",
                    f"{second_wall / first_wall:.4f}",
                    "",
                    "",
                ),
            ],
            ("run", "flow total_s", "wall s (incl. server)", "LLM calls", "provider calls"),
        )
    )
    print(
        f"\nsimulated judge latency in the first run: {simulated:.0f} s of calls "
        f"({first['llm']['provider_calls']} provider calls x {LATENCY_S}s)"
    )
    rows, overhead_total = [], 0.0
    for name, s in first["stages"].items():
        overhead = max(0.0, s["task_s"] - s["seconds"])
        overhead_total += overhead
        rows.append(
            (
                name,
                f"{s['seconds']:.2f}",
                f"{s['task_s']:.2f}",
                f"{overhead * 1e3:.0f}",
                f"{overhead / first['timings']['total_s'] * 100:.2f}%",
            )
        )
    rows.append(
        (
            "all stages",
            "",
            "",
            f"{overhead_total * 1e3:.0f}",
            f"{overhead_total / first['timings']['total_s'] * 100:.2f}%",
        )
    )
    print(
        "\nPrefect overhead per stage (task wall time minus the stage's own time), share of the run"
    )
    print(table(rows, ("stage", "stage s", "task s", "overhead ms", "share of run")))


if __name__ == "__main__":
    main()
