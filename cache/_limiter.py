"""An adaptive per-model concurrency limit: halve on overload, grow back on success (AIMD).

Providers rarely publish how many calls they take at once, and what they take changes with
their load. Like promptfoo and Phoenix, the gateway starts at the configured concurrency,
halves it when the provider's rate limits say it is overloaded (never below 1), and after
``limit`` successes in a row allows one call more, up to the configured maximum. Retry-After
is honoured by the gateway outside the limit: a call waiting it out holds no slot.

Not every rate limit says the provider is overloaded. A provider also refuses a share of calls
whatever the load (a shared pool, a token budget per minute, a flaky front end); that share is
the same at any limit, so halving for it buys nothing, and halving on every such refusal drove
the limit to 1 and kept it near there: at 30 % such refusals, a batch ran at 2.3x the wall of
the same batch without them. So the limit halves only on evidence that our load causes the
refusals, and only calls handed a slot since the limit last changed count (the calls in
flight when the provider pushed back were admitted under the old limit: their refusals say
nothing about the new one, TCP's one decrease per round trip). The evidence is either of:

- **Most recent calls refused** — more than two in three of the last ``2 * limit`` calls
  (:data:`MIN_WINDOW` at least). A provider far over its capacity refuses every call past it,
  at once, and the slot that call frees goes to the next one, refused in turn; refusals that
  come whatever the load leave most calls answered (at 30 %, 11 refusals in 16 calls happen
  0.03 % of the time). This meets a limit configured far above what the provider takes,
  before anything else is known. Once the limit has been lowered, and while no call has been
  made at a lower limit, one in two is enough: a limit still at twice a quota sees about that.
- **Refused more often than at the limits below** — than among the calls made at lower limits
  (the background), significantly (one-sided test at 1 %). A step up past a quota draws more
  refusals than the limits under it; refusals that come whatever the load are as common at
  every limit.

Growing needs successes *in a row*, as in plain AIMD. Counting successes since the last change
instead (so that refusals whatever the load do not hold growth back) was tried: just over a
quota the provider still answers most calls (the client's own time per call leaves it room),
so with 30 % refusals on top the limit climbed step by step to twice the quota, and each step
made the background it is judged against look worse. A step the provider refused is tried
again after twice as many successes as the time before (up to :data:`MAX_PATIENCE` times),
so a quota once found is not probed every few calls.

What is left: a provider that refuses more than two calls in three whatever the load is taken
as overloaded (the limit falls to 1, the polite thing to do there anyway); and when the
client's own time per call is close to the provider's latency (50 ms calls on a loaded
2-core machine), refusals past a quota are too few to tell from a 30 % background quickly, and
with both the limit can sit above the quota for a while.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import math
from dataclasses import dataclass

log = logging.getLogger("ragaudit.gateway")

#: Fewest calls "most recent calls refused" is judged on: at 30 % refusals whatever the load,
#: 3 of 4 calls are refused 8 % of the time, 6 of 8 only 1 %.
MIN_WINDOW = 8
#: One-sided z (1 %) for "refused more often than at the limits below".
Z_OVERLOAD = 2.33
#: Calls counted per unit of the configured maximum before older ones count half, so that the
#: background follows a provider whose refusals change.
BACKGROUND_CALLS = 16
#: The most times ``limit`` successes a step the provider refused waits for.
MAX_PATIENCE = 8


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
    """A semaphore whose capacity halves on overload and grows back by one on success.

    Waiters are plain futures of the running loop, dropped as soon as they are served: an idle
    limiter holds no reference to any event loop. (``asyncio.Condition`` binds itself to its
    loop for good, which would keep a dead loop alive through the gateway's per-loop map.)

    Calls are numbered as they are admitted (:meth:`acquire` returns the number): the rules
    count calls, not seconds, so they are the same on a slow machine and a test can drive the
    limiter call by call.

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
        self._admitted = 0
        # Since the limit last changed: when (in admissions), the refused calls' numbers
        # (oldest first, dropped once out of the window), refusals and successes in a row.
        self._changed_at = 0
        self._changes = 0
        # Calls handed their slot before the last change but numbered after it (a waiter is
        # numbered when it resumes, so that calls not yet sent do not dilute the window).
        self._stale: set[int] = set()
        self._refused: collections.deque[int] = collections.deque()
        self._refusals = 0
        self._successes = 0
        self._lowered = False
        # Calls admitted at each limit, and their refusals: below the limit, the background.
        self._calls_at = [0] * (self.maximum + 1)
        self._refusals_at = [0] * (self.maximum + 1)
        # The last step up the provider refused, and how many times ``limit`` successes the
        # next try of it waits for.
        self._refused_step = 0
        self._patience = 1
        self._waiters: collections.deque[asyncio.Future[int]] = collections.deque()

    @property
    def in_use(self) -> int:
        """Calls holding a slot now."""
        return self._in_use

    async def acquire(self) -> int:
        """Wait for a slot; returns the call's number (pass it to :meth:`release`)."""
        if self._in_use < self.limit and not self._waiters:
            self._in_use += 1
            self._admitted += 1
            return self._admitted
        waiter: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            handed_at = await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():
                # Woken with a slot and cancelled before using it: pass the slot on.
                self._in_use -= 1
                self._wake()
            raise
        finally:
            with contextlib.suppress(ValueError):
                self._waiters.remove(waiter)
        # Numbered when it is sent, but a slot handed over under the old limit is the old
        # limit's: its refusal says nothing about the new one.
        self._admitted += 1
        if handed_at != self._changes:
            self._stale.add(self._admitted)
        return self._admitted

    def release(self, call: int, *, rate_limited: bool = False, ok: bool = False) -> None:
        """Give the slot back, saying how the call went.

        Args:
            call: what :meth:`acquire` returned.
            rate_limited: the provider refused the call as over its rate limit.
            ok: the provider answered.
        """
        self._in_use -= 1
        current = call > self._changed_at and call not in self._stale
        self._stale.discard(call)
        if rate_limited:
            self.stats.rate_limits += 1
            if current:
                self._refused_now(call)
        elif ok and current:
            self._successes += 1
            if self._may_grow():
                if self.limit == self._refused_step:
                    self._refused_step, self._patience = 0, 1  # it went through this time
                self._change(self.limit + 1, f"{self._successes} successes", decrease=False)
                self.stats.increases += 1
        self._wake()

    def _refused_now(self, call: int) -> None:
        self._refused.append(call)
        self._refusals += 1
        self._successes = 0
        if self.limit == 1:
            return
        background = self._background()
        if why := self._most_refused():
            self._change(max(1, self.limit // 2), why, decrease=True)
        elif background[0] and self._above(background, Z_OVERLOAD):
            # A step the provider refused: try it again less often.
            same = self._refused_step == self.limit
            self._patience = min(MAX_PATIENCE, 2 * self._patience) if same else 2
            self._refused_step = self.limit
            why = (
                f"{self._refusals} of {self._admitted - self._changed_at} calls rate limited, "
                f"{background[1]} of {background[0]} at the limits below"
            )
            self._change(max(1, self.limit // 2), why, decrease=True)
        else:
            return
        self.stats.decreases += 1

    def _most_refused(self) -> str:
        """``"k of the last n calls rate limited"`` if that is most of them, else ``""``."""
        start = max(self._changed_at, self._admitted - max(2 * self.limit, MIN_WINDOW))
        while self._refused and self._refused[0] <= start:
            self._refused.popleft()
        # Refusals come back in about the order their calls were admitted, not exactly.
        refused = sum(call > start for call in self._refused)
        calls = self._admitted - start
        share = 1 / 2 if self._lowered and not self._background()[0] else 2 / 3
        if refused > share * max(calls, MIN_WINDOW):
            return f"{refused} of the last {calls} calls rate limited"
        return ""

    def _background(self) -> tuple[int, int]:
        """Calls admitted at the limits below this one, and their refusals."""
        return sum(self._calls_at[: self.limit]), sum(self._refusals_at[: self.limit])

    def _above(self, background: tuple[int, int], z: float) -> bool:
        """More refusals since the last change than the background explains (normal approx.).

        Calls still in flight count as answered: refusals come back first, and a step must not
        be blamed for that head start. Laplace's rule of succession gives the background's
        share, so a few refusal-free calls are not read as a share of zero.
        """
        calls = self._admitted - self._changed_at
        share = (background[1] + 1) / (background[0] + 2)
        excess = self._refusals - 0.5 - calls * share
        return excess > z * math.sqrt(calls * share * (1 - share))

    def _may_grow(self) -> bool:
        if self.limit >= self.maximum:
            return False
        patience = self._patience if self.limit + 1 == self._refused_step else 1
        return self._successes >= self.limit * patience

    def _change(self, limit: int, why: str, *, decrease: bool) -> None:
        log.info("%s: concurrency %d -> %d (%s)", self.model, self.limit, limit, why)
        self._lowered = self._lowered or decrease
        # Every phase counts, however it ended: keeping only the phases that grew would make
        # the background the share of the luckiest ones.
        self._calls_at[self.limit] += self._admitted - self._changed_at
        self._refusals_at[self.limit] += self._refusals
        if sum(self._calls_at) > BACKGROUND_CALLS * self.maximum:
            self._calls_at = [n // 2 for n in self._calls_at]
            self._refusals_at = [n // 2 for n in self._refusals_at]
        self._changed_at = self._admitted
        self._changes += 1
        self._refused.clear()
        self._refusals = self._successes = 0
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
                waiter.set_result(self._changes)


__all__ = ["AdaptiveLimiter", "LimitStats"]
