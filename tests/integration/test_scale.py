"""Scale-out: question batches, the Dask task runner, the global judge limit."""

from __future__ import annotations

import asyncio
from typing import Any

import polars as pl
import pytest

from ragaudit.config import RunConfig
from ragaudit.flows.evaluate import evaluate, flow_for
from ragaudit.runfolder import RunFolder

pytestmark = pytest.mark.usefixtures("prefect_harness")

# Every table a judged stage writes, with the columns that key its rows.
KEYED = {
    "verdicts": ["question_id", "context_id"],
    "comparisons": ["question_id", "first_id", "second_id"],
    "ranking": ["question_id"],
    "agreement": ["question_id", "comparison", "metric", "k"],
    "ground_truth": ["question_id"],
    "scores": ["question_id", "metric"],
}
# What differs between two runs of the same work (ids, timings, where it ran).
VOLATILE = {"run_id", "latency_s"}


def run_flow(config: RunConfig, run_id: str) -> dict[str, Any]:
    return asyncio.run(flow_for(config)(config.model_dump_json(), run_id))


def frame(config: RunConfig, run_id: str, name: str) -> pl.DataFrame:
    df = pl.from_arrow(RunFolder(config.runs_root, run_id).read(name))
    return df.drop([c for c in df.columns if c in VOLATILE]).sort(KEYED[name])


def assert_same_tables(config: RunConfig, a: str, b: str) -> None:
    for name in KEYED:
        left, right = frame(config, a, name), frame(config, b, name)
        assert left.height > 0, name
        assert left.equals(right, null_equal=True), name


def test_batches_give_the_tables_of_one_batch(config_factory, fake) -> None:
    # Each run orders its heads afresh: built on "whole", "batched" would ask no ordering call.
    whole = config_factory(sort__previous="none")
    batched = config_factory(scale__batch_size=2, sort__previous="none")
    asyncio.run(evaluate(whole.model_dump_json(), "whole"))
    manifest = run_flow(batched, "batched")
    assert manifest["status"] == "completed"
    # 5 questions in batches of 2: three tasks per judged stage, per metric for score.
    stages = manifest["stages"]
    assert {"sort:b0000", "sort:b0001", "sort:b0002"} <= set(stages)
    assert {"ground_truth:b0000", "ground_truth:b0002"} <= set(stages)
    metric = batched.score.metrics[0]
    assert f"score:{metric}@b0002" in stages
    run = RunFolder(batched.runs_root, "batched")
    assert run.has("verdicts/b0001") and run.has(f"scores/{metric}@b0001")
    assert_same_tables(whole, "whole", "batched")
    # The run's agreement means are over all questions, not one batch's.
    agreement = frame(batched, "batched", "agreement")
    means = agreement.filter(pl.col("question_id") == "__all__")
    assert means.height > 0
    assert means["n_questions"].max() == 5


def test_a_lost_batch_is_the_only_one_redone(config_factory, fake) -> None:
    config = config_factory(scale__batch_size=2)
    run_flow(config, "lost")
    metric = config.score.metrics[0]
    run = RunFolder(config.runs_root, "lost")
    # What a worker that died before writing its batch leaves: no part table.
    run.table_path(f"scores/{metric}@b0001").unlink()
    fake.reset()
    manifest = run_flow(config, "lost")
    stages = manifest["stages"]
    redone = sorted(name for name, s in stages.items() if not s["cached"])
    # The combined scores come out byte for byte the same, so the report stays cached.
    assert redone == [f"score:{metric}@b0001"]
    assert fake.stats.calls == 0  # its calls were answered by the memo
    assert run.has(f"scores/{metric}@b0001")


def test_global_limit_holds_the_judge_in_one_process(config_factory, fake) -> None:
    # Per-process concurrency 8 against a provider that refuses a third call at once: the
    # global limit of 2 keeps it from ever seeing one.
    config = config_factory(
        judge="fake/judge?latency=0.02&capacity=2",
        models__concurrency=8,
        models__global_limit=2,
        sort__enabled=False,
    )
    manifest = run_flow(config, "limited")
    assert manifest["status"] == "completed"
    assert fake.stats.rate_limited == 0
    assert 1 <= fake.stats.max_in_flight <= 2
    assert manifest["llm"]["provider_calls"] > 0


@pytest.mark.slow
def test_dask_workers_write_the_tables_of_one_process(config_factory, fake) -> None:
    whole = config_factory(sort__previous="none")
    spread = config_factory(
        scale__batch_size=2, scale__task_runner="dask", scale__workers=2, sort__previous="none"
    )
    asyncio.run(evaluate(whole.model_dump_json(), "whole"))
    manifest = run_flow(spread, "dask")
    assert manifest["status"] == "completed"
    assert "score:" + spread.score.metrics[0] + "@b0002" in manifest["stages"]
    assert_same_tables(whole, "whole", "dask")
    # The cluster was started and its workers warmed before the first batch, apart from it.
    assert manifest["workers"]["count"] == 2
    assert manifest["workers"]["warm_s"] == 0.0  # each worker warmed itself as it started
    batches = [s for name, s in manifest["stages"].items() if name.startswith("sort:")]
    flow_process = manifest["stages"]["collect"]["worker"]
    assert {s["worker"] for s in batches}.isdisjoint({flow_process, ""})


def test_the_workers_of_a_run_share_the_global_limit(config_factory) -> None:
    from ragaudit.tasks._common import global_lease

    def lease(**scale: object) -> int | None:
        return global_lease(config_factory(models__global_limit=8, models__concurrency=4, **scale))

    # Four workers of four calls each under a limit of 8: two slots each, 8 in all.
    assert lease(scale__task_runner="dask", scale__workers=4) == 2
    assert lease(scale__task_runner="ray", scale__workers=2) == 4
    assert lease(scale__task_runner="dask", scale__workers=16) == 1
    # One process takes what it can use.
    assert lease() == 4
    assert global_lease(config_factory()) is None


def test_a_lease_is_given_back_before_its_event_loop_ends() -> None:
    # A batch task's loop ends with its stage. A lease still lingering then was left to the
    # loop's teardown, where the release failed and the slots stayed taken until the lease
    # expired; every stage's drain now gives it back while the loop still runs.
    from prefect.client.orchestration import get_client

    from ragaudit.cache._global import ensure_global_limit, give_back_leases, global_slot

    name = "ragaudit-test-give-back"

    async def active() -> int:
        async with get_client() as client:
            return (await client.read_global_concurrency_limit_by_name(name)).active_slots

    async def batch() -> tuple[int, int]:
        async with global_slot(name, size=2):
            pass
        lingering = await active()
        await give_back_leases()
        return lingering, await active()

    asyncio.run(ensure_global_limit(2, name))
    assert asyncio.run(batch()) == (2, 0)
    assert asyncio.run(batch()) == (2, 0)  # the next loop gets the whole limit again


def test_global_slots_are_leased_in_bulk_and_never_exceed_the_limit() -> None:
    from ragaudit.cache._global import ensure_global_limit, global_slot, leases_taken

    name = "ragaudit-test-lease"
    in_flight = peak = 0

    async def call() -> None:
        nonlocal in_flight, peak
        async with global_slot(name, size=3):
            in_flight += 1
            peak = max(peak, in_flight)
            await asyncio.sleep(0.01)
            in_flight -= 1

    async def go() -> int:
        await ensure_global_limit(3, name)
        await asyncio.gather(*(call() for _ in range(60)))
        return leases_taken(name)

    leases = asyncio.run(go())
    assert peak == 3  # the lease's slots are all used, and never one more
    # 60 calls cost a handful of acquire/release round trips, not 60.
    assert 1 <= leases <= 60 // 3


def test_leases_of_two_event_loops_never_overlap_past_the_limit() -> None:
    # Two loops (as two workers would) share a limit of 2 and each leases 2 slots, so only one
    # may run calls at a time. Bursts spaced around the idle linger are where a lease could be
    # given back while a call that came in during the linger is still running.
    import threading

    from ragaudit.cache._global import LINGER_S, _lease, ensure_global_limit, global_slot

    name = "ragaudit-test-overlap"
    lock = threading.Lock()
    counts = {"in_flight": 0, "peak": 0, "unleased": 0}

    async def call() -> None:
        async with global_slot(name, size=2):
            with lock:
                counts["in_flight"] += 1
                counts["peak"] = max(counts["peak"], counts["in_flight"])
            await asyncio.sleep(LINGER_S * 0.6)
            with lock:
                counts["in_flight"] -= 1
                # The lease this call runs on is still held from the server.
                counts["unleased"] += _lease(name, 2).held == 0

    async def bursts() -> None:
        for i in range(25):
            await asyncio.gather(call(), call())
            await asyncio.sleep(LINGER_S * (0.5, 0.7, 0.9)[i % 3])

    asyncio.run(ensure_global_limit(2, name))
    threads = [threading.Thread(target=asyncio.run, args=(bursts(),)) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not any(t.is_alive() for t in threads)
    assert counts["peak"] == 2
    assert counts["unleased"] == 0


@pytest.mark.parametrize("answer_with", ["503", "timeout"])
def test_a_busy_server_is_asked_again_soon_not_after_the_clients_backoff(
    monkeypatch, answer_with: str
) -> None:
    # The Prefect server answers 503 while its database is locked (task runs recording their
    # states at a batch's start and end). Through the Prefect client's retries a lease then
    # came 2 s and 6 s late (it sleeps 2 s, then 4 s) while the slots were free; the request
    # is sent once, and the 503 read as "ask again after BUSY_RETRY_S".
    import contextlib

    import httpx
    import prefect.client.orchestration as orchestration
    from prefect.client.base import PrefectHttpxAsyncClient

    from ragaudit.cache._global import BUSY_RETRY_S, _take

    seen: list[str] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request.url.path)
        if answer_with == "timeout":  # no answer in time: the request is abandoned, asked again
            raise httpx.ReadTimeout("no answer", request=request)
        return httpx.Response(503, json={"exception_message": "Service Unavailable"})

    class Client:
        _client = PrefectHttpxAsyncClient(
            transport=httpx.MockTransport(answer), base_url="http://prefect.invalid/api"
        )

        async def __aenter__(self) -> Client:
            return self

        async def __aexit__(self, *exc: object) -> None:
            return None

    monkeypatch.setattr(orchestration, "get_client", lambda: Client())

    async def take() -> float | None:
        async with contextlib.AsyncExitStack() as stack:
            return await _take(stack, "ragaudit-test-busy", 2)

    assert asyncio.run(take()) == BUSY_RETRY_S
    assert seen == ["/api/v2/concurrency_limits/increment-with-lease"]  # once, no retry


def test_gather_limited_keeps_only_its_workers_tasks() -> None:
    # A task per item was 200,000 tasks (2.8 GB) for the relevance verdicts of 1,000
    # questions x 200 candidates; the workers take the items in turn, results in input order.
    from ragaudit.tasks._common import gather_limited

    most = {"tasks": 0, "running": 0}
    running = 0

    async def double(x: int) -> int:
        nonlocal running
        running += 1
        most["running"] = max(most["running"], running)
        most["tasks"] = max(most["tasks"], len(asyncio.all_tasks()))
        await asyncio.sleep(0)
        running -= 1
        return 2 * x

    async def go() -> list[int]:
        return await gather_limited(range(2_000), double, limit=4)

    assert asyncio.run(go()) == [2 * x for x in range(2_000)]
    assert most["running"] == 4
    assert most["tasks"] <= 4 + 1  # the workers and the main task
