"""The gateway's life in a long process: one per cache folder, run ids in scopes, per-loop
state that dies with its loop, the memo protocol, the call log written as it goes, and no
litellm banner on provider errors."""

from __future__ import annotations

import asyncio
import gc
import os
import signal
import subprocess
import sys
import textwrap
import tracemalloc
import weakref
from pathlib import Path
from typing import Any

import httpx
import litellm
import openai
import polars as pl
import pyarrow.parquet as pq
import pytest
from support.runs import REPO, make_config

from ragaudit.cache import (
    CALL_LOG_SCHEMA,
    CallLog,
    CallRecord,
    DiskMemo,
    Gateway,
    KeyRejected,
    Memo,
    live_gateways,
    open_gateway,
)
from ragaudit.cache._fake import FakeRequest
from ragaudit.tasks._common import hold_gateway, make_context, run_stage


def user(text: str) -> list[dict[str, Any]]:
    return [{"role": "user", "content": text}]


def live_for(cache_dir: Path) -> list[Gateway]:
    gc.collect()
    key = str(Path(cache_dir).resolve())
    return [gw for path, gw in live_gateways().items() if path == key]


# -- one gateway per cache folder, runs in scopes --------------------------------------------


def test_500_runs_share_one_gateway_and_memory_stays_flat(tmp_path: Path, fake: Any) -> None:
    """500 run ids through the stage path in one process: one live gateway, flat memory."""
    fake.reset()  # no request recording: it would grow by design
    config = make_config(tmp_path)
    config_json = config.model_dump_json()
    root = str(tmp_path / "runs")

    async def work(ctx: Any) -> list[str]:
        # A call of its own (a provider call) and one every run asks (a memo hit).
        await ctx.gateway.acompletion(model="fake/judge", messages=user(ctx.run.run_id))
        await ctx.gateway.acompletion(model="fake/judge", messages=user("shared question"))
        return []

    def one_run(i: int, outer: Gateway) -> None:
        # What the flow does: hold the gateway, build each stage's context, run the stage in
        # an event loop of its own (a new loop per run, as asyncio.run gives Prefect flows).
        with hold_gateway(config) as gateway:
            assert gateway is outer
            ctx = make_context(config_json, root, f"run-{i:03d}")
            assert ctx.gateway is outer
            result = asyncio.run(run_stage("sort", ctx, work))
            assert result.llm["calls"] == 2

    try:
        with hold_gateway(config) as outer:
            outer_ref = weakref.ref(outer)
            for i in range(100):
                one_run(i, outer)
            gc.collect()
            # Traced from here on: what is still allocated at run 500 of what runs 100-499
            # allocated is exactly the growth (and tracing the first 100 would only be slower).
            tracemalloc.start()
            at_100 = tracemalloc.get_traced_memory()[0]
            for i in range(100, 500):
                one_run(i, outer)
                if i % 100 == 99:
                    assert live_for(config.cache_dir) == [outer]
            gc.collect()
            at_500 = tracemalloc.get_traced_memory()[0]
            # Every run's loop has gone, and its limiters and in-flight map with it (litellm's
            # logging worker keeps a reference to the last loop it ran in, so one may remain).
            assert len(outer._loops) <= 1
            assert outer.log.rows() == []  # every row went to its run's folder
    finally:
        tracemalloc.stop()
    del outer
    # Nobody holds it any more: the registry did not pin it.
    assert live_for(config.cache_dir) == []
    assert outer_ref() is None

    growth = at_500 - at_100
    print(f"traced memory growth from run 100 to run 500: {growth / 1024:.1f} KiB")
    # What remains is the fake provider's attempt counter (one entry per distinct request,
    # ~110 B): measured 83 KiB. A pinned gateway per run, or a loop's state kept, is far more.
    assert growth < 400 * 1024, f"memory grew {growth} bytes over 400 runs"
    assert fake.stats.calls == 501  # 500 own questions + the shared one once

    # Each run's call log carries its own run id, taken from the scope.
    for i in (0, 250, 499):
        rid = f"run-{i:03d}"
        calls = pl.concat(
            [pl.read_parquet(p) for p in (tmp_path / "runs" / rid / "llm_calls").glob("*.parquet")]
        )
        assert calls["run_id"].to_list() == [rid, rid]
        assert calls["stage"].to_list() == ["sort", "sort"]


def test_holders_share_one_gateway_and_the_last_one_closes_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    closed: list[str] = []
    monkeypatch.setattr(DiskMemo, "close", lambda self: closed.append(str(self.path)))
    with open_gateway(tmp_path / "cache", concurrency=3) as first:
        with open_gateway(tmp_path / "cache" / ".." / "cache") as second:
            assert second is first  # the folder is resolved
            assert first.concurrency == 3
        assert closed == []  # the outer holder still uses it
        with open_gateway(tmp_path / "other") as other:
            assert other is not first
        assert len(closed) == 1 and closed[0].endswith("other")
    assert len(closed) == 2
    del first, second, other
    assert live_for(tmp_path / "cache") == []


async def test_run_id_comes_from_the_scope(tmp_path: Path, fake: Any) -> None:
    gateway = Gateway(tmp_path / "cache", backoff_s=0.0)
    with gateway.scope("sort", run_id="run-a"):
        await gateway.acompletion(model="fake/judge", messages=user("x"))
        with gateway.item_scope():
            await gateway.acompletion(model="fake/judge", messages=user("y"))
    with gateway.scope("sort", run_id="run-b"):
        await gateway.acompletion(model="fake/judge", messages=user("x"))
    assert [r.run_id for r in gateway.log.rows()] == ["run-a", "run-a", "run-b"]
    gateway.close()


# -- per-loop state ----------------------------------------------------------------------------


def test_a_limiter_of_a_closed_loop_is_never_reused(tmp_path: Path, fake: Any) -> None:
    """A loop dies holding every slot of the model's limit; each new loop still gets its own.

    Keyed by ``id(loop)``, a new loop that got a dead loop's id (CPython reuses them at once)
    inherited its exhausted semaphore and waited for ever.
    """
    gateway = Gateway(tmp_path / "cache", concurrency=1, backoff_s=0.0)
    seen_ids: list[int] = []
    limiters: list[Any] = []

    async def leak_a_slot() -> None:
        limiter = gateway._limiter("fake/judge")
        await limiter.acquire()  # never released: the loop dies with the slot taken
        limiters.append(limiter)

    async def call(i: int) -> str:
        reply = await asyncio.wait_for(
            gateway.acompletion(model="fake/judge", messages=user(f"after dead loop {i}")), 10
        )
        return reply.choices[0].message.content

    for i in range(20):
        loop = asyncio.new_event_loop()
        seen_ids.append(id(loop))
        loop.run_until_complete(leak_a_slot())
        loop.close()
        dead = weakref.ref(loop)
        del loop
        gc.collect()
        assert dead() is None  # the gateway's state did not keep the loop alive ...
        assert all(loop_ref is not None for loop_ref in gateway._loops)
        # ... and went with it (litellm's logging worker keeps the last asyncio.run loop).
        assert len(gateway._loops) <= 1
        assert asyncio.run(call(i)) == f"Fake answer to: after dead loop {i}"
    assert len({id(x) for x in limiters}) == 20  # every loop had a limiter of its own
    assert all(x.in_use == 1 for x in limiters)
    print(f"{20 - len(set(seen_ids))} of 20 loops reused a dead loop's id")
    gateway.close()


def test_an_idle_limiter_keeps_no_loop_alive(tmp_path: Path, fake: Any) -> None:
    gateway = Gateway(tmp_path / "cache", concurrency=2, backoff_s=0.0)

    async def busy(run: int) -> weakref.ref:
        await asyncio.gather(
            *(
                gateway.acompletion(model="fake/judge?latency=0.01", messages=user(f"{run} {i}"))
                for i in range(6)
            )
        )
        return weakref.ref(asyncio.get_running_loop())

    first = asyncio.run(busy(1))
    # litellm's logging worker holds on to the last loop it ran in: a second run moves it on.
    second = asyncio.run(busy(2))
    gc.collect()
    assert first() is None
    assert list(gateway._loops) in ([], [second()])
    gateway.close()


# -- memo protocol -----------------------------------------------------------------------------


class DictMemo:
    """The smallest Memo: what a Redis memo will have to provide."""

    def __init__(self) -> None:
        self.data: dict[str, Any] = {}
        self.closed = False

    def get(self, key: str) -> Any | None:
        return self.data.get(key)

    def set(self, key: str, value: Any) -> None:
        self.data[key] = value

    def close(self) -> None:
        self.closed = True

    def stats(self) -> dict[str, Any]:
        return {"path": "memory", "entries": len(self.data), "bytes": 0}


async def test_the_gateway_talks_only_to_the_memo_protocol(tmp_path: Path, fake: Any) -> None:
    memo = DictMemo()
    assert isinstance(memo, Memo) and isinstance(DiskMemo(tmp_path / "d"), Memo)
    gateway = Gateway(tmp_path / "unused", memo=memo, backoff_s=0.0)
    await gateway.acompletion(model="fake/judge", messages=user("q"))
    await gateway.acompletion(model="fake/judge", messages=user("q"))
    await gateway.aembed(["a b", "c d"], model="fake/embed")
    assert fake.stats.calls == 1
    assert gateway.stats() == {"path": "memory", "entries": 3, "bytes": 0}
    assert [r.cache_hit for r in gateway.log.rows()] == [False, True, False]
    assert not (tmp_path / "unused").exists()  # no diskcache was opened
    gateway.close()
    assert memo.closed


# -- call log written as it goes ---------------------------------------------------------------


def test_call_log_writes_parts_every_n_records(tmp_path: Path) -> None:
    log = CallLog(tmp_path / "llm_calls", prefix="sort", every=3, interval_s=60)
    for i in range(7):
        log.add(CallRecord(kind="completion", key_hash=f"k{i}", model="m", stage="sort"))
    assert len(log.parts) == 2 and len(log.rows()) == 1
    log.close()
    assert len(log.parts) == 3 and log.rows() == []
    table = pl.concat([pl.read_parquet(p) for p in log.parts])
    assert table["key_hash"].to_list() == [f"k{i}" for i in range(7)]
    assert pq.read_schema(log.parts[0]).equals(CALL_LOG_SCHEMA, check_metadata=True)
    assert all(p.name.startswith("sort-") for p in log.parts)


async def test_call_log_timer_writes_a_quiet_scope(tmp_path: Path) -> None:
    log = CallLog(tmp_path / "llm_calls", every=1000, interval_s=0.05)
    log.add(CallRecord(kind="completion", key_hash="k", model="m"))
    assert log.parts == []
    await asyncio.sleep(0.3)  # no further call: the timer writes the part
    assert len(log.parts) == 1 and log.rows() == []


_CRASHING_RUN = """
import asyncio, os, signal, sys
import ragaudit
from ragaudit.cache import Gateway

async def main(run_dir):
    gateway = Gateway(sys.argv[2], backoff_s=0.0, log_every=5, log_interval_s=60)
    with gateway.scope("sort", run_id="crashed", calls_dir=run_dir):
        for i in range(12):
            await gateway.acompletion(model="fake/judge", messages=[
                {"role": "user", "content": f"paid question {i}"}])
        os.kill(os.getpid(), signal.SIGKILL)  # no final flush, no cleanup

asyncio.run(main(sys.argv[1]))
"""


def test_calls_logged_before_a_kill_9_are_on_disk(tmp_path: Path) -> None:
    calls_dir = tmp_path / "runs" / "crashed" / "llm_calls"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(_CRASHING_RUN), str(calls_dir), str(tmp_path / "c")],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == -signal.SIGKILL, done.stderr
    parts = sorted(calls_dir.glob("*.parquet"))
    assert len(parts) == 2  # 12 calls at 5 per part: the last 2 are the most a crash loses
    calls = pl.concat([pl.read_parquet(p) for p in parts])
    assert calls.height == 10
    assert set(calls["run_id"]) == {"crashed"} and not calls["cache_hit"].any()
    assert not list(calls_dir.glob(".*tmp"))  # no half-written part left behind
    # The memo kept all 12 answers: a re-run pays for none of them.
    memo = DiskMemo(tmp_path / "c")
    assert memo.stats()["entries"] == 12
    memo.close()


def test_run_stage_writes_its_call_log_when_the_stage_fails(tmp_path: Path, fake: Any) -> None:
    config = make_config(tmp_path)
    ctx = make_context(config.model_dump_json(), str(tmp_path / "runs"), "failing")

    async def work(c: Any) -> list[str]:
        await c.gateway.acompletion(model="fake/judge", messages=user("paid before failing"))
        raise RuntimeError("stage broke")

    with pytest.raises(RuntimeError, match="stage broke"):
        asyncio.run(run_stage("sort", ctx, work))
    (part,) = (tmp_path / "runs" / "failing" / "llm_calls").glob("*.parquet")
    assert pl.read_parquet(part)["run_id"].to_list() == ["failing"]


# -- litellm's banner ------------------------------------------------------------------------


def _provider_401(req: FakeRequest) -> Any:
    # What an OpenAI-compatible provider raises on a bad key; litellm maps it (and prints its
    # banner while mapping unless told not to).
    raise openai.AuthenticationError(
        "Error code: 401 - invalid credentials",
        response=httpx.Response(401, request=httpx.Request("POST", "http://127.0.0.1:9/v1")),
        body=None,
    )


async def _ask_with_401(tmp_path: Path, fake: Any) -> Gateway:
    gateway = Gateway(tmp_path / "cache", backoff_s=0.0)
    with fake.script(_provider_401), pytest.raises(KeyRejected, match="rejected the API key"):
        await gateway.acompletion(model="fake/judge", messages=user("who am I"))
    return gateway


async def test_a_provider_auth_error_prints_no_banner(
    tmp_path: Path, fake: Any, capfd: pytest.CaptureFixture[str]
) -> None:
    capfd.readouterr()
    gateway = await _ask_with_401(tmp_path, fake)
    assert litellm.suppress_debug_info is True
    out, err = capfd.readouterr()
    assert "Give Feedback" not in out + err and "Get Help" not in out + err
    (row,) = gateway.log.rows()
    assert row.error and "401 - invalid credentials" in row.error and row.retries == 0
    gateway.close()


async def test_the_banner_check_sees_a_banner_when_litellm_prints_one(
    tmp_path: Path, fake: Any, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # The control of the test above: with litellm's default the same error prints it.
    Gateway(tmp_path / "warm")  # registers the providers (and sets the flag) first
    monkeypatch.setattr(litellm, "suppress_debug_info", False)
    capfd.readouterr()
    (await _ask_with_401(tmp_path, fake)).close()
    out, _ = capfd.readouterr()
    assert "Give Feedback / Get Help" in out
