"""Stage 3, ground_truth: a reference answer per question from all its relevant candidates.

A thin adapter: it reads the questions, candidates and the sort stage's ranking, asks
:class:`ragaudit.reference.ReferenceWriter` (split, pack, answer and merge within the judge's
window) per question, and writes the ``ground_truth`` table with each answer's merge tree.
"""

from __future__ import annotations

import json
from collections import defaultdict
from typing import Any

from ragaudit import progress
from ragaudit.cache import KeyRejected
from ragaudit.reference import ReferenceWriter
from ragaudit.schemas import GROUND_TRUTH, to_table
from ragaudit.secrets import redact
from ragaudit.tasks._common import StageContext, gather_limited, in_flight


def writer_for(ctx: StageContext, question: str, lang: str) -> ReferenceWriter:
    """The reference writer of one question, with the run's judge, window and budgets."""
    cfg = ctx.config.ground_truth
    return ReferenceWriter(
        ctx.gateway,
        ctx.judge,
        question,
        lang,
        window=ctx.window(),
        answer_tokens=cfg.answer_tokens,
        reserve_tokens=cfg.reserve_tokens,
        temperature=ctx.config.models.temperature,
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


def _context_ids(ranking: dict[str, Any] | None, candidates: list[dict[str, Any]]) -> list[str]:
    """The sort stage's relevant ids when it ran, else every candidate in engine order."""
    if ranking is None:
        return [c["context_id"] for c in sorted(candidates, key=lambda c: c["engine_rank"])]
    # A candidate whose relevance verdict failed is not known to be irrelevant: dropping it
    # could lose the one context that holds a fact, so it follows the relevant ones.
    return list(dict.fromkeys([*ranking["ordered_ids"], *(ranking.get("unjudged_ids") or [])]))


async def ground_truth(ctx: StageContext) -> list[str]:
    """Write ``ground_truth``."""
    cfg = ctx.config.ground_truth
    run_id = ctx.run.run_id
    questions = ctx.run.questions(ctx.ids)
    candidates: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in ctx.run.rows("candidates", ctx.ids):
        candidates[row["question_id"]].append(row)
    ranking = (
        ctx.run.by_question("ranking", ctx.ids)
        if ctx.run.has("ranking") and ctx.config.sort.enabled
        else {}
    )

    async def one(q: Any) -> dict[str, Any]:
        row = {
            "run_id": run_id,
            "question_id": q.question_id,
            "mode": cfg.mode,
            "calls": 0,
            "tokens_in": 0,
            "tokens_out": 0,
        }
        if q.reference and not cfg.overwrite_reference:
            bar.advance()
            return {
                **row,
                "reference": q.reference,
                "origin": "question_set",
                "status": "ok",
                "mode": None,
            }
        texts = {c["context_id"]: c["text"] for c in candidates[q.question_id]}
        ids = _context_ids(ranking.get(q.question_id), candidates[q.question_id])
        contexts = [(i, texts[i]) for i in ids if i in texts]
        try:
            answer, status, support, writer = await reference_answer(
                ctx, q.question, q.language, contexts
            )
        except KeyRejected:
            raise  # every question would be refused: the stage ends at the first
        except Exception as exc:  # one question's failure is its row's, not the run's
            bar.advance()
            return {
                **row,
                "origin": "generated",
                "status": "failed",
                "error": redact(f"{type(exc).__name__}: {exc}")[:2000],
            }
        bar.advance()
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
            "calls": writer.calls,
            "tokens_in": writer.tokens_in,
            "tokens_out": writer.tokens_out,
        }

    with progress.bar(f"ground_truth ({cfg.mode})", len(questions)) as bar:
        rows = await gather_limited(questions, one, limit=in_flight(ctx))
    out = ctx.out("ground_truth")
    ctx.run.write(out, to_table(list(rows), GROUND_TRUTH))
    return [out]


__all__ = ["ground_truth", "reference_answer", "writer_for"]
