"""The adaptive per-model limit: halve on overload, not on refusals whatever the load; grow back,
report and log."""

from __future__ import annotations

import asyncio
import collections
import logging
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ragaudit.cache import AdaptiveLimiter, Gateway, LimitStats
from ragaudit.cache._fake import FakeOptions, FakeRequest, _unit


def limiter(maximum: int) -> AdaptiveLimiter:
    return AdaptiveLimiter("m", maximum, LimitStats(maximum, maximum, maximum))


def changes(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if "concurrency" in r.getMessage()]


async def refuse(lim: AdaptiveLimiter, n: int) -> None:
    """``n`` calls admitted one after the other, each refused."""
    for _ in range(n):
        lim.release(await lim.acquire(), rate_limited=True)


async def answer(lim: AdaptiveLimiter, n: int) -> None:
    """``n`` calls admitted one after the other, each answered."""
    for _ in range(n):
        lim.release(await lim.acquire(), ok=True)


async def drive(
    lim: AdaptiveLimiter,
    answers: int,
    *,
    capacity: int = 0,
    refused: Callable[[], bool] = lambda: False,
) -> list[int]:
    """A provider driven call by call; returns the limit each call was admitted under.

    Every round fills the free slots (the queue never runs dry), then the provider answers
    the oldest call it holds. It refuses a call at once when it holds ``capacity`` already
    (0: no cap), and when ``refused()`` says so whatever the load.
    """
    held: collections.deque[int] = collections.deque()
    admitted: list[int] = []
    for _ in range(answers):
        while lim.in_use < lim.limit:
            call = await lim.acquire()
            admitted.append(lim.limit)
            if (capacity and len(held) >= capacity) or refused():
                lim.release(call, rate_limited=True)
            else:
                held.append(call)
        lim.release(held.popleft(), ok=True)
    return admitted


async def test_most_calls_refused_halve_it_once_per_change_and_never_below_one(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="ragaudit.gateway")
    lim = limiter(8)
    calls = [await lim.acquire() for _ in range(8)]  # a burst, as a batch starts
    for call in calls[:5]:
        lim.release(call, rate_limited=True)
    assert lim.limit == 8  # five of eight is not more than two in three
    lim.release(calls[5], rate_limited=True)
    assert lim.limit == 4
    # The same push-back seen by calls admitted before the change: no second halving.
    lim.release(calls[6], rate_limited=True)
    lim.release(calls[7], rate_limited=True)
    assert lim.limit == 4
    # Lowered, and nothing known about refusals the limit cannot avoid: one in two is enough.
    await refuse(lim, 4)
    assert lim.limit == 4
    await refuse(lim, 1)
    assert lim.limit == 2
    await refuse(lim, 5)
    assert lim.limit == 1
    await refuse(lim, 20)
    assert lim.limit == 1
    assert lim.stats.as_dict() == {
        "configured": 8,
        "min": 1,
        "final": 1,
        "rate_limits": 38,
        "decreases": 3,
        "increases": 0,
    }
    assert changes(caplog) == [
        "m: concurrency 8 -> 4 (6 of the last 8 calls rate limited)",
        "m: concurrency 4 -> 2 (5 of the last 5 calls rate limited)",
        "m: concurrency 2 -> 1 (5 of the last 5 calls rate limited)",
    ]


async def test_refusals_whatever_the_load_leave_the_limit_alone() -> None:
    # 30 % of calls refused at any load: a share halving cannot lower (plain AIMD halved on
    # each and ran at a limit near 1).
    rng = random.Random(0)
    lim = limiter(8)
    admitted = await drive(lim, 400, refused=lambda: rng.random() < 0.3)
    assert lim.stats.rate_limits > 0.2 * len(admitted)
    assert set(admitted) == {8}
    assert lim.stats.decreases == 0 and lim.limit == 8


async def test_it_halves_down_to_a_quota_and_probes_it_ever_less_often(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="ragaudit.gateway")
    lim = limiter(16)  # configured for 16; the provider takes 4 at once
    admitted = await drive(lim, 400, capacity=4)
    log = changes(caplog)
    # The first burst is met by halving until the provider stops refusing.
    assert log[:2] == [
        "m: concurrency 16 -> 8 (9 of the last 13 calls rate limited)",
        "m: concurrency 8 -> 4 (5 of the last 5 calls rate limited)",
    ]
    # From then on it is never more than one step over the quota, and mostly at it or below.
    settled = admitted[admitted.index(4) :]
    assert max(settled) == 5
    assert sum(limit <= 4 for limit in settled) > 0.9 * len(settled)
    # Each step over it is refused and halved; the step is tried again after twice as many
    # successes as the time before, up to eight times ``limit``.
    probes = [line for line in log if line.startswith("m: concurrency 4 -> 5")]
    assert probes[:5] == [f"m: concurrency 4 -> 5 ({n} successes)" for n in (4, 8, 16, 32, 32)]
    refused_steps = [line for line in log if line.startswith("m: concurrency 5 -> 2")]
    assert len(refused_steps) in (len(probes), len(probes) - 1)
    assert all("at the limits below" in line for line in refused_steps[1:])


async def test_a_step_up_is_halved_only_when_refused_more_often_than_below() -> None:
    async def lowered_to_4() -> AdaptiveLimiter:
        lim = limiter(8)
        await refuse(lim, 6)  # six of the first eight calls refused: 8 -> 4
        assert lim.limit == 4
        return lim

    # No refusal at 4: the step to 5 is halved on the third refusal in three calls.
    lim = await lowered_to_4()
    await answer(lim, 4)
    assert lim.limit == 5
    await refuse(lim, 2)
    assert lim.limit == 5
    await refuse(lim, 1)
    assert lim.limit == 2
    # One call in three refused at 4 as well: the same three refusals at 5 are no evidence.
    lim = await lowered_to_4()
    for _ in range(3):
        await refuse(lim, 1)
        await answer(lim, 2)
    await answer(lim, 4)  # four in a row
    assert lim.limit == 5
    await refuse(lim, 3)
    assert lim.limit == 5
    await answer(lim, 5)
    assert lim.limit == 6
    assert lim.stats.decreases == 1  # only the first burst's


async def test_it_grows_by_one_after_limit_successes_in_a_row_up_to_the_maximum() -> None:
    lim = limiter(8)
    await refuse(lim, 6)
    await answer(lim, 3)
    await refuse(lim, 1)  # a refusal, even one that lowers nothing, starts the count again
    await answer(lim, 3)
    assert lim.limit == 4
    await answer(lim, 1)
    assert lim.limit == 5
    await answer(lim, 5 + 6 + 7)
    assert lim.limit == 8
    await answer(lim, 20)
    assert lim.limit == 8  # never past the configured maximum
    assert lim.stats.increases == 4 and lim.stats.final == 8 and lim.stats.lowest == 4


async def test_admits_no_more_than_the_limit_as_it_changes() -> None:
    lim = limiter(8)
    calls = [await lim.acquire() for _ in range(8)]
    for call in calls[:6]:
        lim.release(call, rate_limited=True)  # limit 4, two still hold slots
    calls = calls[6:] + [await lim.acquire() for _ in range(2)]
    waiting = [asyncio.ensure_future(lim.acquire()) for _ in range(3)]
    await asyncio.sleep(0)
    assert lim.limit == 4 and lim.in_use == 4 and not any(w.done() for w in waiting)
    lim.release(calls[0], ok=True)
    await asyncio.sleep(0)
    assert lim.in_use == 4 and sum(w.done() for w in waiting) == 1
    # A cancelled waiter gives up its place without taking a slot.
    pending = [w for w in waiting if not w.done()]
    pending[0].cancel()
    lim.release(calls[1], ok=True)
    await asyncio.sleep(0)
    assert lim.in_use == 4 and pending[1].done()


def _rate_limited_keys(prompts: list[str], model: str) -> int:
    """How many of ``prompts`` the fake refuses once: decided by each request's content."""
    name, opts = FakeOptions.parse(model)
    return sum(
        _unit("ratelimit", FakeRequest(name, user(p), None, {}, opts).digest(), opts.seed)
        < opts.ratelimit
        for p in prompts
    )


def user(text: str) -> list[dict[str, Any]]:
    return [{"role": "user", "content": text}]


async def test_a_batch_with_30_percent_rate_limits_completes_and_records_the_limit(
    tmp_path: Path, fake: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="ragaudit.gateway")
    model = "fake/judge?latency=0.05&ratelimit=0.3&retry_after=0.05"
    gateway = Gateway(tmp_path / "cache", concurrency=8, backoff_s=100.0, max_retries=3)
    prompts = [f"rate limited question {i}" for i in range(60)]
    replies = await asyncio.gather(
        *(gateway.acompletion(model=model, messages=user(p)) for p in prompts)
    )
    assert [r.choices[0].message.content for r in replies] == [
        f"Fake answer to: {p}" for p in prompts
    ]
    refused = _rate_limited_keys(prompts, model)
    assert 10 <= refused <= 26  # about 30 % of 60
    assert fake.stats.rate_limited == refused
    rows = gateway.log.rows()
    assert all(r.error is None for r in rows)
    # Each refused call waited out the provider's Retry-After (0.05 s, not the 100 s backoff)
    # and was asked again once.
    assert sum(r.retries for r in rows) == refused
    report = gateway.limits_report()[model]
    assert report["configured"] == 8 and report["rate_limits"] == refused
    # Refused whatever the load: the limit stays where it was configured, and each row
    # carries the limit in force when its (last) attempt was admitted.
    assert report["min"] == report["final"] == 8 and report["decreases"] == 0
    assert {r.concurrency for r in rows} == {8}
    assert changes(caplog) == []
    gateway.close()


async def test_over_capacity_calls_are_refused_and_the_limit_settles_below_it(
    tmp_path: Path, fake: Any
) -> None:
    # The provider takes 4 calls at once; the gateway is configured for 16.
    model = "fake/judge?latency=0.05&capacity=4&retry_after=0.05"
    gateway = Gateway(tmp_path / "cache", concurrency=16, backoff_s=100.0, max_retries=8)
    prompts = [f"capacity question {i}" for i in range(64)]
    replies = await asyncio.gather(
        *(gateway.acompletion(model=model, messages=user(p)) for p in prompts)
    )
    assert len(replies) == 64 and all(r.error is None for r in gateway.log.rows())
    assert len(gateway.log.rows()) == 64
    assert fake.stats.max_in_flight <= 4
    report = gateway.limits_report()[model]
    assert report["rate_limits"] == fake.stats.rate_limited > 0
    # The first burst of 16 met the quota of 4: the limit fell to it or below, as the rows say.
    assert report["min"] <= 4 and report["decreases"] >= 2
    rows = gateway.log.rows()
    assert min(r.concurrency for r in rows) >= report["min"]
    assert any(r.concurrency <= 4 for r in rows)
    assert fake.stats.calls == 64 + fake.stats.rate_limited
    gateway.close()
