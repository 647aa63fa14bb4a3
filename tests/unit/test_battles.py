"""Battles: the statistics of B against A, the Davidson fit, and a play through the fake judge."""

from __future__ import annotations

import asyncio
import math
from pathlib import Path

import numpy as np
import polars as pl
import pyarrow.parquet as pq

from ragaudit.battles import (
    Pair,
    Pairing,
    battle_calls,
    battle_stats,
    duels,
    fit_davidson,
    pair_answers,
    play,
    write_battles,
)
from ragaudit.cache import Gateway
from ragaudit.judging import Judge
from ragaudit.schemas import BATTLES, schema_version


def _verdicts(per_question: list[tuple[str, str]]) -> pl.DataFrame:
    rows = []
    for k, (ab, ba) in enumerate(per_question):
        rows.append({"question_id": f"q{k:03d}", "order": "AB", "verdict": ab})
        rows.append({"question_id": f"q{k:03d}", "order": "BA", "verdict": ba})
    return pl.DataFrame(rows)


def test_clear_winner_is_better_beyond_noise_and_counts_add_up() -> None:
    df = _verdicts([("B", "B")] * 30 + [("B", "tie")] * 5 + [("A", "B")] * 5)
    st = battle_stats(df, alpha=0.05, resamples=2000)
    assert (st.wins, st.ties, st.losses) == (70, 5, 5)
    assert st.n == 40
    # Ties split: 30 questions score 1, 5 score 0.75, 5 score 0.5.
    assert math.isclose(st.win_rate or 0, (30 + 3.75 + 2.5) / 40)
    assert st.ci_low is not None and st.ci_low > 0.5
    assert st.p_value is not None and st.p_value < 0.05
    assert st.verdict == "B better"
    # 30 of 40 pairs agree in both orders.
    assert math.isclose(st.consistency or 0, 30 / 40)


def test_position_bias_alone_is_no_difference() -> None:
    # The first-shown answer always wins: every pair disagrees with itself, B's score is ½.
    df = _verdicts([("A", "B")] * 40)
    st = battle_stats(df, resamples=2000)
    assert st.win_rate == 0.5
    assert st.consistency == 0.0
    assert st.verdict == "no difference"


def test_worse_and_failed_answers() -> None:
    df = _verdicts([("A", "A")] * 25 + [("A", None)] * 3 + [("B", "B")] * 2)  # type: ignore[list-item]
    st = battle_stats(df, resamples=2000)
    assert st.verdict == "B worse"
    assert st.wins + st.ties + st.losses == 57  # three failed answers left out
    assert st.pairs_both_orders == 27


def test_davidson_ranks_three_planted_strengths_with_intervals_holding_them() -> None:
    planted = {"r1": 0.8, "r2": 0.0, "r3": -0.8}
    nu = 0.4
    rng = np.random.default_rng(7)
    rows = []
    names = list(planted)
    for q in range(300):
        for x in range(3):
            for y in range(x + 1, 3):
                a, b = names[x], names[y]
                pa_, pb_ = math.exp(planted[a]), math.exp(planted[b])
                t = nu * math.sqrt(pa_ * pb_)
                u = rng.random() * (pa_ + pb_ + t)
                verdict = "A" if u < pa_ else "B" if u < pa_ + pb_ else "tie"
                rows.append({"run_a": a, "run_b": b, "question_id": f"q{q}", "verdict": verdict})
    board = fit_davidson(pl.DataFrame(rows), resamples=200, seed=1)
    assert board.runs == ["r1", "r2", "r3"]
    for run, low, high in zip(board.runs, board.ci_low, board.ci_high, strict=True):
        assert low <= planted[run] <= high, (run, low, high)
    assert 0.2 < board.tie_param < 0.7
    assert board.unbounded == []


def test_pairing_keeps_shared_ok_questions_and_counts_the_rest() -> None:
    questions = pl.DataFrame(
        {"question_id": ["1", "2", "3"], "question": ["a", "b", "c"], "language": ["en"] * 3}
    )
    a = pl.DataFrame(
        {"question_id": ["1", "2", "4"], "response": ["x", "y", "z"], "status": ["ok"] * 3}
    )
    b = pl.DataFrame(
        {
            "question_id": ["1", "2", "3"],
            "response": ["x", None, "w"],
            "status": ["ok", "failed", "ok"],
        }
    )
    pairing = pair_answers(questions, a, b)
    assert [p.question_id for p in pairing.pairs] == ["1"]
    assert (pairing.only_a, pairing.only_b, pairing.not_ok) == (1, 1, 1)
    assert battle_calls(len(pairing.pairs), judges=3) == 6


def test_play_asks_both_orders_through_the_fake_judge_and_writes_the_table(tmp_path: Path) -> None:
    gateway = Gateway(tmp_path / "cache", backoff_s=0.0)
    judge = Judge(gateway=gateway, model="fake/judge", window=8192, max_tokens=256)
    pairs = [
        Pair("q1", "when was the tower built", "the tower was built in 1889", "no idea"),
        Pair("q2", "who wrote hamlet", "no idea", "shakespeare wrote hamlet"),
    ]
    rows = asyncio.run(play(pairs, [judge], "runA", "runB"))
    assert len(rows) == battle_calls(2)
    got = {(r["question_id"], r["order"]): r["verdict"] for r in rows}
    # The answer sharing the question's words wins in both orders, whichever is shown first.
    assert got == {("q1", "AB"): "A", ("q1", "BA"): "A", ("q2", "AB"): "B", ("q2", "BA"): "B"}
    path = write_battles(rows, tmp_path)
    table = pq.read_table(path)
    assert schema_version(table.schema) == schema_version(BATTLES) == 1
    assert table.num_rows == 4
    st = battle_stats(pl.from_arrow(table))  # type: ignore[arg-type]
    assert st.consistency == 1.0


def test_the_judge_is_shown_each_questions_vital_nuggets_in_rank_order() -> None:
    questions = pl.DataFrame({"question_id": ["1", "2"], "question": ["a", "b"]})
    answers = pl.DataFrame(
        {"question_id": ["1", "2"], "response": ["x", "y"], "status": ["ok"] * 2}
    )
    nuggets = pl.DataFrame(
        {
            "question_id": ["1", "1", "1", "2"],
            "nugget_index": [1, 0, 2, None],
            "text": ["second vital", "first vital", "an okay one", None],
            "importance": ["vital", "vital", "okay", None],
        }
    )
    pairing = pair_answers(questions, answers, answers, nuggets)
    vital = {p.question_id: p.vital_nuggets for p in pairing.pairs}
    # Question 2's extraction gave no list: its battle goes on with the reference alone.
    assert vital == {"1": ("first vital", "second vital"), "2": ()}


def test_duels_put_b_losses_first_and_unscored_questions_last() -> None:
    pairing = Pairing(
        [Pair(q, f"question {q}", "a", "b") for q in ("won", "lost", "tied", "failed")], 0, 0, 0
    )
    verdict = {"won": "B", "lost": "A", "tied": "tie", "failed": None}
    rows = [
        {"question_id": q, "order": o, "judge": "fake/judge", "repeat": 0, "verdict": v}
        for q, v in verdict.items()
        for o in ("BA", "AB")
    ]
    got = duels(pairing, rows)
    assert [d.question_id for d in got] == ["lost", "tied", "won", "failed"]
    assert [d.score for d in got] == [0.0, 0.5, 1.0, None]
    # Each question's verdicts in a fixed order (judge, sample, order), not as they came back.
    assert [v["order"] for v in got[0].verdicts] == ["AB", "BA"]
    assert len(duels(pairing, rows, limit=2)) == 2


def _battles(pairs: dict[tuple[str, str], list[str]]) -> pl.DataFrame:
    return pl.DataFrame(
        [
            {"run_a": a, "run_b": b, "question_id": f"q{k}", "verdict": v}
            for (a, b), verdicts in pairs.items()
            for k, v in enumerate(verdicts)
        ]
    )


def test_a_run_that_ties_but_never_wins_is_flagged_and_its_fit_bounded() -> None:
    # b never wins against a, only ties or loses: no finite (strength, ν) fits, the likelihood
    # climbs along a ridge where ν and the gap grow together.
    board = fit_davidson(_battles({("a", "b"): ["A", "tie"] * 5}), resamples=20)
    assert board.unbounded == ["a", "b"]
    assert all(abs(s) <= 15.0 for s in board.strength + board.ci_low + board.ci_high)
    assert math.isfinite(board.tie_param) and board.tie_param <= math.exp(15.0)


def test_a_never_winning_run_among_mixed_ones_has_a_finite_fit() -> None:
    # The same ties and losses for c, but a and b win and lose against each other: ν is held
    # by their decisive battles, so c's strength is finite and nothing is flagged.
    board = fit_davidson(
        _battles(
            {
                ("a", "b"): ["A", "A", "B"] * 4,
                ("a", "c"): ["A", "tie"] * 6,
                ("b", "c"): ["A", "tie"] * 6,
            }
        ),
        resamples=20,
    )
    assert board.unbounded == []
    assert board.runs[-1] == "c" and all(abs(s) < 5 for s in board.strength)


def test_b_losing_every_verdict_on_five_questions_says_it_can_never_move() -> None:
    st = battle_stats(_verdicts([("A", "A")] * 5), alpha=0.05, resamples=2000)
    assert (st.wins, st.ties, st.losses) == (0, 0, 10)
    assert st.verdict == "no difference"
    assert st.power_note is not None
    assert st.power_note.startswith("5 paired question(s) can never move at α = 0.05")
    # Enough questions: no note.
    assert battle_stats(_verdicts([("A", "A")] * 30), resamples=2000).power_note is None
