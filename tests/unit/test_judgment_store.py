"""The judgment store (ragaudit.judging): its key, its parts, its lock, what it refuses."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import threading
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from ragaudit.cache import Gateway
from ragaudit.dataset import Question
from ragaudit.judging import (
    Grader,
    Judge,
    JudgmentStore,
    StoreError,
    grade_key,
    grade_through_store,
)

GRADER = Grader("fake/judge", 0.0, 8192, 512)


def _row(key: str, grade: Any = 2, **kw: Any) -> dict[str, Any]:
    return {
        "key": key,
        "grader": GRADER,
        "prompt": "relevance@3",
        "language": "en",
        "question": "q?",
        "text": "a text",
        "question_id": "q1",
        "context_id": "d1",
        "grade": grade,
        "reason": "because",
        **kw,
    }


def _judge(gateway: Gateway, **kw: Any) -> Judge:
    return Judge(gateway=gateway, model="fake/judge", window=8192, max_tokens=512, **kw)


def _pairs(n_questions: int = 3, per: int = 7) -> tuple[dict[str, Question], dict[str, Any]]:
    questions = {
        f"q{i}": Question(question_id=f"q{i}", question=f"What is topic {i} about?")
        for i in range(n_questions)
    }
    candidates = {
        qid: [{"context_id": f"d{j}", "text": f"Passage {j} on topic {qid}."} for j in range(per)]
        for qid in questions
    }
    return questions, candidates


def test_the_store_reads_back_every_part_and_keys_on_the_text(tmp_path: Path) -> None:
    store = JudgmentStore(tmp_path / "judgments")
    key = grade_key(GRADER, "relevance@3", "en", "q?", "a text")
    assert store.add([_row(key), _row("other", grade=None)], "tune:t") == 1
    again = JudgmentStore(tmp_path / "judgments")
    assert len(again) == 1 and again.get(key) is not None and again.get(key).grade == 2
    assert grade_key(GRADER, "relevance@3", "en", "q?", "a changed text") != key
    assert (
        grade_key(dataclasses.replace(GRADER, model="o/j"), "relevance@3", "en", "q?", "a text")
        != key
    )


def test_the_key_holds_the_judges_temperature_window_budget_and_the_language() -> None:
    """Round 5 #6: grades made at temperature 1.5 were served to a tune at 0."""
    key = grade_key(GRADER, "relevance@3", "en", "q?", "t")
    others = [
        grade_key(dataclasses.replace(GRADER, temperature=1.5), "relevance@3", "en", "q?", "t"),
        grade_key(dataclasses.replace(GRADER, window=4096), "relevance@3", "en", "q?", "t"),
        grade_key(dataclasses.replace(GRADER, max_tokens=64), "relevance@3", "en", "q?", "t"),
        grade_key(GRADER, "relevance@3", "zh", "q?", "t"),
    ]
    assert key not in others and len(set(others)) == len(others)


async def test_a_grade_made_at_another_temperature_is_paid_again(tmp_path: Path) -> None:
    gateway = Gateway(tmp_path / "cache", backoff_s=0.0)
    store = JudgmentStore(tmp_path / "judgments")
    questions, candidates = _pairs(1, 3)
    hot = await grade_through_store(
        _judge(gateway, temperature=1.5), questions, candidates, store, source="run:hot"
    )
    assert hot.paid == 3 and hot.found == 0
    cold = await grade_through_store(
        _judge(gateway), questions, candidates, JudgmentStore(tmp_path / "judgments"), source="t"
    )
    assert cold.found == 0 and cold.paid == 3


async def test_a_second_pass_pays_nothing_and_appends_nothing(tmp_path: Path) -> None:
    gateway = Gateway(tmp_path / "cache", backoff_s=0.0)
    questions, candidates = _pairs()
    first = await grade_through_store(
        _judge(gateway), questions, candidates, JudgmentStore(tmp_path / "j"), source="run:a"
    )
    parts = sorted((tmp_path / "j").glob("part-*.parquet"))
    assert first.paid == first.added == 21 and parts
    second = await grade_through_store(
        _judge(gateway), questions, candidates, JudgmentStore(tmp_path / "j"), source="run:b"
    )
    assert second.found == 21 and second.paid == 0 and second.added == 0
    # Round 5 #7: every run re-appended all its grades; now only the new ones are written.
    assert sorted((tmp_path / "j").glob("part-*.parquet")) == parts
    assert [r["grade"] for r in second.graded["q0"].rows] == [
        r["grade"] for r in first.graded["q0"].rows
    ]


def test_an_append_of_stored_keys_writes_no_part(tmp_path: Path) -> None:
    store = JudgmentStore(tmp_path / "j")
    store.add([_row("k1")], "run:a")
    before = sorted((tmp_path / "j").glob("part-*.parquet"))
    assert JudgmentStore(tmp_path / "j").add([_row("k1"), _row("k1")], "run:b") == 0
    assert sorted((tmp_path / "j").glob("part-*.parquet")) == before


def _two_tunes_at_once(tmp_path: Path) -> list[int]:
    """Two threads, each its own gateway and memo, grade the same pairs through one store."""
    questions, candidates = _pairs(4, 10)
    paid: list[int] = [0, 0]
    start = threading.Barrier(2)

    def tune(i: int) -> None:
        gateway = Gateway(tmp_path / f"cache{i}", backoff_s=0.0)

        async def go() -> None:
            with gateway.scope("tune", run_id=f"t{i}") as counts:
                await grade_through_store(
                    _judge(gateway),
                    questions,
                    candidates,
                    JudgmentStore(tmp_path / "judgments"),
                    source=f"tune:t{i}",
                    batch=8,
                )
            paid[i] = counts.provider_calls

        start.wait()
        asyncio.run(go())

    threads = [threading.Thread(target=tune, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return paid


def test_two_tunes_at_once_on_one_store_pay_each_grade_once(tmp_path: Path, fake: Any) -> None:
    """Round 5 #7: two tunes at once paid 809 of 824 grades twice (no lock)."""
    paid = _two_tunes_at_once(tmp_path)
    # 4 questions × 10 documents, each paid by one tune only: the provider saw 40 calls.
    assert fake.stats.calls == 40 and sum(paid) == 40, paid
    assert len(JudgmentStore(tmp_path / "judgments")) == 40


def test_a_damaged_part_is_reported_by_name(tmp_path: Path, caplog: Any) -> None:
    store = JudgmentStore(tmp_path / "j")
    store.add([_row("k1")], "run:a")
    bad = tmp_path / "j" / "part-0-0-0.parquet"
    bad.write_bytes(b"not parquet")
    again = JudgmentStore(tmp_path / "j")
    with caplog.at_level(logging.WARNING):
        assert len(again) == 1
    assert any(str(bad) in p and "damaged" in p for p in again.problems)
    assert str(bad) in caplog.text


def _part(folder: Path, grade: Any, type_: pa.DataType) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "part-1-1-1.parquet"
    from ragaudit.schemas import JUDGMENTS

    cols = {f.name: pa.array([None], f.type) for f in JUDGMENTS}
    cols["key"] = pa.array(["k9"])
    cols["grade"] = pa.array([grade], type_)
    pq.write_table(pa.table(cols), path)
    return path


@pytest.mark.parametrize(
    ("grade", "type_", "words"),
    [("3", pa.string(), "grade is string"), (99, pa.int64(), "grade 99 outside 0–3")],
)
def test_a_part_with_a_grade_that_is_not_0_to_3_is_refused_naming_it(
    tmp_path: Path, grade: Any, type_: pa.DataType, words: str
) -> None:
    """Round 5 #7: a string grade crashed even --dry-run; 99 was used as a grade."""
    path = _part(tmp_path / "j", grade, type_)
    with pytest.raises(StoreError) as err:
        JudgmentStore(tmp_path / "j").lookup(["k9"])
    message = str(err.value)
    assert str(path) in message and words in message and "\n" not in message


def test_a_grade_outside_0_to_3_is_never_written(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="not 0–3"):
        JudgmentStore(tmp_path / "j").add([_row("k1", grade=99)], "run:a")
    assert not list((tmp_path / "j").glob("part-*.parquet"))


def test_parts_that_disagree_on_a_key_are_reported_and_the_first_kept(
    tmp_path: Path, caplog: Any
) -> None:
    """Round 5 #6: when parts disagreed, the last written won silently."""
    JudgmentStore(tmp_path / "j").add([_row("k1", grade=1)], "run:a")
    # Another writer that did not see the first part (as two unlocked writers did).
    other = JudgmentStore(tmp_path / "j")
    other.parts._read.update(p.name for p in other.parts.parts())
    other.add([_row("k1", grade=3)], "run:b")
    store = JudgmentStore(tmp_path / "j")
    with caplog.at_level(logging.WARNING):
        assert store.get("k1").grade == 1
    assert store.conflicts and "differ" in caplog.text
    assert any("1 grade(s) differ" in p for p in store.problems)
