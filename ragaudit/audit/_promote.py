"""Promote the audit's failures: the worst sampled requests as a question set for ``run``.

A request the audit found bad (lowest nDCG@10, lowest faithfulness ...) becomes a question of
a curated set, so the nightly keeps asking it after the traffic moves on. Each question keeps
its provenance in ``metadata``: the audit, the day, the unit and its segment and band, the
request ids that asked it (the one graded first), how many requests it stood for, and every
score it got. Its id derives from the unit (segment + normalised query), so the same query
promoted on two days is one question; a question already in the existing set (same id, or the
same normalised text, filters and history) is left out.

A follow-up is promoted as the turn it was: with its session's earlier turns (``history``,
``conversation_id``, ``turn``), so that a run judges it in context as the audit did; its id then
holds its history too (the same words after another conversation are another question).
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import polars as pl

from ragaudit import atomic
from ragaudit.audit._sample import normalise_query, normalised_query
from ragaudit.audit._served import REQUESTS, SAMPLE, SCORES
from ragaudit.audit._sessions import Conversation, conversations
from ragaudit.dataset import Question, Turn, load_questions
from ragaudit.directions import higher_is_better
from ragaudit.errors import InputError
from ragaudit.hashing import canonical_hash, canonical_json
from ragaudit.lang import detect_language
from ragaudit.runfolder import stored_config, stored_setting
from ragaudit.runlock import check_run_id
from ragaudit.secrets import redact

REQUEST_IDS = 10
"""Request ids of a promoted unit kept in its provenance (the representative one first)."""


def question_id(unit: str, history: Sequence[Turn] = ()) -> str:
    """The promoted question's id: stable per unit (and history), so two days' promotions merge."""
    if not history:
        return "audit-" + unit.split(":", 1)[-1][:16]
    turns = [t.model_dump(mode="json") for t in history]
    return "audit-" + canonical_hash({"unit": unit, "history": turns})[:16]


def _same(question: str, filters: dict[str, Any], history: Sequence[Turn] = ()) -> tuple[str, ...]:
    turns = canonical_json([t.model_dump(mode="json") for t in history])
    return normalise_query(question), canonical_json(filters), turns


def promote(
    sample: pl.DataFrame,
    scores: pl.DataFrame,
    requests: pl.DataFrame | pl.LazyFrame,
    *,
    metric: str,
    worst: int = 50,
    higher_is_better: bool = True,
    existing: Sequence[Question] = (),
    audit: str | None = None,
    day: str | None = None,
    talks: Mapping[str, Conversation] | None = None,
) -> list[Question]:
    """The ``worst`` sampled units by ``metric``, as questions not already in ``existing``.

    Args:
        sample: The day's draw (``sample.parquet``).
        scores: Unit (or ``request_id``) × ``metric`` × ``value`` with ``status``; only ok
            values rank, and every ok metric of a unit goes into its provenance.
        requests: The day's requests (``requests.parquet``): the text, filters and ids.
        metric: The metric to rank by.
        worst: How many to promote (before dropping those already in ``existing``).
        higher_is_better: Whether a high ``metric`` is good (the worst are then the lowest).
        existing: The question set to deduplicate against.
        audit: The audit's name, recorded in the provenance.
        day: The audit day (``YYYY-MM-DD``), recorded in the provenance.
        talks: The sampled requests' conversations (``_sessions.conversations``): a
            follow-up is promoted with its session's earlier turns.

    Raises:
        ValueError: ``metric`` has no ok value in ``scores``.
    """
    key = "unit" if "unit" in scores.columns else "request_id"
    ok = scores.filter(pl.col("status") == "ok", pl.col("value").is_not_null())
    if key == "unit":
        # Several requests of a unit taken with certainty are graded (ADR 21): the unit's value
        # is their mean, its row its representative's (the first) with their weights added.
        ok = ok.group_by("unit", "metric", maintain_order=True).agg(pl.col("value").mean())
        sample = sample.group_by("unit", maintain_order=True).agg(
            pl.all().exclude("weight").first(), pl.col("weight").sum()
        )
    ranked = (
        sample.join(ok.filter(pl.col("metric") == metric).select(key, "value"), on=key)
        .sort(
            ["value", "weight", "unit"],
            descending=[not higher_is_better, True, False],
        )
        .head(worst)
    )
    if ranked.is_empty() and worst > 0:
        known = sorted(set(ok["metric"].to_list()))
        raise ValueError(f"no ok value of metric {metric!r} to promote by (metrics: {known})")
    by_unit = {
        u: dict(zip(m, v, strict=True))
        for u, m, v in ok.group_by(key)
        .agg("metric", "value")
        .select(key, "metric", "value")
        .iter_rows()
    }
    lazy = requests.lazy() if isinstance(requests, pl.DataFrame) else requests
    asked = (
        lazy.select(
            "request_id", "segment", "query", "filters", normalised_query().alias("query_norm")
        )
        .join(ranked.lazy().select("segment", "query_norm"), on=["segment", "query_norm"])
        .sort("request_id")
        .collect()
    )
    ids_of: dict[tuple[str, str], list[str]] = {}
    text_of: dict[str, tuple[str, str]] = {}
    for rid, segment, query, filters, norm in asked.iter_rows():
        ids_of.setdefault((segment, norm), []).append(rid)
        text_of[rid] = (query, filters)
    seen_ids = {q.question_id for q in existing}
    seen_text = {_same(q.question, q.filters, q.history or ()) for q in existing}
    talks = talks or {}
    out: list[Question] = []
    for row in ranked.iter_rows(named=True):
        query, filters_text = text_of[row["request_id"]]
        filters = json.loads(filters_text) if filters_text else {}
        talk = talks.get(row["request_id"])
        history = talk.history if talk is not None else ()
        qid = question_id(row["unit"], history)
        same = _same(query, filters, history)
        if qid in seen_ids or same in seen_text:
            continue
        seen_ids.add(qid)
        seen_text.add(same)
        turn: dict[str, Any] = {}
        if talk is not None and history:
            turn = {"conversation_id": talk.session, "turn": talk.turn, "history": list(history)}
        others = [r for r in ids_of[(row["segment"], row["query_norm"])] if r != row["request_id"]]
        out.append(
            Question(
                question_id=qid,
                question=query.strip(),
                language=detect_language(query),
                filters=filters,
                metadata={
                    "source": "audit",
                    "audit": audit,
                    "day": day,
                    "unit": row["unit"],
                    "segment": row["segment"],
                    "band": row["band"],
                    "request_ids": [row["request_id"], *others][:REQUEST_IDS],
                    "requests": row["count"],
                    "weight": row["weight"],
                    "promoted_by": {"metric": metric, "value": row["value"]},
                    "scores": by_unit.get(row[key], {}),
                    **({"history_incomplete": True} if talk and talk.incomplete else {}),
                },
                **turn,
            )
        )
    return out


def write_question_set(questions: Sequence[Question], path: Path) -> Path:
    """The questions as a JSONL question set (``ragaudit run`` reads it), atomically, redacted."""
    lines = [
        json.dumps(q.model_dump(mode="json", exclude_none=True), ensure_ascii=False)
        for q in questions
    ]
    text = "\n".join(lines) + "\n" if lines else ""
    atomic.write_bytes(redact(text).encode("utf-8"), Path(path))
    return Path(path)


def promote_day(
    runs_root: Path,
    name: str,
    day: dt.date,
    *,
    output: Path,
    worst: int = 50,
    metric: str | None = None,
    against: Path | None = None,
    replace: bool = False,
) -> int:
    """Write an audit day's worst sampled requests as a question set; returns how many.

    Args:
        runs_root: The runs root holding ``audit-<name>/<day>/``.
        name: The audit's name.
        day: The audit day.
        output: The JSONL question set written (``ragaudit run --questions``).
        worst: Requests promoted, before those already in ``against`` are left out.
        metric: The metric ranked by (default: nDCG@k within the served list).
        against: An existing question set whose questions are not promoted again.
        replace: Write over ``output`` when it exists (else refused: it may be a curated set).

    Raises:
        InputError: No finished audit day there, no value of ``metric`` to rank by, or
            ``output`` exists and ``replace`` is not given (before anything is read).
    """
    if Path(output).exists() and not replace:
        raise InputError(
            f"--output {output}: the file exists (a question set of yours?); give another "
            "file, or --force to replace it"
        )
    folder = Path(runs_root) / check_run_id(f"audit-{name}") / day.isoformat()
    if not (folder / SCORES).is_file():
        raise InputError(
            f"{folder}: no finished audit day (no {SCORES}); run ragaudit audit --day "
            f"{day.isoformat()} first"
        )
    k = stored_setting(folder, "audit.k", 10)
    by = metric or f"ndcg@{k}"
    sample = pl.read_parquet(folder / SAMPLE)
    stored = stored_config(folder)
    talks = (
        {}
        if stored is None or stored.audit is None
        else conversations(
            folder.parent, stored.audit, day, folder / REQUESTS, sample["request_id"].to_list()
        )
    )
    try:
        questions = promote(
            sample,
            pl.read_parquet(folder / SCORES),
            pl.scan_parquet(folder / REQUESTS),
            metric=by,
            worst=worst,
            higher_is_better=higher_is_better(by),
            existing=load_questions(against) if against is not None else (),
            audit=name,
            day=day.isoformat(),
            talks=talks,
        )
    except ValueError as exc:
        raise InputError(f"--metric {by}: {exc}") from None
    write_question_set(questions, output)
    return len(questions)


__all__ = ["promote_day", "REQUEST_IDS", "promote", "question_id", "write_question_set"]
