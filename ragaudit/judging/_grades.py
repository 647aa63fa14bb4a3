"""Graded relevance (0–3) of every candidate of every question."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

from ragaudit import progress
from ragaudit.cache import Judged
from ragaudit.dataset import Question
from ragaudit.judging._judge import (
    CountingJudge,
    Judge,
    PlannedRequest,
    Spend,
    gather_limited,
    parsed,
    shown_order,
    stable_key,
)
from ragaudit.judging._jury import GradeAggregate, combined_grade
from ragaudit.prompts import (
    RELEVANCE,
    RELEVANCE_BATCH,
    BatchRelevanceGrades,
    BatchRelevanceInput,
    Passage,
    RelevanceGrade,
    RelevanceInput,
)
from ragaudit.windowing import fit_text

# Fewer tokens than this left for a context: the question alone fills the window.
MIN_ROOM = 32
# At most this many parts of one over-long candidate are graded (a context of megabytes is not
# a retrieved passage: its cost stays bounded, and the note says how much was graded).
_MAX_PARTS = 16
# A cl100k token spans at most a few dozen characters: this many per token of room always
# covers the parts graded, so a huge context is never split in full.
_CHARS_PER_TOKEN = 32


@dataclass
class Graded:
    """The grades of one question's candidates.

    Attributes:
        grades: Context id → grade (0–3), for the candidates graded.
        relevant: Ids graded at or above the cut, in engine order.
        irrelevant: Ids graded below the cut, best grade first, engine order inside a grade.
        unjudged: Ids whose grade failed.
        rows: One ``verdicts`` row per candidate.
        spend: What the grading asked of the judge.
        from_memo: Ids every answer of whose grade the memo gave (no provider call now).
    """

    grades: dict[str, int] = field(default_factory=dict)
    relevant: list[str] = field(default_factory=list)
    irrelevant: list[str] = field(default_factory=list)
    unjudged: list[str] = field(default_factory=list)
    rows: list[dict[str, Any]] = field(default_factory=list)
    spend: Spend = field(default_factory=Spend)
    from_memo: set[str] = field(default_factory=set)

    @classmethod
    def from_rows(
        cls, rows: Sequence[dict[str, Any]], relevant_grade: int, spend: Spend | None = None
    ) -> Graded:
        """One question's grades from its ``verdicts`` rows (engine order), however they came.

        ``relevant`` keeps engine order; ``irrelevant`` is best grade first, engine order
        inside a grade; a row without a grade is ``unjudged``.
        """
        g = cls(rows=list(rows), spend=spend or Spend())
        for row in rows:
            cid, grade = row["context_id"], row["grade"]
            if grade is None:
                g.unjudged.append(cid)
                continue
            g.grades[cid] = grade
            (g.relevant if grade >= relevant_grade else g.irrelevant).append(cid)
        # sorted() is stable: engine order inside a grade.
        g.irrelevant.sort(key=lambda cid: -g.grades[cid])
        return g


@dataclass
class _Verdict:
    grade: int | None
    reason: str | None
    status: str
    error: str | None
    note: str | None = None
    memo: bool = False
    """Every answer it rests on came from the memo."""


async def _grade_one(judge: Judge, q: Question, text: str, spend: Spend) -> _Verdict:
    """One candidate's grade, one call (or one per part when it is over the window).

    A candidate too long for one prompt is cut into parts that fit (at paragraph, sentence or
    word ends) and takes the best grade of its parts: relevance is the presence of something
    that helps answer, and a part holds it or not regardless of the rest.
    """
    whole = await judge.ask(
        RELEVANCE, RelevanceInput(question=q.question, context=text), q.language
    )
    spend.add(whole)
    if whole.status != "too_long" or whole.calls:
        v = parsed(whole)
        return _Verdict(
            v.grade if v else None,
            v.reason if v else None,
            whole.status,
            whole.error,
            memo=whole.memo,
        )
    room = judge.room(RELEVANCE, RelevanceInput(question=q.question, context=""), q.language)
    if room < MIN_ROOM:
        return _Verdict(None, None, whole.status, whole.error)
    head = text[: room * _MAX_PARTS * _CHARS_PER_TOKEN]
    parts = fit_text(head, room, judge.model)[:_MAX_PARTS]
    answers: list[Judged[Any]] = await asyncio.gather(
        *(
            judge.ask(RELEVANCE, RelevanceInput(question=q.question, context=p), q.language)
            for p, _ in parts
        )
    )
    for a in answers:
        spend.add(a)
    judged_all = sum(len(p) for p, _ in parts) == len(text)
    graded = [(k, v) for k, a in enumerate(answers, start=1) if (v := parsed(a)) is not None]
    failed = [k for k, a in enumerate(answers, start=1) if not a.ok]
    note = (
        f"context over the judge's window ({whole.prompt_tokens}-token prompt, budget "
        f"{judge.budget}): graded in {len(parts)} parts"
        + ("" if judged_all else f" (its first {len(parts)} only)")
        + ", the best part's grade; part grades: "
        + (", ".join(f"{k}:{v.grade}" for k, v in graded) or "none")
        + (f"; failed parts: {', '.join(map(str, failed))}" if failed else "")
    )
    memo = all(a.memo for a in answers)
    if not graded:
        first = answers[failed[0] - 1] if failed else whole
        return _Verdict(None, None, first.status, first.error, note, memo)
    _, best = max(graded, key=lambda kv: kv[1].grade)
    return _Verdict(best.grade, best.reason, "ok", None, note, memo)


async def _grade_batch(
    judge: Judge, q: Question, chunk: Sequence[tuple[str, str]], spend: Spend
) -> dict[str, _Verdict]:
    """Grades of several candidates in one call; one call each when the batch cannot be used.

    A repeated sample shows the passages in another layout of its own, so that a judge's
    preference for a position does not fall on the same candidate in every sample.
    """
    salt = f"sample {judge.repeat}" if judge.repeat else ""
    shown = shown_order([cid for cid, _ in chunk], salt)
    texts = dict(chunk)
    inp = BatchRelevanceInput(
        question=q.question,
        passages=[Passage(id=i, text=texts[cid]) for i, cid in enumerate(shown, start=1)],
    )
    out = await judge.ask(RELEVANCE_BATCH, inp, q.language)
    spend.add(out)
    value = parsed(out)
    if out.status == "too_long" and not out.calls:
        # Over the window together: each on its own (and cut in parts if it must be).
        alone = await asyncio.gather(*(_grade_one(judge, q, t, spend) for _, t in chunk))
        return {cid: v for (cid, _), v in zip(chunk, alone, strict=True)}
    got = {g.id: g for g in value.grades} if value is not None else {}
    verdicts = {}
    for i, cid in enumerate(shown, start=1):
        if i in got:
            verdicts[cid] = _Verdict(got[i].grade, got[i].reason, "ok", None, None, out.memo)
        elif value is not None:
            verdicts[cid] = _Verdict(
                None, None, "failed", f"no grade for passage {i} in the answer", memo=out.memo
            )
        else:
            verdicts[cid] = _Verdict(None, None, out.status, out.error, memo=out.memo)
    return verdicts


def _combined(
    verdicts: Sequence[_Verdict], how: GradeAggregate
) -> tuple[_Verdict, list[int | None]]:
    """One candidate's verdict from its samples' (the first sample's alone when there is one).

    The grade is the samples' aggregate; the reason is that of the first sample that gave it.
    The verdict fails only when every sample failed (then it is the first sample's failure);
    samples that failed beside answered ones are counted in the note.
    """
    grades = [v.grade for v in verdicts]
    if len(verdicts) == 1:
        return verdicts[0], grades
    memo = all(v.memo for v in verdicts)
    grade = combined_grade(grades, how)
    if grade is None:
        return dataclasses.replace(verdicts[0], memo=memo), grades
    chosen = next(v for v in verdicts if v.grade == grade)
    failed = sum(g is None for g in grades)
    notes = [chosen.note] if chosen.note else []
    if failed:
        notes.append(f"{failed} of {len(grades)} grade samples failed")
    return _Verdict(grade, chosen.reason, "ok", None, "; ".join(notes) or None, memo), grades


async def grade_candidates(
    judge: Judge | Sequence[Judge],
    questions: Mapping[str, Question],
    candidates: Mapping[str, Sequence[Mapping[str, Any]]],
    *,
    relevant_grade: int = 2,
    per_call: int = 1,
    run_id: str = "",
    aggregate: GradeAggregate = "majority",
    bar: progress.Bar | None = None,
) -> dict[str, Graded]:
    """A grade (0–3) for every candidate, under the gateway's limit.

    Args:
        judge: The judge, or one judge per independent sample of every grade (the
            :func:`~ragaudit.judging.sample_judges` of a :func:`~ragaudit.judging.grade_plan`:
            a judge's repeats, a jury's members). Each sample grades every candidate as the
            judge alone would; a candidate's grade is their aggregate.
        questions: Question id → question.
        candidates: Question id → its candidates (``context_id``, ``text``), engine order.
        relevant_grade: The lowest grade that counts as relevant.
        per_call: Candidates graded per call. With 1 a grade depends only on the question, the
            candidate's text, the judge and the prompt, so a re-run whose engine returns the
            same candidates in any order pays nothing for them. Above 1 the candidates of a
            question are grouped by their ids (not by engine order) into calls of that size
            (and each sample asks the same groups).
        run_id: Written in every row.
        aggregate: How several samples' grades become one (``majority``, ``median``).
        bar: A progress bar the caller holds (one of its own otherwise).
    """
    judges = [judge] if isinstance(judge, Judge) else list(judge)
    if not judges:
        raise ValueError("grade_candidates needs at least one judge")
    several = len(judges) > 1
    spends = {qid: Spend() for qid in candidates}
    chunks: list[tuple[str, list[tuple[str, str]]]] = []
    for qid, rows in candidates.items():
        pairs = [(c["context_id"], c["text"]) for c in rows]
        if per_call <= 1:
            chunks += [(qid, [p]) for p in pairs]
        else:
            pairs.sort(key=lambda p: stable_key(p[0]))
            chunks += [(qid, pairs[i : i + per_call]) for i in range(0, len(pairs), per_call)]
    # Candidate-major: a jury's members (often different providers) are asked side by side.
    units = [(s, qid, chunk) for qid, chunk in chunks for s in range(len(judges))]
    total = sum(len(chunk) for _, _, chunk in units)
    with (
        contextlib.nullcontext(bar) if bar is not None else progress.bar("sort: relevance", total)
    ) as shown:

        async def grade(unit: tuple[int, str, list[tuple[str, str]]]) -> dict[str, _Verdict]:
            s, qid, chunk = unit
            q, spend, one = questions[qid], spends[qid], judges[s]
            if len(chunk) == 1:
                out = {chunk[0][0]: await _grade_one(one, q, chunk[0][1], spend)}
            else:
                out = await _grade_batch(one, q, chunk, spend)
            shown.advance(len(chunk))
            return out

        done = await gather_limited(units, grade, limit=judges[0].in_flight)

    verdicts: list[dict[str, dict[str, _Verdict]]] = [
        {qid: {} for qid in candidates} for _ in judges
    ]
    for (s, qid, _), out in zip(units, done, strict=True):
        verdicts[s][qid].update(out)
    models = [j.model for j in judges]
    result = {}
    for qid, rows in candidates.items():
        verdict_rows = []
        memo = set()
        for c in rows:
            cid = c["context_id"]
            v, samples = _combined([per[qid][cid] for per in verdicts], aggregate)
            if v.memo:
                memo.add(cid)
            verdict_rows.append(
                {
                    "run_id": run_id,
                    "question_id": qid,
                    "context_id": cid,
                    "grade": v.grade,
                    "relevant": None if v.grade is None else v.grade >= relevant_grade,
                    "reason": v.reason,
                    "status": v.status,
                    "error": v.error,
                    "note": v.note,
                    "grade_samples": samples if several else None,
                    "grade_judges": models if several else None,
                }
            )
        result[qid] = Graded.from_rows(verdict_rows, relevant_grade, spends[qid])
        result[qid].from_memo = memo
    return result


def _stand_in(schema: type[BaseModel]) -> BaseModel:
    # Grade 0 for one candidate, none for a batch: which candidates are relevant is the dry
    # run's prior, not something a plan can know.
    if schema is RelevanceGrade:
        return RelevanceGrade(grade=0)
    return BatchRelevanceGrades(grades=[])


async def plan_grades(
    judge: Judge | Sequence[Judge],
    questions: Mapping[str, Question],
    candidates: Mapping[str, Sequence[Mapping[str, Any]]],
    *,
    per_call: int = 1,
) -> list[PlannedRequest]:
    """The requests :func:`grade_candidates` sends for these candidates, sending none.

    Run through a :class:`CountingJudge` per sample, so a candidate over the window is cut in
    parts and a batch over it asked one by one exactly as in a run. What the dry run counts.
    """
    judges = [judge] if isinstance(judge, Judge) else list(judge)
    requests: list[PlannedRequest] = []
    counting = [CountingJudge.like(j, _stand_in, requests) for j in judges]
    await grade_candidates(counting, questions, candidates, per_call=per_call)
    return requests


__all__ = ["MIN_ROOM", "Graded", "grade_candidates", "plan_grades"]
