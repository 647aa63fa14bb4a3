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
workers do not wait for one another to start: when each leased as many slots as it could use,
the first to ask held the whole limit while the others slept out the server's Retry-After.
A share alone left slots idle, though, whenever another worker had nothing to run (between
batches, or done with its own while one worker still had a batch): so a process whose calls
wait beyond its share asks for further leases of the same size, up to its own concurrency,
and gives each back as soon as its calls no longer need it. A further lease may be another
process's share, taken while that process was idle: it is yielded after
:data:`EXTRA_HOLD_S` and asked for again only after a pause, so a process refused meanwhile
gets its share back within a few seconds rather than after the other's batch.

A request the server refuses (the limit is taken) is asked again after the server's
Retry-After, at most :data:`RETRY_MAX_S`, while calls still wait. The leases held never
exceed the limit on the server, and no process runs more calls than its leases hold, so the
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

EXTRA_HOLD_S = 3.0
"""How long a lease held beside others is kept while calls want it before it is yielded."""

EXTRA_RETRY_S = 2.0
"""Longest wait before a refused request for a further lease (beyond the first) is made again."""

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
    """One event loop's leases of a global limit: ``size`` slots each, up to ``most`` slots.

    The first lease is the loop's share of the limit. While more of its calls wait than its
    leases hold, another lease is asked for (refused while the limit is taken): so the limit
    stays in use when other processes have nothing to run (one process still at work, the
    others between or after their batches) instead of idling beside calls that wait. A lease
    its calls no longer need (the others hold every call running and waiting) goes back after
    the linger, so other processes get the slots; a further lease is yielded now and then
    (:meth:`_keep`).
    """

    def __init__(self, name: str, size: int, most: int) -> None:
        self.name = name
        self.size = size
        self.most = max(size, most)
        self.cond = asyncio.Condition()
        self.waiting = 0  # calls that want a slot
        self.in_use = 0  # calls running on the held leases
        self.held = 0  # slots held from the server (a multiple of size)
        self.closing = 0  # held slots being yielded: no call is admitted onto them
        self.holders: set[asyncio.Task[None]] = set()  # one per lease held or asked for
        self.giving_back = False  # idle and asked to give the leases back now, not after a linger
        self.error: BaseException | None = None
        self.leases = 0  # leases taken (API round trips), for tests and benches
        self.refused = 0  # lease requests refused (all slots taken)

    def _can_enter(self) -> bool:
        return self.error is not None or self.in_use < self.held - self.closing

    def _demand(self) -> int:
        return self.in_use + self.waiting

    def _idle(self) -> bool:
        return self._demand() == 0

    def _spare(self) -> bool:
        # The other leases hold every call running and waiting: one can go back without a
        # running call being left on slots the server no longer counts.
        return self.held > 0 and self._demand() <= self.held - self.size

    def _ask_more(self) -> None:
        """Under the lock: start a holder when calls want more than the leases held or asked."""
        self.holders = {t for t in self.holders if not t.done()}
        if not self.holders:
            self.error = None
        asked = self.size * len(self.holders)
        if self._demand() > asked and asked + self.size <= self.most:
            self.holders.add(asyncio.create_task(self._hold()))

    @contextlib.asynccontextmanager
    async def slot(self) -> AsyncIterator[None]:
        async with self.cond:
            self.waiting += 1
            try:
                self._ask_more()
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
        """Give idle held leases back now, and wait until the server has them."""
        async with self.cond:
            holders = {t for t in self.holders if not t.done()}
            if not holders or not self._idle():
                return  # nothing held, or calls of this loop still use it: they give it back
            self.giving_back = True
            self.cond.notify_all()
        try:
            await asyncio.wait(holders)
        finally:
            async with self.cond:
                self.giving_back = False

    async def _hold(self) -> None:
        """Hold one lease while this loop's calls need it."""
        try:
            pause = False
            while True:
                if pause:
                    # After yielding a further lease: a process refused its share meanwhile
                    # asks again within this pause (it asks every RETRY_MAX_S), before this
                    # one does; short, as in a run's tail nobody else wants the slots.
                    await asyncio.sleep(2 * RETRY_MAX_S)
                    pause = False
                async with self.cond:
                    if self._demand() <= self.held:
                        return  # what is held serves every call: this lease is not needed
                    # A loop without a lease asks for its share again soon; one asking for a
                    # further lease less often: the slots it wants are mostly other loops'
                    # shares, and every refusal costs the Prefect server a request.
                    retry = RETRY_MAX_S if self.held == 0 else EXTRA_RETRY_S
                async with contextlib.AsyncExitStack() as stack:
                    wait = await _take(stack, self.name, self.size)
                    if wait is not None:
                        self.refused += 1
                        await asyncio.sleep(min(wait, retry))
                        continue
                    self.leases += 1
                    async with self.cond:
                        self.held += self.size
                        self.cond.notify_all()
                        try:
                            pause = await self._keep()
                        finally:
                            # No call is admitted onto these slots from here: they are on
                            # their way back (the stack releases them).
                            self.held -= self.size
                            self.cond.notify_all()
        except BaseException as exc:
            async with self.cond:
                self.error = exc
                self.cond.notify_all()
            if not isinstance(exc, Exception):
                raise

    async def _keep(self) -> bool:
        """Under the lock, with the lease held: wait until it may go back.

        A lease goes back once it is spare (after the linger). One held beside others is
        yielded after :data:`EXTRA_HOLD_S` even while calls want it: it may be another
        process's share, taken while that process was idle, and that process is refused
        until the slots come back; so they come back, and are asked for again after a pause.

        Returns:
            Whether the lease was yielded while calls still wanted it.
        """
        loop = asyncio.get_running_loop()
        until = loop.time() + EXTRA_HOLD_S
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(
                    self.cond.wait_for(self._spare), max(0.0, until - loop.time())
                )
            if self._spare():
                # Spare: a call that follows at once keeps the lease. Whether it is still
                # spare is asked again under the lock: calls may have come in (and be
                # running) while this waited.
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(
                        self.cond.wait_for(lambda: not self._spare() or self.giving_back),
                        LINGER_S,
                    )
                if self._spare():
                    return False
                continue
            if self.held <= self.size:
                until = loop.time() + EXTRA_HOLD_S  # the only lease held: the loop's share
                continue
            # Yield: admit no call onto these slots, and let the calls on them finish.
            self.closing += self.size
            try:
                await self.cond.wait_for(lambda: self.in_use <= self.held - self.size)
            finally:
                self.closing -= self.size
            return True


_LEASES: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[tuple[str, int], _Lease]] = (
    weakref.WeakKeyDictionary()
)


def _lease(name: str, size: int, most: int | None = None) -> _Lease:
    loop = asyncio.get_running_loop()
    leases = _LEASES.setdefault(loop, {})
    key = (name, size)
    if key not in leases:
        leases[key] = _Lease(name, size, most or size)
    return leases[key]


@contextlib.asynccontextmanager
async def global_slot(
    name: str = JUDGE_LIMIT, size: int = 1, most: int | None = None
) -> AsyncIterator[None]:
    """Hold one slot of the global limit ``name`` for the block (waits while all are taken).

    Args:
        name: the global concurrency limit.
        size: slots this process leases at once (its share of the limit) and shares among
            its calls; at most the limit (a larger lease could never be granted).
        most: slots this event loop may hold at once, in further leases of ``size`` while its
            calls wait and the limit has slots free (None: one lease).
    """
    async with _lease(name, max(1, size), most).slot():
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
