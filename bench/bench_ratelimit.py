"""Wall time of a batch under rate limits against the same batch without, side by side.

The fake judge answers in ``LATENCY`` seconds. Two kinds of rate limit, each with a
``Retry-After`` of ``RETRY_AFTER`` seconds:

- ``quota``: the provider takes ``CAPACITY`` calls at once and refuses the rest; the gateway
  is configured for 4x that. Baseline: the same batch at the concurrency the provider allows,
  with no refusal.
- ``random 30%``: 30 % of requests are refused once whatever the load (refusals the limit
  cannot avoid). Baseline: the same batch at the same configured concurrency, no refusal.

Each scenario is measured ``REPEAT`` times alternating with its baseline (fresh memo each
time) and the median ratio is printed, with the adaptive limit's lowest and final value.
"""

from __future__ import annotations

import asyncio
import logging
import statistics
import sys
import time

from _util import scratch, table

import ragaudit  # noqa: F401
from ragaudit.cache import Gateway
from ragaudit.cache._fake import FAKE

N = int(sys.argv[1]) if len(sys.argv) > 1 else 200
LATENCY = 0.05
RETRY_AFTER = 0.05
CAPACITY = 4
REPEAT = 3


async def batch(model: str, concurrency: int, tag: str) -> tuple[float, dict, int]:
    FAKE.reset()
    gw = Gateway(scratch("ratelimit") / "cache", concurrency=concurrency, backoff_s=1.0)
    prompts = [[{"role": "user", "content": f"{tag} question {i}"}] for i in range(N)]
    started = time.perf_counter()
    await asyncio.gather(*(gw.acompletion(model=model, messages=m) for m in prompts))
    wall = time.perf_counter() - started
    assert all(r.error is None for r in gw.log.rows())
    report = gw.limits_report()[model]
    gw.close()
    return wall, report, FAKE.stats.rate_limited


async def main() -> None:
    base = f"fake/judge?latency={LATENCY}&retry_after={RETRY_AFTER}"
    scenarios = [
        ("quota", f"{base}&capacity={CAPACITY}", 4 * CAPACITY, base, CAPACITY),
        ("random 30%", f"{base}&ratelimit=0.3", 8, base, 8),
        ("quota + random 30%", f"{base}&capacity={CAPACITY}&ratelimit=0.3", 16, base, CAPACITY),
    ]
    await batch(base, 8, "warm")  # imports and first-call costs out of the figures
    rows = []
    for name, model, conc, baseline, base_conc in scenarios:
        ratios, walls, base_walls, reports, refused = [], [], [], [], []
        for r in range(REPEAT):
            wall, report, n_refused = await batch(model, conc, f"{name} {r}")
            base_wall, _, _ = await batch(baseline, base_conc, f"{name} base {r}")
            ratios.append(wall / base_wall)
            walls.append(wall)
            base_walls.append(base_wall)
            reports.append(report)
            refused.append(n_refused)
        rows.append(
            (
                name,
                N,
                conc,
                f"{statistics.median(refused) / N:.0%}",
                f"{statistics.median(walls):.2f}",
                f"{statistics.median(base_walls):.2f} (c={base_conc})",
                f"{statistics.median(ratios):.2f} ({min(ratios):.2f}-{max(ratios):.2f})",
                "/".join(str(rep["min"]) for rep in reports),
                "/".join(str(rep["final"]) for rep in reports),
            )
        )
    print(
        table(
            rows,
            (
                "scenario",
                "calls",
                "configured",
                "refused",
                "wall s",
                "baseline s",
                "ratio (range)",
                "min limit",
                "final limit",
            ),
        )
    )


if __name__ == "__main__":
    logging.basicConfig(level=logging.WARNING)
    asyncio.run(main())
