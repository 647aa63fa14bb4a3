"""The adaptive per-model limit: halve on a rate limit, grow back on success, report and log."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

import pytest

from ragaudit.cache import AdaptiveLimiter, Gateway, LimitStats
from ragaudit.cache._fake import FakeOptions, FakeRequest, _unit


def limiter(maximum: int) -> AdaptiveLimiter:
    return AdaptiveLimiter("m", maximum, LimitStats(maximum, maximum, maximum))


async def test_halves_on_a_rate_limit_once_per_epoch_and_never_below_one(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="ragaudit.gateway")
    lim = limiter(8)
    before = await lim.acquire()  # in flight when the provider pushes back
    first = await lim.acquire()
    lim.release(first, rate_limited=True)
    assert lim.limit == 4
    lim.release(before, rate_limited=True)  # the same push-back, seen later: no second halving
    assert lim.limit == 4
    for expected in (2, 1, 1):
        lim.release(await lim.acquire(), rate_limited=True)
        assert lim.limit == expected
    assert lim.stats.as_dict() == {
        "configured": 8,
        "min": 1,
        "final": 1,
        "rate_limits": 5,
        "decreases": 3,
        "increases": 0,
    }
    assert [r.getMessage() for r in caplog.records] == [
        "m: concurrency 8 -> 4 (rate limited)",
        "m: concurrency 4 -> 2 (rate limited)",
        "m: concurrency 2 -> 1 (rate limited)",
    ]


async def test_grows_by_one_after_limit_successes_up_to_the_maximum() -> None:
    lim = limiter(4)
    lim.release(await lim.acquire(), rate_limited=True)
    lim.release(await lim.acquire(), rate_limited=True)
    assert lim.limit == 1
    seen = []
    for _ in range(1 + 2 + 3 + 5):
        lim.release(await lim.acquire(), ok=True)
        seen.append(lim.limit)
    # 1 success at 1, 2 at 2, 3 at 3, then capped at the configured 4.
    assert seen == [2, 2, 3, 3, 3, 4, 4, 4, 4, 4, 4]
    assert lim.stats.final == 4 and lim.stats.lowest == 1 and lim.stats.increases == 3
    # A rate limit breaks a run of successes.
    lim.release(await lim.acquire(), ok=True)
    lim.release(await lim.acquire(), rate_limited=True)
    assert lim.limit == 2


async def test_admits_no_more_than_the_limit_as_it_changes() -> None:
    lim = limiter(4)
    epochs = [await lim.acquire() for _ in range(4)]
    waiting = [asyncio.ensure_future(lim.acquire()) for _ in range(3)]
    await asyncio.sleep(0)
    assert lim.in_use == 4 and not any(w.done() for w in waiting)
    lim.release(epochs[0], rate_limited=True)  # limit 2, three still hold slots
    await asyncio.sleep(0)
    assert lim.limit == 2 and lim.in_use == 3 and not any(w.done() for w in waiting)
    lim.release(epochs[1])
    lim.release(epochs[2])
    await asyncio.sleep(0)
    assert lim.in_use == 2 and sum(w.done() for w in waiting) == 1
    # A cancelled waiter gives up its place without taking a slot.
    pending = [w for w in waiting if not w.done()]
    pending[0].cancel()
    lim.release(epochs[3])
    await asyncio.sleep(0)
    assert lim.in_use == 2 and pending[1].done()


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
    assert 1 <= report["min"] < 8 and report["decreases"] >= 1
    assert report["min"] <= report["final"] <= 8
    # Each row carries the limit in force when its (last) attempt was admitted.
    assert {r.concurrency for r in rows} <= set(range(report["min"], 9))
    assert any(r.concurrency < 8 for r in rows)
    changes = [r.getMessage() for r in caplog.records if "concurrency" in r.getMessage()]
    assert changes[0] == f"{model}: concurrency 8 -> 4 (rate limited)"
    assert len(changes) == report["decreases"] + report["increases"]
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
    # The first burst of 16 met the quota of 4: the limit fell to it or below.
    assert report["min"] <= 4
    assert fake.stats.calls == 64 + fake.stats.rate_limited
    gateway.close()
