"""Stage 3, ground_truth: a reference answer per question from all its relevant candidates.

*fast* packs the (seeded-shuffled) contexts into groups that fill the judge's window, answers
the groups in parallel, then merges the partial answers in rounds until one remains; *slow*
answers from each context alone and merges the same way. Every prompt is sized by token count
so none can overflow the window; a context longer than a prompt holds is split, not cut.
"""

from __future__ import annotations

import asyncio
import json
import random
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from ragaudit import progress
from ragaudit.prompts import ANSWER_GROUP, MERGE, GroupAnswerInput, MergeInput
from ragaudit.schemas import GROUND_TRUTH, to_table
from ragaudit.tasks._common import StageContext, count_tokens
from ragaudit.tasks.collect import read_questions

# JSON quoting, separators and the chat template around a prompt: a margin on every count.
_SAFETY = 1.1


@dataclass
class _Piece:
    """A partial answer (or a context) and the context ids it rests on."""

    text: str
    ids: list[str]
    node: int


@dataclass
class _Job:
    """Bookkeeping of one question's reference answer."""

    qid: str
    question: str
    lang: str
    calls: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    tree: list[dict[str, Any]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def node(self, kind: str, ids: list[str], children: list[int] | None = None, status: str = "ok") -> int:
        self.tree.append({"node": len(self.tree), "kind": kind, "context_ids": ids,
                          "children": children or [], "status": status})
        return len(self.tree) - 1


def split_text(text: str, budget: int, model: str) -> list[str]:
    """Cut ``text`` into pieces of at most ``budget`` tokens, at line or sentence ends when possible."""
    if count_tokens(model, text) <= budget:
        return [text]
    pieces, current = [], ""
    units = [u for u in text.replace("。", "。\n").replace(". ", ".\n").split("\n") if u]
    for unit in units:
        while count_tokens(model, unit) > budget:  # one unit larger than the budget: cut by length
            cut = max(1, int(len(unit) * budget / count_tokens(model, unit) / _SAFETY))
            if current:
                pieces.append(current)
                current = ""
            pieces.append(unit[:cut])
            unit = unit[cut:]
        candidate = f"{current}\n{unit}" if current else unit
        if count_tokens(model, candidate) > budget:
            pieces.append(current)
            current = unit
        else:
            current = candidate
    if current:
        pieces.append(current)
    return pieces


def pack(sizes: list[int], budget: int) -> list[list[int]]:
    """Greedy next-fit packing of items (in order) into groups of at most ``budget`` tokens."""
    groups: list[list[int]] = []
    used = budget + 1
    for i, size in enumerate(sizes):
        if used + size > budget:
            groups.append([])
            used = 0
        groups[-1].append(i)
        used += size
    return groups


async def reference_answer(ctx: StageContext, job: _Job, contexts: list[tuple[str, str]]) -> tuple[str | None, str, list[str]]:
    """Write one reference answer; returns (answer, status, supporting ids)."""
    cfg = ctx.config.ground_truth
    model = ctx.judge
    window = ctx.window()
    overhead = count_tokens(model, ANSWER_GROUP.instruction[ANSWER_GROUP.language(job.lang)] + job.question) + 200
    budget = int((window - cfg.answer_tokens - overhead) / _SAFETY)
    if budget < 64:
        job.errors.append(f"the judge's window ({window} tokens) leaves no room for contexts")
        return None, "failed", []
    rng = random.Random(cfg.seed)
    order = list(contexts)
    rng.shuffle(order)
    pieces: list[_Piece] = []
    for cid, text in order:
        for part in split_text(text, budget, model):
            pieces.append(_Piece(part, [cid], job.node("context", [cid])))

    async def answer(group: list[_Piece]) -> _Piece | None:
        inp = GroupAnswerInput(question=job.question, contexts=[p.text for p in group])
        out = await ctx.gateway.astructured(
            model=model, messages=ANSWER_GROUP.messages(inp, job.lang), schema=ANSWER_GROUP.output_model,
            prompt_version=ANSWER_GROUP.key, temperature=ctx.config.models.temperature,
            max_tokens=cfg.answer_tokens,
        )
        job.calls += 1 + (1 if out.repaired else 0)
        job.tokens_in += out.tokens_in
        job.tokens_out += out.tokens_out
        ids = [i for p in group for i in p.ids]
        children = [p.node for p in group]
        if not out.ok:
            job.errors.append(out.error or "failed")
            job.node("answer", ids, children, status="failed")
            return None
        if not out.value.answerable or not out.value.answer.strip():
            job.node("answer", ids, children, status="unknown")
            return None
        return _Piece(out.value.answer.strip(), ids, job.node("answer", ids, children))

    if cfg.mode == "slow":
        groups = [[p] for p in pieces]
    else:
        groups = [[pieces[i] for i in g] for g in pack([count_tokens(model, p.text) for p in pieces], budget)]
    partials = [p for p in await asyncio.gather(*(answer(g) for g in groups)) if p is not None]
    if not partials:
        if job.errors:
            return None, "failed", []
        return None, "insufficient", []

    async def merge(group: list[_Piece]) -> _Piece:
        inp = MergeInput(question=job.question, partial_answers=[p.text for p in group])
        out = await ctx.gateway.astructured(
            model=model, messages=MERGE.messages(inp, job.lang), schema=MERGE.output_model,
            prompt_version=MERGE.key, temperature=ctx.config.models.temperature, max_tokens=cfg.answer_tokens,
        )
        job.calls += 1 + (1 if out.repaired else 0)
        job.tokens_in += out.tokens_in
        job.tokens_out += out.tokens_out
        ids = [i for p in group for i in p.ids]
        children = [p.node for p in group]
        if not out.ok:
            # A failed merge keeps its inputs side by side rather than losing any of them.
            job.errors.append(out.error or "merge failed")
            return _Piece("\n".join(p.text for p in group), ids, job.node("merge", ids, children, status="failed"))
        return _Piece(out.value.answer.strip(), ids, job.node("merge", ids, children))

    while len(partials) > 1:
        groups_idx = pack([count_tokens(model, p.text) for p in partials], budget)
        # Two answers always fit together (each is capped at answer_tokens); never leave a round
        # of singletons, which would loop forever.
        if all(len(g) == 1 for g in groups_idx):
            groups_idx = [list(range(i, min(i + 2, len(partials)))) for i in range(0, len(partials), 2)]
        groups = [[partials[i] for i in g] for g in groups_idx]
        merged = await asyncio.gather(*(merge(g) if len(g) > 1 else _passthrough(g[0]) for g in groups))
        partials = list(merged)
    final = partials[0]
    status = "ok" if not job.errors else "partial"
    return final.text, status, sorted(set(final.ids), key=final.ids.index)


async def _passthrough(piece: _Piece) -> _Piece:
    return piece


async def ground_truth(ctx: StageContext) -> list[str]:
    """Write ``ground_truth``."""
    cfg = ctx.config.ground_truth
    run_id = ctx.run.run_id
    questions = read_questions(ctx)
    candidates: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in ctx.run.read("candidates").to_pylist():
        candidates[row["question_id"]].append(row)
    ranking = {r["question_id"]: r for r in ctx.run.read("ranking").to_pylist()} if ctx.run.has("ranking") and ctx.config.sort.enabled else {}

    async def one(q: Any) -> dict[str, Any]:
        row = {"run_id": run_id, "question_id": q.question_id, "mode": cfg.mode, "calls": 0,
               "tokens_in": 0, "tokens_out": 0}
        if q.reference and not cfg.overwrite_reference:
            bar.advance()
            return {**row, "reference": q.reference, "origin": "question_set", "status": "ok", "mode": None}
        texts = {c["context_id"]: c["text"] for c in candidates[q.question_id]}
        if q.question_id in ranking:
            ids = ranking[q.question_id]["ordered_ids"]
        else:
            ids = [c["context_id"] for c in sorted(candidates[q.question_id], key=lambda c: c["engine_rank"])]
        job = _Job(q.question_id, q.question, q.language)
        if not ids:
            answer, status, support = None, "insufficient", []
        else:
            answer, status, support = await reference_answer(ctx, job, [(i, texts[i]) for i in ids])
        bar.advance()
        return {
            **row,
            "reference": answer,
            "origin": "generated",
            "status": status,
            "error": "; ".join(job.errors)[:2000] or (
                "no relevant context holds an answer" if status == "insufficient" else None),
            "supporting_ids": support,
            "merge_tree": json.dumps(job.tree, ensure_ascii=False),
            "calls": job.calls,
            "tokens_in": job.tokens_in,
            "tokens_out": job.tokens_out,
        }

    with progress.bar(f"ground_truth ({cfg.mode})", len(questions)) as bar:
        rows = await asyncio.gather(*(one(q) for q in questions))
    ctx.run.write("ground_truth", to_table(list(rows), GROUND_TRUTH))
    return ["ground_truth"]


__all__ = ["ground_truth", "pack", "reference_answer", "split_text"]
