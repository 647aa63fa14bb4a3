"""Grades that earlier runs' sort stages paid for, brought into the judgment store.

The sort stage grades one candidate per call with the same prompt a tune uses, so a run's
verdicts are grades a tune may reuse. The sort stage appends them to the store as it writes its
verdicts (``store_sort_grades``): the store is a cross-run cache like the gateway's memo, not an
interface between stages, so a run that crashes before its end still spares a later tune the
grades it paid for. Runs made before the sort stage wrote there are read once each from their
folders (``import_run_grades``). Either way only grades that mean what the store's mean are
taken: one judge (no jury, no repeats), one candidate per call, the store's relevance prompt.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from ragaudit.config import OFFLINE_JUDGE
from ragaudit.prompts import RELEVANCE
from ragaudit.runfolder import RunFolder
from ragaudit.tuning._store import STORE_DIR, JudgmentStore, grade_key

_FINISHED = {"completed", "completed_with_failures"}


def _relevance_versions(calls_dir: Path) -> set[str]:
    versions: set[str] = set()
    name = RELEVANCE.key.split("@", 1)[0] + "@"
    for part in sorted(calls_dir.glob("*.parquet")) if calls_dir.is_dir() else []:
        try:
            table = pq.read_table(part, columns=["prompt_version"])
        except (OSError, pa.ArrowInvalid, KeyError):
            continue
        versions.update(
            v for v in table["prompt_version"].unique().to_pylist() if v and v.startswith(name)
        )
    return versions


def _usable(manifest: dict[str, Any], judge: str) -> bool:
    cfg = manifest.get("config") or {}
    models, sort = cfg.get("models") or {}, cfg.get("sort") or {}
    return (
        manifest.get("status") in _FINISHED
        and (models.get("judge") or OFFLINE_JUDGE) == judge
        and single_judge(models.get("jury"), models.get("judge_repeats"), sort.get("grade_batch"))
    )


def single_judge(jury: Iterable[str] | None, repeats: int | None, per_call: int | None) -> bool:
    """Whether a run's grades are single-judge grades, one candidate per call (storable)."""
    return not list(jury or []) and int(repeats or 1) == 1 and int(per_call or 1) == 1


def _grade_rows(
    judge: str,
    questions: Mapping[str, str],
    texts: Mapping[tuple[str, str], str],
    verdicts: Iterable[Mapping[str, Any]],
) -> list[dict[str, Any]]:
    rows = []
    for v in verdicts:
        qid, cid, grade = v["question_id"], v["context_id"], v.get("grade")
        text = texts.get((qid, cid))
        if v.get("status") != "ok" or grade is None or text is None or qid not in questions:
            continue
        rows.append(
            {
                "key": grade_key(judge, RELEVANCE.key, questions[qid], text),
                "judge": judge,
                "prompt": RELEVANCE.key,
                "question": questions[qid],
                "text": text,
                "question_id": qid,
                "context_id": cid,
                "grade": int(grade),
                "reason": v.get("reason") or "",
            }
        )
    return rows


def store_sort_grades(
    runs_root: Path | str,
    run_id: str,
    judge: str,
    questions: Mapping[str, str],
    texts: Mapping[tuple[str, str], str],
    verdicts: Iterable[Mapping[str, Any]],
) -> int:
    """Append a sort stage's single-judge grades to the store under ``runs_root``.

    The caller checks ``single_judge`` first: a jury's or repeats' grades are aggregates, not
    the grade one call of ``judge`` gives. ``questions`` maps a question id to its text,
    ``texts`` a (question id, context id) pair to the candidate's text.

    Returns:
        The grades added.
    """
    rows = _grade_rows(judge, questions, texts, verdicts)
    if not rows:
        return 0
    return JudgmentStore(Path(runs_root) / STORE_DIR).add(rows, f"run:{run_id}")


def import_run_grades(runs_root: Path | str, store: JudgmentStore, judge: str) -> int:
    """Store the grades earlier runs under ``runs_root`` paid for, each run read once.

    Only finished runs whose grades ``judge`` gave alone, one candidate per call, with the
    store's relevance prompt.

    Returns:
        The grades added.
    """
    root = Path(runs_root)
    done = store.sources()
    added = 0
    for manifest_path in sorted(root.glob("*/manifest.json")):
        run_id = manifest_path.parent.name
        source = f"run:{run_id}"
        if source in done:
            continue
        try:
            manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if not isinstance(manifest, dict) or not _usable(manifest, judge):
            continue
        run = RunFolder(root, run_id)
        if not (run.has("verdicts") and run.has("candidates") and run.has("questions")):
            continue
        if _relevance_versions(run.calls_dir) != {RELEVANCE.key}:
            continue
        questions = {q.question_id: q.question for q in run.questions()}
        texts = {
            (qid, c["context_id"]): c["text"]
            for qid, rows in run.candidates().items()
            for c in rows
        }
        rows = _grade_rows(judge, questions, texts, run.rows("verdicts"))
        # An empty part still marks the run as read, so it is not read again.
        added += store.add(rows, source) if rows else store.mark(source)
    return added


__all__ = ["import_run_grades", "single_judge", "store_sort_grades"]
