"""Stage 2, sort: an LLM-judged ground-truth order of the candidates, and agreement metrics.

The order is compared with the engine's, and both with gold labels when the question set has
them.

Two phases per run: every candidate of every question gets one relevance verdict, all at once
under the gateway's per-model limit; then the relevant candidates of each question are ordered
by pairwise comparisons (strategy ``sort.strategy``, see :mod:`ragaudit.ordering`), every
question at once. Each comparison is asked in both orders; when the two answers disagree the
pair is a tie (position bias cancels out). Every call goes through the gateway's memo, so a
re-run pays for nothing it already asked.

Tables written: ``verdicts`` (one row per candidate), ``comparisons`` (one row per pair asked),
``ranking`` (one row per question) and ``agreement`` (one row per question, comparison and
metric, plus the mean over questions under ``question_id == "__all__"``).
"""

from __future__ import annotations

import asyncio
import math
import time
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from ragaudit import progress, ranking
from ragaudit.cache import Judged
from ragaudit.dataset import Question
from ragaudit.ordering import STRATEGIES, options_for
from ragaudit.prompts import PAIRWISE, RELEVANCE, PairwiseInput, RelevanceInput
from ragaudit.schemas import AGREEMENT, COMPARISONS, RANKING, VERDICTS, to_table
from ragaudit.tasks._common import StageContext
from ragaudit.tasks.collect import read_questions

ALL_QUESTIONS = "__all__"
"""``question_id`` of the agreement rows that average over every question."""


class PairwiseJudge:
    """Pairwise judge calls for one question: each pair asked once, in both orders.

    ``compare(a, b)`` is the comparison the ordering strategies take: -1 when ``a`` answers the
    question better, 1 when ``b`` does, 0 for a tie, a position-biased disagreement or a failed
    call. Every pair asked is kept as a row for the ``comparisons`` table.
    """

    def __init__(
        self, ctx: StageContext, question: Question, texts: dict[str, str], bar: Any = None
    ):
        self.ctx, self.question, self.texts, self.bar = ctx, question, texts, bar
        self.rows: list[dict[str, Any]] = []
        self.calls = 0
        self._done: dict[frozenset[str], asyncio.Future[tuple[str, int]]] = {}

    async def _ask(self, first: str, second: str) -> Judged[Any]:
        inp = PairwiseInput(
            question=self.question.question,
            context_1=self.texts[first],
            context_2=self.texts[second],
        )
        self.calls += 1
        out = await self.ctx.gateway.astructured(
            model=self.ctx.judge,
            messages=PAIRWISE.messages(inp, self.question.language),
            schema=PAIRWISE.output_model,
            prompt_version=PAIRWISE.key,
            temperature=self.ctx.config.models.temperature,
            max_tokens=self.ctx.config.models.max_output_tokens,
        )
        if self.bar is not None:
            self.bar.advance()
        return out

    async def compare(self, a: str, b: str) -> int:
        """-1 when ``a`` answers better, 1 when ``b`` does, 0 for a tie or a failed comparison."""
        key = frozenset((a, b))
        if key in self._done:
            first, outcome = await asyncio.shield(self._done[key])
            return outcome if first == a else -outcome
        fut: asyncio.Future[tuple[str, int]] = asyncio.get_running_loop().create_future()
        self._done[key] = fut
        ba: Judged[Any] | None = None
        if self.ctx.config.sort.both_orders:
            ab, ba = await asyncio.gather(self._ask(a, b), self._ask(b, a))
        else:
            ab = await self._ask(a, b)
        # Each answer as a vote for a: -1 a first, 1 b first ("1" in ab is a; "2" in ba is a).
        votes = []
        if ab.ok:
            votes.append(-1 if ab.value.better == 1 else 1)
        if ba is not None and ba.ok:
            votes.append(-1 if ba.value.better == 2 else 1)
        failed = not ab.ok or (ba is not None and not ba.ok)
        # Agreement in both orders is a preference; disagreement is position bias: a tie.
        # A failed call leaves no preference either: the strategies keep the engine order.
        outcome = votes[0] if votes and not failed and all(v == votes[0] for v in votes) else 0
        errors = [j.error for j in (ab, ba) if j is not None and not j.ok and j.error]
        self.rows.append(
            {
                "first_id": a,
                "second_id": b,
                "choice_ab": str(ab.value.better) if ab.ok else None,
                "choice_ba": str(ba.value.better) if ba is not None and ba.ok else None,
                "outcome": {-1: "first", 1: "second", 0: "tie"}[outcome],
                "reason_ab": ab.value.reason if ab.ok else None,
                "reason_ba": ba.value.reason if ba is not None and ba.ok else None,
                "status": "failed" if failed else "ok",
                "error": "; ".join(errors) or None,
            }
        )
        fut.set_result((a, outcome))
        return outcome


@dataclass
class Relevance:
    """The relevance verdicts of one question's candidates, in engine order."""

    relevant: list[str] = field(default_factory=list)
    irrelevant: list[str] = field(default_factory=list)
    unjudged: list[str] = field(default_factory=list)
    rows: list[dict[str, Any]] = field(default_factory=list)


async def judge_relevance(
    ctx: StageContext, questions: dict[str, Question], candidates: dict[str, list[dict[str, Any]]]
) -> dict[str, Relevance]:
    """One relevance verdict per candidate, all at once under the gateway's limit."""
    pairs = [(qid, c) for qid, rows in candidates.items() for c in rows]
    with progress.bar("sort: relevance", len(pairs)) as bar:

        async def judge(item: tuple[str, dict[str, Any]]) -> Judged[Any]:
            qid, cand = item
            q = questions[qid]
            out = await ctx.gateway.astructured(
                model=ctx.judge,
                messages=RELEVANCE.messages(
                    RelevanceInput(question=q.question, context=cand["text"]), q.language
                ),
                schema=RELEVANCE.output_model,
                prompt_version=RELEVANCE.key,
                temperature=ctx.config.models.temperature,
                max_tokens=ctx.config.models.max_output_tokens,
            )
            bar.advance()
            return out

        # The gateway's per-model limit bounds the concurrency; gather is only the fan-out.
        verdicts = await asyncio.gather(*(judge(p) for p in pairs))

    out = {qid: Relevance() for qid in candidates}
    for (qid, cand), v in zip(pairs, verdicts, strict=True):
        cid = cand["context_id"]
        rel = out[qid]
        rel.rows.append(
            {
                "run_id": ctx.run.run_id,
                "question_id": qid,
                "context_id": cid,
                "relevant": v.value.relevant if v.ok else None,
                "reason": v.value.reason if v.ok else None,
                "status": v.status,
                "error": v.error,
            }
        )
        (
            rel.relevant if v.ok and v.value.relevant else rel.irrelevant if v.ok else rel.unjudged
        ).append(cid)
    return out


@dataclass
class Ordered:
    """One question's judged order."""

    question_id: str
    ordered: list[str]
    groups: list[int]
    judge: PairwiseJudge


async def order_relevant(
    ctx: StageContext,
    questions: dict[str, Question],
    candidates: dict[str, list[dict[str, Any]]],
    relevance: dict[str, Relevance],
) -> list[Ordered]:
    """Order each question's relevant candidates by pairwise comparison, every question at once."""
    cfg = ctx.config.sort
    strategy = STRATEGIES[cfg.strategy]
    # About n log2 n comparisons, two calls each: the bar's scale, not a promise.
    expected = sum(
        len(r.relevant) * max(1, math.ceil(math.log2(max(len(r.relevant), 2))))
        for r in relevance.values()
    )
    with progress.bar(
        f"sort: pairwise ({cfg.strategy})", (2 if cfg.both_orders else 1) * expected
    ) as bar:

        async def order(qid: str) -> Ordered:
            texts = {c["context_id"]: c["text"] for c in candidates[qid]}
            judge = PairwiseJudge(ctx, questions[qid], texts, bar)
            ordered, groups = await strategy(
                relevance[qid].relevant,
                judge.compare,
                top_k=cfg.top_k_exact,
                **options_for(cfg.strategy, cfg.model_dump()),
            )
            return Ordered(qid, ordered, groups, judge)

        return list(await asyncio.gather(*(order(qid) for qid in candidates)))


def _candidates(ctx: StageContext) -> dict[str, list[dict[str, Any]]]:
    """Each question's candidates in engine order (the first ``sort.max_candidates``)."""
    by_question: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in ctx.run.read("candidates").to_pylist():
        by_question[row["question_id"]].append(row)
    for rows in by_question.values():
        rows.sort(key=lambda r: r["engine_rank"])
        if ctx.config.sort.max_candidates:
            del rows[ctx.config.sort.max_candidates :]
    return dict(by_question)


async def sort(ctx: StageContext, *, timings: dict[str, float] | None = None) -> list[str]:
    """Write ``verdicts``, ``comparisons``, ``ranking`` and ``agreement``.

    ``timings``, when given, receives the wall time of each phase (``relevance_s``,
    ``ordering_s``), for the benchmark.
    """
    cfg = ctx.config.sort
    run_id = ctx.run.run_id
    questions = {q.question_id: q for q in read_questions(ctx)}
    candidates = _candidates(ctx)
    started = time.perf_counter()
    relevance = await judge_relevance(ctx, questions, candidates)
    ctx.run.write(
        "verdicts", to_table([r for rel in relevance.values() for r in rel.rows], VERDICTS)
    )
    judged = time.perf_counter()
    results = await order_relevant(ctx, questions, candidates, relevance)
    if timings is not None:
        timings["relevance_s"] = judged - started
        timings["ordering_s"] = time.perf_counter() - judged

    comparison_rows, ranking_rows, agreement_rows = [], [], []
    k = cfg.agreement_k
    for res in results:
        qid, rel = res.question_id, relevance[res.question_id]
        # Sorted, not in the order the answers came back: a re-run writes the same bytes.
        rows = sorted(res.judge.rows, key=lambda r: (r["first_id"], r["second_id"]))
        comparison_rows += [{"run_id": run_id, "question_id": qid, **r} for r in rows]
        exact = (
            cfg.top_k_exact
            if cfg.top_k_exact is not None and cfg.top_k_exact < len(res.ordered)
            else None
        )
        ranking_rows.append(
            {
                "run_id": run_id,
                "question_id": qid,
                "ordered_ids": res.ordered,
                "tie_group": res.groups,
                "exact_k": exact,
                "irrelevant_ids": rel.irrelevant,
                "unjudged_ids": rel.unjudged,
                "strategy": cfg.strategy,
                "comparisons": len(res.judge.rows),
                "judge_calls": len(candidates[qid]) + res.judge.calls,
                "status": "ok" if not rel.unjudged else "partial",
                "error": f"{len(rel.unjudged)} relevance verdicts failed" if rel.unjudged else None,
            }
        )
        engine = [c["context_id"] for c in candidates[qid]]
        q = questions[qid]
        has_gold = q.reference_context_ids is not None or any(
            c["gold_relevant"] is not None for c in candidates[qid]
        )
        # Gold the engine never retrieved still counts (recall and the ideal DCG see it).
        gold = {c["context_id"] for c in candidates[qid] if c["gold_relevant"]} | set(
            q.reference_context_ids or []
        )
        agreement_rows += agreement(
            run_id,
            qid,
            engine,
            res.ordered,
            res.groups,
            rel.irrelevant,
            gold if has_gold else None,
            k,
        )
    agreement_rows += aggregate(run_id, agreement_rows)
    ctx.run.write("comparisons", to_table(comparison_rows, COMPARISONS))
    ctx.run.write("ranking", to_table(ranking_rows, RANKING))
    ctx.run.write("agreement", to_table(agreement_rows, AGREEMENT))
    return ["verdicts", "comparisons", "ranking", "agreement"]


def agreement(
    run_id: str,
    qid: str,
    engine: list[str],
    ordered: list[str],
    groups: list[int],
    irrelevant: list[str],
    gold: set[str] | None,
    k: int,
) -> list[dict[str, Any]]:
    """Agreement rows of one question: judge vs engine, and each vs gold when there is gold.

    judge vs engine: Spearman and Kendall tau-b over every judged candidate (the relevant ones
    in judged order with their tie groups, then the irrelevant ones tied last; the engine's
    ranks over the same ids); top-k overlap of the two orders; NDCG@k of the engine order with
    graded gains from the judge's order; MRR, hit@k, precision@k and recall@k of the engine
    order against the judge's relevant set. Against gold: the label metrics, NDCG@k with
    binary gains, for the engine's order and the judge's.
    """
    rows: list[dict[str, Any]] = []

    def add(
        comparison: str,
        metric: str,
        value: float,
        overlap: list[str] | None = None,
        why: str = "undefined for this question (too few ranked or relevant items)",
    ) -> None:
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
                "n_questions": 1 if ok else 0,
                "status": "ok" if ok else "skipped",
                "reason": None if ok else why,
            }
        )

    judged = [*ordered, *irrelevant]
    judge_ranks = ranking.full_judge_ranks(ordered, groups, irrelevant)
    engine_ranks = ranking.average_ranks([e for e in engine if e in judge_ranks])
    add("judge_vs_engine", "spearman", ranking.spearman(judge_ranks, engine_ranks))
    add("judge_vs_engine", "kendall_tau", ranking.kendall_tau_b(judge_ranks, engine_ranks))
    no_relevant = "the judge found no relevant candidate"
    share, overlap = ranking.top_k_overlap(judged, engine, k)
    add("judge_vs_engine", "top_k_overlap", share if ordered else math.nan, overlap, no_relevant)
    add(
        "judge_vs_engine",
        "ndcg",
        ranking.ndcg_at_k(engine, ranking.judge_gains(ordered, groups), k),
        why=no_relevant,
    )
    for name, value in ranking.order_vs_labels(engine, set(ordered), k).items():
        if name != "ndcg":
            add("judge_vs_engine", name, value if ordered else math.nan, why=no_relevant)
    if gold is not None:
        for comparison, order in (("engine_vs_gold", engine), ("judge_vs_gold", judged)):
            for name, value in ranking.order_vs_labels(order, gold, k).items():
                add(
                    comparison,
                    name,
                    value if gold else math.nan,
                    why="no gold context for this question",
                )
    return rows


def aggregate(run_id: str, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per comparison and metric, the mean over the questions where it is defined.

    Written under ``question_id == "__all__"`` with ``n_questions`` saying how many questions
    the mean is over (``skipped`` when none).
    """
    values: dict[tuple[str, str, int], list[float]] = defaultdict(list)
    for r in rows:
        key = (r["comparison"], r["metric"], r["k"])
        values.setdefault(key, [])
        if r["status"] == "ok":
            values[key].append(r["value"])
    out = []
    for (comparison, metric, k), vals in values.items():
        out.append(
            {
                "run_id": run_id,
                "question_id": ALL_QUESTIONS,
                "comparison": comparison,
                "metric": metric,
                "k": k,
                "value": math.fsum(vals) / len(vals) if vals else None,
                "overlap_ids": None,
                "n_questions": len(vals),
                "status": "ok" if vals else "skipped",
                "reason": None if vals else "undefined for every question",
            }
        )
    return out


__all__ = [
    "ALL_QUESTIONS",
    "Ordered",
    "PairwiseJudge",
    "Relevance",
    "agreement",
    "aggregate",
    "judge_relevance",
    "order_relevant",
    "sort",
]
