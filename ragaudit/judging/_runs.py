"""Grades that earlier runs' sort stages paid for, brought into the judgment store.

The sort stage grades one candidate per call with the same prompt a tune uses, so a run's
verdicts are grades a tune may reuse. A single-judge run's sort stage grades through the store
(:func:`~ragaudit.judging.grade_through_store`): the store is a cross-run cache like the
gateway's memo, not an interface between stages, so a run that crashes before its end still
spares a later tune the grades it paid for. Runs made before the sort stage wrote there are
read once each from their folders (:func:`import_run_grades`). Either way only grades that mean
what the store's mean are taken: one judge (no jury, no repeats), one candidate per call, the
store's relevance prompt, and the same judge settings (temperature, window, answer budget).
"""

from __future__ import annotations

from collections.abc import Iterable

from ragaudit.config import RunConfig
from ragaudit.judging._store import Grader, JudgmentStore, grade_key
from ragaudit.prompts import RELEVANCE
from ragaudit.runfolder import RunEntry, RunsRoot, stored_config


def single_judge(jury: Iterable[str] | None, repeats: int | None, per_call: int | None) -> bool:
    """Whether a run's grades are single-judge grades, one candidate per call (storable)."""
    return not list(jury or []) and int(repeats or 1) == 1 and int(per_call or 1) == 1


def config_grader(config: RunConfig) -> Grader:
    """The grader a config's judge is (what ``Judge.from_config`` builds), without a gateway."""
    from ragaudit.cache import context_window

    models = config.models
    window = context_window(models.judge_model, models.judge_context_window)
    return Grader(models.judge_model, float(models.temperature), window, models.max_output_tokens)


def _usable(entry: RunEntry, grader: Grader) -> bool:
    config = stored_config(entry.folder)
    if config is None:
        return False
    models = config.models
    return config_grader(config) == grader and single_judge(
        models.jury, models.judge_repeats, config.sort.grade_batch
    )


def import_run_grades(runs_root: RunsRoot, store: JudgmentStore, grader: Grader) -> int:
    """Store the grades earlier finished runs paid for, each run read once.

    Only runs whose grades ``grader`` gave alone, one candidate per call, with the store's
    relevance prompt.

    Returns:
        The grades added.
    """
    done = store.sources()
    added = 0
    for entry in runs_root.finished():
        source = f"run:{entry.run_id}"
        if source in done or not _usable(entry, grader):
            continue
        run = entry.folder
        if not (run.has("verdicts") and run.has("candidates") and run.has("questions")):
            continue
        if run.prompt_versions(RELEVANCE.key.split("@", 1)[0]) != {RELEVANCE.key}:
            continue
        # A turn of a conversation was graded with its history, bounded by that run's judge:
        # the sort stage stored those grades under their own keys as it paid for them.
        questions = {q.question_id: q for q in run.questions() if not q.conversational}
        texts = {
            (qid, c["context_id"]): c["text"]
            for qid, rows in run.candidates().items()
            for c in rows
        }
        rows = []
        for v in run.rows("verdicts"):
            qid, cid, grade = v["question_id"], v["context_id"], v.get("grade")
            text, q = texts.get((qid, cid)), questions.get(qid)
            if v.get("status") != "ok" or grade is None or text is None or q is None:
                continue
            rows.append(
                {
                    "key": grade_key(grader, RELEVANCE.key, q.language, q.question, text),
                    "grader": grader,
                    "prompt": RELEVANCE.key,
                    "language": q.language,
                    "question": q.question,
                    "text": text,
                    "question_id": qid,
                    "context_id": cid,
                    "grade": int(grade),
                    "reason": v.get("reason") or "",
                }
            )
        got = store.add(rows, source)
        added += got
        if not got:
            store.mark(source)  # an empty part still marks the run as read
    return added


__all__ = ["config_grader", "import_run_grades", "single_judge"]
