"""How a tune searches: the time it records per search (no engine, no judge)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from ragaudit.config import load_config
from ragaudit.dataset import Question, Turn
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


class Recording:
    """A backend that records what it was sent and finds one document named by it."""

    def __init__(self, sent: list[str]) -> None:
        self.sent = sent

    async def search(self, query: str, *, filters: dict[str, Any], top_n: int) -> list[Hit]:
        self.sent.append(query)
        return [Hit(id=query, text=query, score=1.0, rank=1)]


def test_without_queries_each_variant_still_searches_its_query_form(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sent: list[str] = []
    monkeypatch.setattr("ragaudit.tuning._pool._fill_local", lambda config, embed: None)
    monkeypatch.setattr(
        "ragaudit.tuning._pool.make_search_backend", lambda config, embed: Recording(sent)
    )
    history = [
        Turn(role="user", text="What is the VAT rate on books in France?"),
        Turn(role="assistant", text="5.5 %."),
    ]
    turn = Question(
        question_id="vat::2",
        question="And in Germany?",
        history=history,
        rewrite="What is the VAT rate on books in Germany?",
    )
    lone = Question(question_id="q1", question="What is VAT?")

    def variant(form: str) -> Variant:
        data = {"runs_root": str(tmp_path / "runs"), "collect": {"query_form": form}}
        return Variant(form, load_config(None, data, environ={}))

    async def embed(texts: list[str]) -> list[list[float]]:
        return [[0.0] for _ in texts]

    forms = ("last", "history", "rewrite")
    runs = asyncio.run(retrieve([variant(f) for f in forms], [turn, lone], 1, embed, {}))
    searched = {r.variant.name: {q: got.query for q, got in r.questions.items()} for r in runs}
    assert searched == {
        "last": {"vat::2": "And in Germany?", "q1": "What is VAT?"},
        "history": {
            "vat::2": "What is the VAT rate on books in France?\nAnd in Germany?",
            "q1": "What is VAT?",
        },
        "rewrite": {"vat::2": "What is the VAT rate on books in Germany?", "q1": "What is VAT?"},
    }
    assert {r.variant.name: r.questions["vat::2"].ids for r in runs} == {
        f: [searched[f]["vat::2"]] for f in forms
    }
    # A rewrite only the judge could give is refused before anything is searched.
    sent.clear()
    unwritten = turn.model_copy(update={"rewrite": None})
    with pytest.raises(ValueError, match="judge's rewrite"):
        asyncio.run(retrieve([variant("rewrite")], [unwritten], 1, embed, {}))
    assert sent == []
