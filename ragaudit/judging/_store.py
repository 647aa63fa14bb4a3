"""The judgment store: every relevance grade paid for, reusable by any later run or tune.

A grade given one candidate per call depends on the judge (its model, its temperature, its
window and answer budget, which decide whether a long text is graded in parts), on the prompt
(name and version), on the question's language (the prompt's language) and text, and on the
document's text, and on nothing else: those are the key (:func:`grade_key`), so a grade is
never paid twice and a changed document, question or judge setting is graded anew.

Why Parquet part files under ``<runs_root>/judgments/`` rather than a second diskcache: the
store is read by any Parquet tool (``pool.qrels.txt`` is one query away); it is a
:class:`~ragaudit.partstore.PartStore`, so each batch of new grades is one new part written
atomically under the store's lock, a process killed mid-batch loses at most that batch (whose
answers the gateway's memo still holds), and :func:`grade_through_store` holds the lock from
its look-up to its append, so two tunes (or a tune and a run) on one store pay each grade once.
The LLM memo stays what it is, the per-request cache; the store is the per-grade record that
outlives a memo cleared or moved.

People's and imported judgments live in the same parts (schema version 3: columns added, none
changed). Each row says its ``source_kind`` (judge, person, imported), its source's
name, its annotator and time, and its ``state`` (graded, unrateable, later: an unrateable pair
is a row without a grade, an unjudged pair has no row). A person's or an imported row is keyed
by what it judged, the question and the document text (:func:`label_key`), without a judge:
several annotators' rows share a key and none is a conflict. Only rows naming a ``judge`` are
the judge's grades a look-up returns: the sort stage's, a tune's, an audit's, and imported
grades an import was told to stand in for that judge (``role`` ``seed``), which is how a tune
pays nothing for a pair someone already judged. A label a person gives on a labelling page (a
run's, an audit day's: :mod:`ragaudit.labels`) is such a row too, of source ``labelling``; a
person's yes/no on an answer (schema version 4) names its ``metric`` and is keyed apart. The
columns, keys and checks both sides share are :mod:`ragaudit.judgment_parts`'.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa

from ragaudit import progress
from ragaudit.cache import structured_prompt_tokens
from ragaudit.dataset import Question
from ragaudit.hashing import canonical_hash
from ragaudit.judging._grades import Graded, grade_candidates
from ragaudit.judging._judge import Judge, Spend
from ragaudit.judgment_parts import (
    GRADES,
    ROLES,
    SOURCE_KINDS,
    STATES,
    checked,
    label_key,
    ref_key,
    row_parts,
    text_hash,
    text_parts,
)
from ragaudit.partstore import ForeignPart
from ragaudit.prompts import RELEVANCE, RelevanceInput
from ragaudit.runfolder import STORE_DIR
from ragaudit.schemas import JUDGMENT_TEXTS, JUDGMENTS, to_table

_log = logging.getLogger(__name__)


BATCH = 200
"""Pairs looked up and paid per hold of the store's lock: another writer waits at most one."""


class StoreError(ForeignPart):
    """A part of the judgment store holds a row that is not a grade (another type or range)."""


@dataclass(frozen=True)
class Grader:
    """What of a judge changes the grade it gives: the store's key holds all of it."""

    model: str
    temperature: float
    window: int | None
    max_tokens: int

    @classmethod
    def of(cls, judge: Judge) -> Grader:
        """The grader ``judge`` is."""
        return cls(judge.model, float(judge.temperature), judge.window, judge.max_tokens)


def grade_key(grader: Grader, prompt: str, language: str, question: str, text: str) -> str:
    """The store's key of one grade (``grade/2``: version 1 keys left the judge's settings out)."""
    return canonical_hash(
        [
            "grade/2",
            grader.model,
            grader.temperature,
            grader.window,
            grader.max_tokens,
            prompt,
            language,
            text_hash(question),
            text_hash(text),
        ]
    )


@dataclass(frozen=True)
class StoredGrade:
    """One grade from the store."""

    grade: int
    reason: str


class JudgmentStore:
    """Grades by key, read from the part files of one folder and appended as new parts.

    A key two parts give different grades is reported (:attr:`problems`, and a logged
    warning naming both parts); the first written is kept, as every reader before the second
    part saw it.
    """

    def __init__(self, folder: Path | str) -> None:
        """Open the store in ``folder`` (created on the first write)."""
        self.folder = Path(folder)
        self.parts = row_parts(self.folder)
        self.texts = text_parts(self.folder)
        """Resolved texts by hash (the people's and imported rows' questions and documents)."""
        self._grades: dict[str, tuple[StoredGrade, str]] = {}
        self._sources: set[str] = set()
        self.conflicts: dict[str, tuple[str, str]] = {}
        """Keys two parts grade differently: key → (the part kept, the part disagreeing)."""

    @property
    def problems(self) -> list[str]:
        """Damaged parts skipped, and keys whose parts disagree, one line each."""
        return list(self.parts.problems)

    def refresh(self) -> None:
        """Read the parts written since the last read (by this process or any other).

        Raises:
            StoreError: A part holds a grade that is not an integer 0–3, or other columns.
        """
        try:
            new = self.parts.read_new()
        except ForeignPart as exc:
            raise StoreError(str(exc)) from None
        for path, table in new:
            self._take(path, table)

    def _take(self, path: Path, table: pa.Table) -> None:
        self._sources.update(s for s in table["source"].unique().to_pylist() if s)
        keys, grades = table["key"].to_pylist(), table["grade"].to_pylist()
        bad = sorted({g for g in grades if g is not None and g not in GRADES})
        if bad:
            raise StoreError(
                f"{path}: grade {', '.join(map(str, bad[:3]))} outside 0–3; move the part out "
                f"of {self.folder} and re-run"
            )
        bad_states = sorted({s for s in table["state"].unique().to_pylist() if s} - set(STATES))
        if bad_states:
            raise StoreError(
                f"{path}: state {', '.join(map(str, bad_states[:3]))} is not one of "
                f"{', '.join(STATES)}; move the part out of {self.folder} and re-run"
            )
        disagree: list[str] = []
        judges = table["judge"].to_pylist()
        for key, grade, reason, judge in zip(
            keys, grades, table["reason"].to_pylist(), judges, strict=True
        ):
            # People's and imported rows name no judge: they are never a judge's grade, and
            # two annotators disagreeing on a pair is a figure (stats), not a conflict.
            if grade is None or not key or not judge:
                continue
            held = self._grades.get(key)
            if held is None:
                self._grades[key] = (StoredGrade(grade, reason or ""), path.name)
            elif held[0].grade != grade and key not in self.conflicts:
                self.conflicts[key] = (held[1], path.name)
                disagree.append(key)
        if disagree:
            first = self.conflicts[disagree[0]][0]
            line = (
                f"{path}: {len(disagree)} grade(s) differ from those an earlier part gives the "
                f"same key (first: {first}); the earlier grades are kept"
            )
            self.parts.problems.append(line)
            _log.warning(line)

    def sources(self) -> set[str]:
        """What paid for the stored grades (``tune:<name>``, ``run:<id>``)."""
        self.refresh()
        return set(self._sources)

    def __len__(self) -> int:
        self.refresh()
        return len(self._grades)

    def get(self, key: str) -> StoredGrade | None:
        """The stored grade of ``key``, if any."""
        self.refresh()
        held = self._grades.get(key)
        return None if held is None else held[0]

    def lookup(self, keys: Iterable[str]) -> dict[str, StoredGrade]:
        """The stored grades of those ``keys`` the store holds."""
        self.refresh()
        return {k: self._grades[k][0] for k in keys if k in self._grades}

    def add(self, rows: Sequence[Mapping[str, Any]], source: str, *, locked: bool = False) -> int:
        """Append the graded rows the store lacks as one new part.

        A row holds ``key``, ``grader`` (a :class:`Grader`), ``prompt``, ``language``,
        ``question``, ``text``, ``question_id``, ``context_id``, ``grade`` and ``reason``; rows
        without a grade, and keys the store already holds, are not written. ``locked``: the
        caller holds the store's lock (:meth:`PartStore.alock`).

        Returns:
            The grades written.

        Raises:
            ValueError: A grade outside 0–3.
        """
        now = dt.datetime.now(dt.UTC).isoformat()
        self.refresh()
        out: dict[str, dict[str, Any]] = {}
        for r in rows:
            if r.get("grade") is None or r["key"] in self._grades or r["key"] in out:
                continue
            if r["grade"] not in GRADES:
                raise ValueError(f"grade {r['grade']!r} of {r['context_id']!r}: not 0–3")
            grader: Grader = r["grader"]
            out[r["key"]] = {
                "key": r["key"],
                "judge": grader.model,
                "temperature": grader.temperature,
                "window": grader.window,
                "max_tokens": grader.max_tokens,
                "prompt": r["prompt"],
                "language": r["language"],
                "question_hash": text_hash(r["question"]),
                "text_hash": text_hash(r["text"]),
                "question_id": r["question_id"],
                "context_id": r["context_id"],
                "grade": int(r["grade"]),
                "reason": r.get("reason") or "",
                "source": source,
                "created_at": now,
                "source_kind": "judge",
                "state": "graded",
                "source_value": str(int(r["grade"])),
                "query": r["question"],
            }
        if not out:
            return 0
        path = self.parts.append(to_table(list(out.values()), JUDGMENTS), locked=locked)
        for key, r in out.items():
            self._grades[key] = (StoredGrade(r["grade"], r["reason"]), path.name)
        self._sources.add(source)
        return len(out)

    def add_table(self, table: pa.Table, *, locked: bool = False) -> int:
        """Append prepared rows of the store's schema (people's or imported judgments) as one part.

        Every row is written, whatever the store holds: a person's or an imported row is a
        record of who said what, and a later row of the same key and annotator supersedes an
        earlier one when read. Rows naming a judge (``role`` ``seed``) become that judge's
        grades for look-ups, the first written of a key kept as :meth:`add` keeps it.

        Returns:
            The rows written.

        Raises:
            ValueError: A row without a key, a grade outside 0–3, or an unknown source kind,
                state or role (nothing is written then).
        """
        if table.num_rows == 0:
            return 0
        table = checked(table)
        self.refresh()
        path = self.parts.append(table, locked=locked)
        self._take(path, table)
        return table.num_rows

    def rows(self) -> pa.Table:
        """Every row of every readable part, oldest first (a fresh read: the stats, an export)."""
        return row_parts(self.folder).read_all()

    def add_texts(self, texts: Mapping[str, str], *, locked: bool = False) -> int:
        """Keep ``texts`` (hash → text) the store does not hold yet; returns how many were new."""
        held = self.text_hashes()
        new = {h: t for h, t in texts.items() if h not in held}
        if not new:
            return 0
        table = pa.table(
            {"text_hash": list(new), "text": list(new.values())}, schema=JUDGMENT_TEXTS
        )
        self.texts.append(table, locked=locked)
        return len(new)

    def text_hashes(self) -> set[str]:
        """The hashes whose text the store keeps."""
        reader = text_parts(self.folder)
        return set(reader.read_all()["text_hash"].to_pylist())

    def texts_of(self, hashes: Iterable[str]) -> dict[str, str]:
        """The kept text of each of ``hashes`` (hashes without one are left out)."""
        wanted = set(hashes)
        table = text_parts(self.folder).read_all()
        return {
            h: t
            for h, t in zip(table["text_hash"].to_pylist(), table["text"].to_pylist(), strict=True)
            if h in wanted
        }

    def mark(self, source: str) -> None:
        """Record that ``source`` was read and gave no grade (so it is not read again)."""
        now = dt.datetime.now(dt.UTC).isoformat()
        self.parts.append(to_table([{"key": "", "source": source, "created_at": now}], JUDGMENTS))
        self._sources.add(source)


def pair_key(judge: Judge, question: Question, text: str) -> str:
    """The store's key of ``judge``'s grade of ``text`` for ``question``: the one key function.

    What a tune, an audit and the sort stage look up and append under (:func:`grade_key` of the
    judge's :class:`Grader`, the relevance prompt's version, the question's language and text,
    the document's text).
    """
    return grade_key(Grader.of(judge), RELEVANCE.key, question.language, question.question, text)


def prompt_tokens(judge: Judge, question: Question, text: str) -> int:
    """Tokens of the grading prompt of one document, as the gateway counts them."""
    messages = RELEVANCE.messages(
        RelevanceInput(question=question.question, context=text), question.language
    )
    return structured_prompt_tokens(judge.model, RELEVANCE.output_model, messages)


def _answered_tokens(judge: Judge, q: Question, text: str) -> int:
    """The prompt tokens the judge's answer for ``text`` reports (0 without a window)."""
    return 0 if judge.budget is None else prompt_tokens(judge, q, text)


Candidates = Mapping[str, Sequence[Mapping[str, Any]]]
"""Question id → its documents (``context_id``, ``text``)."""


def lookup_pairs(
    judge: Judge, questions: Mapping[str, Question], candidates: Candidates, store: JudgmentStore
) -> dict[tuple[str, str], StoredGrade]:
    """(question id, context id) → the grade the store holds for it, for the pairs it holds."""
    keys = {
        (qid, c["context_id"]): pair_key(judge, questions[qid], c["text"])
        for qid, rows in candidates.items()
        for c in rows
    }
    held = store.lookup(set(keys.values()))
    return {pair: held[key] for pair, key in keys.items() if key in held}


@dataclass
class StoreGrading:
    """What :func:`grade_through_store` did.

    Attributes:
        graded: Question id → its candidates' grades (as :func:`grade_candidates` gives them).
        how: (question id, context id) → where its grade came from: ``store`` (held before),
            ``memo`` (asked now, every answer from the memo) or ``paid`` (a provider answered);
            a pair of the same key as another takes the other's.
        found: Pairs whose grade the store held.
        paid: Pairs graded by the judge now (memo hits included; failed ones too).
        failed: Of those, pairs left without a grade.
        added: Grades appended to the store.
    """

    graded: dict[str, Graded] = field(default_factory=dict)
    how: dict[tuple[str, str], str] = field(default_factory=dict)
    found: int = 0
    paid: int = 0
    failed: int = 0
    added: int = 0


def _stored_row(
    run_id: str, qid: str, cid: str, held: StoredGrade, relevant: int
) -> dict[str, Any]:
    return {
        "run_id": run_id,
        "question_id": qid,
        "context_id": cid,
        "grade": held.grade,
        "relevant": held.grade >= relevant,
        "reason": held.reason,
        "status": "ok",
        "error": None,
        "note": None,
        "grade_samples": None,
        "grade_judges": None,
    }


async def grade_through_store(
    judge: Judge,
    questions: Mapping[str, Question],
    candidates: Candidates,
    store: JudgmentStore | None,
    *,
    source: str,
    relevant_grade: int = 2,
    run_id: str = "",
    batch: int = BATCH,
) -> StoreGrading:
    """Grade (question, document) pairs through the store: look up, pay only the missing, append.

    The one way a grade goes through the store, for the sort stage, a tune and an audit alike.
    Pairs of one key (the same question and text: a document served to several requests of one
    query, pooled by two variants, or held under two ids) are asked once and the grade fanned
    out to each. One candidate per call, ``judge`` alone (a jury's or repeats' grade is an
    aggregate no single call gives, so it never enters the store). Per batch of ``batch``
    distinct pairs the store's lock is held from the look-up to the append: a second process
    grading the same pairs waits, then finds them stored and pays none. Only grades paid now
    are appended, and only those one call gave (a text over the judge's window, graded in
    parts, is left to the memo). A stored or fanned-out grade counts in the question's spend as
    a memo hit does (one answer, its prompt's tokens), so a re-run's tables are the same
    whichever cache answered. With ``store`` None nothing is looked up or appended (a check
    that asks stored grades again).

    Args:
        judge: The judge (its model, temperature, window and answer budget are in the key).
        questions: Question id → question (its text and language are in the key).
        candidates: Question id → documents (``context_id``, ``text``), in the order the
            result's rows keep.
        store: The runs root's store, or None.
        source: What pays for new grades: ``run:<id>``, ``tune:<name>``, ``audit:<name>``.
        relevant_grade: The lowest grade that counts as relevant (the result's split).
        run_id: Written in every row.
        batch: Distinct pairs per hold of the store's lock.

    Returns:
        The grades per question (``verdicts`` rows, a stored grade's row with status ``ok``
        and its stored reason), where each came from, and the counts.

    Raises:
        StoreError: A part of the store holds a value that is not a grade (before any call).
    """
    grader = Grader.of(judge)
    pairs = [(qid, c["context_id"], c["text"]) for qid, rows in candidates.items() for c in rows]
    keys = {(qid, cid): pair_key(judge, questions[qid], text) for qid, cid, text in pairs}
    first: dict[str, tuple[str, str, str]] = {}
    for qid, cid, text in pairs:
        first.setdefault(keys[(qid, cid)], (qid, cid, text))
    asked = list(first.values())
    rows: dict[tuple[str, str], dict[str, Any]] = {}
    spends = {qid: Spend() for qid in candidates}
    out = StoreGrading()
    if store is not None:
        store.refresh()  # a part that is not the store's is refused before any call
    with progress.bar("sort: relevance", len(pairs)) as bar:
        for start in range(0, len(asked), batch):
            chunk = asked[start : start + batch]
            async with store.parts.alock() if store is not None else contextlib.nullcontext():
                stored = store.lookup(keys[(q, c)] for q, c, _ in chunk) if store else {}
                todo: dict[str, list[dict[str, str]]] = {}
                for qid, cid, text in chunk:
                    held = stored.get(keys[(qid, cid)])
                    if held is None:
                        todo.setdefault(qid, []).append({"context_id": cid, "text": text})
                        continue
                    out.found += 1
                    out.how[(qid, cid)] = "store"
                    bar.advance()
                    # Counted as a memo hit is: the answer used, the prompt it answered. So a
                    # re-run writes the same ``ranking`` table whichever cache answered it.
                    spends[qid].calls += 1
                    spends[qid].prompt_tokens += _answered_tokens(judge, questions[qid], text)
                    rows[(qid, cid)] = _stored_row(run_id, qid, cid, held, relevant_grade)
                if not todo:
                    continue
                graded = await grade_candidates(
                    judge,
                    questions,
                    todo,
                    relevant_grade=relevant_grade,
                    per_call=1,
                    run_id=run_id,
                    bar=bar,
                )
                new = []
                for qid, g in graded.items():
                    q = questions[qid]
                    spends[qid].calls += g.spend.calls
                    spends[qid].prompt_tokens += g.spend.prompt_tokens
                    spends[qid].failed += g.spend.failed
                    texts = {d["context_id"]: d["text"] for d in todo[qid]}
                    for row in g.rows:
                        cid = row["context_id"]
                        rows[(qid, cid)] = row
                        out.how[(qid, cid)] = "memo" if cid in g.from_memo else "paid"
                        out.paid += 1
                        out.failed += row["grade"] is None
                        if row["note"] is not None:
                            # Graded in parts (over the window): not one call's grade, and its
                            # note would be lost on reuse; the memo still holds its parts.
                            continue
                        new.append(
                            {
                                **row,
                                "key": keys[(qid, cid)],
                                "grader": grader,
                                "prompt": RELEVANCE.key,
                                "language": q.language,
                                "question": q.question,
                                "text": texts[cid],
                            }
                        )
                if store is not None:
                    out.added += store.add(new, source, locked=True)
        # The pairs sharing another's key: its grade and its source, counted as that answer.
        for qid, cid, text in pairs:
            if (qid, cid) in rows:
                continue
            oq, oc, _ = first[keys[(qid, cid)]]
            rows[(qid, cid)] = {**rows[(oq, oc)], "question_id": qid, "context_id": cid}
            out.how[(qid, cid)] = out.how[(oq, oc)]
            bar.advance()
            spends[qid].calls += 1
            spends[qid].prompt_tokens += _answered_tokens(judge, questions[qid], text)
            spends[qid].failed += rows[(qid, cid)]["grade"] is None
    for qid, docs in candidates.items():
        out.graded[qid] = Graded.from_rows(
            [rows[(qid, d["context_id"])] for d in docs], relevant_grade, spends[qid]
        )
    return out


__all__ = [
    "BATCH",
    "GRADES",
    "ROLES",
    "SOURCE_KINDS",
    "STATES",
    "STORE_DIR",
    "Grader",
    "JudgmentStore",
    "StoreError",
    "StoreGrading",
    "StoredGrade",
    "grade_key",
    "grade_through_store",
    "label_key",
    "lookup_pairs",
    "pair_key",
    "prompt_tokens",
    "ref_key",
    "text_hash",
]
