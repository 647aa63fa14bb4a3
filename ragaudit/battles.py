"""Blind pairwise battles between two runs' answers, and a leaderboard over many runs.

The judge sees one question and two answers labelled only "answer 1" and "answer 2"; each pair
is asked in both orders, so a judge's preference for a position falls once on each run and
cancels. A question's score for B is the mean over its verdicts (both orders, every judge
sample) of 1 for a B win, ½ for a tie (ties split), 0 for a loss; B's win rate is the mean of
those scores over questions. Its 95 % interval is a percentile bootstrap over questions and its
test against ½ a paired sign-flip permutation test over questions (the metric comparison's
:func:`ragaudit.stats.paired_test`, with A's side held at ½), so both account for the
questions as the unit of noise, not the individual calls.

Over many runs, :func:`fit_davidson` fits the Bradley–Terry model with ties of Davidson (1970)
by maximum likelihood: P(i beats j) = πᵢ / (πᵢ + πⱼ + ν√(πᵢπⱼ)), P(tie) = ν√(πᵢπⱼ) / (same).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from ragaudit.atomic import write_table
from ragaudit.cache import (
    FakeRequest,
    Gateway,
    items_in_flight,
    register_fake_answer,
)
from ragaudit.config import RunConfig
from ragaudit.conversation import in_context
from ragaudit.errors import RagauditError
from ragaudit.judging import GradeSample, Judge, gather_limited, grade_plan, sample_judges
from ragaudit.lang import token_share
from ragaudit.prompts import BATTLE, BattleInput
from ragaudit.runfolder import RunFolder
from ragaudit.schemas import BATTLES, LEADERBOARD, to_table
from ragaudit.stats import beyond_noise, paired_test, power

ORDERS = ("AB", "BA")
"""``AB``: A shown as answer 1; ``BA``: B shown as answer 1."""

SCORE = {"B": 1.0, "tie": 0.5, "A": 0.0}
"""A verdict's score for B (ties split)."""


@dataclass(frozen=True)
class Pair:
    """One shared question with both runs' answers and what a good answer holds, when known."""

    question_id: str
    question: str
    answer_a: str
    answer_b: str
    language: str = "en"
    reference: str = ""
    vital_nuggets: tuple[str, ...] = ()


@dataclass(frozen=True)
class Pairing:
    """The questions two runs can battle on, and how many each run has that the other lacks."""

    pairs: list[Pair]
    only_a: int
    only_b: int
    not_ok: int
    """Shared questions left out because either answer is not ``ok``."""


def pair_answers(
    questions: pl.DataFrame,
    answers_a: pl.DataFrame,
    answers_b: pl.DataFrame,
    nuggets: pl.DataFrame | None = None,
) -> Pairing:
    """Questions answered ``ok`` in both runs (shared question ids only), with both answers.

    Args:
        questions: B's ``questions`` table (question text, language, reference).
        answers_a: A's ``answers`` table.
        answers_b: B's ``answers`` table.
        nuggets: B's ``nuggets`` table, when it has one: each question's vital nuggets are
            shown to the judge beside the reference (what an answer must say).
    """
    vital = _vital_nuggets(nuggets)
    ids_a = set(answers_a["question_id"].to_list())
    ids_b = set(answers_b["question_id"].to_list())
    shared = ids_a & ids_b
    a = answers_a.filter(pl.col("status") == "ok").select(
        "question_id", pl.col("response").alias("answer_a")
    )
    b = answers_b.filter(pl.col("status") == "ok").select(
        "question_id", pl.col("response").alias("answer_b")
    )
    cols = [c for c in ("question_id", "question", "language", "reference") if c in questions]
    joined = (
        a.join(b, on="question_id")
        .join(questions.select(cols).unique("question_id"), on="question_id", how="left")
        .sort("question_id")
    )
    pairs = [
        Pair(
            question_id=r["question_id"],
            question=r.get("question") or "",
            answer_a=r["answer_a"] or "",
            answer_b=r["answer_b"] or "",
            language=r.get("language") or "en",
            reference=r.get("reference") or "",
            vital_nuggets=vital.get(r["question_id"], ()),
        )
        for r in joined.iter_rows(named=True)
    ]
    return Pairing(pairs, len(ids_a - ids_b), len(ids_b - ids_a), len(shared) - len(pairs))


def _vital_nuggets(nuggets: pl.DataFrame | None) -> dict[str, tuple[str, ...]]:
    # The list of a question whose extraction failed is empty or partial; a partial list's
    # vital nuggets are still facts the contexts state, so they are shown, in their rank order.
    if nuggets is None or nuggets.is_empty():
        return {}
    vital = (
        nuggets.filter((pl.col("importance") == "vital") & pl.col("text").is_not_null())
        .sort("question_id", "nugget_index")
        .group_by("question_id", maintain_order=True)
        .agg(pl.col("text"))
    )
    return {r["question_id"]: tuple(r["text"]) for r in vital.iter_rows(named=True)}


def battle_calls(n_pairs: int, judges: int = 1) -> int:
    """Judge calls a battle asks: both orders of every pair, for every judge sample."""
    return n_pairs * len(ORDERS) * judges


async def play(
    pairs: Sequence[Pair], judges: Sequence[Judge], run_a: str, run_b: str
) -> list[dict[str, Any]]:
    """Ask every judge sample both orders of every pair; one ``battles`` row per answer.

    ``judges`` are the samples (a judge's repeats, a jury's members): each is asked through
    :meth:`Judge.ask`, so every call is memoised and logged by the gateway. A failed answer is a
    row with status ``failed`` and its error; the rest go on.
    """
    work = [(p, j, order) for p in pairs for j in judges for order in ORDERS]

    async def one(item: tuple[Pair, Judge, str]) -> dict[str, Any]:
        p, judge, order = item
        first, second = (p.answer_a, p.answer_b) if order == "AB" else (p.answer_b, p.answer_a)
        inp = BattleInput(
            question=p.question,
            answer_1=first,
            answer_2=second,
            reference=p.reference,
            vital_nuggets=list(p.vital_nuggets),
        )
        judged = await judge.ask(BATTLE, inp, p.language)
        verdict = None
        if judged.ok and judged.value is not None:
            shown = judged.value.verdict
            verdict = "tie" if shown == "tie" else order[int(shown) - 1]
        return {
            "run_a": run_a,
            "run_b": run_b,
            "question_id": p.question_id,
            "order": order,
            "verdict": verdict,
            "reason": judged.value.reason if judged.ok and judged.value is not None else None,
            "judge": judge.model,
            "repeat": judge.repeat,
            "status": "ok" if verdict is not None else "failed",
            "error": judged.error if verdict is None else None,
        }

    limit = max(1, min((j.in_flight for j in judges), default=1))
    return list(await gather_limited(work, one, limit))


def in_context_pairs(pairing: Pairing, dir_b: Path, config: RunConfig, judge: Judge) -> Pairing:
    """The pairs with each turn of a conversation shown with its history, as B judged it."""
    fb = RunFolder(Path(dir_b).parent, Path(dir_b).name)
    turns = {q.question_id: q for q in fb.questions() if q.conversational}
    if not turns:
        return pairing
    shown = [
        dataclasses.replace(
            p,
            question=in_context(
                turns[p.question_id], config.conversation, judge.model, judge.budget
            ).question,
        )
        if p.question_id in turns
        else p
        for p in pairing.pairs
    ]
    return dataclasses.replace(pairing, pairs=shown)


def run_pairing(dir_a: Path, dir_b: Path) -> Pairing:
    """The questions runs in ``dir_a`` and ``dir_b`` can battle on (B's questions table)."""
    fa, fb = (RunFolder(Path(d).parent, Path(d).name) for d in (dir_a, dir_b))
    for folder in (fa, fb):
        for name in ("questions", "answers"):
            if not folder.has(name):
                raise RagauditError(f"battles: {folder.table_path(name)} is missing")
    q = pl.from_arrow(fb.read("questions"))
    a = pl.from_arrow(fa.read("answers"))
    b = pl.from_arrow(fb.read("answers"))
    n = pl.from_arrow(fb.read("nuggets")) if fb.has("nuggets") else None
    return pair_answers(q, a, b, n)  # type: ignore[arg-type]


def battle_judges(config: RunConfig, gateway: Gateway) -> list[Judge]:
    """The judge samples a battle asks: the config's jury or judge, each ``judge_repeats`` times.

    The same plan as a candidate's grade samples (:func:`ragaudit.judging.grade_plan`), so
    repeats and juries mean the same thing for battles as for metrics.
    """
    judge = Judge.from_config(config.models, gateway, items_in_flight(config))
    return sample_judges(judge, battle_plan(config), config.models)


def battle_plan(config: RunConfig) -> tuple[GradeSample, ...]:
    """Every judge sample each order of a pair is asked as (the dry run counts them)."""
    return grade_plan(
        config.models.graders,
        config.models.judge_repeats,
        config.models.temperature,
        config.score.sampling_temperature,
    )


async def battle_runs(
    dir_a: Path, dir_b: Path, config: RunConfig, gateway: Gateway
) -> tuple[Pairing, list[dict[str, Any]]]:
    """Play A against B on their shared ``ok`` questions and write ``battles.parquet`` in B."""
    judges = battle_judges(config, gateway)
    pairing = in_context_pairs(run_pairing(dir_a, dir_b), dir_b, config, judges[0])
    rows = await play(pairing.pairs, judges, dir_a.name, dir_b.name)
    write_battles(rows, dir_b)
    return pairing, rows


async def battle_verdict(
    dir_a: Path, dir_b: Path, config: RunConfig, gateway: Gateway, alpha: float
) -> tuple[Pairing, list[dict[str, Any]], BattleStats]:
    """Play A against B (:func:`battle_runs`) and test the verdicts at ``alpha``."""
    pairing, rows = await battle_runs(dir_a, dir_b, config, gateway)
    frame = verdict_frame(rows)
    stats = battle_stats(frame, alpha=alpha, resamples=config.report.compare_resamples)
    return pairing, rows, stats


async def round_robin(
    dirs: Sequence[Path], config: RunConfig, gateway: Gateway
) -> tuple[list[dict[str, Any]], dict[tuple[str, str], Pairing]]:
    """Every pair of runs played on its shared ``ok`` questions (for :func:`fit_davidson`).

    Nothing is written: a pair's ``battles.parquet`` belongs to ``compare``; asking again is
    answered from the memo.
    """
    judges = battle_judges(config, gateway)
    rows: list[dict[str, Any]] = []
    pairings: dict[tuple[str, str], Pairing] = {}
    for k, a in enumerate(dirs):
        for b in dirs[k + 1 :]:
            pairing = in_context_pairs(run_pairing(a, b), b, config, judges[0])
            pairings[(a.name, b.name)] = pairing
            rows += await play(pairing.pairs, judges, a.name, b.name)
    return rows, pairings


def verdict_frame(rows: list[dict[str, Any]]) -> pl.DataFrame:
    """Battle rows as a frame with ``battles.parquet``'s columns and types (all-null ones too)."""
    frame = pl.from_arrow(to_table(rows, BATTLES))
    assert isinstance(frame, pl.DataFrame)
    return frame


def write_battles(rows: list[dict[str, Any]], folder: Path) -> Path:
    """Write ``battles.parquet`` atomically in ``folder`` (B's run folder)."""
    path = folder / "battles.parquet"
    write_table(to_table(rows, BATTLES), path)
    return path


def write_leaderboard(board: Leaderboard, verdicts: int, folder: Path) -> Path:
    """Write ``leaderboard.parquet`` atomically in ``folder`` (the round robin's own folder)."""
    rows = [
        {
            "rank": k,
            "run": run,
            "strength": s,
            "ci_low": low,
            "ci_high": high,
            "unbounded": run in board.unbounded,
            "tie_param": board.tie_param,
            "verdicts": verdicts,
        }
        for k, (run, s, low, high) in enumerate(
            zip(board.runs, board.strength, board.ci_low, board.ci_high, strict=True), 1
        )
    ]
    path = folder / "leaderboard.parquet"
    write_table(to_table(rows, LEADERBOARD), path)
    return path


@dataclass(frozen=True)
class BattleStats:
    """The battle verdict of B against A over the shared questions."""

    n: int
    """Questions with at least one usable verdict."""
    wins: int
    """Verdicts (each order, each judge sample) that B won."""
    ties: int
    losses: int
    win_rate: float | None
    """B's mean score over questions (win 1, tie ½, loss 0)."""
    ci_low: float | None
    ci_high: float | None
    p_value: float | None
    """Paired sign-flip permutation test of the question scores against ½ (two-sided)."""
    consistency: float | None
    """Share of (question, judge sample) pairs whose two orders gave the same verdict."""
    pairs_both_orders: int
    alpha: float = 0.05
    verdict: str = field(default="no difference")
    """``B better``, ``B worse`` (beyond noise) or ``no difference``."""
    power_note: str | None = None
    """Why the questions are too few to show a difference at ``alpha`` (the metric table's
    sentence), else None: "no difference" over them is no evidence that nothing changed."""


def battle_stats(
    verdicts: pl.DataFrame, alpha: float = 0.05, resamples: int = 9999, seed: int = 0
) -> BattleStats:
    """Wins/ties/losses, B's win rate with its interval and test, and position consistency.

    Args:
        verdicts: Rows with ``question_id``, ``order``, ``verdict`` (``A``, ``B``, ``tie`` or
            null for a failed answer), and optionally ``judge`` and ``repeat``.
        alpha: The test's level (``report.alpha``).
        resamples: Bootstrap and permutation resamples.
        seed: Seed of both.
    """
    df = verdicts.filter(pl.col("verdict").is_not_null())
    for col, default in (("judge", ""), ("repeat", 0)):
        if col not in df.columns:
            df = df.with_columns(pl.lit(default).alias(col))
    counts = {v: int((df["verdict"] == v).sum()) for v in SCORE}
    scored = df.with_columns(pl.col("verdict").replace_strict(SCORE).alias("score"))
    per_q = scored.group_by("question_id").agg(pl.col("score").mean()).sort("question_id")
    s = per_q["score"].to_numpy()
    both = (
        df.group_by("question_id", "judge", "repeat")
        .agg(pl.col("verdict").n_unique().alias("kinds"), pl.col("order").n_unique().alias("o"))
        .filter(pl.col("o") == len(ORDERS))
    )
    consistency = float((both["kinds"] == 1).mean()) if both.height else None  # type: ignore[arg-type]
    test = paired_test(np.full(len(s), 0.5), s, resamples=resamples, seed=seed)
    rate = None if test.diff is None else 0.5 + test.diff
    low = None if test.ci_low is None else 0.5 + test.ci_low
    high = None if test.ci_high is None else 0.5 + test.ci_high
    verdict = "no difference"
    if beyond_noise(test.p_value, low, high, alpha, null=0.5):
        verdict = "B better" if low is not None and low > 0.5 else "B worse"
    return BattleStats(
        power_note=power(s - 0.5, alpha).text(alpha) if len(s) else None,
        n=len(s),
        wins=counts["B"],
        ties=counts["tie"],
        losses=counts["A"],
        win_rate=rate,
        ci_low=low,
        ci_high=high,
        p_value=test.p_value,
        consistency=consistency,
        pairs_both_orders=both.height,
        alpha=alpha,
        verdict=verdict,
    )


@dataclass(frozen=True)
class Duel:
    """One question's battle for the drill-down: both answers side by side, every verdict."""

    question_id: str
    question: str
    answer_a: str
    answer_b: str
    score: float | None
    """B's score on the question (win 1, tie ½, loss 0, averaged); None: no usable verdict."""
    verdicts: list[dict[str, Any]]
    """Each verdict: ``order`` (AB: A shown first), ``judge``, ``repeat``, ``verdict`` (A, B,
    tie, or null when the call failed), ``reason``."""


def duels(pairing: Pairing, rows: list[dict[str, Any]], limit: int = 50) -> list[Duel]:
    """The questions of a battle for the drill-down: B's losses first, then ties, then wins.

    Args:
        pairing: The questions the runs battled on (both answers).
        rows: The battle verdicts (``battles.parquet`` rows).
        limit: At most this many questions (a page with hundreds of answer pairs is unread).
    """
    by_q: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        by_q.setdefault(r["question_id"], []).append(
            {k: r.get(k) for k in ("order", "judge", "repeat", "verdict", "reason")}
        )
    out = []
    for p in pairing.pairs:
        got = sorted(
            by_q.get(p.question_id, []), key=lambda v: (v["judge"], v["repeat"], v["order"])
        )
        scores = [SCORE[v["verdict"]] for v in got if v["verdict"] is not None]
        score = sum(scores) / len(scores) if scores else None
        out.append(Duel(p.question_id, p.question, p.answer_a, p.answer_b, score, got))
    # Unscored questions last; among scored, B's worst first (what a reader checks on a loss).
    out.sort(key=lambda d: (d.score is None, d.score or 0.0, d.question_id))
    return out[:limit]


@dataclass(frozen=True)
class Leaderboard:
    """Davidson strengths (log π, centred to mean 0) with bootstrap intervals, best first."""

    runs: list[str]
    strength: list[float]
    ci_low: list[float]
    ci_high: list[float]
    tie_param: float
    """ν: how often close runs tie (0: never)."""
    unbounded: list[str] = field(default_factory=list)
    """Runs whose strength has no finite fit (:func:`_unbounded`: one that won every battle
    without a tie, or never won but tied): the likelihood grows without end, so their figures
    are where the fit stopped at its bound, an order only."""


def _counts(
    battles: pl.DataFrame, runs: list[str]
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per pair of runs (i, j): i's wins, j's wins, ties."""
    index = {r: k for k, r in enumerate(runs)}
    g = battles.group_by("run_a", "run_b", "verdict").len()
    key: dict[tuple[int, int], list[float]] = {}
    for r in g.iter_rows(named=True):
        i, j = index[r["run_a"]], index[r["run_b"]]
        c = key.setdefault((i, j), [0.0, 0.0, 0.0])
        c[{"A": 0, "B": 1, "tie": 2}[r["verdict"]]] += r["len"]
    ij = np.array(list(key), dtype=int).reshape(-1, 2)
    w = np.array(list(key.values()), dtype=float).reshape(-1, 3)
    return ij[:, 0], ij[:, 1], w[:, 0], w[:, 1:]


def _nll(theta: np.ndarray, i: np.ndarray, j: np.ndarray, w: np.ndarray, m: int) -> float:
    # θ = (log π₂…π_m, log ν) with log π₁ = 0: the model is unchanged by a common factor on π.
    lp = np.concatenate(([0.0], theta[: m - 1]))
    lnu = theta[m - 1]
    a, b = lp[i], lp[j]
    tie = lnu + (a + b) / 2
    denom = np.logaddexp(np.logaddexp(a, b), tie)
    return float(-np.sum(w[:, 0] * (a - denom) + w[:, 1] * (b - denom) + w[:, 2] * (tie - denom)))


LOG_BOUND = 15.0
"""Bound on each log-strength (against the first run's) and on log ν in the fit: where no finite
maximum exists the likelihood keeps rising along a ridge (strengths ±30 and ν 1e13 were seen),
and the fit stops at the bound (a ratio of e¹⁵ no finite set of battles could tell from a larger
one); :func:`_unbounded` names the runs whose figures are then only an order."""


def _fit(i: np.ndarray, j: np.ndarray, wins: np.ndarray, m: int) -> tuple[np.ndarray, float]:
    from scipy import optimize

    res = optimize.minimize(
        _nll,
        np.zeros(m),
        args=(i, j, wins, m),
        method="L-BFGS-B",
        bounds=[(-LOG_BOUND, LOG_BOUND)] * m,
    )
    lp = np.concatenate(([0.0], res.x[: m - 1]))
    return lp - lp.mean(), float(math.exp(res.x[m - 1]))


def _unbounded(i: np.ndarray, j: np.ndarray, wins: np.ndarray, m: int) -> list[int]:
    """The runs whose centred strength has no finite maximum-likelihood value.

    Each verdict's log-likelihood is its score less the log-sum-exp of the three outcomes'
    scores (i: log πᵢ, j: log πⱼ, tie: log ν + (log πᵢ + log πⱼ)/2). Along a direction d of
    (log π, log ν) it never falls when every observed outcome's score rises at least as fast as
    the pair's other two: then the likelihood climbs (or stays) to infinity along d. Those
    directions form a cone given by linear inequalities (one pair at a time), so a linear
    program per run finds whether its centred strength moves along one: a run that never wins
    but ties (ν and its gap grow together), or wins every battle without a tie.
    """
    from scipy import optimize

    rows = []

    def unit(k: int) -> np.ndarray:
        e = np.zeros(m + 1)
        e[k] = 1.0
        return e

    nu = unit(m)
    for a, b, (a_won, b_won, tied) in zip(i, j, wins, strict=True):
        half = (unit(a) - unit(b)) / 2
        if a_won:  # a's score rises fastest: past b's and past the tie's
            rows += [-2 * half, nu - half]
        if b_won:
            rows += [2 * half, nu + half]
        if tied:
            rows += [half - nu, -half - nu]
    if not rows:
        return []
    bounds = [(-1.0, 1.0)] * (m + 1)
    centre = np.concatenate((np.full(m, -1.0 / m), [0.0]))
    out = []
    for k in range(m):
        objective = unit(k) + centre  # the run's centred log-strength
        for sign in (1.0, -1.0):
            res = optimize.linprog(
                -sign * objective, A_ub=np.array(rows), b_ub=np.zeros(len(rows)), bounds=bounds
            )
            if res.status == 0 and -res.fun > 1e-9:
                out.append(k)
                break
    return out


def fit_davidson(
    battles: pl.DataFrame, resamples: int = 500, seed: int = 0, confidence: float = 0.95
) -> Leaderboard:
    """Fit the Davidson model to battle verdicts of many runs; bootstrap over questions.

    Args:
        battles: Rows with ``run_a``, ``run_b``, ``question_id`` and ``verdict`` (``A``, ``B``,
            ``tie``; nulls are dropped).
        resamples: Bootstrap resamples: questions are drawn again with replacement, each with
            all of its battles (every pair of runs, both orders), and the model fitted again.
        seed: The bootstrap's seed.
        confidence: The intervals' level.
    """
    battles = battles.filter(pl.col("verdict").is_not_null())
    runs = sorted(set(battles["run_a"].to_list()) | set(battles["run_b"].to_list()))
    m = len(runs)
    if m < 2:
        raise ValueError("a leaderboard needs battles between at least two runs")
    i, j, w1, rest = _counts(battles, runs)
    wins = np.column_stack([w1, rest])
    strength, nu = _fit(i, j, wins, m)
    qids = battles["question_id"].unique().sort().to_list()
    by_q = battles.partition_by("question_id", as_dict=True)
    rng = np.random.default_rng(seed)
    draws = np.empty((resamples, m))
    for k in range(resamples):
        picked = rng.integers(0, len(qids), len(qids))
        sample = pl.concat([by_q[(qids[p],)] for p in picked])
        bi, bj, bw1, brest = _counts(sample, runs)
        draws[k] = _fit(bi, bj, np.column_stack([bw1, brest]), m)[0]
    tail = (1 - confidence) / 2 * 100
    low = np.percentile(draws, tail, axis=0)
    high = np.percentile(draws, 100 - tail, axis=0)
    order = np.argsort(-strength)
    diverging = set(_unbounded(i, j, wins, m))
    unbounded = [runs[k] for k in order if k in diverging]
    return Leaderboard(
        unbounded=unbounded,
        runs=[runs[k] for k in order],
        strength=[float(strength[k]) for k in order],
        ci_low=[float(low[k]) for k in order],
        ci_high=[float(high[k]) for k in order],
        tie_param=nu,
    )


@register_fake_answer("BattleVerdict")
def _fake_battle(req: FakeRequest) -> dict[str, Any]:
    """The offline fake judge: the answer sharing more of the question's tokens wins."""
    p = req.payload
    q = p.get("question", "")
    a, b = token_share(q, p.get("answer_1", "")), token_share(q, p.get("answer_2", ""))
    verdict = "tie" if abs(a - b) < 0.05 else "1" if a > b else "2"
    return {"verdict": verdict, "reason": f"token overlap {a:.2f} vs {b:.2f}"}


__all__ = [
    "ORDERS",
    "SCORE",
    "BattleStats",
    "Leaderboard",
    "Pair",
    "Pairing",
    "battle_calls",
    "battle_judges",
    "battle_plan",
    "battle_runs",
    "battle_verdict",
    "round_robin",
    "run_pairing",
    "battle_stats",
    "duels",
    "Duel",
    "fit_davidson",
    "pair_answers",
    "play",
    "verdict_frame",
    "write_battles",
    "write_leaderboard",
]
