"""The previous run whose judged heads the sort stage builds on (``sort.previous``).

The incremental head (:mod:`ragaudit.judging._incremental`) keeps what a previous run judged
where nothing changed; this module finds that run (the runs root's previous like-for-like run,
:meth:`~ragaudit.runfolder.RunsRoot.previous_like`, or the one named) and reads its heads. Each
"no" says why in one phrase (:attr:`OrderingBaseline.note`), which the sort stage writes beside
every head it orders afresh: the log, the manifest and the report then say why a night paid for
its heads again.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from ragaudit.config import RunConfig
from ragaudit.errors import StageError
from ragaudit.judging._incremental import PreviousHead, head_signature
from ragaudit.runfolder import RunFolder, RunsRoot, stored_config


def config_signature(config: RunConfig) -> dict[str, object]:
    """The judge and prompt versions a run's judged heads rest on (see ``head_signature``)."""
    return head_signature(
        config.models.judge_model, config.models.temperature, config.sort.head_method
    )


def stored_signature(run: RunFolder) -> dict[str, Any] | None:
    """The judge and head prompt versions a stored run ordered with (None: not known).

    From its manifest's ``ordering`` section; a run written before that section has its judge
    from its stored config and its prompt versions from its call log.
    """
    recorded = (run.read_manifest().get("ordering") or {}).get("signature")
    if isinstance(recorded, dict):
        return recorded
    config = stored_config(run)
    if config is None:
        return None
    signature = config_signature(config)
    wanted = {str(v).split("@")[0] for v in signature["prompt_versions"]}  # type: ignore[attr-defined]
    logged = sorted(run.prompt_versions(*wanted))
    if not logged:
        return None
    return {**signature, "prompt_versions": logged}


def _shown(value: Any, width: int = 120) -> str:
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return text if len(text) <= width else text[: width - 1] + "…"


@dataclass(frozen=True)
class OrderingBaseline:
    """The earlier run whose judged heads the sort stage builds on, and those heads.

    ``heads`` holds only the questions whose previous ranking may be reused (status ``ok``,
    the same method); ``note`` says why there is no baseline or why it was not used;
    ``skipped`` why a question's previous head was not given (its text changed).
    """

    run_id: str | None
    heads: dict[str, PreviousHead]
    note: str | None = None
    skipped: dict[str, str] = field(default_factory=dict)

    def why_fresh(self, question_id: str) -> str | None:
        """Why the question's head cannot be built on a previous one (None: it may be)."""
        if question_id in self.heads:
            return None
        return self.skipped.get(question_id) or self.note


def ordering_baseline(
    run: RunFolder, config: RunConfig, ids: frozenset[str] | None = None
) -> OrderingBaseline:
    """The previous heads ``sort.previous`` points at, for ``run``'s questions (``ids``).

    ``auto``: the runs root's previous like-for-like run (the nightly's baseline); a run id:
    that run, which must exist under the runs root; ``none``: no baseline. A baseline judged
    with another judge or other prompt versions gives no heads; per question only an ``ok``
    ranking made by the same method, of a question whose text is unchanged, is given.

    Raises:
        StageError: ``sort.previous`` names no run under the runs root.
    """
    cfg = config.sort
    if cfg.order != "head" or cfg.previous == "none":
        return OrderingBaseline(None, {})
    root = RunsRoot(run.path.parent)
    if cfg.previous == "auto":
        if stored_config(run) is None:
            # Without its own config stored a run cannot say which runs are like it.
            return OrderingBaseline(None, {}, "this run's configuration is not stored yet")
        found = root.previous_like(run)
        if found is None:
            return OrderingBaseline(
                None, {}, "no earlier completed run of this question set and configuration"
            )
        prev = found.folder
    else:
        prev = RunFolder(root.path, cfg.previous)
        if prev.run_id == run.run_id or not prev.manifest_path.is_file():
            raise StageError(f"sort.previous: run {cfg.previous!r} is not a run under {root.path}")
    if not prev.has("ranking") or not prev.has("candidates") or not prev.has("verdicts"):
        return OrderingBaseline(prev.run_id, {}, f"run {prev.run_id} has no judged ranking")
    then, now = stored_signature(prev), config_signature(config)
    if then != now:
        what = "not recorded" if then is None else _shown(then)
        return OrderingBaseline(
            prev.run_id,
            {},
            f"run {prev.run_id} ordered with another judge or prompts ({what}; now {_shown(now)})",
        )
    method = f"head:{cfg.head_method}"
    asked = {q.question_id: q.question for q in run.questions(ids)} if run.has("questions") else {}
    before = {q.question_id: q.question for q in prev.questions(ids)}
    texts: dict[str, dict[str, str]] = {}
    for c in prev.rows("candidates", ids):
        texts.setdefault(c["question_id"], {})[c["context_id"]] = c["text"]
    grades: dict[str, dict[str, int]] = {}
    for v in prev.rows("verdicts", ids):
        if v["grade"] is not None:
            grades.setdefault(v["question_id"], {})[v["context_id"]] = v["grade"]
    heads, skipped = {}, {}
    for qid, row in prev.ranking(ids).items():
        if row.get("status") != "ok" or row.get("method") != method or row.get("exact_k") is None:
            continue
        if qid in asked and before.get(qid) != asked[qid]:
            # The same id with other words is another question: its grades and order are not
            # this one's, however alike its candidates.
            skipped[qid] = f"its text changed since run {prev.run_id}"
            continue
        ordered = tuple(row["ordered_ids"] or ())
        heads[qid] = PreviousHead(
            head=ordered[: row["exact_k"]],
            ordered=ordered,
            texts=texts.get(qid, {}),
            grades=grades.get(qid, {}),
        )
    note = None if heads else f"run {prev.run_id} has no reusable head of these questions"
    return OrderingBaseline(prev.run_id, heads, note, skipped)


__all__ = ["OrderingBaseline", "config_signature", "ordering_baseline", "stored_signature"]
