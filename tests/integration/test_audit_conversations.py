"""An audit of chat traffic with the fake judge: a follow-up is judged with its session's earlier
turns (every grade and answer-metric prompt holds them, the fake provider records each), a first
turn's prompts and keys are a lone query's, a grade made under one history is not reused under
another, a session begun before midnight takes its turns from the day before or is history
incomplete, and the day's estimates and report break down by turn."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from support.audit_chats import CHATS, DAY, EVE, FIRST_DAY, chat_yaml, request_id, write_chat_logs

from ragaudit.audit import run_audit_day
from ragaudit.audit._reading import judge_of, tokens_per_request
from ragaudit.audit._score import samples_of
from ragaudit.cache import hold_gateway
from ragaudit.cache._fake import FAKE
from ragaudit.config import RunConfig, load_config

KYOTO = next(c for c in CHATS if c.city == "Kyoto")
LISBON = next(c for c in CHATS if c.city == "Lisbon")
BERLIN = next(c for c in CHATS if c.city == "Berlin")


def _days(config: RunConfig, days: list[str], *, record: str | None = None) -> dict[str, Any]:
    """Audit ``days`` in order; the judge requests of the day ``record`` (FakeRequest list)."""
    out: dict[str, Any] = {}

    async def run() -> None:
        with hold_gateway(config) as gateway:
            for day in days:
                FAKE.reset(keep_requests=day == record)
                out[day] = await run_audit_day(config, dt.date.fromisoformat(day), gateway=gateway)
                if day == record:
                    out["requests"] = list(FAKE.stats.requests)
        FAKE.reset()

    asyncio.run(run())
    return out


@pytest.fixture(scope="module")
def chats(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("chats")
    write_chat_logs(tmp)
    config = load_config(chat_yaml(tmp))
    out = _days(config, [EVE, FIRST_DAY, DAY], record=DAY)
    # The same traffic under an audit that never read the day before.
    alone = load_config(chat_yaml(tmp, name="travel-chat-today"))
    out["alone"] = _days(alone, [DAY])[DAY]
    out["config"], out["tmp"] = config, tmp
    return out


def _grades(requests: list[Any]) -> list[dict[str, Any]]:
    """The relevance prompts' inputs (question, context) the judge was sent."""
    return [r.payload for r in requests if r.title == "RelevanceGrade"]


def _text(request: Any) -> str:
    return "\n".join(str(m.get("content")) for m in request.messages)


def _rows(folder: Path, table: str) -> dict[str, dict[str, Any]]:
    return {r["request_id"]: r for r in pl.read_parquet(folder / table).iter_rows(named=True)}


def test_a_follow_ups_judge_prompts_hold_its_sessions_earlier_turns(chats: dict[str, Any]) -> None:
    requests = chats["requests"]
    asked = _grades(requests)
    # Berlin's turn 4 ("can I get there by tram"): graded with Berlin's first turn above it.
    opening = "which museum should I see in Berlin"
    berlin = [p["question"] for p in asked if opening in p["question"] and p["question"] != opening]
    assert len({q.rsplit("\n", 1)[-1] for q in berlin}) == 6  # turns 2 to 7
    assert all(q.startswith("The conversation so far") for q in berlin)
    fourth = [q for q in berlin if q.endswith("can I get there by tram")]
    assert fourth and all("how much is a ticket there" in q for q in fourth)
    # The answer metrics see it too: faithfulness' prompts, and the question every metric's
    # sample holds (answer relevancy compares it with questions the judge writes from the answer).
    faithfulness = [
        _text(r)
        for r in requests
        if r.stage == "audit-score:faithfulness" and "can I get there by tram" in _text(r)
    ]
    assert faithfulness and all(opening in t for t in faithfulness if "Berlin" in t)
    day = chats[DAY]
    samples, _ = samples_of(day.served, day.config.conversation, judge_of(day.config, None))
    sample = next(x for x in samples if x.question_id == request_id(BERLIN, 4))
    assert opening in sample.question and sample.question.endswith("can I get there by tram")


def test_a_first_turns_prompts_and_keys_are_a_lone_querys(chats: dict[str, Any]) -> None:
    asked = _grades(chats["requests"])
    first = [p for p in asked if p["question"] == "which museum should I see in Lisbon"]
    # Lisbon's first turn and the same query without a session: one prompt, one grade.
    assert first
    verdicts = pl.read_parquet(chats[DAY].folder / "verdicts.parquet")
    chat_first = verdicts.filter(pl.col("request_id") == request_id(LISBON, 1)).sort("rank")
    no_session = verdicts.filter(pl.col("request_id") == "alone-0").sort("rank")
    assert chat_first["grade"].to_list() == no_session["grade"].to_list()
    assert chat_first["turn"].to_list() == [1, 1] and no_session["turn"].is_null().all()
    assert not any(
        "conversation so far" in _text(r)
        for r in chats["requests"]
        if r.title == "RelevanceGrade"
        and r.payload["question"] == "which museum should I see in Lisbon"
    )


def test_a_grade_made_under_one_history_is_not_reused_under_another(chats: dict[str, Any]) -> None:
    # "how much is a ticket there", the same served text, after Lisbon and after Berlin.
    asked = {
        p["question"]
        for p in _grades(chats["requests"])
        if p["question"].endswith("how much is a ticket there")
        and p["context"].startswith("tickets")
    }
    assert len(asked) == 2 and {("Lisbon" in q, "Berlin" in q) for q in asked} == {
        (True, False),
        (False, True),
    }
    verdicts = pl.read_parquet(chats[DAY].folder / "verdicts.parquet")
    second = verdicts.filter(
        pl.col("request_id").is_in([request_id(LISBON, 2), request_id(BERLIN, 2)]),
        pl.col("rank") == 1,
    )
    # Neither took the other's grade (nor Kyoto's, graded the day before under its history).
    assert set(second["source"]) <= {"paid", "memo"} and second.height == 2


def test_a_session_crossing_midnight_takes_its_turns_from_the_day_before(
    chats: dict[str, Any],
) -> None:
    folder = chats[DAY].folder
    sample = _rows(folder, "sample.parquet")
    third, fourth = request_id(KYOTO, 3), request_id(KYOTO, 4)
    assert (sample[third]["turn"], sample[third]["history_incomplete"]) == (3, False)
    assert (sample[fourth]["turn"], sample[fourth]["history_incomplete"]) == (4, False)
    # Its prompts hold the turns asked before midnight: the city is named only there.
    kyoto = [
        p["question"]
        for p in _grades(chats["requests"])
        if p["question"].endswith("can I get there by tram") and "Kyoto" in p["question"]
    ]
    assert kyoto and all("how much is a ticket there" in q for q in kyoto)
    for table in ("verdicts.parquet", "scores.parquet"):
        rows = pl.read_parquet(folder / table).filter(pl.col("request_id") == third)
        assert rows["turn"].unique().to_list() == [3]
        assert not rows["history_incomplete"].any()
    # The first day: its chats began that day (the eve holds none of them).
    first = pl.read_parquet(chats[FIRST_DAY].folder / "sample.parquet")
    assert not first["history_incomplete"].any()


def test_without_the_day_before_a_session_is_history_incomplete(chats: dict[str, Any]) -> None:
    day = chats["alone"]
    sample = _rows(day.folder, "sample.parquet")
    third, fourth = request_id(KYOTO, 3), request_id(KYOTO, 4)
    # Judged with what the day holds: turn 3 as the session's first, turn 4 after it.
    assert (sample[third]["turn"], sample[third]["history_incomplete"]) == (1, True)
    assert (sample[fourth]["turn"], sample[fourth]["history_incomplete"]) == (2, True)
    served = {s.request_id: s for s in day.served}
    assert [t.text for t in served[fourth].history][0] == "is it open on mondays"
    assert served[third].history == ()
    assert sample["alone-0"]["history_incomplete"] is False
    report = (day.folder / "report.html").read_text(encoding="utf-8")
    assert "history incomplete</b>" in report
    counts = json.loads((day.folder / "manifest.json").read_text())["conversations"]
    # Every chat request of the day: none can be placed without the day before.
    assert counts["history_incomplete"] == counts["in_session"] == 12


def test_the_days_estimates_and_report_break_down_by_turn(chats: dict[str, Any]) -> None:
    folder = chats[DAY].folder
    turns = pl.read_parquet(folder / "turn_estimates.parquet")
    bands = turns.filter(pl.col("breakdown") == "turn_band", pl.col("metric") == "precision@2")
    assert bands["cell"].to_list() == ["1", "2", "3-5", "6+", "(no session)"]
    # Lisbon's and Berlin's first turns; 6+ is Berlin's turns 6 and 7.
    assert dict(bands.select("cell", "n").iter_rows()) == {
        "1": 2,
        "2": 2,
        "3-5": 6,
        "6+": 2,
        "(no session)": 2,
    }
    kinds = turns.filter(pl.col("breakdown") == "turn_kind", pl.col("metric") == "precision@2")
    assert dict(kinds.select("cell", "n").iter_rows()) == {
        "standalone": 2,
        "follow-up": 10,
        "(no session)": 2,
    }
    report = (folder / "report.html").read_text(encoding="utf-8")
    assert '<table id="turns">' in report and "follow-up" in report
    assert "10 follow-ups judged with their session" in report
    manifest = json.loads((folder / "manifest.json").read_text())
    assert "turn_estimates.parquet" in manifest["tables"]
    assert manifest["conversations"] == {
        "sessions": 3,
        "in_session": 12,
        "follow_ups": 10,
        "history_incomplete": 0,
    }


def test_the_budget_counts_a_turns_prompt_with_its_history(chats: dict[str, Any]) -> None:
    config: RunConfig = chats["config"]
    day = dt.date.fromisoformat(DAY)
    requests = chats[DAY].folder / "requests.parquet"
    judge = judge_of(config, None)
    section, root = config.audit, chats[DAY].folder.parent
    assert section is not None and section.k == 2
    with_history = tokens_per_request(section, root, config.conversation, day, requests, judge)
    alone = config.conversation.model_copy(update={"max_history_turns": 0})
    assert with_history > tokens_per_request(section, root, alone, day, requests, judge) > 0


def test_the_dry_run_counts_the_prompts_with_their_history(chats: dict[str, Any]) -> None:
    day = dt.date.fromisoformat(DAY)

    def plan(**conversation: Any) -> Any:
        config = load_config(chat_yaml(chats["tmp"], name="travel-chat-dry"))
        config = config.model_copy(
            update={"conversation": config.conversation.model_copy(update=conversation)}
        )
        out = asyncio.run(run_audit_day(config, day, dry_run=True)).plan
        assert out is not None
        return out

    # The same histories as the audit that never read the day before: its keys, all stored.
    same = plan()
    assert same.pairs == same.in_store == 28 and same.grade_calls == 0
    # One exchange of history kept: the later turns' prompts are others, to be asked.
    shorter = plan(max_history_turns=1)
    assert shorter.pairs == 28 and 0 < shorter.grade_calls < 28


def test_the_judge_check_asks_a_follow_up_again_with_its_history(chats: dict[str, Any]) -> None:
    from ragaudit.audit._served import AuditDay, audit_dir
    from ragaudit.audit._watch import recheck_judge

    config = chats["config"]
    first = audit_dir(config, dt.date.fromisoformat(FIRST_DAY))
    day = dt.date.fromisoformat(DAY)
    out: dict[str, Any] = {}

    async def run() -> None:
        with hold_gateway(config) as gateway:
            FAKE.reset(keep_requests=True)
            check_day = AuditDay(config, day, audit_dir(config, day), None, pl.DataFrame())
            out["check"] = await recheck_judge(check_day, first, judge_of(config, gateway), gateway)
            out["requests"] = list(FAKE.stats.requests)
        FAKE.reset()

    asyncio.run(run())
    asked = [p["question"] for p in _grades(out["requests"])]
    verdicts = pl.read_parquet(first / "verdicts.parquet")
    follow_ups = verdicts.filter(pl.col("turn") > 1, pl.col("status") == "ok")
    assert follow_ups.height and asked
    # The first day graded its follow-ups in context; the check asks them again the same way
    # (a bare follow-up would be graded otherwise and the judge called drifted for it).
    assert any("\n" in q for q in asked)
    assert all(q.count("\n") == 0 for q in asked if "which museum" in q.split("\n")[-1])
    assert out["check"] is not None and out["check"].n == len(asked)
    assert not out["check"].drifted


def test_a_promoted_follow_up_keeps_its_history(chats: dict[str, Any], tmp_path: Path) -> None:
    from ragaudit.audit import promote_day
    from ragaudit.dataset import load_questions

    config = chats["config"]
    out = tmp_path / "promoted.jsonl"
    day = dt.date.fromisoformat(DAY)
    n = promote_day(
        config.runs_root, "travel-chat", day, output=out, worst=500, metric="precision@2"
    )
    questions = load_questions(out)
    assert n == len(questions) > 0
    turns = [q for q in questions if q.turn is not None and q.turn > 1]
    assert turns and all(q.history and q.conversation_id for q in turns)
    # "how much is a ticket there" (one unit: Lisbon's and Berlin's) is promoted as its
    # representative was asked, after its own city's first turn.
    (ticket,) = [q for q in questions if q.question == "how much is a ticket there"]
    assert ticket.history and ticket.history[0].text in {
        "which museum should I see in Lisbon",
        "which museum should I see in Berlin",
    }
    assert all(not q.history for q in questions if q.turn is None)
    # Promoted again against the first set: nothing new (the histories are part of the match).
    again = tmp_path / "again.jsonl"
    kept = promote_day(
        config.runs_root,
        "travel-chat",
        day,
        output=again,
        worst=500,
        metric="precision@2",
        against=out,
    )
    assert kept == 0 and again.read_text(encoding="utf-8") == ""


def test_with_turn_strata_a_days_change_is_split_over_the_draws_units(
    chats: dict[str, Any],
) -> None:
    from ragaudit.audit._watch import _design

    config = load_config(chat_yaml(chats["tmp"], name="travel-chat-turns", turn_strata=True))
    days = _days(config, [FIRST_DAY, DAY])
    for name, day in days.items():
        design = _design(config, name, day.folder)
        assert design is not None and design.units is not None
        drawn = set(pl.read_parquet(day.folder / "sample.parquet")["unit"].to_list())
        # The day's queries counted as the draw counted them: a query at one turn band.
        assert drawn <= set(design.units["unit"].to_list())
    changes = pl.read_parquet(days[DAY].folder / "changes.parquet")
    assert changes.filter(pl.col("part") == "total", pl.col("pairs") > 0).height > 0
