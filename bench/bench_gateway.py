"""Memo-hit cost against a provider call, measured side by side in one run.

A provider call here is the fake provider through litellm with no simulated latency (so the
figure is litellm's and our own overhead, the cheapest a provider call can ever be), and with
a 200 ms latency (a fast real API). A memo hit is the same request answered from diskcache.
"""

from __future__ import annotations

import asyncio
import statistics
import time

from _util import scratch, table

import ragaudit  # noqa: F401
from ragaudit.cache import Gateway

N = 300


async def measure() -> list[tuple]:
    gw = Gateway(scratch("gateway") / "cache", concurrency=64, backoff_s=0.0)
    msgs = [
        [{"role": "user", "content": f"question {i}: what is the capital of country {i}?"}]
        for i in range(N)
    ]

    async def timed(model: str, batch: list) -> list[float]:
        out = []
        for m in batch:
            t = time.perf_counter()
            await gw.acompletion(model=model, messages=m)
            out.append(time.perf_counter() - t)
        return out

    await timed("fake/judge", msgs[:5])  # warm imports
    miss = await timed("fake/judge", msgs[5:])
    hit = await timed("fake/judge", msgs[5:])
    slow_msgs = msgs[5:25]
    miss_slow = await timed("fake/judge?latency=0.2", slow_msgs)
    hit_slow = await timed("fake/judge?latency=0.2", slow_msgs)
    emb = [f"sentence {i}" for i in range(N)]
    t = time.perf_counter()
    await gw.aembed(emb, model="fake/embed")
    emb_miss = (time.perf_counter() - t) / N
    t = time.perf_counter()
    await gw.aembed(emb, model="fake/embed")
    emb_hit = (time.perf_counter() - t) / N
    med = statistics.median
    return [
        (
            "completion, provider 0 ms",
            f"{med(miss) * 1e3:.3f}",
            f"{med(hit) * 1e3:.3f}",
            f"{med(miss) / med(hit):.0f}x",
        ),
        (
            "completion, provider 200 ms",
            f"{med(miss_slow) * 1e3:.1f}",
            f"{med(hit_slow) * 1e3:.3f}",
            f"{med(miss_slow) / med(hit_slow):.0f}x",
        ),
        (
            "embedding (per text, batch of 300)",
            f"{emb_miss * 1e3:.3f}",
            f"{emb_hit * 1e3:.3f}",
            f"{emb_miss / emb_hit:.1f}x",
        ),
    ]


if __name__ == "__main__":
    rows = asyncio.run(measure())
    print("Gateway: memo hit vs provider call (median ms per call, one run, side by side)")
    print(table(rows, ("call", "provider call ms", "memo hit ms", "provider / hit")))
