"""A day's requests as conversations: the requests of one ``session``, ordered by time.

A request's turn is its place in its session (1: the first), its history the session's earlier
requests — each one's query and answer, as ``requests.parquet`` holds them: redacted as the
day's own texts are — and it is judged with that history exactly as a run judges a turn
(:func:`ragaudit.conversation.in_context`, bounded by the ``conversation`` section). Within a
day the session's requests are ordered by time, then as the log holds them (a request without a
time comes after those with one). A request without a session stands alone: no turn, no
history, its prompts and keys a question's that stands alone.

A session can have begun before the day. Its earlier requests are then read from the days
before, newest first, in this audit's day folders (each day's ``requests.parquet``, only the
rows of the sessions still needed, a few columns): a session the day before does not hold began
on the day; one it holds is looked for the day before that, and so on, for at most
:data:`LOOKBACK_DAYS` days. Where the walk stops before every session is placed — a day not
audited, its traffic read or redacted otherwise (``audit.source``, ``audit.redact``), or the
bound reached — the sessions still open may have begun earlier still: their requests are
**history incomplete**, judged with the turns that were found, their turn a lower bound. On
the first day an audit reads, every request of a session is, since none can be placed.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from ragaudit._audit_config import AuditSection
from ragaudit._section import measured
from ragaudit.audit._served import REQUESTS
from ragaudit.dataset import TURN_BANDS, Turn, turn_band
from ragaudit.runfolder import stored_config

LOOKBACK_DAYS = 7
"""Days before the audited one a session's earlier requests are looked for, at most: a session
still open a week back is history incomplete."""
NO_SESSION = "(no session)"
"""The turn cell of requests without a session (their place in a conversation is unknown)."""
TURN_CELLS = (*TURN_BANDS, NO_SESSION)
"""Turn bands as the audit's strata and breakdowns name them."""
KIND_CELLS = ("standalone", "follow-up", "(unknown)", NO_SESSION)
"""A request by its place in its session: the first of its session (stands alone), a later one
(follows up), the first found of a session that may have begun before (unknown), none."""


@dataclass(frozen=True)
class Conversation:
    """A request's place in its session: its turn and the turns before it."""

    session: str
    turn: int
    """Its place among its session's requests, from 1 (a lower bound when incomplete)."""
    history: tuple[Turn, ...]
    """The session's earlier requests, oldest first: each query, then its answer if any."""
    incomplete: bool
    """The session may have begun before the earliest day read: turns may be missing."""


def turn_cell(turn: int | None) -> str:
    """The turn band a request is counted in (:data:`NO_SESSION` without a session)."""
    return turn_band(turn) or NO_SESSION


def turn_cells(turn: str = "turn") -> pl.Expr:
    """:func:`turn_cell` of a column of turns (the bands of :func:`ragaudit.dataset.turn_band`)."""
    bands = {t: turn_cell(t) for t in range(1, 7)}  # every turn from 6 on is "6+"
    return (
        pl.col(turn)
        .clip(1, 6)
        .replace_strict(bands, default=None, return_dtype=pl.String)
        .fill_null(NO_SESSION)
    )


def turn_kind(turn: int | None, incomplete: bool | None) -> str:
    """``standalone``, ``follow-up``, ``(unknown)`` or :data:`NO_SESSION` (:data:`KIND_CELLS`)."""
    if turn is None:
        return NO_SESSION
    if turn > 1:
        return "follow-up"
    return "(unknown)" if incomplete else "standalone"


def same_reading(then: AuditSection, now: AuditSection) -> bool:
    """Whether a day read under ``then`` read and redacted its traffic as ``now`` does.

    Its requests are then the same texts today's would be: a history from them shows the judge
    nothing today's redaction would have replaced.
    """
    return measured(then.source) == measured(now.source) and measured(then.redact) == measured(
        now.redact
    )


def requests_of_day(root: Path, section: AuditSection, day: dt.date) -> Path | None:
    """``day``'s ``requests.parquet`` when it was read as ``section`` reads today's (else None).

    ``root`` is the audit's folder of days (``audit-<name>/``).
    """
    folder = root / day.isoformat()
    path = folder / REQUESTS
    if not path.is_file():
        return None
    then = stored_config(folder)
    if then is None or then.audit is None:
        return None
    return path if same_reading(then.audit, section) else None


def _ordered(frame: pl.LazyFrame, columns: Sequence[str]) -> pl.DataFrame:
    """``frame``'s ``columns`` with ``_place`` (from 1) in its session: by time, then as logged."""
    return (
        frame.with_row_index("_row")
        .filter(pl.col("session").is_not_null())
        .sort("session", "time", "_row", nulls_last=True)
        .with_columns((pl.int_range(pl.len()).over("session") + 1).alias("_place"))
        .select(*columns, "_place")
        .collect()
    )


def _sessions_filter(sessions: Collection[str]) -> pl.Expr:
    return pl.col("session").is_in(pl.Series(list(sessions), dtype=pl.String))


def earlier_requests(
    root: Path,
    section: AuditSection,
    day: dt.date,
    sessions: Iterable[str],
    columns: Sequence[str],
) -> tuple[list[pl.DataFrame], set[str]]:
    """The ``sessions``' requests on the days before ``day``, and the sessions still open.

    Walks back a day at a time, reading only the sessions the later days held (``columns``
    and ``_place``, their order within the day); stops when none is left, at a day not there
    (:func:`requests_of_day`) or after :data:`LOOKBACK_DAYS`.

    Returns:
        The days' rows, the earliest day first, and the sessions the walk left open (history
        incomplete).
    """
    found: list[pl.DataFrame] = []
    open_ = set(sessions)
    when = day
    for _ in range(LOOKBACK_DAYS):
        if not open_:
            break
        when -= dt.timedelta(days=1)
        path = requests_of_day(root, section, when)
        if path is None:
            break
        rows = _ordered(
            pl.scan_parquet(path)
            .select("session", "time", *columns)
            .filter(_sessions_filter(open_)),
            ["session", *columns],
        )
        found.append(rows)
        open_ = set(rows["session"].to_list())
    return found[::-1], open_


def session_turns(root: Path, section: AuditSection, day: dt.date, requests: Path) -> pl.DataFrame:
    """Every request of the day with its ``turn`` and ``history_incomplete``.

    ``root`` is the audit's folder of days (``audit-<name>/``), whose earlier days
    :func:`earlier_requests` reads as ``section`` reads today's.

    ``turn`` null and ``history_incomplete`` false for a request without a session. Reads the
    day's ``request_id``, ``session`` and ``time`` and the earlier days' ``session`` only.
    """
    day_rows = pl.scan_parquet(requests).select("request_id", "session", "time")
    today = _ordered(day_rows, ["request_id", "session"])
    sessions = today["session"].unique().to_list()
    earlier, incomplete = earlier_requests(root, section, day, sessions, [])
    before = (
        pl.concat([e.select("session") for e in earlier]).group_by("session").len("_before")
        if earlier
        else pl.DataFrame(schema={"session": pl.String, "_before": pl.UInt32})
    )
    placed = today.join(before, on="session", how="left").select(
        "request_id",
        (pl.col("_place") + pl.col("_before").fill_null(0)).cast(pl.Int64).alias("turn"),
        _sessions_filter(incomplete).alias("history_incomplete"),
    )
    return (
        day_rows.select("request_id")
        .collect()
        .join(placed, on="request_id", how="left")
        .with_columns(pl.col("history_incomplete").fill_null(False))
    )


def conversations(
    root: Path,
    section: AuditSection,
    day: dt.date,
    requests: Path,
    request_ids: Iterable[str],
) -> dict[str, Conversation]:
    """The conversations of ``request_ids`` (those with a session): turn, history, whether whole.

    Reads the texts of those requests' sessions only: the day's, then the days before's.
    """
    ids = pl.Series(list(request_ids), dtype=pl.String)
    day_rows = pl.scan_parquet(requests)
    wanted = dict(
        day_rows.filter(pl.col("request_id").is_in(ids) & pl.col("session").is_not_null())
        .select("request_id", "session")
        .collect()
        .iter_rows()
    )
    if not wanted:
        return {}
    sessions = set(wanted.values())
    columns = ["request_id", "query", "answer"]
    today = _ordered(
        day_rows.select("session", "time", *columns).filter(_sessions_filter(sessions)),
        ["session", *columns],
    )
    earlier, incomplete = earlier_requests(root, section, day, sessions, ["query", "answer"])
    turns: dict[str, list[Turn]] = {s: [] for s in sessions}
    counts: dict[str, int] = dict.fromkeys(sessions, 0)
    out: dict[str, Conversation] = {}
    for part in [*earlier, today]:
        for row in part.iter_rows(named=True):
            session = row["session"]
            rid = row.get("request_id")
            if rid is not None and wanted.get(rid) == session:
                out[rid] = Conversation(
                    session, counts[session] + 1, tuple(turns[session]), session in incomplete
                )
            counts[session] += 1
            turns[session].append(Turn(role="user", text=row["query"] or ""))
            if (row["answer"] or "").strip():
                turns[session].append(Turn(role="assistant", text=row["answer"]))
    return out


__all__ = [
    "KIND_CELLS",
    "LOOKBACK_DAYS",
    "NO_SESSION",
    "TURN_CELLS",
    "Conversation",
    "conversations",
    "earlier_requests",
    "requests_of_day",
    "same_reading",
    "session_turns",
    "turn_cell",
    "turn_cells",
    "turn_kind",
]
