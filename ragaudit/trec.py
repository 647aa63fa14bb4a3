"""TREC interchange: a run folder's judgements and engine order as trec_eval's files.

Three files in the run folder, for any TREC tool (trec_eval, pytrec_eval, ir_measures, ranx):

- ``qrels.judge.txt``: the judge's grades, ``qid 0 docid grade`` (verdicts that failed are
  left out, as an unjudged document is in TREC); with several samples of each grade (repeats,
  a jury), the aggregated grade the run used;
- ``qrels.judge.<k>-<model>.txt``: with a jury, each member's own grades (its repeats
  aggregated as the run's), ``k`` its place in ``models.jury``;
- ``qrels.gold.txt``: the gold grades, where the question set (or ``gold.qrels``) has them;
- ``run.engine.txt``: the engine's order, ``qid Q0 docid rank score tag``.

trec_eval orders a run by its score, not by its rank column, and breaks ties by document id:
the score written is therefore taken from the rank (``n - rank + 1``), so every tool reads the
engine's order exactly as the agreement table does; the engine's own score is not kept.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ragaudit.agreement import gold_grades
from ragaudit.noise import GradeAggregate, combined_grade
from ragaudit.runfolder import RunFolder, stored_setting, write_bytes

QRELS_JUDGE = "qrels.judge.txt"
QRELS_GOLD = "qrels.gold.txt"
RUN_ENGINE = "run.engine.txt"

_SPACE = re.compile(r"\s+")
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def trec_id(value: str) -> str:
    """An id as a TREC field: whitespace would split it, so it becomes ``_``."""
    return _SPACE.sub("_", value) or "_"


def qrels_text(grades: Mapping[str, Mapping[str, int]]) -> str:
    """TREC qrels lines (``qid 0 docid grade``), questions and documents in the given order."""
    lines = [
        f"{trec_id(qid)} 0 {trec_id(doc)} {int(grade)}"
        for qid, docs in grades.items()
        for doc, grade in docs.items()
    ]
    return "".join(line + "\n" for line in lines)


def run_text(orders: Mapping[str, Sequence[str]], tag: str = "engine") -> str:
    """TREC run lines (``qid Q0 docid rank score tag``) for each question's order, best first."""
    lines = []
    for qid, docs in orders.items():
        n = len(docs)
        for rank, doc in enumerate(docs, start=1):
            lines.append(f"{trec_id(qid)} Q0 {trec_id(doc)} {rank} {n - rank + 1} {trec_id(tag)}")
    return "".join(line + "\n" for line in lines)


def _judge_grades(rows: Iterable[Mapping[str, object]]) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for r in rows:
        grade = r.get("grade")
        if grade is None and r.get("relevant") is not None:
            # A run from before graded verdicts: relevant is 1, not relevant 0.
            grade = int(bool(r["relevant"]))
        if grade is not None:
            out.setdefault(str(r["question_id"]), {})[str(r["context_id"])] = int(grade)  # type: ignore[call-overload]
    return out


def juror_qrels_name(k: int, model: str) -> str:
    """The per-juror qrels file of the ``k``-th jury member (1-based): a file-safe name."""
    return f"qrels.judge.{k}-{_UNSAFE.sub('_', model).strip('_') or 'judge'}.txt"


def _juror_grades(
    rows: Iterable[Mapping[str, Any]], how: GradeAggregate
) -> dict[str, dict[str, dict[str, int]]]:
    """Model → qid → docid → that model's grade (its own samples aggregated by ``how``)."""
    out: dict[str, dict[str, dict[str, int]]] = {}
    for r in rows:
        grades: list[int | None] = r.get("grade_samples") or []
        judges: list[str] = r.get("grade_judges") or []
        for model in dict.fromkeys(judges):
            mine = [g for g, m in zip(grades, judges, strict=True) if m == model]
            grade = combined_grade(mine, how)
            docs = out.setdefault(str(model), {}).setdefault(str(r["question_id"]), {})
            if grade is not None:
                docs[str(r["context_id"])] = grade
    return out


def export_trec(run_dir: Path | str) -> list[Path]:
    """Write the TREC files of the run folder ``run_dir``; returns the paths written.

    ``run.engine.txt`` needs the ``candidates`` table, ``qrels.judge.txt`` the ``verdicts``
    table (a run without the judge has none), ``qrels.gold.txt`` gold grades in the questions.
    """
    run_dir = Path(run_dir)
    run = RunFolder(run_dir.parent, run_dir.name)
    written: list[Path] = []
    if not run.has("candidates"):
        return written
    candidates = run.candidates()
    orders = {qid: [c["context_id"] for c in rows] for qid, rows in candidates.items()}
    path = run.path / RUN_ENGINE
    write_bytes(run_text(orders).encode(), path)
    written.append(path)
    if run.has("verdicts"):
        verdicts = run.rows("verdicts")
        path = run.path / QRELS_JUDGE
        write_bytes(qrels_text(_judge_grades(verdicts)).encode(), path)
        written.append(path)
        how = stored_setting(run, "sort.grade_aggregate")
        jurors = _juror_grades(verdicts, how or "majority")
        if len(jurors) >= 2:
            for k, (model, juror) in enumerate(jurors.items(), start=1):
                path = run.path / juror_qrels_name(k, model)
                write_bytes(qrels_text(juror).encode(), path)
                written.append(path)
    gold: dict[str, dict[str, int]] = {}
    if run.has("questions"):
        for q in run.questions():
            grades = gold_grades(q, candidates.get(q.question_id, []))
            if grades:
                gold[q.question_id] = grades
    if gold:
        path = run.path / QRELS_GOLD
        write_bytes(qrels_text(gold).encode(), path)
        written.append(path)
    return written


__all__ = [
    "QRELS_GOLD",
    "QRELS_JUDGE",
    "RUN_ENGINE",
    "export_trec",
    "juror_qrels_name",
    "qrels_text",
    "run_text",
    "trec_id",
]
