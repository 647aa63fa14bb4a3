"""An adaptive per-model concurrency limit: halve on a rate limit, grow back on success (AIMD).

Providers rarely publish how many calls they take at once, and what they take changes with
their load. Like promptfoo and Phoenix, the gateway starts at the configured concurrency,
halves it on every rate limit (never below 1), and after ``limit`` successes in a row allows
one call more, up to the configured maximum.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
from dataclasses import dataclass

log = logging.getLogger("ragaudit.gateway")


@dataclass
class LimitStats:
    """What a model's limit went through in one gateway (over every event loop)."""

    configured: int
    lowest: int
    final: int
    rate_limits: int = 0
    decreases: int = 0
    increases: int = 0

    def as_dict(self) -> dict[str, int]:
        """The report row of the model."""
        return {
            "configured": self.configured,
            "min": self.lowest,
            "final": self.final,
            "rate_limits": self.rate_limits,
            "decreases": self.decreases,
            "increases": self.increases,
        }


class AdaptiveLimiter:
    """A semaphore whose capacity halves on a rate limit and grows back by one on success.

    Waiters are plain futures of the running loop, dropped as soon as they are served: an idle
    limiter holds no reference to any event loop. (``asyncio.Condition`` binds itself to its
    loop for good, which would keep a dead loop alive through the gateway's per-loop map.)

    Only a rate limit seen by a call admitted *after* the last decrease halves again: the calls
    already in flight when the provider pushed back will mostly be pushed back too, and that is
    one signal, not one per call (TCP's one decrease per round trip).

    Args:
        model: the model string, for the log.
        maximum: the configured concurrency, where the limit starts and which it never passes.
        stats: where the lowest and final limits are recorded.
    """

    def __init__(self, model: str, maximum: int, stats: LimitStats) -> None:
        self.model = model
        self.maximum = max(1, maximum)
        self.limit = self.maximum
        self.stats = stats
        self._in_use = 0
        self._successes = 0
        self._epoch = 0
        self._waiters: collections.deque[asyncio.Future[None]] = collections.deque()

    @property
    def in_use(self) -> int:
        """Calls holding a slot now."""
        return self._in_use

    async def acquire(self) -> int:
        """Wait for a slot; returns the epoch it was granted in (pass it to :meth:`release`)."""
        if self._in_use < self.limit and not self._waiters:
            self._in_use += 1
            return self._epoch
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():
                # Woken with a slot and cancelled before using it: pass the slot on.
                self._in_use -= 1
                self._wake()
            raise
        finally:
            with contextlib.suppress(ValueError):
                self._waiters.remove(waiter)
        return self._epoch

    def release(self, epoch: int, *, rate_limited: bool = False, ok: bool = False) -> None:
        """Give the slot back, saying how the call went.

        Args:
            epoch: what :meth:`acquire` returned.
            rate_limited: the provider refused the call as over its rate limit.
            ok: the provider answered.
        """
        self._in_use -= 1
        if rate_limited:
            self.stats.rate_limits += 1
            self._successes = 0
            if epoch == self._epoch and self.limit > 1:
                self._set(max(1, self.limit // 2), "rate limited")
                self.stats.decreases += 1
                self._epoch += 1
        elif ok:
            self._successes += 1
            if self._successes >= self.limit and self.limit < self.maximum:
                self._successes = 0
                self._set(self.limit + 1, f"{self.limit} successes in a row")
                self.stats.increases += 1
        self._wake()

    def _set(self, limit: int, why: str) -> None:
        log.info("%s: concurrency %d -> %d (%s)", self.model, self.limit, limit, why)
        self.limit = limit
        self.stats.final = limit
        self.stats.lowest = min(self.stats.lowest, limit)

    def _wake(self) -> None:
        # A slot is counted as taken the moment it is handed over, so a burst of releases never
        # admits more waiters than the limit.
        while self._waiters and self._in_use < self.limit:
            waiter = self._waiters.popleft()
            if not waiter.done():
                self._in_use += 1
                waiter.set_result(None)


__all__ = ["AdaptiveLimiter", "LimitStats"]
