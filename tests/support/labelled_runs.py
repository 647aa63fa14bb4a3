"""Run folders with judged candidates, judged answers and people's labels of some of them.

The planted truth is drawn first; the judge over-rates relevance grades (a grade goes up by one
with probability ``over``) and over-scores answers, as LLM judges tend to; people's labels are
the truth. The tables are written directly, as ``reporting_runs`` writes its runs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from ragaudit import labels
from ragaudit.runfolder import RunFolder
from ragaudit.schemas import CANDIDATES, VERDICTS, to_table
from support.reporting_runs import write_run


def labelled_run(
    root: Path,
    run_id: str,
    *,
    questions: int = 30,
    candidates: int = 5,
    over: float = 0.5,
    seed: int = 0,
    grade_labels: int | None = None,
    answer_labels: int = 12,
    annotators: tuple[str, ...] = ("ann",),
    with_labels: bool = True,
    shift: float = 0.0,
) -> tuple[Path, dict[str, Any]]:
    """A run with ``questions`` × ``candidates`` judged grades and one judged metric.

    ``grade_labels`` questions have every candidate graded by people (all of them when None);
    ``answer_labels`` answers are labelled yes/no. ``shift`` moves the truth of the answers
    (a better system). Returns the run folder and the planted truth.
    """
    rng = np.random.default_rng(seed)
    qids = [f"q{i:04d}" for i in range(questions)]
    truth_answer = (rng.random(questions) < 0.5 + shift).astype(float)
    # The judge scores a right answer high and a wrong one too high half the time.
    judge_score = np.where(truth_answer == 1, 0.9, np.where(rng.random(questions) < 0.5, 0.8, 0.2))
    path = write_run(root, run_id, {"faithfulness": judge_score.tolist()}, question_ids=qids)
    run = RunFolder(root, run_id)
    cand_rows, verdict_rows, truth_grades = [], [], {}
    for q in qids:
        for c in range(candidates):
            cid = f"c{c}"
            true = int(rng.integers(0, 4))
            judged = min(3, true + int(rng.random() < over))
            truth_grades[(q, cid)] = true
            cand_rows.append(
                {
                    "run_id": run_id,
                    "question_id": q,
                    "context_id": cid,
                    "text": f"<b>context {cid} of {q}</b>",
                    "engine_rank": c + 1,
                    "engine_score": float(candidates - c),
                    "source": "test",
                }
            )
            verdict_rows.append(
                {
                    "run_id": run_id,
                    "question_id": q,
                    "context_id": cid,
                    "grade": judged,
                    "relevant": judged >= 2,
                    "status": "ok",
                }
            )
    run.write("candidates", to_table(cand_rows, CANDIDATES))
    run.write("verdicts", to_table(verdict_rows, VERDICTS))
    if with_labels:
        rows = []
        graded = qids if grade_labels is None else qids[:grade_labels]
        for who in annotators:
            for q in graded:
                for c in range(candidates):
                    cid = f"c{c}"
                    rows.append(label_row("grade", q, cid, who, float(truth_grades[(q, cid)])))
            for i, q in enumerate(qids[:answer_labels]):
                rows.append(label_row("faithfulness", q, None, who, float(truth_answer[i])))
        labels.append_labels(path, rows)
    return path, {"answers": truth_answer, "grades": truth_grades}


def label_row(kind: str, q: str, cid: str | None, who: str, value: float | None) -> dict[str, Any]:
    """One label as ``labels.append_labels`` takes it (``value`` None: a skip)."""
    return {
        "item_id": labels.item_id(kind, q, cid),
        "kind": kind,
        "question_id": q,
        "candidate_id": cid,
        "annotator": who,
        "label": value,
    }


GRADE_SHARES = (0.45, 0.25, 0.18, 0.12)
"""How often a planted candidate is truly graded 0, 1, 2, 3: most of a pool is off topic."""


def planted_pool_run(
    root: Path,
    run_id: str,
    *,
    questions: int = 40,
    pool: int = 60,
    over: float = 0.3,
    seed: int = 0,
) -> tuple[Path, dict[tuple[str, str], int], dict[tuple[str, str], int]]:
    """A run whose every question has a judged pool of ``pool`` candidates, and its truth.

    True grades are drawn with :data:`GRADE_SHARES`; the engine ranks a question's pool by
    its true grade plus noise (a fair engine, not a perfect one); the judge grades a true 0
    or 1 as a 2 with chance ``over`` (it over-rates, as LLM judges lean) and is right
    otherwise. Returns the run folder, the true grades and the judge's.
    """
    path, _ = labelled_run(
        root, run_id, questions=questions, candidates=1, with_labels=False, answer_labels=0,
        seed=seed,
    )  # fmt: skip
    rng = np.random.default_rng(seed)
    run = RunFolder(root, run_id)
    cand_rows, verdict_rows = [], []
    truth: dict[tuple[str, str], int] = {}
    judged: dict[tuple[str, str], int] = {}
    for i in range(questions):
        q = f"q{i:04d}"
        true = rng.choice(4, size=pool, p=GRADE_SHARES)
        judge = np.where((true < 2) & (rng.random(pool) < over), 2, true)
        order = np.argsort(-(true + rng.normal(0, 1.5, pool)), kind="stable")
        for rank, c in enumerate(order, start=1):
            cid = f"c{c:03d}"
            truth[(q, cid)], judged[(q, cid)] = int(true[c]), int(judge[c])
            cand_rows.append(
                {
                    "run_id": run_id, "question_id": q, "context_id": cid,
                    "text": f"passage {cid} of {q}", "engine_rank": rank,
                    "engine_score": float(pool - rank), "source": "test",
                }
            )  # fmt: skip
            verdict_rows.append(
                {
                    "run_id": run_id, "question_id": q, "context_id": cid,
                    "grade": int(judge[c]), "relevant": bool(judge[c] >= 2), "status": "ok",
                }
            )  # fmt: skip
    run.write("candidates", to_table(cand_rows, CANDIDATES))
    run.write("verdicts", to_table(verdict_rows, VERDICTS))
    return path, truth, judged


def label_sample_with_truth(
    run_dir: Path, truth: dict[tuple[str, str], int], *, limit: int | None = None
) -> int:
    """A person labels the run's grade sample in its order with the true grades; how many."""
    sample = labels.read_sample(run_dir)
    assert sample is not None
    rows = [
        label_row("grade", r["question_id"], r["candidate_id"], "ann",
               float(truth[(r["question_id"], r["candidate_id"])]))
        for r in sample.to_pylist()
        if r["kind"] == "grade"
    ][:limit]  # fmt: skip
    labels.append_labels(run_dir, rows)
    return len(rows)
