"""An audit day's requests as conversations: turns in time order, earlier turns from the days
before (or history incomplete), a turn's judge question, turn bands as strata, estimates by turn."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest
from support.audit_chats import chat_yaml

from ragaudit.audit._estimate import estimate, estimate_turns
from ragaudit.audit._sample import SAMPLE_COLUMNS, draw_sample, strata_table
from ragaudit.audit._served import REQUESTS, Served, audit_dir, audit_root, audit_section
from ragaudit.audit._sessions import (
    LOOKBACK_DAYS,
    NO_SESSION,
    Conversation,
    conversations,
    session_turns,
    turn_cell,
    turn_kind,
)
from ragaudit.config import RunConfig, load_config
from ragaudit.conversation import ConversationConfig
from ragaudit.dataset import Question
from ragaudit.judging import Judge, pair_key
from ragaudit.schemas import AUDIT_REQUESTS, to_table

DAY = dt.date(2026, 11, 26)


def _config(tmp: Path, **audit: Any) -> RunConfig:
    return load_config(chat_yaml(tmp, **audit))


def _at(day: dt.date, hour: int, minute: int = 0) -> dt.datetime:
    return dt.datetime.combine(day, dt.time(hour, minute), dt.UTC)


def _request(rid: str, session: str | None, time: dt.datetime | None, query: str) -> dict:
    return {
        "request_id": rid,
        "time": time,
        "session": session,
        "query": query,
        "filters": "{}",
        "segment": "(none)",
        "docs": [{"rank": 1, "id": "d1", "text": f"about {query}", "content_hash": None}],
        "answer": f"answer to {query}",
        "origin": f"log:{rid}",
    }


def _write(path: Path, rows: list[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    pl.from_arrow(to_table(rows, AUDIT_REQUESTS)).write_parquet(path)
    return path


def _audited(config: RunConfig, day: dt.date, rows: list[dict]) -> Path:
    """A day folder of the audit as a finished day leaves it: its requests and stored config."""
    folder = audit_dir(config, day)
    _write(folder / REQUESTS, rows)
    manifest = {"kind": "audit", "config": config.model_dump(mode="json")}
    (folder / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    return folder


def _talks(config: RunConfig, requests: Path, ids: list[str]) -> dict[str, Conversation]:
    return conversations(audit_root(config), audit_section(config), DAY, requests, ids)


def _turns(config: RunConfig, requests: Path) -> dict[str, tuple[int | None, bool]]:
    frame = session_turns(audit_root(config), audit_section(config), DAY, requests)
    return {r: (t, i) for r, t, i in frame.iter_rows()}


def test_a_sessions_requests_are_its_turns_in_time_order(tmp_path: Path) -> None:
    config = _config(tmp_path)
    _audited(config, DAY - dt.timedelta(days=1), [_request("eve", None, _at(DAY, 0), "x")])
    rows = [
        # Logged out of order; two at the same minute keep the log's order; no time comes last.
        _request("c", "s1", _at(DAY, 9, 30), "third"),
        _request("a", "s1", _at(DAY, 9, 0), "first"),
        _request("b1", "s1", _at(DAY, 9, 10), "second"),
        _request("b2", "s1", _at(DAY, 9, 10), "second again"),
        _request("late", "s1", None, "no time"),
        _request("other", "s2", _at(DAY, 8, 0), "alone in s2"),
        _request("none", None, _at(DAY, 7, 0), "no session"),
    ]
    requests = _write(tmp_path / "day" / REQUESTS, rows)
    assert _turns(config, requests) == {
        "a": (1, False),
        "b1": (2, False),
        "b2": (3, False),
        "c": (4, False),
        "late": (5, False),
        "other": (1, False),
        "none": (None, False),
    }
    talks = _talks(config, requests, ["c", "other", "none"])
    assert set(talks) == {"c", "other"}  # a request without a session has no conversation
    c = talks["c"]
    assert c.turn == 4 and not c.incomplete
    assert [(t.role, t.text) for t in c.history] == [
        ("user", "first"),
        ("assistant", "answer to first"),
        ("user", "second"),
        ("assistant", "answer to second"),
        ("user", "second again"),
        ("assistant", "answer to second again"),
    ]
    assert talks["other"].history == () and talks["other"].turn == 1


def test_a_session_begun_the_day_before_takes_its_earlier_turns_from_it(tmp_path: Path) -> None:
    config = _config(tmp_path)
    before = DAY - dt.timedelta(days=1)
    _audited(config, before - dt.timedelta(days=1), [_request("e", None, _at(before, 1), "x")])
    _audited(
        config,
        before,
        [
            _request("y2", "night", _at(before, 23, 55), "which tram goes there"),
            _request("y1", "night", _at(before, 23, 50), "museums in Kyoto"),
            _request("y0", "done", _at(before, 12, 0), "another chat, over by night"),
        ],
    )
    requests = _write(
        tmp_path / "day" / REQUESTS,
        [
            _request("t1", "night", _at(DAY, 0, 5), "is it open on mondays"),
            _request("t0", "new", _at(DAY, 9, 0), "a chat of the day"),
        ],
    )
    assert _turns(config, requests) == {"t1": (3, False), "t0": (1, False)}
    talk = _talks(config, requests, ["t1"])["t1"]
    assert [t.text for t in talk.history if t.role == "user"] == [
        "museums in Kyoto",
        "which tram goes there",
    ]


def test_without_the_day_before_a_session_is_history_incomplete(tmp_path: Path) -> None:
    config = _config(tmp_path)
    requests = _write(
        tmp_path / "day" / REQUESTS,
        [
            _request("t1", "night", _at(DAY, 0, 5), "is it open on mondays"),
            _request("t2", "night", _at(DAY, 0, 9), "and on sundays"),
            _request("n", None, _at(DAY, 3), "no session: nothing missing"),
        ],
    )
    # No day before: any session may have begun before the day; judged with what there is.
    assert _turns(config, requests) == {"t1": (1, True), "t2": (2, True), "n": (None, False)}
    talk = _talks(config, requests, ["t2"])["t2"]
    assert talk.incomplete and [t.text for t in talk.history][0] == "is it open on mondays"


def test_a_day_before_read_or_redacted_otherwise_is_not_taken(tmp_path: Path) -> None:
    config = _config(tmp_path)
    other = _config(tmp_path, redact={"patterns": [{"name": "city", "pattern": "Kyoto"}]})
    before = DAY - dt.timedelta(days=1)
    _audited(other, before, [_request("y1", "night", _at(before, 23, 50), "museums in Kyoto")])
    requests = _write(
        tmp_path / "day" / REQUESTS,
        [_request("t1", "night", _at(DAY, 0, 5), "is it open on mondays")],
    )
    # Its texts were redacted otherwise than today's would be: not shown to today's judge.
    assert _turns(config, requests) == {"t1": (1, True)}
    assert _talks(config, requests, ["t1"])["t1"].history == ()


def test_the_walk_back_is_bounded(tmp_path: Path) -> None:
    config = _config(tmp_path)
    for back in range(1, LOOKBACK_DAYS + 2):
        when = DAY - dt.timedelta(days=back)
        _audited(config, when, [_request(f"d{back}", "forever", _at(when, 12), f"day {back}")])
    requests = _write(
        tmp_path / "day" / REQUESTS, [_request("t", "forever", _at(DAY, 12), "today")]
    )
    # Seven days read, the session in each: it may go back further still.
    assert _turns(config, requests) == {"t": (LOOKBACK_DAYS + 1, True)}


def _served(turn: int | None, history: list[tuple[str, str]] = ()) -> Served:
    from ragaudit.dataset import Turn

    return Served(
        request_id="r",
        unit="u",
        segment="(none)",
        query="is it open on mondays",
        language="en",
        answer="yes",
        citations=None,
        docs=[],
        session=None if turn is None else "s",
        turn=turn,
        history=tuple(Turn(role=r, text=t) for r, t in history),  # type: ignore[arg-type]
    )


def test_a_turns_judge_question_holds_its_history_and_a_first_turns_is_unchanged() -> None:
    judge = Judge(None, "fake/judge", window=8192, max_tokens=512)  # type: ignore[arg-type]
    conversation = ConversationConfig(max_history_turns=1)
    today = Question(question_id="r", question="is it open on mondays", language="en")
    alone, first = _served(None), _served(1)
    assert alone.judged(conversation, judge) == today
    assert first.judged(conversation, judge).question == today.question
    assert pair_key(judge, first.judged(conversation, judge), "t") == pair_key(judge, today, "t")
    third = _served(
        3,
        [
            ("user", "museums in Lisbon"),
            ("assistant", "the Gulbenkian"),
            ("user", "how much is a ticket there"),
            ("assistant", "15 euros"),
        ],
    )
    text = third.judged(conversation, judge).question
    # The conversation section bounds it as a run's turn: one exchange kept, one left out.
    assert "how much is a ticket there" in text and "Lisbon" not in text
    assert "[1 earlier exchange(s) left out]" in text and text.endswith("is it open on mondays")
    assert pair_key(judge, third.judged(conversation, judge), "t") != pair_key(judge, today, "t")


def _traffic() -> pl.DataFrame:
    """A day of 600 requests: queries asked at several turns, some without a session."""
    rng = np.random.default_rng(7)
    n = 600
    turns = rng.choice([1, 1, 1, 2, 2, 3, 4, 6, 9], size=n)
    return pl.DataFrame(
        {
            "request_id": [f"r{i}" for i in range(n)],
            "segment": rng.choice(["a", "b"], size=n).tolist(),
            "query": [f"q{int(x)}" for x in rng.zipf(1.6, size=n) % 80],
            "turn": [None if i % 10 == 0 else int(t) for i, t in enumerate(turns)],
            "history_incomplete": [i % 25 == 0 for i in range(n)],
        },
        schema_overrides={"turn": pl.Int64},
    )


def test_by_default_the_design_is_todays_and_turn_strata_split_units_by_turn_band() -> None:
    from ragaudit._audit_config import SampleOptions

    traffic = _traffic()
    plain = draw_sample(
        traffic.drop("turn", "history_incomplete").lazy(), SampleOptions(sample=60), salt="s"
    )
    with_turns = draw_sample(traffic.lazy(), SampleOptions(sample=60), salt="s")
    today = [c for c in SAMPLE_COLUMNS if c not in ("turn", "history_incomplete")]
    # Turns read or not, the default draws the same requests with the same weights.
    assert plain.select(today).equals(with_turns.select(today))
    assert plain["turn"].is_null().all() and not plain["history_incomplete"].any()
    assert with_turns.columns == list(SAMPLE_COLUMNS)
    by_turn = draw_sample(traffic.lazy(), SampleOptions(sample=60, turn_strata=True), salt="s")
    strata = strata_table(traffic.lazy(), SampleOptions(sample=60, turn_strata=True), salt="s")
    assert set(strata["turn_band"]) == {"1", "2", "3-5", "6+", NO_SESSION}
    assert all(
        s.endswith(f"/turn {t}") for s, t in strata.select("stratum", "turn_band").iter_rows()
    )
    assert by_turn["unit"].str.starts_with("u1t:").all()
    # Each unit is one query at one turn band: its requests' turns all fall in its band.
    bands = by_turn.with_columns(pl.col("stratum").str.split("/turn ").list.last().alias("b"))
    for band, turn in bands.select("b", "turn").iter_rows():
        assert band == turn_cell(turn)
    # Weights still stand for the day: every stratum's requests.
    assert by_turn["weight"].sum() == pytest.approx(traffic.height, rel=0.35)


def test_estimates_by_turn_are_domains_of_the_days_design() -> None:
    from ragaudit._audit_config import SampleOptions

    traffic = _traffic()
    sample = draw_sample(traffic.lazy(), SampleOptions(sample=120), salt="s")
    rng = np.random.default_rng(3)
    values = pl.DataFrame(
        {
            "request_id": sample["request_id"],
            "metric": ["m"] * sample.height,
            "value": rng.uniform(size=sample.height).round(3),
            "status": ["ok"] * sample.height,
        }
    )
    overall = estimate(values, sample).filter(pl.col("segment") == "(all)").row(0, named=True)
    turns = estimate_turns(values, sample)
    bands = turns.filter(pl.col("breakdown") == "turn_band")
    kinds = turns.filter(pl.col("breakdown") == "turn_kind")
    # Every graded request in exactly one cell of each breakdown.
    assert bands["n"].sum() == kinds["n"].sum() == overall["n"]
    assert bands["requests"].sum() == pytest.approx(overall["requests"])
    joined = sample.join(values, on="request_id")
    cells = joined.with_columns(
        pl.Series(
            "kind",
            [turn_kind(t, i) for t, i in joined.select("turn", "history_incomplete").iter_rows()],
        )
    )
    for row in kinds.iter_rows(named=True):
        part = cells.filter(pl.col("kind") == row["cell"])
        w, y = part["weight"].to_numpy(), part["value"].to_numpy()
        assert row["estimate"] == pytest.approx(float((w * y).sum() / w.sum()))
        assert row["incomplete"] == int(part["history_incomplete"].sum())
        if row["n"] >= 5:
            assert row["se"] > 0 and row["ci_low"] < row["estimate"] < row["ci_high"]
    assert set(kinds["cell"]) <= {"standalone", "follow-up", "(unknown)", NO_SESSION}
    # The interval is the design's (the same estimator over the whole sample, the cell its
    # domain): a cell's interval is wider than the whole day's.
    follow = kinds.filter(pl.col("cell") == "follow-up").row(0, named=True)
    assert follow["method"] == overall["method"]
    assert follow["se"] > overall["se"]


def test_a_day_without_sessions_has_no_turn_breakdown() -> None:
    from ragaudit._audit_config import SampleOptions

    traffic = _traffic().drop("turn", "history_incomplete")
    sample = draw_sample(traffic.lazy(), SampleOptions(sample=40), salt="s")
    values = pl.DataFrame(
        {
            "request_id": sample["request_id"],
            "metric": ["m"] * sample.height,
            "value": [0.5] * sample.height,
            "status": ["ok"] * sample.height,
        }
    )
    assert estimate_turns(values, sample).is_empty()
