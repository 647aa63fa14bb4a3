"""Synthetic run folders for the reporting tests and bench: tables written directly.

Judge verdicts are drawn the way the fake provider's ``wrong`` option produces them: a metric
value is the share of a question's statements judged supported, and a judge wrong with
probability p flips each verdict independently.
"""

from __future__ import annotations

import datetime as dt
import json
import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from ragaudit.cache._calllog import CALL_LOG_SCHEMA
from ragaudit.config import RunConfig
from ragaudit.runfolder import RunFolder, write_table
from ragaudit.schemas import ANSWERS, QUESTIONS, SCORES, to_table


def judged_share(truth: list[np.ndarray], wrong: float, rng: np.random.Generator) -> np.ndarray:
    """Per question: the share of statements judged supported by a judge wrong with ``wrong``."""
    out = np.empty(len(truth))
    for i, t in enumerate(truth):
        flips = rng.random(len(t)) < wrong
        out[i] = np.where(flips, ~t, t).mean()
    return out


def statement_truth(n: int, rng: np.random.Generator, supported: float = 0.8) -> list[np.ndarray]:
    """True verdicts of 1-6 statements per question."""
    return [rng.random(int(k)) < supported for k in rng.integers(1, 7, n)]


def write_run(
    root: Path,
    run_id: str,
    values: dict[str, list[float | None]],
    *,
    judge: str = "fake/judge",
    embedder: str = "fake/embed",
    question_ids: list[str] | None = None,
    warnings: list[str] | None = None,
    score_overrides: dict[str, Any] | None = None,
    reason_chars: int = 60,
    calls: list[dict[str, Any]] | None = None,
    prefixes: list[str] | None = None,
    conversations: dict[str, dict[str, Any]] | None = None,
) -> Path:
    """A run folder with questions, answers, scores (None = failed) and a manifest.

    ``prefixes`` (one per question) start that question's text, reference, answer, reason and
    error, as a hostile corpus or question set would. ``conversations`` gives a question its
    ``questions`` row's conversation (``conversation_id``, ``turn``, ``history``,
    ``turn_kind``, ``answerability``, ``history_cut`` …), as the collect stage writes it.
    """
    n = len(next(iter(values.values())))
    ids = question_ids or [f"q{i:04d}" for i in range(n)]
    lead = dict(zip(ids, prefixes or [""] * n, strict=True))
    run = RunFolder(root, run_id)
    run.write(
        "questions",
        to_table(
            [
                {
                    "run_id": run_id,
                    "question_id": q,
                    "question": f"{lead[q]}question {q}?",
                    "language": "en",
                    "reference": f"{lead[q]}reference of {q}",
                    "metadata": "{}",
                    "conversation": json.dumps(conversations[q], ensure_ascii=False)
                    if conversations and q in conversations
                    else None,
                }
                for q in ids
            ],
            QUESTIONS,
        ),
    )
    run.write(
        "answers",
        to_table(
            [
                {
                    "run_id": run_id,
                    "question_id": q,
                    "response": f"{lead[q]}answer {q}",
                    "status": "ok",
                }
                for q in ids
            ],
            ANSWERS,
        ),
    )
    rows = []
    for metric, vals in values.items():
        for q, v in zip(ids, vals, strict=True):
            ok = v is not None
            rows.append(
                {
                    "run_id": run_id,
                    "question_id": q,
                    "metric": metric,
                    "value": v,
                    "status": "ok" if ok else "failed",
                    "error": None if ok else f"{lead[q]}JudgeError: no verdict could be parsed",
                    "reason": ('{"why": "' + lead[q].replace('"', "'") + "x" * reason_chars + '"}')
                    if ok
                    else None,
                    "k_used": 3,
                    "judge": judge,
                    "metric_args": "{}",
                }
            )
    run.write("scores", to_table(rows, SCORES))
    config = RunConfig(
        models={"judge": judge, "embedder": embedder},
        score={"metrics": list(values), **(score_overrides or {})},
        runs_root=root,
    )
    run.write_manifest(
        {
            "run_id": run_id,
            "config": config.model_dump(mode="json"),
            "models": {"judge": judge, "embedder": embedder, "generator": judge},
            "status": "completed",
            "started_at": dt.datetime.now(dt.UTC).isoformat(),
            "warnings": warnings or [],
        }
    )
    if calls:
        records = [{"ts": time.time(), "run_id": run_id, **c} for c in calls]
        write_table(
            pa.Table.from_pylist(
                [{k: r.get(k) for k in CALL_LOG_SCHEMA.names} for r in records],
                schema=CALL_LOG_SCHEMA,
            ),
            run.calls_dir / "score-1.parquet",
        )
    return run.path


def write_answers(root: Path, run_id: str, ids: list[str], good: bool) -> None:
    """Answers of ``run_id`` that the fake battle judge prefers (``good``) or not.

    The fake judge prefers the answer sharing more of the question's words.
    """
    rows = [
        {
            "run_id": run_id,
            "question_id": q,
            "response": f"the question {q} is answered here" if good else "no idea at all",
            "status": "ok",
        }
        for q in ids
    ]
    RunFolder(root, run_id).write("answers", to_table(rows, ANSWERS))
