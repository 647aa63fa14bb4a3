"""A caller sharing an identical call in flight leaves nothing for asyncio to complain about.

With the Redis memo lost mid-run a successful run printed ``ERROR | asyncio - Future exception
was never retrieved … RuntimeError('the call was cancelled')``: a waiter that shares another
caller's call was cancelled, then the owner was; the owner's failure reached the waiter's
wrapped future after the waiter had gone, and nobody read it.
"""

from __future__ import annotations

import asyncio
import gc
from pathlib import Path
from typing import Any

from ragaudit.cache import Gateway

MSGS = [{"role": "user", "content": "What is the capital of France?"}]
EMBED = "fake/embed?latency=30"


async def _settle() -> None:
    for _ in range(5):
        gc.collect()
        await asyncio.sleep(0)


async def _cancel_waiter_then_owner(start: Any, gateway: Gateway) -> list[dict[str, Any]]:
    loop = asyncio.get_running_loop()
    seen: list[dict[str, Any]] = []
    loop.set_exception_handler(lambda _loop, context: seen.append(context))
    try:
        owner = asyncio.ensure_future(start())
        while not gateway._inflight:  # the owner has claimed the call
            await asyncio.sleep(0)
        waiter = asyncio.ensure_future(start())
        for _ in range(20):  # the waiter reaches the shared call (it has nothing else to await)
            await asyncio.sleep(0)
        waiter.cancel()
        await asyncio.gather(waiter, return_exceptions=True)
        owner.cancel()
        await asyncio.gather(owner, return_exceptions=True)
        del owner, waiter
        await _settle()
    finally:
        loop.set_exception_handler(None)
    return seen


async def test_completion_waiter_cancelled_before_the_owner(tmp_path: Path) -> None:
    gateway = Gateway(tmp_path / "memo", concurrency=4, backoff_s=0.0, max_retries=1)
    try:

        async def start() -> Any:
            return await gateway.acompletion(model="fake/judge?latency=30", messages=MSGS)

        seen = await _cancel_waiter_then_owner(start, gateway)
    finally:
        gateway.close()
    assert [str(c.get("message")) for c in seen] == []


async def test_embedding_waiter_cancelled_before_the_owner(tmp_path: Path) -> None:
    gateway = Gateway(tmp_path / "memo", concurrency=4, backoff_s=0.0, max_retries=1)
    try:

        async def start() -> Any:
            return await gateway.aembed(["Paris"], model=EMBED)

        seen = await _cancel_waiter_then_owner(start, gateway)
    finally:
        gateway.close()
    assert [str(c.get("message")) for c in seen] == []
