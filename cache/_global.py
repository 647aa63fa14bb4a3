"""The judge's limit across processes: a Prefect global concurrency limit.

Every worker of a distributed run has its own gateway and its own per-process limit; what the
provider allows is shared. Prefect's global concurrency limits hold that count on the Prefect
server, so every worker that talks to the same API takes its slots from one pool.

A slot taken per call costs two API requests (acquire and release, each a round trip and
client CPU, and slow under load). So a process leases its
*share* of the limit in one request (``size`` slots: the limit divided among the run's worker
processes, at most its own concurrency), shares it among its calls through a local count,
holds it while it has calls and gives it back after a short idle linger or when its stage
ends (:func:`give_back_leases`). The shares of one run add up to at most the limit, so its
workers do not wait for one another: when each leased as many slots as it could use, the
first to ask held the whole limit while the others slept out the server's Retry-After.

A request the server refuses (the limit is taken) is asked again after the server's
Retry-After, at most :data:`RETRY_MAX_S`, while calls still wait; one it could not serve
(busy) after :data:`BUSY_RETRY_S`. The leases held never exceed the limit on the server, and
no process runs more calls than its lease holds, so the provider never sees more than the
limit across processes.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import weakref
from collections.abc import AsyncIterator
from typing import Any

JUDGE_LIMIT = "ragaudit-judge"
"""Name of the global concurrency limit on judge (completion) calls."""

LINGER_S = 0.05
"""How long an idle lease waits for the next call before it is given back."""

LEASE_S = 300.0
"""A lease the server takes back unless renewed (a crashed worker's slots come back then)."""

BUSY_RETRY_S = 0.1
"""First wait before a lease request the server could not serve (503: busy, or no answer
within :data:`REQUEST_TIMEOUT_S`) is made again; it doubles while the server stays busy."""

REQUEST_TIMEOUT_S = 10.0
"""Longest wait for the server's answer to a lease request before it is made again."""

RETRY_MAX_S = 0.5
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
        None when granted; else how long to wait before asking again: the server's
        Retry-After when all slots are taken, :data:`BUSY_RETRY_S` when it was busy.
    """
    from uuid import UUID

    import httpx
    from prefect.client.orchestration import get_client

    client = await stack.enter_async_context(get_client())
    try:
        response = await _increment(client, name, size)
    except (httpx.TimeoutException, httpx.NetworkError, httpx.RemoteProtocolError):
        return BUSY_RETRY_S  # what the Prefect client retries: asked again here
    if response.status_code == 423:
        return float(response.headers.get("Retry-After") or 0.0)
    if response.status_code == 503:
        return BUSY_RETRY_S
    response.raise_for_status()
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


async def _increment(client: Any, name: str, size: int) -> Any:
    """Ask the server for ``size`` slots of ``name`` on a lease; its response, refusals included.

    Sent past the Prefect client's own retries. A server busy writing (SQLite locked while
    task runs record their states, as at every batch's start and end) answers 503 in a
    fraction of a second, and the client then slept 2 s before asking again and 4 s more
    after a second 503, while the slots asked for were free, with the process's calls waiting. A
    503 here is asked again after :data:`BUSY_RETRY_S`, doubling while it lasts.
    """
    import httpx

    http = client._client  # the client's httpx client: base URL, auth, headers
    request = http.build_request(
        "POST",
        "/v2/concurrency_limits/increment-with-lease",
        json={"names": [name], "slots": size, "mode": "concurrency", "lease_duration": LEASE_S},
        timeout=REQUEST_TIMEOUT_S,
    )
    if http.enable_csrf_support:
        await http._add_csrf_headers(request=request)
    return await httpx.AsyncClient.send(http, request)


class _Lease:
    """One event loop's lease of a global limit: ``size`` slots, shared among its calls.

    Taken when a call wants a slot, held while calls come, given back after the idle linger
    (or at once by :meth:`give_back`). The lease is the loop's share of the limit and never
    more: loops that took further leases whenever their calls waited (the limit idled when
    other processes were between batches) ran slower on a benchmark whose batches divided
    evenly over the workers (1.17-1.20x the ideal wall against 1.11-1.14x with shares
    alone): a share given back at a batch's end was taken as another's further lease, and
    the process's next batch was refused until that lease was yielded, seconds later.
    """

    def __init__(self, name: str, size: int) -> None:
        self.name = name
        self.size = size
        self.cond = asyncio.Condition()
        self.waiting = 0  # calls that want a slot
        self.in_use = 0  # calls running on the lease
        self.held = 0  # slots held from the server: 0 or size
        self.holder: asyncio.Task[None] | None = None  # holds the lease, or asks for it
        self.giving_back = False  # idle and asked to give the lease back now, not after a linger
        self.error: BaseException | None = None
        self.leases = 0  # leases taken (API round trips), for tests and benches
        self.refused = 0  # lease requests refused (all slots taken, or the server busy)

    def _can_enter(self) -> bool:
        return self.error is not None or self.in_use < self.held

    def _idle(self) -> bool:
        return self.in_use + self.waiting == 0

    @contextlib.asynccontextmanager
    async def slot(self) -> AsyncIterator[None]:
        async with self.cond:
            self.waiting += 1
            try:
                if self.holder is None or self.holder.done():
                    self.error = None
                    self.holder = asyncio.create_task(self._hold())
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
            holder = self.holder
            if holder is None or holder.done() or not self._idle():
                return  # nothing held, or calls of this loop still use it: they give it back
            self.giving_back = True
            self.cond.notify_all()
        try:
            await asyncio.wait({holder})
        finally:
            async with self.cond:
                self.giving_back = False

    async def _hold(self) -> None:
        """Take the lease (asking again while refused), hold it while calls come."""
        streak = 0  # requests refused in a row
        try:
            while True:
                async with self.cond:
                    if self._idle():
                        return  # the calls that wanted it are gone
                async with contextlib.AsyncExitStack() as stack:
                    wait = await _take(stack, self.name, self.size)
                    if wait is not None:
                        # Spread out, and slower while refused: every request of every
                        # process that wants slots reaches a server that may be busy writing.
                        self.refused += 1
                        streak += 1
                        backoff = min(wait * 2 ** min(streak - 1, 4), RETRY_MAX_S)
                        await asyncio.sleep(backoff * random.uniform(0.5, 1.5))
                        continue
                    streak = 0
                    self.leases += 1
                    async with self.cond:
                        self.held = self.size
                        self.cond.notify_all()
                        try:
                            await self._keep()
                        finally:
                            # No call is admitted onto these slots from here: they are on
                            # their way back (the stack releases them).
                            self.held = 0
                            self.cond.notify_all()
                # Given back: calls that came in while it went back take it again.
        except BaseException as exc:
            async with self.cond:
                self.error = exc
                self.cond.notify_all()
            if not isinstance(exc, Exception):
                raise

    async def _keep(self) -> None:
        """Under the lock, with the lease held: wait until no call has wanted it for the linger.

        Whether the loop is idle is asked again under the lock after the linger: calls may
        have come in (and be running) meanwhile, and they keep the lease.
        """
        while True:
            await self.cond.wait_for(self._idle)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(
                    self.cond.wait_for(lambda: not self._idle() or self.giving_back), LINGER_S
                )
            if self._idle():
                return


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
