"""Wall time of a batch under rate limits against the same batch without, side by side.

The fake judge answers in ``LATENCY`` seconds. Two kinds of rate limit, each with a
``Retry-After`` of ``RETRY_AFTER`` seconds, alone and together:

- ``quota``: the provider takes ``CAPACITY`` calls at once and refuses the rest; the gateway
  is configured for 4x that. Baseline: the same batch at the concurrency the provider allows,
  with no refusal. The limit must find the quota by halving.
- ``random 30%``: 30 % of requests are refused once whatever the load (refusals the limit
  cannot avoid). Baseline: the same batch at the same configured concurrency, no refusal.
  The limit must not fall for them.
- ``quota + random 30%``: both; baseline as for ``quota``.

Each scenario is measured ``REPEAT`` times alternating with its baseline (fresh memo each
time) and the median ratio is printed (with its range), with the adaptive limit's lowest and
final value and its halvings from ``limits_report()``, and the mean of the limit each call
was admitted under as the call log records it (its ``concurrency`` column): the concurrency
the run reached. "refused" is the provider's refusals per call (a call may be refused more
than once). On a loaded machine the client's own CPU per call (several ms, more for a refused
call, which goes through litellm's error path) still moves the walls of both sides: the
ratios vary from run to run even where the limit never moves.
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
# A judge call takes seconds; at 50 ms, on this loaded 2-core machine, the client's own time
# per call (5-40 ms through litellm) blurs what the provider sees of our concurrency.
LATENCY = 0.2
RETRY_AFTER = 0.2
CAPACITY = 4
REPEAT = 3


async def batch(model: str, concurrency: int, tag: str) -> tuple[float, dict, int]:
    FAKE.reset()
    gw = Gateway(scratch("ratelimit") / "cache", concurrency=concurrency, backoff_s=1.0)
    prompts = [[{"role": "user", "content": f"{tag} question {i}"}] for i in range(N)]
    started = time.perf_counter()
    await asyncio.gather(*(gw.acompletion(model=model, messages=m) for m in prompts))
    wall = time.perf_counter() - started
    rows = gw.log.rows()
    assert all(r.error is None for r in rows)
    report = gw.limits_report()[model]
    # The limit each call was admitted under, as the call log records it: what the run ran at.
    report["logged"] = statistics.mean(r.concurrency for r in rows)
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
                "/".join(f"{rep['logged']:.1f}" for rep in reports),
                "/".join(str(rep["final"]) for rep in reports),
                "/".join(str(rep["decreases"]) for rep in reports),
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
                "mean logged limit",
                "final limit",
                "halvings",
            ),
        )
    )


if __name__ == "__main__":
    logging.basicConfig(level=logging.WARNING)
    asyncio.run(main())
