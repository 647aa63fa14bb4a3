"""Judgments of a run or a tune as exportable rows, with the engine's own requests.

A run folder's verdicts are the judge's grades of its questions' candidates (its reasons with
them); a tune's pool qrels are the grades of every document its variants pooled. Either becomes
the rows any format writes; for ``_rank_eval`` each question also carries the search request the
configured engine sends for it (the run's config, or the tune winner's ``best.yaml`` section),
so the body is ready to ``POST <index>/_rank_eval``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import polars as pl

from ragaudit.dataset import Question
from ragaudit.errors import InputError
from ragaudit.runfolder import RunFolder
from ragaudit.search import TemplateRenderError

RUN_COLUMNS: dict[str, Any] = {
    "query": pl.String,
    "query_id": pl.String,
    "doc_id": pl.String,
    "doc_index": pl.String,
    "value": pl.String,
    "annotator": pl.String,
    "state": pl.String,
    "reason": pl.String,
    "created_at": pl.String,
    "doc_text": pl.String,
    "extra": pl.String,
    "grade": pl.Int64,
    "source_kind": pl.String,
    "text_hash": pl.String,
    "converted": pl.Boolean,
    "scale": pl.String,
}
"""The columns ``export_frame`` takes (``as_frame``'s)."""


def graded_rows(
    questions: Sequence[Question],
    grades: Mapping[str, Mapping[str, int]],
    *,
    judge: str | None,
    reasons: Mapping[tuple[str, str], str] | None = None,
    index: str | None = None,
) -> pl.DataFrame:
    """Rows of the judge's grades of ``questions``' documents, in the questions' order."""
    reasons = reasons or {}
    rows = []
    for q in questions:
        for doc, grade in (grades.get(q.question_id) or {}).items():
            rows.append(
                {
                    "query": q.question,
                    "query_id": q.question_id,
                    "doc_id": doc,
                    "doc_index": index,
                    "value": str(int(grade)),
                    "annotator": judge,
                    "state": "graded",
                    "reason": reasons.get((q.question_id, doc)) or None,
                    "grade": int(grade),
                    "source_kind": "judge",
                    "converted": False,
                }
            )
    return pl.DataFrame(rows, schema=RUN_COLUMNS)


def run_rows(run: RunFolder, *, index: str | None = None) -> tuple[pl.DataFrame, int]:
    """A run's verdicts as rows (and how many verdicts failed, which have no grade to export).

    Raises:
        InputError: The folder has no verdicts (the sort stage did not run).
    """
    if not run.has("verdicts"):
        raise InputError(f"{run.path}: no verdicts (the run's sort stage did not run)")
    from ragaudit.runfolder import stored_config

    config = stored_config(run)
    judge = config.models.judge_model if config is not None else None
    grades: dict[str, dict[str, int]] = {}
    reasons: dict[tuple[str, str], str] = {}
    failed = 0
    for v in run.rows("verdicts"):
        if v.get("status") != "ok" or v.get("grade") is None:
            failed += 1
            continue
        qid, cid = str(v["question_id"]), str(v["context_id"])
        grades.setdefault(qid, {})[cid] = int(v["grade"])
        reasons[(qid, cid)] = v.get("reason") or ""
    return graded_rows(run.questions(), grades, judge=judge, reasons=reasons, index=index), failed


def with_requests(
    rows: pl.DataFrame,
    backend: Any,
    questions: Sequence[Question],
    top_n: int,
) -> tuple[pl.DataFrame, list[dict[str, Any]]]:
    """``rows`` with each question's search request as the engine ``backend`` renders it.

    Returns the rows (``extra.request`` set, ``doc_index`` the backend's index) and notes for
    the loss report: questions whose template did not render, ids read from a ``_source`` field
    rather than ``_id``.

    Raises:
        InputError: The backend renders no request (it is not an engine).
    """
    builder = getattr(backend, "builder", None)
    if builder is None:
        raise InputError(
            "a _rank_eval request needs an engine backend (opensearch or elasticsearch) in "
            "collect.backend: it renders each question's search request"
        )
    bodies: dict[str, str] = {}
    failed: dict[str, str] = {}
    for q in questions:
        try:
            bodies[q.question_id] = json.dumps(
                {"request": builder.body(q.question, q.filters, top_n)}, ensure_ascii=False
            )
        except TemplateRenderError as exc:
            failed[q.question_id] = str(exc)
    notes: list[dict[str, Any]] = []
    if failed:
        notes.append(
            {
                "what": "questions whose query template did not render: a match query instead",
                "rows": rows.filter(pl.col("query_id").is_in(list(failed))).height,
                "examples": list(failed.items())[:3],
            }
        )
    id_field = getattr(getattr(backend, "fields", None), "id", None)
    if id_field:
        notes.append(
            {
                "what": f"document ids are the _source field '{id_field}', which _rank_eval does "
                "not read: it rates by _id",
                "rows": rows.height,
            }
        )
    out = rows.with_columns(
        pl.col("query_id")
        .replace_strict(bodies, default=None, return_dtype=pl.String)
        .alias("extra"),
        pl.lit(getattr(backend, "index_name", None), dtype=pl.String).alias("doc_index"),
    )
    return out, notes


__all__ = ["RUN_COLUMNS", "graded_rows", "run_rows", "with_requests"]
