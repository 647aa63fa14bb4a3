"""The per-loop state helper and the in-flight table the gateway is built on."""

from __future__ import annotations

import asyncio
import gc
import weakref
from typing import Any

import pytest

from ragaudit.cache._inflight import InFlight
from ragaudit.concurrency import PerLoop


def test_each_loop_gets_its_own_state_and_keeps_it() -> None:
    made: list[object] = []

    def make() -> object:
        made.append(object())
        return made[-1]

    states = PerLoop(make)

    async def twice() -> tuple[object, object]:
        return states.get(), states.get()

    first = asyncio.run(twice())
    second = asyncio.run(twice())
    assert first[0] is first[1] and second[0] is second[1]
    assert first[0] is not second[0]
    assert len(made) == 2


def test_a_state_dies_with_its_loop_and_never_passes_to_a_new_one() -> None:
    states: PerLoop[list[int]] = PerLoop(list)
    seen: list[int] = []
    for i in range(10):
        loop = asyncio.new_event_loop()

        async def use(i: int = i) -> list[int]:
            state = states.get()
            state.append(i)
            return state

        # A new loop (whatever id() it got) starts from a fresh state.
        assert loop.run_until_complete(use()) == [i]
        seen.append(id(loop))
        loop.close()
        dead = weakref.ref(loop)
        del loop
        gc.collect()
        assert dead() is None  # the helper did not keep the loop alive
        assert len(states) == 0 and list(states) == []


def test_pop_takes_the_running_loops_state_only() -> None:
    states: PerLoop[dict[str, int]] = PerLoop(dict)
    assert states.pop() is None  # outside any loop

    async def run() -> tuple[Any, Any, Any]:
        made = states.get()
        return made, states.pop(), states.pop()

    made, popped, again = asyncio.run(run())
    assert popped is made and again is None


def test_a_claim_owns_a_new_request_and_shares_one_in_flight() -> None:
    table = InFlight()
    memo: dict[str, Any] = {"stored": {"answer": 1}}
    owner, stored = table.claim(["new", "stored"], memo.get)
    assert owner.owned is not None and owner.stored is None and owner.pending is None
    assert stored.stored == {"answer": 1} and stored.owned is None
    (waiter,) = table.claim(["new"], memo.get)
    assert waiter.pending is owner.owned and waiter.owned is None
    assert len(table) == 1
    table.release(owner, value={"answer": 2})
    assert waiter.pending.result() == {"answer": 2}
    assert len(table) == 0


def test_a_claim_together_owns_nothing_below_its_count() -> None:
    table = InFlight()
    memo = {"b": {"answer": 0}}
    claims = table.claim(["a", "b", "a"], memo.get, together=2)
    # "a" twice is one request; with "b" answered only one would be asked: none is owned.
    assert [c.key for c in claims] == ["a", "b"]
    assert all(c.owned is None for c in claims) and len(table) == 0
    both = table.claim(["a", "c"], memo.get, together=2)
    assert all(c.owned is not None for c in both) and len(table) == 2


def test_a_failure_reaches_every_waiter() -> None:
    table = InFlight()
    (owner,) = table.claim(["k"], lambda key: None)
    (waiter,) = table.claim(["k"], lambda key: None)
    table.release(owner, error=asyncio.CancelledError())
    assert waiter.pending is not None
    with pytest.raises(RuntimeError, match="cancelled"):
        waiter.pending.result()
    assert len(table) == 0
