"""Stage 2, sort: an LLM-judged ground-truth order of the candidates and its agreement with the
engine's order (and with gold labels when the question set has them)."""

from __future__ import annotations

import asyncio
import math
from collections import defaultdict
from typing import Any

from ragaudit import progress, ranking
from ragaudit.cache import Judged
from ragaudit.ordering import STRATEGIES
from ragaudit.prompts import PAIRWISE, RELEVANCE, PairwiseInput, RelevanceInput
from ragaudit.schemas import AGREEMENT, COMPARISONS, RANKING, VERDICTS, to_table
from ragaudit.tasks._common import StageContext
from ragaudit.tasks.collect import read_questions


class _Comparator:
    """Pairwise judge calls for one question, asked in both orders, each pair asked once."""

    def __init__(self, ctx: StageContext, question: str, lang: str, texts: dict[str, str], bar: Any):
        self.ctx, self.question, self.lang, self.texts, self.bar = ctx, question, lang, texts, bar
        self.rows: list[dict[str, Any]] = []
        self.calls = 0
        self._done: dict[frozenset[str], asyncio.Future[tuple[str, int]]] = {}

    async def _ask(self, first: str, second: str) -> Judged[Any]:
        inp = PairwiseInput(question=self.question, context_1=self.texts[first], context_2=self.texts[second])
        self.calls += 1
        self.bar.advance()
        return await self.ctx.gateway.astructured(
            model=self.ctx.judge,
            messages=PAIRWISE.messages(inp, self.lang),
            schema=PAIRWISE.output_model,
            prompt_version=PAIRWISE.key,
            temperature=self.ctx.config.models.temperature,
            max_tokens=self.ctx.config.models.max_output_tokens,
        )

    async def compare(self, a: str, b: str) -> int:
        """-1 when ``a`` answers better, 1 when ``b`` does, 0 for a tie or a failed comparison."""
        key = frozenset((a, b))
        if key in self._done:
            first, outcome = await self._done[key]
            return outcome if first == a else -outcome
        fut: asyncio.Future[tuple[str, int]] = asyncio.get_running_loop().create_future()
        self._done[key] = fut
        ba: Judged[Any] | None = None
        if self.ctx.config.sort.both_orders:
            ab, ba = await asyncio.gather(self._ask(a, b), self._ask(b, a))
        else:
            ab = await self._ask(a, b)
        # Preference for a: 1 → a wins when shown first; 2 → a wins when shown second.
        votes = []
        if ab.ok:
            votes.append(-1 if ab.value.better == 1 else 1)
        if ba is not None and ba.ok:
            votes.append(-1 if ba.value.better == 2 else 1)
        failed = not ab.ok or (ba is not None and not ba.ok)
        # Agreement in both orders is a preference; disagreement is position bias: a tie.
        outcome = votes[0] if votes and all(v == votes[0] for v in votes) and not failed else 0
        errors = [j.error for j in (ab, ba) if j is not None and not j.ok]
        self.rows.append(
            {
                "first_id": a,
                "second_id": b,
                "choice_ab": str(ab.value.better) if ab.ok else None,
                "choice_ba": str(ba.value.better) if ba is not None and ba.ok else None,
                "outcome": {-1: "first", 1: "second", 0: "tie"}[outcome],
                "reason": " | ".join(j.value.reason for j in (ab, ba) if j is not None and j.ok),
                "status": "failed" if failed else "ok",
                "error": "; ".join(e for e in errors if e) or None,
            }
        )
        fut.set_result((a, outcome))
        return outcome


async def sort(ctx: StageContext) -> list[str]:
    """Write ``verdicts``, ``comparisons``, ``ranking`` and ``agreement``."""
    cfg = ctx.config.sort
    run_id = ctx.run.run_id
    questions = {q.question_id: q for q in read_questions(ctx)}
    by_question: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in ctx.run.read("candidates").to_pylist():
        by_question[row["question_id"]].append(row)
    for rows in by_question.values():
        rows.sort(key=lambda r: r["engine_rank"])
        if cfg.max_candidates:
            del rows[cfg.max_candidates :]

    pairs = [(qid, c) for qid, rows in by_question.items() for c in rows]
    with progress.bar("sort: relevance", len(pairs)) as bar:

        async def judge(item: tuple[str, dict[str, Any]]) -> Judged[Any]:
            qid, cand = item
            q = questions[qid]
            out = await ctx.gateway.astructured(
                model=ctx.judge,
                messages=RELEVANCE.messages(RelevanceInput(question=q.question, context=cand["text"]), q.language),
                schema=RELEVANCE.output_model,
                prompt_version=RELEVANCE.key,
                temperature=ctx.config.models.temperature,
                max_tokens=ctx.config.models.max_output_tokens,
            )
            bar.advance()
            return out

        # The gateway's per-model limit bounds the concurrency; gather is only the fan-out.
        verdicts = await asyncio.gather(*(judge(p) for p in pairs))

    verdict_rows = []
    relevant: dict[str, list[str]] = defaultdict(list)
    irrelevant: dict[str, list[str]] = defaultdict(list)
    unjudged: dict[str, list[str]] = defaultdict(list)
    for (qid, cand), v in zip(pairs, verdicts, strict=True):
        cid = cand["context_id"]
        verdict_rows.append(
            {
                "run_id": run_id,
                "question_id": qid,
                "context_id": cid,
                "relevant": v.value.relevant if v.ok else None,
                "reason": v.value.reason if v.ok else None,
                "status": v.status,
                "error": v.error,
            }
        )
        (relevant if v.ok and v.value.relevant else irrelevant if v.ok else unjudged)[qid].append(cid)
    ctx.run.write("verdicts", to_table(verdict_rows, VERDICTS))

    strategy = STRATEGIES[cfg.strategy]
    expected = sum(len(r) * max(1, math.ceil(math.log2(max(len(r), 2)))) for r in relevant.values())
    with progress.bar(f"sort: pairwise ({cfg.strategy})", 2 * expected) as bar:

        async def order(qid: str) -> tuple[str, list[str], list[int], _Comparator]:
            q = questions[qid]
            texts = {c["context_id"]: c["text"] for c in by_question[qid]}
            comp = _Comparator(ctx, q.question, q.language, texts, bar)
            ordered, groups = await strategy(relevant[qid], comp.compare)
            return qid, ordered, groups, comp

        results = await asyncio.gather(*(order(qid) for qid in by_question))

    comparison_rows, ranking_rows, agreement_rows = [], [], []
    k = cfg.agreement_k
    for qid, ordered, groups, comp in results:
        comparison_rows += [{"run_id": run_id, "question_id": qid, **r} for r in comp.rows]
        ranking_rows.append(
            {
                "run_id": run_id,
                "question_id": qid,
                "ordered_ids": ordered,
                "tie_group": groups,
                "irrelevant_ids": irrelevant[qid],
                "unjudged_ids": unjudged[qid],
                "strategy": cfg.strategy,
                "judge_calls": len(by_question[qid]) + comp.calls,
                "status": "ok" if not unjudged[qid] else "partial",
                "error": f"{len(unjudged[qid])} relevance verdicts failed" if unjudged[qid] else None,
            }
        )
        engine = [c["context_id"] for c in by_question[qid]]
        gold = {c["context_id"] for c in by_question[qid] if c["gold_relevant"]}
        has_gold = any(c["gold_relevant"] is not None for c in by_question[qid])
        agreement_rows += _agreement(run_id, qid, engine, ordered, groups, irrelevant[qid], gold, has_gold, k)
    ctx.run.write("comparisons", to_table(comparison_rows, COMPARISONS))
    ctx.run.write("ranking", to_table(ranking_rows, RANKING))
    ctx.run.write("agreement", to_table(agreement_rows, AGREEMENT))
    return ["verdicts", "comparisons", "ranking", "agreement"]


def _agreement(
    run_id: str,
    qid: str,
    engine: list[str],
    ordered: list[str],
    groups: list[int],
    irrelevant: list[str],
    gold: set[str],
    has_gold: bool,
    k: int,
) -> list[dict[str, Any]]:
    """Agreement rows of one question: judge vs engine, and each vs gold when there is gold."""
    rows: list[dict[str, Any]] = []

    def add(comparison: str, metric: str, value: float, overlap: list[str] | None = None) -> None:
        ok = not math.isnan(value)
        rows.append(
            {
                "run_id": run_id,
                "question_id": qid,
                "comparison": comparison,
                "metric": metric,
                "k": k,
                "value": value if ok else None,
                "overlap_ids": overlap,
                "status": "ok" if ok else "skipped",
                "reason": None if ok else "undefined for this question (too few ranked or relevant items)",
            }
        )

    judged = [*ordered, *irrelevant]
    judge_ranks = ranking.full_judge_ranks(ordered, groups, irrelevant)
    engine_ranks = ranking.average_ranks([e for e in engine if e in judge_ranks])
    add("judge_vs_engine", "spearman", ranking.spearman(judge_ranks, engine_ranks))
    add("judge_vs_engine", "kendall_tau", ranking.kendall_tau_b(judge_ranks, engine_ranks))
    share, overlap = ranking.top_k_overlap(judged, engine, k)
    add("judge_vs_engine", "top_k_overlap", share if ordered else math.nan, overlap)
    add("judge_vs_engine", "ndcg", ranking.ndcg_at_k(engine, ranking.judge_gains(ordered), k))
    for name, value in ranking.order_vs_labels(engine, set(ordered), k).items():
        if name != "ndcg":
            add("judge_vs_engine", name, value if ordered else math.nan)
    if has_gold:
        for comparison, order in (("engine_vs_gold", engine), ("judge_vs_gold", judged)):
            for name, value in ranking.order_vs_labels(order, gold, k).items():
                add(comparison, name, value if gold else math.nan)
    return rows


__all__ = ["sort"]
