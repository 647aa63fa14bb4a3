"""The judge's limit across processes: a Prefect global concurrency limit.

Every worker of a distributed run has its own gateway and its own per-process limit; what the
provider allows is shared. Prefect's global concurrency limits hold that count on the Prefect
server, so every worker that talks to the same API takes its slots from one pool.

A slot taken per call costs two API requests (acquire and release, ~0.1 s and tens of ms of
client CPU each time; under load one request took up to 2 s). So a process leases its
*share* of the limit in one request (``size`` slots: the limit divided among the run's worker
processes, at most its own concurrency), shares it among its calls through a local count,
holds it while it has calls and gives it back after a short idle linger or when its stage
ends (:func:`give_back_leases`). The shares of one run add up to at most the limit, so its
workers never wait for one another: when each leased as many slots as it could use, the first
to ask held the whole limit and renewed it as soon as they gave it back, the others slept out
the server's Retry-After (which grows with every refusal), and a worker left waiting until the
others were done ran its batches alone, on its own concurrency, below the limit.

A request the server refuses (another run shares the limit, or more processes than slots) is
asked again after the server's Retry-After, at most :data:`RETRY_MAX_S`. The leases held never
exceed the limit on the server, and no process runs more calls than its lease holds, so the
provider never sees more than the limit across processes.
"""

from __future__ import annotations

import asyncio
import contextlib
import weakref
from collections.abc import AsyncIterator

JUDGE_LIMIT = "ragaudit-judge"
"""Name of the global concurrency limit on judge (completion) calls."""

LINGER_S = 0.05
"""How long an idle lease waits for the next call before it is given back."""

LEASE_S = 300.0
"""A lease the server takes back unless renewed (a crashed worker's slots come back then)."""

RETRY_MAX_S = 1.0
"""Longest wait before a refused lease request is made again.

The server's Retry-After grows with every refusal (up to 30 s); slots given back meanwhile
stayed idle while the processes that wanted them slept."""


async def ensure_global_limit(limit: int, name: str = JUDGE_LIMIT) -> None:
    """Create the limit ``name`` with ``limit`` slots, or set an existing one to it (active)."""
    from prefect.client.orchestration import get_client

    async with get_client() as client:
        await client.upsert_global_concurrency_limit_by_name(name, limit)


async def _take(stack: contextlib.AsyncExitStack, name: str, size: int) -> float | None:
    """Lease ``size`` slots of ``name`` into ``stack``: renewed while open, given back on close.

    The Prefect client's own requests rather than ``prefect.concurrency``'s
    ``concurrency()``, which sleeps out the server's Retry-After on a refusal (or, told not to
    retry, logs every refusal as an error) and posts two events per lease.

    Returns:
        None when granted; the server's Retry-After when all slots are taken.
    """
    from uuid import UUID

    import httpx
    from prefect.client.orchestration import get_client

    client = await stack.enter_async_context(get_client())
    try:
        response = await client.increment_concurrency_slots_with_lease(
            names=[name], slots=size, mode="concurrency", lease_duration=LEASE_S
        )
    except httpx.HTTPStatusError as exc:
        if exc.response.status_code != 423:
            raise
        return float(exc.response.headers.get("Retry-After") or 0.0)
    granted = response.json()
    if not granted.get("limits"):
        # Prefect grants nothing from a limit that does not exist; going on without one would
        # let every worker run its full concurrency.
        raise RuntimeError(f"global concurrency limit {name!r} does not exist")
    lease_id = UUID(granted["lease_id"])
    stack.push_async_callback(client.release_concurrency_slots_with_lease, lease_id)

    async def renew() -> None:
        while True:
            await asyncio.sleep(LEASE_S / 3)
            await client.renew_concurrency_lease(lease_id, LEASE_S)

    renewing = asyncio.create_task(renew())
    stack.callback(renewing.cancel)  # runs first: no renewal after the release
    return None


class _Lease:
    """One event loop's lease of a global limit: ``size`` slots held, used locally."""

    def __init__(self, name: str, size: int) -> None:
        self.name = name
        self.size = size
        self.cond = asyncio.Condition()
        self.waiting = 0  # calls that want a slot
        self.in_use = 0  # calls running on the held lease
        self.held = 0  # slots held from the server (0 or size)
        self.giving_back = False  # idle and asked to give the lease back now, not after a linger
        self.returned = 0  # leases given back (the release request done)
        self.error: BaseException | None = None
        self.holder: asyncio.Task[None] | None = None
        self.leases = 0  # leases taken (API round trips), for tests and benches
        self.refused = 0  # lease requests refused (all slots taken)

    def _can_enter(self) -> bool:
        return self.error is not None or self.in_use < self.held

    def _idle(self) -> bool:
        return self.in_use == 0 and self.waiting == 0

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
        try:
            yield
        finally:
            async with self.cond:
                self.in_use -= 1
                self.cond.notify_all()

    async def give_back(self) -> None:
        """Give an idle held lease back now, and wait until the server has it."""
        async with self.cond:
            if self.held == 0 or not self._idle():
                return  # nothing held, or calls of this loop still use it: they give it back
            returned = self.returned
            self.giving_back = True
            self.cond.notify_all()
            await self.cond.wait_for(
                lambda: self.returned > returned or self.holder is None or self.holder.done()
            )

    async def _hold(self) -> None:
        """Hold the lease while this loop has calls."""
        try:
            while True:
                async with self.cond:
                    if self.waiting == 0:
                        return
                async with contextlib.AsyncExitStack() as stack:
                    wait = await _take(stack, self.name, self.size)
                    if wait is not None:
                        self.refused += 1
                        await asyncio.sleep(min(wait, RETRY_MAX_S))
                        continue
                    self.leases += 1
                    async with self.cond:
                        self.held = self.size
                        self.cond.notify_all()
                        try:
                            while True:
                                await self.cond.wait_for(self._idle)
                                # Idle: a call that follows at once keeps the lease. Whether it
                                # is still idle is asked again under the lock: a call may have
                                # come in (and be running) while this waited.
                                with contextlib.suppress(TimeoutError):
                                    await asyncio.wait_for(
                                        self.cond.wait_for(
                                            lambda: not self._idle() or self.giving_back
                                        ),
                                        LINGER_S,
                                    )
                                if self._idle():
                                    break
                        finally:
                            # No call is admitted onto the lease from here: it is on its way
                            # back (the stack releases it).
                            self.held = 0
                async with self.cond:
                    self.returned += 1
                    self.giving_back = False
                    self.cond.notify_all()
        except BaseException as exc:
            async with self.cond:
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
        leases[key] = _Lease(name, size)
    return leases[key]


@contextlib.asynccontextmanager
async def global_slot(name: str = JUDGE_LIMIT, size: int = 1) -> AsyncIterator[None]:
    """Hold one slot of the global limit ``name`` for the block (waits while all are taken).

    Args:
        name: the global concurrency limit.
        size: slots this process leases at once (its share of the limit) and shares among
            its calls; at most the limit (a larger lease could never be granted).
    """
    async with _lease(name, max(1, size)).slot():
        yield


async def give_back_leases() -> None:
    """Give back every idle lease this event loop holds, before the loop ends.

    A lease lingers after its last call in case another follows. A task that ended within
    the linger left its lease to the loop's teardown, where Prefect's client was already
    closed: the release failed and the slots stayed taken until the lease expired (300 s),
    so the limit shrank by a lease for every batch that ended that way.
    """
    for lease in list(_LEASES.get(asyncio.get_running_loop(), {}).values()):
        await lease.give_back()


def leases_taken(name: str = JUDGE_LIMIT) -> int:
    """Leases this event loop has taken from ``name`` so far (each one acquire + release)."""
    leases = _LEASES.get(asyncio.get_running_loop(), {})
    return sum(lease.leases for (n, _), lease in leases.items() if n == name)


__all__ = [
    "JUDGE_LIMIT",
    "ensure_global_limit",
    "give_back_leases",
    "global_slot",
    "leases_taken",
]
