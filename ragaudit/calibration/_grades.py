"""Per-grade calibration: the judge's relevance grades (0–3) against a human's, per grade.

A labels file gives a human grade for some (question, context) pairs. The judge grades every
labelled context through the judging library (the same prompt, memo and limits as the sort
stage), and :func:`ragaudit.stats.calibrate_grades` measures, for each judge grade, the share
of its contexts the human calls relevant, and for each human grade, the share the judge rated
higher and lower. A judge that over-rates shows it at every human grade below the top.

When the file gives the engine's rank of each context, the engine's NDCG@10 is measured three
ways on the same questions: with the human grades as gains, with the judge's grades, and with
the judge's grades calibrated (each replaced by the share of its grade the human calls
relevant), so a user sees how far the judge-based figure a run reports sits from the human one.
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ragaudit import labels as labels_store
from ragaudit.calibration._data import _labels_records, text_field
from ragaudit.dataset import Question
from ragaudit.errors import InputError
from ragaudit.judging import Judge, grade_candidates
from ragaudit.lang import detect_language
from ragaudit.stats import NDCG_GAINS, GradeCalibration, Share, calibrate_grades, engine_ndcg

GRADE_KIND = "grade_calibration"
"""The ``kind`` of the per-grade figures in ``calibration.parquet``."""
GRADE_METRIC = "relevance@3"
GRADES = range(4)
NDCG_K = 10


@dataclass(frozen=True)
class GradeLabel:
    """A human's grade (0–3) of one context for one question."""

    question_id: str
    question: str
    context_id: str
    context: str
    human: int
    rank: int | None = None
    """The engine's rank of the context for the question (1 = first), when the file gives it."""


def _digest(prefix: str, text: str) -> str:
    return f"{prefix}-{hashlib.sha256(text.encode('utf-8')).hexdigest()[:12]}"


def _grade(value: Any, where: str) -> int:
    try:
        grade = float(value)
    except (TypeError, ValueError):
        raise InputError(f"{where}: human grade {value!r} is not a number") from None
    if grade not in GRADES:
        raise InputError(f"{where}: human grade {value!r} is not one of 0, 1, 2, 3")
    return int(grade)


def _rank(value: Any, where: str) -> int | None:
    if value in (None, ""):
        return None
    try:
        rank = int(float(value))
    except (TypeError, ValueError):
        raise InputError(f"{where}: rank {value!r} is not a number") from None
    if rank < 1 or rank != float(value):
        raise InputError(f"{where}: rank {value!r} is not a whole number from 1")
    return rank


def _store_grades(run_dir: Path) -> list[GradeLabel]:
    """The grades of a run's labels store, each with its passage and the engine's rank."""
    out = []
    where = run_dir / labels_store.FILE
    for row in labels_store.labelled_items(run_dir, (labels_store.GRADE,)):
        if row["question"] is None or row["candidate"] is None:
            raise InputError(
                f"{where}: item {row['item_id']!r} names a question or passage the run does "
                "not have"
            )
        out.append(
            GradeLabel(
                row["question_id"],
                row["question"],
                row["candidate_id"],
                row["candidate"],
                _grade(row["label"], f"{where}, item {row['item_id']!r}"),
                row["rank"],
            )
        )
    if not out:
        raise InputError(f"{where}: no grade labels")
    return out


def is_judgment_store(path: Path) -> bool:
    """Whether ``path`` is a judgment store's folder (``<runs_root>/judgments``)."""
    return path.is_dir() and any(path.glob("part-*.parquet"))


def _judgment_store_grades(path: Path) -> list[GradeLabel]:
    """People's and imported people's grades of resolved pairs in a judgment store.

    Ids are taken from the texts (sources name their queries and documents each their own way,
    so two sources' ``1`` may be two documents); the engine's rank is not known there.
    """
    from ragaudit.judging import JudgmentStore
    from ragaudit.judgments import grade_labels

    rows = grade_labels(JudgmentStore(path))
    if not rows:
        raise InputError(
            f"{path}: no people's grade of a resolved pair (import with --config or --corpus so "
            "queries and documents resolve to texts)"
        )
    return [
        GradeLabel(
            _digest("q", r["question"]),
            r["question"],
            _digest("c", r["context"]),
            r["context"],
            _grade(r["grade"], f"{path}: {r['source']}"),
        )
        for r in rows
    ]


def load_grade_labels(path: Path | str) -> list[GradeLabel]:
    """Human relevance grades from JSONL or CSV, a run's labels store, or the judgment store.

    Each row: ``question``, ``context`` (its text), ``grade`` (or ``human_grade``) 0–3, and
    optionally ``question_id``, ``context_id`` and ``rank`` (the engine's rank of the context,
    1 first, for the engine's NDCG). Missing ids are derived from the texts, so
    the same question or context always gets the same id. A run folder or its
    labels store gives each person's latest grade (skipped items left out) with the
    passage's text and engine rank from the run. A judgment store's folder
    (``<runs_root>/judgments``) gives every person's and imported rater's grade of a pair
    whose question and document text were resolved (``ragaudit judgments import``).

    Raises:
        InputError: a missing file, a row without question, context or grade, a grade
            outside 0–3, or one id given two different questions or context texts.
    """
    path = Path(path)
    if is_judgment_store(path):
        return _judgment_store_grades(path)
    store = labels_store.store_dir(path)
    if store is not None:
        return _store_grades(store)
    if not path.is_file():
        raise InputError(f"{path}: grade labels file not found")
    out: list[GradeLabel] = []
    questions: dict[str, str] = {}
    contexts: dict[tuple[str, str], str] = {}
    for where, rec in _labels_records(path):
        question = text_field(rec, where, "question")
        context = text_field(rec, where, "context")
        if not question:
            raise InputError(f"{where}: no 'question'")
        if not context:
            raise InputError(f"{where}: no 'context' (the text the human graded)")
        value = rec.get("grade", rec.get("human_grade"))
        if value in (None, ""):
            raise InputError(f"{where}: no human grade ('grade' or 'human_grade')")
        qid = str(rec.get("question_id") or _digest("q", question))
        if questions.setdefault(qid, question) != question:
            raise InputError(f"{where}: question id {qid!r} names two different questions")
        cid = str(rec.get("context_id") or _digest("c", context))
        if contexts.setdefault((qid, cid), context) != context:
            raise InputError(f"{where}: context id {cid!r} names two different texts")
        out.append(
            GradeLabel(
                qid,
                str(question),
                cid,
                str(context),
                _grade(value, where),
                _rank(rec.get("rank"), where),
            )
        )
    if not out:
        raise InputError(f"{path}: no grade labels")
    return out


@dataclass(frozen=True)
class GradeCalibrationResult:
    """The judge's grade of every labelled context and the per-grade calibration."""

    rows: list[dict[str, Any]]
    """One row per label: ids, human grade, judge grade (None when its call failed), status."""
    calibration: GradeCalibration | None
    """None when no labelled context got a judge grade."""
    judge: str
    unjudged: int
    ndcg: dict[str, tuple[float | None, float | None, float | None]] | None = None
    """Gains (human, judge, calibrated) → the engine's mean NDCG@10 and its bootstrap interval."""
    ndcg_questions: int = 0

    def figures(self, embedder: str | None) -> list[dict[str, Any]]:
        """The per-grade figures as ``calibration.parquet`` rows (``family`` names the grade)."""
        if self.calibration is None:
            return []
        cut = self.calibration.relevant_grade
        note = f"human relevant at grade ≥ {cut}"
        if self.unjudged:
            note += f"; {self.unjudged} label(s) without a judge grade left out"
        out = []

        def add(family: str, statistic: str, s: Share) -> None:
            out.append(
                {
                    "kind": GRADE_KIND,
                    "dataset": "grade_labels",
                    "metric": GRADE_METRIC,
                    "family": family,
                    "statistic": statistic,
                    "value": s.share,
                    "ci_low": s.ci_low,
                    "ci_high": s.ci_high,
                    "n": s.n,
                    "note": note,
                    "judge": self.judge,
                    "embedder": embedder,
                }
            )

        for g, s in sorted(self.calibration.relevant_given_grade.items()):
            add(f"judge grade {g}", "human_relevant", s)
        for g in sorted(self.calibration.over_rated):
            add(f"human grade {g}", "over_rated", self.calibration.over_rated[g])
            add(f"human grade {g}", "under_rated", self.calibration.under_rated[g])
        note = f"mean over questions, bootstrap interval; gains: {NDCG_GAINS}"
        for gains, (mean, low, high) in (self.ndcg or {}).items():
            n = self.ndcg_questions
            add(f"engine NDCG@{NDCG_K}", f"ndcg_{gains}", Share(0, n, mean, low, high))
        return out

    def as_dict(self) -> dict[str, Any]:
        """The calibration as ``calibration.json`` holds it (grades as string keys)."""

        def shares(table: dict[int, Share]) -> dict[str, dict[str, Any]]:
            return {
                str(g): {"k": s.k, "n": s.n, "share": s.share, "ci": [s.ci_low, s.ci_high]}
                for g, s in sorted(table.items())
            }

        cal = self.calibration
        return {
            "judge": self.judge,
            "labels": len(self.rows),
            "unjudged": self.unjudged,
            "relevant_grade": cal.relevant_grade if cal else None,
            "human_relevant_given_judge_grade": shares(cal.relevant_given_grade) if cal else {},
            "over_rated_given_human_grade": shares(cal.over_rated) if cal else {},
            "under_rated_given_human_grade": shares(cal.under_rated) if cal else {},
            "engine_ndcg": {
                "k": NDCG_K,
                "questions": self.ndcg_questions,
                **{g: {"mean": m, "ci": [lo, hi]} for g, (m, lo, hi) in (self.ndcg or {}).items()},
            }
            if self.ndcg
            else None,
        }


async def calibrate_judge_grades(
    labels: list[GradeLabel], judge: Judge, *, relevant_grade: int = 2, run_id: str = ""
) -> GradeCalibrationResult:
    """Grade every labelled context with ``judge`` and calibrate its grades per grade.

    Each distinct (question, context) is graded once, one call per context as the sort stage
    grades by default, so its grade is the memo's answer to exactly the prompt a run asks;
    several humans' labels of one context each count against that one judge grade.

    Args:
        labels: The human grades.
        judge: The judge (gateway, model, window).
        relevant_grade: The lowest grade a human calls relevant.
        run_id: Written in every row.
    """
    questions: dict[str, Question] = {}
    candidates: dict[str, dict[str, dict[str, str]]] = defaultdict(dict)
    for label in labels:
        if label.question_id not in questions:
            questions[label.question_id] = Question(
                question_id=label.question_id,
                question=label.question,
                language=detect_language(label.question),
            )
        candidates[label.question_id].setdefault(
            label.context_id, {"context_id": label.context_id, "text": label.context}
        )
    graded = await grade_candidates(
        judge,
        questions,
        {qid: list(c.values()) for qid, c in candidates.items()},
        relevant_grade=relevant_grade,
        run_id=run_id,
    )
    verdicts = {
        (row["question_id"], row["context_id"]): row for g in graded.values() for row in g.rows
    }
    rows, judged, human = [], [], []
    for label in labels:
        v = verdicts[(label.question_id, label.context_id)]
        rows.append(
            {
                "run_id": run_id,
                "question_id": label.question_id,
                "context_id": label.context_id,
                "human_grade": label.human,
                "judge_grade": v["grade"],
                "status": v["status"],
                "error": v["error"],
                "reason": v["reason"],
            }
        )
        if v["grade"] is not None:
            judged.append(int(v["grade"]))
            human.append(label.human)
    calibration = calibrate_grades(judged, human, relevant_grade) if judged else None
    both = [
        (label.question_id, label.context_id, label.rank, label.human, row["judge_grade"])
        for label, row in zip(labels, rows, strict=True)
    ]
    ndcg, n = (None, 0) if calibration is None else engine_ndcg(both, calibration, NDCG_K)
    return GradeCalibrationResult(
        rows, calibration, judge.model, len(labels) - len(judged), ndcg, n
    )


__all__ = [
    "GRADE_KIND",
    "GRADE_METRIC",
    "GradeCalibrationResult",
    "GradeLabel",
    "calibrate_judge_grades",
    "load_grade_labels",
]
