"""The judge's limit across processes: a Prefect global concurrency limit.

Every worker of a distributed run has its own gateway and its own per-process limit; what the
provider allows is shared. Prefect's global concurrency limits hold that count on the Prefect
server, so every worker that talks to the same API takes its slots from one pool.

A slot taken per call costs two API requests (acquire and release, ~0.1 s and tens of ms of
client CPU each time), and a call refused by a full limit sleeps out the server's Retry-After,
which grows with the number of refused requests. So a process leases its slots in bulk: one
request takes ``size`` slots (the process's own concurrency, at most the limit) and holds them
for a window of calls that share them through a local count; the lease is given back when the
window is used up or the process has no more calls waiting, so other processes get their turn.
The sum of leases never exceeds the limit, and no process runs more calls than its lease holds,
so the provider never sees more than the limit across processes.
"""

from __future__ import annotations

import asyncio
import contextlib
import weakref
from collections.abc import AsyncIterator

JUDGE_LIMIT = "ragaudit-judge"
"""Name of the global concurrency limit on judge (completion) calls."""

WINDOW_ROUNDS = 4
"""A lease serves ``WINDOW_ROUNDS * size`` calls before it goes back to the server."""

LINGER_S = 0.05
"""How long an idle lease waits for the next call before it is given back."""


async def ensure_global_limit(limit: int, name: str = JUDGE_LIMIT) -> None:
    """Create the limit ``name`` with ``limit`` slots, or set an existing one to it (active)."""
    from prefect.client.orchestration import get_client

    async with get_client() as client:
        await client.upsert_global_concurrency_limit_by_name(name, limit)


class _Lease:
    """One event loop's share of a global limit: a held lease of ``size`` slots, used locally."""

    def __init__(self, name: str, size: int, window: int) -> None:
        self.name = name
        self.size = size
        self.window = window
        self.cond = asyncio.Condition()
        self.waiting = 0  # calls that want a slot
        self.in_use = 0  # calls running on the held lease
        self.held = 0  # slots held from the server (0 or size)
        self.admitted = 0  # calls admitted in the current window
        self.draining = False  # window used up: admit no more until the lease is renewed
        self.error: BaseException | None = None
        self.holder: asyncio.Task[None] | None = None
        self.leases = 0  # leases taken (API round trips), for tests and benches

    def _can_enter(self) -> bool:
        return self.error is not None or (
            self.held > 0 and self.in_use < self.held and not self.draining
        )

    @contextlib.asynccontextmanager
    async def slot(self) -> AsyncIterator[None]:
        async with self.cond:
            self.waiting += 1
            try:
                if self.holder is None or self.holder.done():
                    self.error = None
                    self.holder = asyncio.create_task(self._hold())
                self.cond.notify_all()
                await self.cond.wait_for(self._can_enter)
            finally:
                self.waiting -= 1
            if self.error is not None:
                raise self.error
            self.in_use += 1
            self.admitted += 1
            if self.admitted >= self.window:
                self.draining = True
        try:
            yield
        finally:
            async with self.cond:
                self.in_use -= 1
                self.cond.notify_all()

    def _idle(self) -> bool:
        return self.in_use == 0 and self.waiting == 0

    def _done(self) -> bool:
        return self.in_use == 0 and (self.draining or self.waiting == 0)

    async def _hold(self) -> None:
        from prefect.concurrency.asyncio import concurrency

        try:
            while True:
                async with self.cond:
                    if self.waiting == 0:
                        return
                # strict: a missing limit is an error, not silently no limit at all.
                async with concurrency(self.name, occupy=self.size, strict=True):
                    self.leases += 1
                    async with self.cond:
                        self.held, self.admitted, self.draining = self.size, 0, False
                        self.cond.notify_all()
                        while True:
                            await self.cond.wait_for(self._done)
                            if self.draining:
                                break
                            # Idle: a call that follows at once keeps the lease. Whether it
                            # is still idle is asked again under the lock: a call may have come
                            # in (and be running) while this waited.
                            with contextlib.suppress(TimeoutError):
                                await asyncio.wait_for(
                                    self.cond.wait_for(lambda: not self._idle()), LINGER_S
                                )
                            if self._idle():
                                break
                        self.held = 0
        except BaseException as exc:
            async with self.cond:
                self.held = 0
                self.error = exc
                self.cond.notify_all()
            if not isinstance(exc, Exception):
                raise


_LEASES: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[tuple[str, int], _Lease]] = (
    weakref.WeakKeyDictionary()
)


def _lease(name: str, size: int) -> _Lease:
    loop = asyncio.get_running_loop()
    leases = _LEASES.setdefault(loop, {})
    key = (name, size)
    if key not in leases:
        leases[key] = _Lease(name, size, WINDOW_ROUNDS * size)
    return leases[key]


@contextlib.asynccontextmanager
async def global_slot(name: str = JUDGE_LIMIT, size: int = 1) -> AsyncIterator[None]:
    """Hold one slot of the global limit ``name`` for the block (waits while all are taken).

    Args:
        name: the global concurrency limit.
        size: slots this process leases at once and shares among its calls; at most the
            limit (a larger lease could never be granted).
    """
    async with _lease(name, max(1, size)).slot():
        yield


def leases_taken(name: str = JUDGE_LIMIT) -> int:
    """Leases this event loop has taken from ``name`` so far (each one acquire + release)."""
    leases = _LEASES.get(asyncio.get_running_loop(), {})
    return sum(lease.leases for (n, _), lease in leases.items() if n == name)


__all__ = ["JUDGE_LIMIT", "ensure_global_limit", "global_slot", "leases_taken"]
