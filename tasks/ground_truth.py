"""Stage 3, ground_truth: a reference answer, the nuggets and the answerability of each question.

A thin adapter: it reads the questions, candidates and the sort stage's ranking, and per
question asks :class:`ragaudit.reference.ReferenceWriter` for the reference answer (with its
merge tree), :func:`ragaudit.nuggets.extract_nuggets` for the nuggets and, for a turn the set
does not label, :func:`ragaudit.answerability.judge_answerability` for its answerability, all
from the same relevant contexts and concurrently; it writes the ``ground_truth`` and ``nuggets``
tables.

The answerability is judged here, not in the score stage: like the reference, it is a fact of
the turn and the corpus, the same for every system answering it, asked once per question (the
score stage runs one task per metric, and every conditioned metric reads the label), and it is
what the answers are measured against.
"""

from __future__ import annotations

import asyncio
import json
from collections import defaultdict
from typing import Any

from ragaudit import progress
from ragaudit.answerability import judge_answerability, should_judge
from ragaudit.cache import KeyRejected
from ragaudit.dataset import Question
from ragaudit.nuggets import NuggetResult, extract_nuggets
from ragaudit.reference import ReferenceWriter, relevant_context_ids
from ragaudit.schemas import GROUND_TRUTH, NUGGETS, to_table
from ragaudit.secrets import redact
from ragaudit.tasks._common import StageContext, gather_limited, in_flight
from ragaudit.windowing import QuestionJudge


def writer_for(ctx: StageContext, question: str, lang: str) -> ReferenceWriter:
    """The reference writer of one question, with the run's judge and budgets."""
    cfg = ctx.config.ground_truth
    return ReferenceWriter(
        QuestionJudge(ctx.llm, question, lang, cfg.answer_tokens, cfg.reserve_tokens)
    )


async def reference_answer(
    ctx: StageContext,
    question: str,
    lang: str,
    contexts: list[tuple[str, str]],
) -> tuple[str | None, str, list[str], ReferenceWriter]:
    """One question's reference answer from ``contexts`` (id, text) in the configured mode.

    Returns (answer, status, supporting ids, the writer with its tree and counts). Status is
    ``ok``, ``partial`` (some contexts could not be answered from), ``insufficient`` (no
    context holds an answer: no answer is invented) or ``failed``.
    """
    cfg = ctx.config.ground_truth
    writer = writer_for(ctx, question, lang)
    if not contexts:
        return None, "insufficient", [], writer
    answer, status, support = await writer.write(contexts, cfg.mode, cfg.seed)
    return answer, status, support, writer


async def nuggets_of(
    ctx: StageContext, question: str, lang: str, contexts: list[tuple[str, str]]
) -> NuggetResult:
    """One question's nuggets from ``contexts`` (id, text) with the run's judge and budgets."""
    cfg = ctx.config.ground_truth
    return await extract_nuggets(
        ctx.llm,
        question,
        lang,
        contexts,
        answer_tokens=cfg.nugget_tokens,
        reserve_tokens=cfg.reserve_tokens,
        max_nuggets=cfg.max_nuggets,
    )


async def answerability_columns(
    ctx: StageContext, q: Question, contexts: list[tuple[str, str]]
) -> dict[str, Any]:
    """The turn's answerability columns: the set's label, the judge's, or none.

    ``q`` is the question as the judge sees it (in its conversation); ``contexts`` its relevant
    contexts, most relevant first.
    """
    cfg = ctx.config.ground_truth
    if q.answerability is not None:
        return {"answerability": q.answerability, "answerability_source": "given"}
    if not should_judge(q, cfg.answerability):
        return {}
    try:
        found = await judge_answerability(
            ctx.llm, q.question, q.language, [t for _, t in contexts], cfg.answerability_passages
        )
        reason = found.reason
    except KeyRejected:
        raise
    except Exception as exc:  # one question's failure is its row's, not the run's
        found, reason = None, f"{type(exc).__name__}: {exc}"
    return {
        "answerability": found.label if found else None,
        "answerability_source": "judged",
        "answerability_reason": redact(reason)[:2000] or None,
    }


def nugget_rows(run_id: str, question_id: str, result: NuggetResult) -> list[dict[str, Any]]:
    """A question's rows of the ``nuggets`` table; one row with no nugget when it has none."""
    base = {
        "run_id": run_id,
        "question_id": question_id,
        "status": result.status,
        "reason": redact("; ".join(result.notes))[:2000] or None,
        "calls": result.calls,
        "tokens_in": result.tokens_in,
        "tokens_out": result.tokens_out,
    }
    if not result.nuggets:
        return [base]
    return [{**base, "nugget_index": k, **n.as_row()} for k, n in enumerate(result.nuggets)]


async def ground_truth(ctx: StageContext) -> list[str]:
    """Write ``ground_truth`` and ``nuggets``."""
    cfg = ctx.config.ground_truth
    run_id = ctx.run.run_id
    questions = ctx.judged_questions()
    candidates: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in ctx.run.rows("candidates", ctx.ids):
        candidates[row["question_id"]].append(row)
    ranking = (
        ctx.run.by_question("ranking", ctx.ids)
        if ctx.run.has("ranking") and ctx.config.sort.enabled
        else {}
    )

    async def reference_row(q: Any, contexts: list[tuple[str, str]]) -> dict[str, Any]:
        row = {
            "run_id": run_id,
            "question_id": q.question_id,
            "mode": cfg.mode,
            "calls": 0,
            "tokens_in": 0,
            "tokens_out": 0,
        }
        if q.reference and not cfg.overwrite_reference:
            return {
                **row,
                "reference": q.reference,
                "origin": "question_set",
                "status": "ok",
                "mode": None,
            }
        try:
            answer, status, support, writer = await reference_answer(
                ctx, q.question, q.language, contexts
            )
        except KeyRejected:
            raise  # every question would be refused: the stage ends at the first
        except Exception as exc:  # one question's failure is its row's, not the run's
            return {
                **row,
                "origin": "generated",
                "status": "failed",
                "error": redact(f"{type(exc).__name__}: {exc}")[:2000],
            }
        problems = writer.lost + writer.notes
        if status == "insufficient" and not problems:
            problems = [
                "no relevant context holds an answer" if contexts else "no relevant context"
            ]
        return {
            **row,
            "reference": answer,
            "origin": "generated",
            "status": status,
            "error": "; ".join(problems)[:2000] or None,
            "supporting_ids": support,
            "merge_tree": json.dumps(writer.tree(), ensure_ascii=False),
            "calls": writer.spent.calls,
            "tokens_in": writer.spent.tokens_in,
            "tokens_out": writer.spent.tokens_out,
        }

    async def nugget_list(q: Any, contexts: list[tuple[str, str]]) -> list[dict[str, Any]]:
        if not cfg.nuggets:
            skipped = NuggetResult([], "skipped", ["ground_truth.nuggets is off"])
            return nugget_rows(run_id, q.question_id, skipped)
        try:
            result = await nuggets_of(ctx, q.question, q.language, contexts)
        except Exception as exc:  # one question's failure is its row's, not the run's
            result = NuggetResult([], "failed", [f"{type(exc).__name__}: {exc}"])
        return nugget_rows(run_id, q.question_id, result)

    async def one(q: Any) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        texts = {c["context_id"]: c["text"] for c in candidates[q.question_id]}
        ids = relevant_context_ids(ranking.get(q.question_id), candidates[q.question_id])
        contexts = [(i, texts[i]) for i in ids if i in texts]
        try:
            row, nuggets, label = await asyncio.gather(
                reference_row(q, contexts),
                nugget_list(q, contexts),
                answerability_columns(ctx, q, contexts),
            )
            return {**row, **label}, nuggets
        finally:
            bar.advance()

    with progress.bar(f"ground_truth ({cfg.mode})", len(questions)) as bar:
        done = await gather_limited(questions, one, limit=in_flight(ctx))
    out = ctx.out("ground_truth")
    ctx.run.write(out, to_table([r for r, _ in done], GROUND_TRUTH))
    nuggets_out = ctx.out("nuggets")
    ctx.run.write(nuggets_out, to_table([n for _, ns in done for n in ns], NUGGETS))
    return [out, nuggets_out]


__all__ = [
    "answerability_columns",
    "ground_truth",
    "nugget_rows",
    "nuggets_of",
    "reference_answer",
    "writer_for",
]
