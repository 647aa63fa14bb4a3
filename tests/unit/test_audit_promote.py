"""Promote: the worst sampled requests become a question set that ``ragaudit run`` reads."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from ragaudit.audit import SampleOptions, draw_sample
from ragaudit.audit._promote import promote, question_id, write_question_set
from ragaudit.dataset import load_questions


def _day() -> pl.DataFrame:
    rows = []
    for segment in ("news", "legal"):
        for q in range(1, 9):
            for i in range(9 - q):
                text = (
                    f"Question {q} about {segment}" if i % 2 else f"question {q}  ABOUT {segment} "
                )
                rows.append(
                    {
                        "request_id": f"{segment}-{q}-{i}",
                        "segment": segment,
                        "query": text,
                        "filters": f'{{"collection": "{segment}"}}',
                    }
                )
    return pl.DataFrame(rows)


def _scores(sample: pl.DataFrame) -> pl.DataFrame:
    """One value a unit (each unit's graded requests agree)."""
    rows = []
    units = sample["unit"].unique(maintain_order=True)
    for i, unit in enumerate(units):
        rows.append({"unit": unit, "metric": "ndcg@10", "value": (i % 7) / 7, "status": "ok"})
        rows.append({"unit": unit, "metric": "faithfulness", "value": 1.0, "status": "ok"})
    # One unit's nDCG failed: it is never promoted by nDCG.
    rows[0] = {"unit": sample["unit"][0], "metric": "ndcg@10", "value": None, "status": "failed"}
    return pl.DataFrame(rows)


def test_promote_writes_the_worst_with_provenance_readable_by_run(tmp_path: Path) -> None:
    requests = _day()
    sample = draw_sample(requests.lazy(), SampleOptions(sample=None), salt="bot")
    scores = _scores(sample)
    questions = promote(
        sample, scores, requests, metric="ndcg@10", worst=5, audit="bot", day="2026-11-26"
    )
    assert len(questions) == 5
    values = [q.metadata["promoted_by"]["value"] for q in questions]
    assert values == sorted(values) and values[0] == 0.0
    assert sample["unit"][0] not in {q.metadata["unit"] for q in questions}
    first = questions[0]
    assert first.filters == {"collection": first.metadata["segment"]}
    assert first.metadata["request_ids"][0] in set(sample["request_id"])
    assert first.metadata["scores"] == {"ndcg@10": 0.0, "faithfulness": 1.0}
    assert first.metadata["day"] == "2026-11-26" and first.metadata["audit"] == "bot"

    path = write_question_set(questions, tmp_path / "q.jsonl")
    back = load_questions(path)
    assert [q.question_id for q in back] == [q.question_id for q in questions]
    assert [q.question for q in back] == [q.question for q in questions]
    assert back[0].filters == first.filters
    assert back[0].metadata["request_ids"] == first.metadata["request_ids"]


def test_promote_skips_questions_already_in_the_set() -> None:
    requests = _day()
    sample = draw_sample(requests.lazy(), SampleOptions(sample=None), salt="bot")
    scores = _scores(sample)
    first = promote(sample, scores, requests, metric="ndcg@10", worst=4)
    again = promote(sample, scores, requests, metric="ndcg@10", worst=6, existing=first)
    assert {q.question_id for q in again}.isdisjoint({q.question_id for q in first})
    assert len(again) == 2
    # The same query typed another way with the same filters, under another id, is a duplicate.
    retyped = [
        first[0].model_copy(update={"question_id": "x", "question": first[0].question.upper()})
    ]
    third = promote(sample, scores, requests, metric="ndcg@10", worst=4, existing=retyped)
    assert question_id(first[0].metadata["unit"]) not in {q.question_id for q in third}
    assert len(third) == 3


def test_promote_by_an_unknown_metric_is_one_clear_error() -> None:
    requests = _day()
    sample = draw_sample(requests.lazy(), SampleOptions(sample=None), salt="bot")
    with pytest.raises(ValueError, match="no ok value of metric 'recall'.*faithfulness"):
        promote(sample, _scores(sample), requests, metric="recall")
