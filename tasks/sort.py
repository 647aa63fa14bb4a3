"""Stage 2, sort: an LLM-judged ground-truth order of the candidates, and agreement metrics.

The order is compared with the engine's, and both with gold labels when the question set has
them.

Two phases per run: every candidate of every question gets one relevance verdict, under the
gateway's per-model limit; then the relevant candidates of each question are ordered by
pairwise comparisons (strategy ``sort.strategy``, see :mod:`ragaudit.ordering`), several
questions at once. Each comparison is asked in both orders; when the two answers disagree the
pair is a tie (position bias cancels out). Every call goes through the gateway's memo, so a
re-run pays for nothing it already asked.

Tables written: ``verdicts`` (one row per candidate), ``comparisons`` (one row per pair asked),
``ranking`` (one row per question) and ``agreement`` (:mod:`ragaudit.agreement`). With the judge
off, :func:`gold` writes the engine's agreement with gold relevance alone, without any LLM call.
"""

from __future__ import annotations

import asyncio
import math
import time
from dataclasses import dataclass, field
from typing import Any, TypeVar

from pydantic import BaseModel

from ragaudit import progress
from ragaudit.agreement import ALL_QUESTIONS, JudgeOrder, aggregate, gold_grades, question_rows
from ragaudit.cache import Judged, structured_prompt_tokens
from ragaudit.dataset import Question
from ragaudit.ordering import STRATEGIES, options_for
from ragaudit.prompts import PAIRWISE, RELEVANCE, PairwiseInput, Prompt, RelevanceInput
from ragaudit.reference import fit_text, json_cost
from ragaudit.schemas import AGREEMENT, COMPARISONS, RANKING, VERDICTS, to_table
from ragaudit.tasks._common import StageContext, combine_parts, gather_limited, in_flight

# Tokens kept free when a context is cut to fit: BPE may merge a few tokens differently where
# the cut text meets the prompt's JSON.
_FIT_SLACK = 8
# Fewer tokens than this left for a context: the question alone fills the window.
_MIN_ROOM = 32
# At most this many parts of one over-long candidate are judged (a context of megabytes is not
# a retrieved passage: its cost stays bounded, and the note says how much was judged).
_MAX_PARTS = 16
# A cl100k token spans at most a few dozen characters: this many per token of room always
# covers the parts judged, so a huge context is never split in full.
_CHARS_PER_TOKEN = 32


def prompt_budget(ctx: StageContext) -> int:
    """Tokens a judge prompt may use: the judge's window less the answer's ``max_tokens``."""
    return ctx.window() - ctx.config.models.max_output_tokens


V = TypeVar("V", bound=BaseModel)


def _parsed(judged: Judged[V] | None) -> V | None:
    """The parsed answer of a judgement that succeeded; None for a failed or missing one."""
    return judged.value if judged is not None and judged.ok else None


def context_room(ctx: StageContext, prompt: Prompt, empty: BaseModel, language: str) -> int:
    """Tokens left for the contexts: the budget less the prompt rendered with them empty."""
    messages = prompt.messages(empty, language)
    fixed = structured_prompt_tokens(ctx.judge, prompt.output_model, messages)
    return prompt_budget(ctx) - fixed - _FIT_SLACK


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

    async def _ask(self, first: str, second: str, texts: dict[str, str]) -> Judged[Any]:
        inp = PairwiseInput(
            question=self.question.question, context_1=texts[first], context_2=texts[second]
        )
        out = await self.ctx.gateway.astructured(
            model=self.ctx.judge,
            messages=PAIRWISE.messages(inp, self.question.language),
            schema=PAIRWISE.output_model,
            prompt_version=PAIRWISE.key,
            prompt_budget=prompt_budget(self.ctx),
            temperature=self.ctx.config.models.temperature,
            max_tokens=self.ctx.config.models.max_output_tokens,
        )
        self.calls += 1 if out.calls else 0  # a prompt over the window is not asked
        return out

    async def _both(
        self, a: str, b: str, texts: dict[str, str]
    ) -> tuple[Judged[Any], Judged[Any] | None]:
        if self.ctx.config.sort.both_orders:
            ab, ba = await asyncio.gather(self._ask(a, b, texts), self._ask(b, a, texts))
            return ab, ba
        return await self._ask(a, b, texts), None

    def _fitted(self, a: str, b: str) -> tuple[dict[str, str], str] | None:
        """The pair cut to fit one prompt (each context's head), with a note; None if it can't.

        A context that fits in half the room stays whole and the other gets the rest;
        otherwise each gets half. Both orders are asked on the same fitted texts.
        """
        empty = PairwiseInput(question=self.question.question, context_1="", context_2="")
        room = context_room(self.ctx, PAIRWISE, empty, self.question.language)
        if room < 2 * _MIN_ROOM:
            return None
        model = self.ctx.judge
        costs = {c: json_cost(model, self.texts[c]) for c in (a, b)}
        small, large = sorted((a, b), key=lambda c: costs[c])
        share = {small: min(costs[small], room // 2)}
        share[large] = room - share[small]
        fitted, cut = {}, []
        for c in (a, b):
            text = self.texts[c]
            if costs[c] <= share[c]:
                fitted[c] = text
                continue
            head, used = fit_text(text[: share[c] * _CHARS_PER_TOKEN], share[c], model)[0]
            fitted[c] = head
            cut.append(f"{c} to its first {used} of {costs[c]} tokens")
        note = "pair over the judge's window: compared on fitted heads (" + "; ".join(cut) + ")"
        return fitted, note

    async def compare(self, a: str, b: str) -> int:
        """-1 when ``a`` answers better, 1 when ``b`` does, 0 for a tie or a failed comparison."""
        key = frozenset((a, b))
        if key in self._done:
            first, outcome = await asyncio.shield(self._done[key])
            return outcome if first == a else -outcome
        fut: asyncio.Future[tuple[str, int]] = asyncio.get_running_loop().create_future()
        self._done[key] = fut
        ab, ba = await self._both(a, b, self.texts)
        note = None
        if any(j is not None and j.status == "too_long" and not j.calls for j in (ab, ba)):
            # Over the window by our count, so nothing was sent: ask on fitted heads instead.
            fitted = self._fitted(a, b)
            if fitted is not None:
                texts, note = fitted
                ab, ba = await self._both(a, b, texts)
        if self.bar is not None:
            self.bar.advance(2 if ba is not None else 1)
        # Each answer as a vote for a: -1 a first, 1 b first ("1" in ab is a; "2" in ba is a).
        pa, pb = _parsed(ab), _parsed(ba)
        votes = []
        if pa is not None:
            votes.append(-1 if pa.better == 1 else 1)
        if pb is not None:
            votes.append(-1 if pb.better == 2 else 1)
        failed = not ab.ok or (ba is not None and not ba.ok)
        # Agreement in both orders is a preference; disagreement is position bias: a tie.
        # A failed call leaves no preference either: the strategies keep the engine order.
        outcome = votes[0] if votes and not failed and all(v == votes[0] for v in votes) else 0
        errors = [j.error for j in (ab, ba) if j is not None and not j.ok and j.error]
        self.rows.append(
            {
                "first_id": a,
                "second_id": b,
                "choice_ab": str(pa.better) if pa is not None else None,
                "choice_ba": str(pb.better) if pb is not None else None,
                "outcome": {-1: "first", 1: "second", 0: "tie"}[outcome],
                "reason_ab": pa.reason if pa is not None else None,
                "reason_ba": pb.reason if pb is not None else None,
                "status": "failed" if failed else "ok",
                "error": "; ".join(errors) or None,
                "note": note,
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
    calls: int = 0
    """Relevance answers asked (a candidate judged in parts asks one per part)."""


async def _relevance(
    ctx: StageContext, q: Question, text: str
) -> tuple[Judged[Any], str | None, int]:
    """One candidate's verdict, the note on fitting it to the window, and the answers sent.

    A candidate too long for one prompt is cut into parts that fit (at paragraph, sentence
    or word ends) and is relevant when any part is: relevance is the presence of something
    that helps answer, and a part holds it or not regardless of the rest.
    """

    async def ask(context: str) -> Judged[Any]:
        return await ctx.gateway.astructured(
            model=ctx.judge,
            messages=RELEVANCE.messages(
                RelevanceInput(question=q.question, context=context), q.language
            ),
            schema=RELEVANCE.output_model,
            prompt_version=RELEVANCE.key,
            prompt_budget=prompt_budget(ctx),
            temperature=ctx.config.models.temperature,
            max_tokens=ctx.config.models.max_output_tokens,
        )

    whole = await ask(text)
    if whole.status != "too_long" or whole.calls:
        return whole, None, 1
    room = context_room(ctx, RELEVANCE, RelevanceInput(question=q.question, context=""), q.language)
    if room < _MIN_ROOM:
        return whole, None, 0
    head = text[: room * _MAX_PARTS * _CHARS_PER_TOKEN]
    parts = fit_text(head, room, ctx.judge)[:_MAX_PARTS]
    answers = await asyncio.gather(*(ask(part) for part, _ in parts))
    judged_all = sum(len(part) for part, _ in parts) == len(text)
    relevant = [
        k for k, a in enumerate(answers, start=1) if (p := _parsed(a)) is not None and p.relevant
    ]
    failed = [k for k, a in enumerate(answers, start=1) if not a.ok]
    note = (
        f"context over the judge's window ({whole.prompt_tokens}-token prompt, budget "
        f"{prompt_budget(ctx)}): judged in {len(parts)} parts"
        + ("" if judged_all else f" (its first {len(parts)} only)")
        + ", relevant if any part is; relevant parts: "
        + (", ".join(map(str, relevant)) or "none")
        + (f"; failed parts: {', '.join(map(str, failed))}" if failed else "")
    )
    if relevant:
        verdict = answers[relevant[0] - 1]
    elif failed:  # no part found relevant, and not every part was judged
        verdict = answers[failed[0] - 1]
    else:
        verdict = answers[0]
    return verdict, note, sum(1 for a in answers if a.calls)


async def judge_relevance(
    ctx: StageContext, questions: dict[str, Question], candidates: dict[str, list[dict[str, Any]]]
) -> dict[str, Relevance]:
    """One relevance verdict per candidate, under the gateway's limit."""
    pairs = [(qid, c) for qid, rows in candidates.items() for c in rows]
    with progress.bar("sort: relevance", len(pairs)) as bar:

        async def judge(item: tuple[str, dict[str, Any]]) -> tuple[Judged[Any], str | None, int]:
            qid, cand = item
            out = await _relevance(ctx, questions[qid], cand["text"])
            bar.advance()
            return out

        # The gateway's per-model limit bounds the calls; this bounds the verdicts begun at
        # once (a task and its prompt each), so only the finished answers grow with the run.
        verdicts = await gather_limited(pairs, judge, limit=in_flight(ctx))

    out = {qid: Relevance() for qid in candidates}
    for (qid, cand), (v, note, asked) in zip(pairs, verdicts, strict=True):
        cid = cand["context_id"]
        rel = out[qid]
        rel.calls += asked
        parsed = _parsed(v)
        rel.rows.append(
            {
                "run_id": ctx.run.run_id,
                "question_id": qid,
                "context_id": cid,
                "relevant": parsed.relevant if parsed is not None else None,
                "reason": parsed.reason if parsed is not None else None,
                "status": v.status,
                "error": v.error,
                "note": note,
            }
        )
        if parsed is None:
            rel.unjudged.append(cid)
        else:
            (rel.relevant if parsed.relevant else rel.irrelevant).append(cid)
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
    """Order each question's relevant candidates by pairwise comparison, several at once."""
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

        return await gather_limited(list(candidates), order, limit=in_flight(ctx))


async def sort(ctx: StageContext, *, timings: dict[str, float] | None = None) -> list[str]:
    """Write ``verdicts``, ``comparisons``, ``ranking`` and ``agreement``.

    ``timings``, when given, receives the wall time of each phase (``relevance_s``,
    ``ordering_s``), for the benchmark.
    """
    cfg = ctx.config.sort
    run_id = ctx.run.run_id
    questions = {q.question_id: q for q in ctx.run.questions(ctx.ids)}
    candidates = ctx.run.candidates(cfg.max_candidates, ctx.ids)
    started = time.perf_counter()
    relevance = await judge_relevance(ctx, questions, candidates)
    ctx.run.write(
        ctx.out("verdicts"),
        to_table([r for rel in relevance.values() for r in rel.rows], VERDICTS),
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
                "judge_calls": rel.calls + res.judge.calls,
                "status": "ok" if not rel.unjudged else "partial",
                "error": f"{len(rel.unjudged)} relevance verdicts failed" if rel.unjudged else None,
            }
        )
        agreement_rows += question_rows(
            run_id,
            qid,
            [c["context_id"] for c in candidates[qid]],
            k,
            judge=JudgeOrder(res.ordered, res.groups, rel.irrelevant, rel.unjudged),
            gold=gold_grades(questions[qid], candidates[qid]),
        )
    if not ctx.batched:
        # A batch's means would be a batch's: the run's are taken when the batches combine.
        agreement_rows += aggregate(run_id, agreement_rows)
    ctx.run.write(ctx.out("comparisons"), to_table(comparison_rows, COMPARISONS))
    ctx.run.write(ctx.out("ranking"), to_table(ranking_rows, RANKING))
    ctx.run.write(ctx.out("agreement"), to_table(agreement_rows, AGREEMENT))
    return [ctx.out(t) for t in SORT_TABLES]


SORT_TABLES = ("verdicts", "comparisons", "ranking", "agreement")


def combine_sort(ctx: StageContext, parts: list[str]) -> list[str]:
    """Join the batches' tables and add the run's agreement means over all their questions."""
    names = combine_parts(ctx, SORT_TABLES, parts)
    rows = ctx.run.rows("agreement")
    rows += aggregate(ctx.run.run_id, rows)
    ctx.run.write("agreement", to_table(rows, AGREEMENT))
    return names


async def gold(ctx: StageContext) -> list[str]:
    """Write ``agreement`` with the engine's agreement with gold relevance only (no LLM call).

    The stage that runs instead of :func:`sort` when the judge stages are off.
    """
    run_id, k = ctx.run.run_id, ctx.config.sort.agreement_k
    candidates = ctx.run.candidates(ctx.config.sort.max_candidates)
    rows: list[dict[str, Any]] = []
    for q in ctx.run.questions():
        cands = candidates.get(q.question_id, [])
        rows += question_rows(
            run_id,
            q.question_id,
            [c["context_id"] for c in cands],
            k,
            judge=None,
            gold=gold_grades(q, cands),
        )
    rows += aggregate(run_id, rows)
    ctx.run.write("agreement", to_table(rows, AGREEMENT))
    return ["agreement"]


__all__ = [
    "ALL_QUESTIONS",
    "Ordered",
    "PairwiseJudge",
    "Relevance",
    "SORT_TABLES",
    "combine_sort",
    "context_room",
    "gold",
    "judge_relevance",
    "order_relevant",
    "prompt_budget",
    "sort",
]
