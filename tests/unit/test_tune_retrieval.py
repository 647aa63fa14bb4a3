"""How a tune searches: the time it records per search (no engine, no judge)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from ragaudit.config import load_config
from ragaudit.dataset import Question
from ragaudit.search import Hit
from ragaudit.tuning import Variant, retrieve


class Clock:
    """A clock that moves only while a search runs: 1 s a search."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class OneAtATime:
    """A backend that takes one search at a time and 1 s (on ``clock``) for each."""

    concurrency = 1

    def __init__(self, clock: Clock) -> None:
        self.clock = clock

    async def search(self, query: str, *, filters: dict[str, Any], top_n: int) -> list[Hit]:
        await asyncio.sleep(0)  # the others queue behind the held slot meanwhile
        self.clock.now += 1.0
        return [Hit(id=f"{query}-{i}", text=f"text {i}", score=1.0, rank=i + 1) for i in range(3)]


def test_a_variants_latency_is_its_searches_not_the_queue_before_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = Clock()
    monkeypatch.setattr("ragaudit.tuning._pool.time.perf_counter", clock)
    monkeypatch.setattr("ragaudit.tuning._pool._fill_local", lambda config, embed: None)
    monkeypatch.setattr(
        "ragaudit.tuning._pool.make_search_backend", lambda config, embed: OneAtATime(clock)
    )
    config = load_config(None, {"runs_root": str(tmp_path / "runs")}, environ={})
    variants = [Variant(name, config) for name in ("baseline", "second", "third")]
    questions = [Question(question_id=f"q{i}", question=f"q{i}") for i in range(4)]

    async def embed(texts: list[str]) -> list[list[float]]:
        return [[0.0] for _ in texts]

    runs = asyncio.run(retrieve(variants, questions, 3, embed, {}))
    # Twelve searches queue for one slot: each took 1 s however long it waited for the slot,
    # so a variant's place in the config does not show as latency.
    assert [sorted({r.latency_s for r in run.questions.values()}) for run in runs] == [[1.0]] * 3
