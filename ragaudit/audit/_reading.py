"""A day's traffic read and drawn: the requests, the sample, the served lists graded.

Reading goes through the registered reader ``audit.source.format`` names (``read_day``), the
draw through the day's design (``draw_sample``, ADR 13 and 21); the documents logged by id only
get their texts from the backend, only for the sampled requests; a sampled request of a session
comes with its session's earlier turns (``_sessions.py``).
"""

from __future__ import annotations

import datetime as dt
import inspect
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import polars as pl

from ragaudit._audit_config import AuditSection
from ragaudit._conversation_config import ConversationConfig
from ragaudit.audit._content import resolve_texts
from ragaudit.audit._sample import draw_sample, strata_table
from ragaudit.audit._served import Served, audit_section
from ragaudit.audit._sessions import Conversation, conversations, session_turns
from ragaudit.audit._source import ReadReport, read_day
from ragaudit.cache import Gateway, items_in_flight
from ragaudit.config import RunConfig
from ragaudit.judging import Judge, prompt_tokens
from ragaudit.lang import detect_language


def judge_of(config: RunConfig, gateway: Gateway | None) -> Judge:
    """The judge a day grades and scores with (a dry run's has no gateway)."""
    return Judge.from_config(config.models, gateway, items_in_flight(config))  # type: ignore[arg-type]


def read_traffic(section: AuditSection, day: dt.date, out: Path) -> ReadReport:
    """The day's requests read by the section's reader, redacted, to ``out``."""
    return read_day(
        section.source,
        section.redact,
        day,
        # No segment expression: a literal null, so every request is in "(none)".
        segment=section.segment or "`null`",
        out=out,
        max_bad_share=section.max_bad_share,
    )


def doc_rows(docs: Sequence[Mapping[str, Any]] | None, k: int) -> list[dict[str, Any]]:
    ordered = sorted(docs or [], key=lambda d: d.get("rank") or 0)
    return [
        {
            "rank": int(d.get("rank") or i),
            "id": str(d.get("id") or ""),
            "text": d.get("text"),
            "changed": bool(d.get("changed") or False),
        }
        for i, d in enumerate(ordered[:k], start=1)
    ]


def sampled_rows(requests: Path, sample: pl.DataFrame) -> pl.DataFrame:
    """The rows of ``requests.parquet`` the sample drew (read lazily: only those)."""
    ids = sample["request_id"].to_list()
    return pl.scan_parquet(requests).filter(pl.col("request_id").is_in(ids)).collect()


async def fetch_missing_texts(config: RunConfig, rows: pl.DataFrame) -> pl.DataFrame:
    """``rows`` with the texts of documents logged by id only fetched from the backend.

    Only the sampled requests are read, so the fetch is bounded by the sample. A backend that
    cannot fetch by id leaves those documents without text: they are skipped, saying why.
    Where the log carries a content hash, a text that changed since it was served is flagged
    and kept out of grading (``resolve_texts``).
    """
    docs = rows["docs"].to_list() if rows.height else []
    if not any(d["text"] is None for ds in docs for d in ds or ()):
        return rows
    from ragaudit.search import FetchingBackend, make_search_backend

    section = audit_section(config)
    backend = make_search_backend(config)
    try:
        if not isinstance(backend, FetchingBackend):
            return rows
        return await resolve_texts(
            rows,
            backend.fetch_texts,
            redact=section.redact,
            hash_algorithm=section.source.hash_algorithm,
        )
    finally:
        # An engine's async client belongs to this loop: ``aclose`` closes it (and the sync one).
        close = getattr(backend, "aclose", None) or getattr(backend, "close", None)
        if close is not None:
            done = close()
            if inspect.isawaitable(done):
                await done


def served_of(
    r: Mapping[str, Any],
    talk: Conversation | None,
    k: int,
    *,
    unit: str = "",
    segment: str = "",
) -> Served:
    """A logged request (a ``requests.parquet`` row) as served, its top ``k`` documents.

    Its language detected, and its turn and earlier turns when ``talk`` places it in a session.
    """
    return Served(
        request_id=r["request_id"],
        unit=unit,
        segment=segment,
        query=r["query"],
        language=detect_language(r["query"]),
        answer=r.get("answer"),
        citations=r.get("citations"),
        docs=doc_rows(r.get("docs"), k),
        session=None if talk is None else talk.session,
        turn=None if talk is None else talk.turn,
        history=() if talk is None else talk.history,
        history_incomplete=False if talk is None else talk.incomplete,
    )


def served_requests(
    rows: pl.DataFrame,
    sample: pl.DataFrame,
    k: int,
    talks: Mapping[str, Conversation] | None = None,
) -> list[Served]:
    """The sampled requests with their top ``k`` served documents, in the sample's order.

    ``talks``: the conversations of the requests with a session (:func:`conversations`):
    each one's turn and its session's earlier turns.
    """
    by_id = {r["request_id"]: r for r in rows.iter_rows(named=True)}
    talks = talks or {}
    return [
        served_of(
            by_id[u["request_id"]],
            talks.get(u["request_id"]),
            k,
            unit=u["unit"],
            segment=u["segment"],
        )
        for u in sample.iter_rows(named=True)
        if u["request_id"] in by_id
    ]


def sampled_served(
    section: AuditSection,
    root: Path,
    day: dt.date,
    requests: Path,
    rows: pl.DataFrame,
    sample: pl.DataFrame,
) -> list[Served]:
    """The sampled requests (``rows``, their texts fetched) as served, each with its history.

    ``root``: the audit's folder of days, where a session's earlier turns are read.
    """
    talks = conversations(root, section, day, requests, sample["request_id"].to_list())
    return served_requests(rows, sample, section.k, talks)


def tokens_per_request(
    section: AuditSection,
    root: Path,
    window: ConversationConfig,
    day: dt.date,
    requests: Path,
    judge: Judge,
) -> float:
    """Mean judge prompt tokens of grading one request's top k (what a budget draws against).

    Measured on the day's first 200 requests with the grading prompt as it is sent, a turn's
    with its session's earlier turns (bounded by ``window`` as its judge prompts are).
    """
    head = pl.scan_parquet(requests).head(200).collect()
    talks = conversations(root, section, day, requests, head["request_id"].to_list())
    totals = []
    for r in head.iter_rows(named=True):
        served = served_of(r, talks.get(r["request_id"]), section.k)
        q = served.judged(window, judge)
        totals.append(sum(prompt_tokens(judge, q, d["text"]) for d in served.docs if d["text"]))
    return sum(totals) / len(totals) if totals else 0.0


def draw(
    section: AuditSection,
    root: Path,
    window: ConversationConfig,
    day: dt.date,
    requests: Path,
    judge: Judge,
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The day's sample and every stratum of the day, drawn from or not.

    Each request with its ``turn`` and ``history_incomplete`` (:func:`session_turns`): the
    sample's rows carry them, and ``audit.turn_strata`` stratifies by them. ``window``: the
    conversation window a budget's prompt tokens are counted with.
    """
    per = (
        tokens_per_request(section, root, window, day, requests, judge)
        if section.max_judge_tokens is not None
        else None
    )
    turns = session_turns(root, section, day, requests)
    traffic = pl.scan_parquet(requests).join(turns.lazy(), on="request_id", how="left")
    opts = section.sampling()
    return (
        draw_sample(traffic, opts, salt=section.name, tokens_per_request=per),
        strata_table(traffic, opts, salt=section.name, tokens_per_request=per),
    )


__all__ = [
    "doc_rows",
    "draw",
    "fetch_missing_texts",
    "judge_of",
    "read_traffic",
    "sampled_rows",
    "sampled_served",
    "served_of",
    "served_requests",
    "tokens_per_request",
]
