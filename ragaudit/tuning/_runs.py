"""Grades that earlier runs' sort stages paid for, brought into the judgment store.

The sort stage grades one candidate per call with the same prompt a tune uses, so a run's
verdicts are grades a tune may reuse. Rather than have the sort stage write to the store too,
a tune reads the finished run folders under its runs root once each (the run folder is the
interface between stages): only runs whose grades mean what the store's mean are taken, i.e.
one judge (no jury, no repeats), one candidate per call, and a call log showing the relevance
prompt at the store's version and no other.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from ragaudit.config import OFFLINE_JUDGE
from ragaudit.prompts import RELEVANCE
from ragaudit.runfolder import RunFolder
from ragaudit.tuning._store import JudgmentStore, grade_key

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
        and not models.get("jury")
        and int(models.get("judge_repeats") or 1) == 1
        and int(sort.get("grade_batch") or 1) == 1
    )


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
        rows = []
        for v in run.rows("verdicts"):
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
        # An empty part still marks the run as read, so it is not read again.
        added += store.add(rows, source) if rows else store.mark(source)
    return added


__all__ = ["import_run_grades"]
