"""How a turn is searched (``collect.query_form``): the utterance, its user turns, a rewrite.

A question without a history searches its text under every form; ``history`` joins the user
turns; ``rewrite`` takes a given rewrite without a call, else asks the judge (the prompt pinned
in English and Chinese); a rewrite the judge cannot give searches the history and says so.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ragaudit.cache import Gateway
from ragaudit.config import RunConfig
from ragaudit.dataset import Question, Turn, load_questions
from ragaudit.judging import Judge
from ragaudit.prompts.rewrite import REWRITE, ConversationTurn, RewriteInput
from ragaudit.query_forms import QUERY_FORMS, history_text, rewrite_input, search_queries

REPO = Path(__file__).resolve().parents[2]
CONVERSATION = RunConfig().conversation
HISTORY = [
    Turn(role="user", text="What is the VAT rate on books in France?"),
    Turn(role="assistant", text="Books are taxed at 5.5 % in France."),
    Turn(role="user", text="And on newspapers?"),
    Turn(role="assistant", text="2.1 %."),
]


def _turn(qid: str = "vat::3", **extra: Any) -> Question:
    return Question(question_id=qid, question="Does that apply in Germany too?", **extra)


def _judge(tmp_path: Path) -> Judge:
    gateway = Gateway(tmp_path / "cache", backoff_s=0.0, max_retries=0)
    return Judge(gateway=gateway, model="fake/judge", window=8192, max_tokens=256)


def test_the_forms_are_the_configs() -> None:
    assert QUERY_FORMS == ("last", "history", "rewrite")
    assert RunConfig().collect.query_form == "last"
    assert RunConfig(collect={"query_form": "rewrite"}).collect.query_form == "rewrite"
    with pytest.raises(ValueError, match="query_form"):
        RunConfig(collect={"query_form": "everything"})


def test_a_standalone_set_searches_its_text_under_every_form_without_a_judge() -> None:
    questions = load_questions(REPO / "data" / "demo" / "questions.jsonl")
    for form in QUERY_FORMS:
        # No judge given: none may be needed.
        got = asyncio.run(search_queries(questions, form, CONVERSATION, None))
        assert {qid: (s.text, s.source, s.error) for qid, s in got.items()} == {
            q.question_id: (q.question, "utterance", None) for q in questions
        }
    # A first turn (no history) is a lone question too.
    first = _turn("vat::1", conversation_id="vat", turn=1)
    assert asyncio.run(search_queries([first], "rewrite", CONVERSATION, None))["vat::1"].text == (
        first.question
    )


def test_history_joins_the_user_turns_oldest_first_then_the_utterance() -> None:
    q = _turn(history=HISTORY)
    assert history_text(q, CONVERSATION) == (
        "What is the VAT rate on books in France?\nAnd on newspapers?\n"
        "Does that apply in Germany too?"
    )
    got = asyncio.run(search_queries([q], "history", CONVERSATION, None))["vat::3"]
    assert (got.source, got.error) == ("history", None)
    assert got.text == history_text(q, CONVERSATION)
    # At most max_history_turns earlier exchanges, the newest; none at 0.
    one = RunConfig(conversation={"max_history_turns": 1}).conversation
    assert history_text(q, one) == "And on newspapers?\nDoes that apply in Germany too?"
    off = RunConfig(conversation={"max_history_turns": 0}).conversation
    assert history_text(q, off) == q.question
    # ``last`` is the utterance, whatever the history.
    assert asyncio.run(search_queries([q], "last", CONVERSATION, None))["vat::3"].text == (
        q.question
    )


def test_a_given_rewrite_is_searched_without_a_call(tmp_path: Path, fake: Any) -> None:
    given = "Does the French VAT rate on books apply in Germany?"
    q = _turn(history=HISTORY, rewrite=given)
    got = asyncio.run(search_queries([q], "rewrite", CONVERSATION, _judge(tmp_path)))["vat::3"]
    assert (got.text, got.source, got.error) == (given, "given", None)
    assert fake.stats.calls == 0
    # Only the rewrite form reads it.
    assert asyncio.run(search_queries([q], "last", CONVERSATION, None))["vat::3"].text == (
        q.question
    )


def test_the_judge_rewrites_a_turn_once_memoised(tmp_path: Path, fake: Any) -> None:
    q = _turn(history=HISTORY)
    judge = _judge(tmp_path)
    got = asyncio.run(search_queries([q], "rewrite", CONVERSATION, judge))["vat::3"]
    # The fake judge names the conversation's first question after the turn.
    assert got.source == "judge" and got.error is None
    assert got.text == (
        "Does that apply in Germany too? (What is the VAT rate on books in France?)"
    )
    [request] = fake.stats.requests
    assert request.title == "StandaloneQuestion"
    assert request.payload == rewrite_input(q, CONVERSATION, judge.model, judge.budget).model_dump()
    # The history the judge is shown, in the prompt: both earlier exchanges.
    assert "5.5 %" in request.user and "newspapers" in request.user
    again = asyncio.run(search_queries([q], "rewrite", CONVERSATION, judge))["vat::3"]
    assert again == got and fake.stats.calls == 1  # the memo answered


def test_a_rewrite_the_judge_cannot_give_searches_the_history_and_says_so(
    tmp_path: Path, fake: Any
) -> None:
    q = _turn(history=HISTORY)

    def broken(req: Any) -> str | None:
        return "I would rather not" if req.title == "StandaloneQuestion" else None

    with fake.script(broken):
        got = asyncio.run(search_queries([q], "rewrite", CONVERSATION, _judge(tmp_path)))
    query = got["vat::3"]
    assert query.source == "history" and query.form == "rewrite"
    assert query.text == history_text(q, CONVERSATION)
    assert query.error and query.error.startswith("rewrite failed (")
    assert query.error.endswith("searched the history form instead")


def _digest(messages: list[dict[str, Any]]) -> str:
    return hashlib.sha256(json.dumps(messages, ensure_ascii=False).encode()).hexdigest()[:16]


def test_the_rewrite_prompt_is_pinned_in_english_and_chinese() -> None:
    # Editing the prompt's text changes these digests: bump REWRITE.version with it, so the
    # memo never serves rewrites made under the old wording.
    inp = RewriteInput(
        conversation=[ConversationTurn(role="user", text="壁虎是益虫吗")], question="会咬人吗？"
    )
    en, zh = REWRITE.messages(inp, "en"), REWRITE.messages(inp, "zh")
    assert REWRITE.key == "rewrite@1"
    assert en[0]["content"].startswith("You prepare search queries for a search engine")
    assert zh[0]["content"].startswith("你为搜索引擎准备检索问题")
    assert "壁虎主要吃什么？" in zh[1]["content"]  # its own example
    assert {"en": _digest(en), "zh": _digest(zh)} == {
        "en": "0a6fac02189685d7",
        "zh": "1ffc6d70d4c6b825",
    }


def test_the_gain_by_turn_has_each_groups_n_and_paired_interval() -> None:
    from ragaudit.stats import paired_test
    from ragaudit.tuning import turn_gains

    turns = [
        Question(question_id=f"c{c}::{t}", question="q", conversation_id=f"c{c}", turn=t)
        for c in range(4)
        for t in (1, 2, 4, 7)
    ]
    labelled = Question(question_id="k", question="q", turn=3, turn_kind="standalone")
    lone = Question(question_id="lone", question="q")
    questions = [*turns, labelled, lone]
    base = {q.question_id: 0.5 for q in questions}
    # Rewriting helps later turns, more the later they are; the first ones search alike.
    better = {
        q.question_id: 0.5 + 0.05 * ((q.turn or 1) - 1) + 0.01 * (sum(map(ord, q.question_id)) % 3)
        for q in questions
    }
    better.update({q.question_id: 0.5 for q in questions if (q.turn or 1) == 1})
    values = {"baseline": {"ndcg": base}, "rewrite": {"ndcg": better}, "same": {"ndcg": base}}
    forms = {"baseline": "last", "rewrite": "rewrite", "same": "last"}
    ids = [q.question_id for q in questions]
    rows = turn_gains(values, questions, "baseline", forms, ["ndcg"], ids, resamples=999)
    # Only the variant whose form differs from the baseline's.
    assert {r.variant for r in rows} == {"rewrite"}
    bands = {r.group: r for r in rows if r.breakdown == "turn_band"}
    assert list(bands) == ["1", "2", "3-5", "6+"]
    assert {g: r.n for g, r in bands.items()} == {"1": 4, "2": 4, "3-5": 5, "6+": 4}
    members = [q.question_id for q in questions if q.turn is not None and 3 <= q.turn <= 5]
    expected = paired_test(
        np.array([base[q] for q in members]), np.array([better[q] for q in members]), 999
    )
    assert bands["3-5"].gain == pytest.approx(expected.diff)
    assert (bands["3-5"].ci_low, bands["3-5"].ci_high) == (expected.ci_low, expected.ci_high)
    assert bands["1"].gain == 0 and bands["6+"].gain > bands["2"].gain > 0
    assert all(r.p_adjusted is not None and r.p_adjusted >= r.p_value for r in bands.values())
    kinds = {r.group: r for r in rows if r.breakdown == "turn_kind"}
    # A labelled turn 3 stands alone; a lone question too; the first turns by position.
    assert (kinds["standalone"].n, kinds["standalone"].labelled) == (6, 1)
    assert (kinds["non-standalone"].n, kinds["non-standalone"].labelled) == (12, 0)
    # A set without conversations gets no such table.
    assert turn_gains(values, [lone], "baseline", forms, ["ndcg"], ["lone"]) == []
