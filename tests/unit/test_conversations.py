"""Conversation question sets and judging a turn in its context.

A standalone question keeps today's prompts and keys exactly (pinned); a turn carries its
bounded history in every judge prompt, and its store key and memo key differ with its history.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ragaudit.config import RunConfig
from ragaudit.conversation import exchanges, history_cut, in_context, turn_band
from ragaudit.dataset import Question, Turn, load_questions
from ragaudit.errors import InputError
from ragaudit.judging import Grader, Judge, grade_key, pair_key
from ragaudit.prompts import RELEVANCE, RelevanceInput

UTTERANCE = "Does that apply in Germany too?"
HISTORY = [
    Turn(role="user", text="What is the VAT rate on books in France?"),
    Turn(role="assistant", text="Books are taxed at 5.5 % in France."),
]


def _judge(window: int = 8192) -> Judge:
    return Judge(gateway=None, model="fake/judge", window=window, max_tokens=1024)  # type: ignore[arg-type]


def _turn(history: list[Turn] | None = HISTORY, **extra: object) -> Question:
    return Question(question_id="c1::2", question=UTTERANCE, history=history, **extra)  # type: ignore[arg-type]


def test_a_standalone_question_keeps_todays_prompt_and_store_key_exactly() -> None:
    q = Question(question_id="q1", question="Who founded the Red Cross?")
    shown = in_context(q, RunConfig().conversation, "fake/judge", 7168)
    assert shown is q
    # The store key as the code before conversations computed it (grade/2), pinned.
    judge = _judge()
    assert pair_key(judge, shown, "Henry Dunant founded it in 1863.") == (
        "k1:42f5c70aef29ede9e2107acb1ce7bc829e220eb1e1f0c43a5b1d2399a5495aef"
    )
    assert pair_key(judge, shown, "x") == grade_key(
        Grader.of(judge), RELEVANCE.key, "en", "Who founded the Red Cross?", "x"
    )
    # The memo key is a hash of the messages sent: unchanged messages, unchanged key.
    sent = RELEVANCE.messages(RelevanceInput(question=shown.question, context="x"), "en")
    assert sent == RELEVANCE.messages(
        RelevanceInput(question="Who founded the Red Cross?", context="x"), "en"
    )


def test_a_turn_is_judged_with_its_history_and_keyed_by_it() -> None:
    config = RunConfig().conversation
    shown = in_context(_turn(), config, "fake/judge", 7168)
    assert "What is the VAT rate on books in France?" in shown.question
    assert "5.5 %" in shown.question and shown.question.endswith(UTTERANCE)
    judge = _judge()
    alone = Question(question_id="c1::2", question=UTTERANCE)
    other = _turn([Turn(role="user", text="What is the VAT rate on food in Italy?")])
    keys = {
        pair_key(judge, in_context(q, config, judge.model, judge.budget), "a passage")
        for q in (alone, _turn(), other)
    }
    # Never reused across histories, nor between a turn and the same words standing alone.
    assert len(keys) == 3
    again = in_context(_turn(), config, judge.model, judge.budget)
    assert pair_key(judge, again, "a passage") in keys
    # Chinese turns read their history under Chinese labels.
    zh = Question(
        question_id="z",
        question="那德国呢？",
        language="zh",
        history=[Turn(role="user", text="法国的图书增值税是多少？")],
    )
    assert "此前的对话" in in_context(zh, config, judge.model, judge.budget).question


def test_the_oldest_exchanges_are_cut_first_and_the_cut_is_counted() -> None:
    history = []
    for n in range(10):
        history += [
            Turn(role="user", text=f"question {n}"),
            Turn(role="assistant", text=f"answer {n}"),
        ]
    q = _turn(history)
    assert len(exchanges(history)) == 10
    config = RunConfig(conversation={"max_history_turns": 3}).conversation
    shown = in_context(q, config, "fake/judge", 7168).question
    assert "question 9" in shown and "question 7" in shown and "question 6" not in shown
    assert "[7 earlier exchange(s) left out]" in shown
    assert history_cut(q, config, "fake/judge", 7168) == 7
    # A small window: the history gets at most its share of the budget, oldest cut first.
    tight = history_cut(q, RunConfig().conversation, "fake/judge", 60)
    assert 0 < tight <= 10
    # A history shorter than the bound is shown whole (5 exchanges under a bound of 8).
    five = _turn(history[:10])
    assert history_cut(five, RunConfig().conversation, "fake/judge", 7168) == 0
    assert "question 0" in in_context(five, RunConfig().conversation, "fake/judge", 7168).question
    # max_history_turns 0: the turn is judged alone.
    off = RunConfig(conversation={"max_history_turns": 0}).conversation
    assert in_context(q, off, "fake/judge", 7168).question == UTTERANCE


def test_turn_bands() -> None:
    assert [turn_band(t) for t in (None, 1, 2, 3, 5, 6, 40)] == [
        None,
        "1",
        "2",
        "3-5",
        "3-5",
        "6+",
        "6+",
    ]


def test_a_conversation_file_gives_one_question_per_user_turn(tmp_path: Path) -> None:
    path = tmp_path / "chats.jsonl"
    chat = {
        "conversation_id": "shop-1",
        "filters": {"collection": "tax"},
        "messages": [
            {"role": "user", "content": "What is the VAT rate on books in France?"},
            {"role": "assistant", "content": "5.5 %."},
            {"role": "user", "content": "Does that apply in Germany too?"},
            {"role": "assistant", "content": "No, 7 % there."},
            {"role": "user", "content": "And e-books?"},
        ],
    }
    path.write_text(json.dumps(chat) + "\n", encoding="utf-8")
    qs = load_questions(path)
    assert [q.question_id for q in qs] == ["shop-1::1", "shop-1::2", "shop-1::3"]
    assert [q.turn for q in qs] == [1, 2, 3]
    assert qs[0].history == [] or qs[0].history is None
    assert [t.text for t in qs[2].history or []] == [
        "What is the VAT rate on books in France?",
        "5.5 %.",
        "Does that apply in Germany too?",
        "No, 7 % there.",
    ]
    # The assistant's answer to a turn is the response evaluated; the last turn has none.
    assert qs[1].response == "No, 7 % there." and qs[2].response is None
    assert all(q.filters == {"collection": "tax"} for q in qs)


def test_a_question_row_may_carry_its_history_and_labels(tmp_path: Path) -> None:
    path = tmp_path / "turns.jsonl"
    rows = [
        {
            "question_id": "t2",
            "question": UTTERANCE,
            "conversation_id": "c",
            "history": [{"speaker": "user", "text": "VAT on books in France?"}],
            "answerability": "UNANSERABLE",
            "turn_kind": "Follow-up",
            "rewrite": "Does the French VAT rate on books apply in Germany?",
        },
        {"question_id": "lone", "question": "Who founded the Red Cross?"},
    ]
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    turn, lone = load_questions(path)
    assert turn.turn == 2 and turn.conversational and not lone.conversational
    assert turn.answerability == "unanswerable" and turn.turn_kind == "follow-up"
    assert turn.rewrite and turn.metadata == {}
    bad = tmp_path / "bad.jsonl"
    bad.write_text(
        json.dumps({"question": "x", "history": [{"role": "narrator", "text": "y"}]}) + "\n",
        encoding="utf-8",
    )
    with pytest.raises(InputError, match=r"bad.jsonl: line 1, column 'history': turn 1: role"):
        load_questions(bad)
