"""One question's judged order from its grades: full pairwise, the head only, or none.

- ``full``: every relevant candidate ordered by pairwise comparisons (:mod:`ragaudit.ordering`).
- ``head``: the top ``head_k`` ordered exactly by a setwise or listwise method
  (:mod:`ragaudit.judging._head`); behind them the relevant candidates follow by grade, tied
  inside a grade (engine order there).
- ``none``: the grades alone: relevant candidates by grade, tied inside a grade.

The head is taken from the best grades down: whole grade groups until they hold ``head_k``
candidates, in an order given by the grades and the candidates' ids (not the engine's), so
the calls asked depend on the candidates and their grades only and a re-run with the same
candidates in another order is answered from the memo.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from ragaudit import progress
from ragaudit.dataset import Question
from ragaudit.judging._grades import Graded
from ragaudit.judging._head import SetJudge, plan_head
from ragaudit.judging._incremental import HeadSource, PreviousHead, incremental_head
from ragaudit.judging._judge import Judge, Spend, gather_limited, stable_key
from ragaudit.judging._pairwise import PairwiseJudge
from ragaudit.ordering import STRATEGIES, options_for, simulated_comparisons
from ragaudit.prompts import (
    PAIRWISE,
    PairwiseInput,
    Passage,
    Prompt,
)
from ragaudit.registry import HEAD_METHODS

OrderMode = Literal["full", "head", "none"]


@dataclass(frozen=True)
class OrderOptions:
    """How the relevant candidates are ordered (the ``sort`` settings that matter here)."""

    order: OrderMode = "head"
    head_k: int = 10
    head_method: str = "window"
    set_size: int = 4
    window: int = 20
    votes: int = 2
    strategy: str = "sample"
    strategy_options: Mapping[str, Any] = field(default_factory=dict)
    both_orders: bool = True
    top_k_exact: int | None = None

    @classmethod
    def from_sort(cls, cfg: Any) -> OrderOptions:
        """The options from the config's ``sort`` section (the sort stage and the dry run)."""
        return cls(
            order=cfg.order,
            head_k=cfg.head_k,
            head_method=cfg.head_method,
            set_size=cfg.set_size,
            window=cfg.window,
            votes=cfg.head_votes,
            strategy=cfg.strategy,
            strategy_options=cfg.model_dump(),
            both_orders=cfg.both_orders,
            top_k_exact=cfg.top_k_exact,
        )

    @property
    def method(self) -> str:
        """The method's name as the ``ranking`` table records it."""
        if self.order == "full":
            return f"pairwise:{self.strategy}"
        if self.order == "head":
            return f"head:{self.head_method}"
        return "grades"


@dataclass
class Ordered:
    """One question's judged order of its relevant candidates.

    Attributes:
        question_id: The question.
        ordered: The relevant ids, best first.
        groups: Tie group of each position.
        exact_k: Positions ordered exactly from the top (None: all of them).
        rows: ``comparisons`` rows of the calls asked.
        spend: What the ordering asked of the judge.
        failed: Ordering calls (or pairs) left without an answer.
        asked: Ordering calls (or pairs) asked.
        source: Where the head came from: ``reused`` from the previous run with no call,
            ``inserted`` into it, or ordered ``fresh`` (None: no judged order, ``order: none``).
        note: Why a previous head was not built on (None: it was, or there was none).
    """

    question_id: str
    ordered: list[str]
    groups: list[int]
    exact_k: int | None
    rows: list[dict[str, Any]] = field(default_factory=list)
    spend: Spend = field(default_factory=Spend)
    failed: int = 0
    asked: int = 0
    source: HeadSource | None = None
    note: str | None = None


def by_grade(ids: Sequence[str], grades: Mapping[str, int]) -> tuple[list[str], list[int]]:
    """``ids`` best grade first (their order kept inside a grade), one tie group per grade."""
    ordered = sorted(ids, key=lambda c: -grades.get(c, 0))
    groups: list[int] = []
    last: int | None = None
    for c in ordered:
        g = grades.get(c, 0)
        groups.append(groups[-1] + (g != last) if groups else 0)
        last = g
    return ordered, groups


def head_pool(relevant: Sequence[str], grades: Mapping[str, int], k: int) -> list[str]:
    """The candidates the head is chosen from: whole grade groups from the best down to ``2k``.

    Twice k, not k: a grade is sometimes one off, and a candidate of the head graded one too
    low must still be in the pool to be found. In grade order, the ids' own hash order inside a
    grade: nothing of the engine's order.
    """
    ranked = sorted(relevant, key=lambda c: (-grades[c], stable_key(c)))
    pool: list[str] = []
    for i, c in enumerate(ranked):
        if len(pool) >= 2 * k and grades[c] != grades[ranked[i - 1]]:
            break
        pool.append(c)
    return pool


async def order_one(
    judge: Judge,
    question: Question,
    texts: dict[str, str],
    graded: Graded,
    options: OrderOptions,
    bar: Any = None,
    previous: PreviousHead | None = None,
) -> Ordered:
    """The judged order of one question's relevant candidates (``graded.relevant``).

    ``previous``, in ``head`` mode: the previous run's head of this question, built on rather
    than ordered afresh (:func:`ragaudit.judging._incremental.incremental_head`).
    """
    qid = question.question_id
    relevant, grades = graded.relevant, graded.grades
    if options.order == "none" or not relevant:
        ordered, groups = by_grade(relevant, grades)
        return Ordered(qid, ordered, groups, 0 if options.order == "none" else None)
    if options.order == "full":
        pj = PairwiseJudge(judge, question, texts, both_orders=options.both_orders, bar=bar)
        ordered, groups = await STRATEGIES[options.strategy](
            relevant,
            pj.compare,
            top_k=options.top_k_exact,
            **options_for(options.strategy, options.strategy_options),
        )
        k = options.top_k_exact
        return Ordered(
            qid,
            ordered,
            groups,
            k if k is not None and k < len(ordered) else None,
            pj.rows,
            pj.spend,
            pj.failed,
            len(pj.rows),
            source="fresh",
        )
    sj = SetJudge(judge, question, texts)
    pool = head_pool(relevant, grades, options.head_k)
    source: HeadSource = "fresh"
    note = None
    head: list[str] | None = None
    if previous is not None:
        placed = await incremental_head(
            previous, pool, relevant, texts, grades, sj, options.head_k, options.window
        )
        head, note = placed.head, placed.reason
        if head is not None:
            source = placed.source
    if head is None:
        method = HEAD_METHODS.get(options.head_method)
        result = await method.order(pool, sj, options.head_k, options)
        head = result[: min(options.head_k, len(result))]
    rest, rest_groups = by_grade([c for c in relevant if c not in set(head)], grades)
    if bar is not None:
        bar.advance()
    return Ordered(
        qid,
        head + rest,
        list(range(len(head))) + [len(head) + g for g in rest_groups],
        len(head),
        sj.rows,
        sj.spend,
        sj.spend.failed,
        len(sj.rows),
        source=source,
        note=note,
    )


async def order_questions(
    judge: Judge,
    questions: Mapping[str, Question],
    candidates: Mapping[str, Sequence[Mapping[str, Any]]],
    graded: Mapping[str, Graded],
    options: OrderOptions,
    previous: Mapping[str, PreviousHead] | None = None,
) -> list[Ordered]:
    """Order each question's relevant candidates, several questions at once.

    ``previous``: the previous run's heads by question, built on in ``head`` mode.
    """
    if options.order == "full":
        # About n log2 n comparisons, two calls each: the bar's scale, not a promise.
        per = 2 if options.both_orders else 1
        expected = per * sum(
            len(g.relevant) * max(1, math.ceil(math.log2(max(len(g.relevant), 2))))
            for g in graded.values()
        )
    elif options.order == "head":
        # Counted in questions: a question's head calls depend on its pool, window and votes
        # (counted as two calls a question, the bar read "15/10").
        expected = sum(1 for qid in candidates if graded[qid].relevant)
    else:
        expected = 0
    with progress.bar(f"sort: order ({options.method})", expected) as bar:

        async def order(qid: str) -> Ordered:
            texts = {c["context_id"]: c["text"] for c in candidates[qid]}
            before = (previous or {}).get(qid) if options.order == "head" else None
            return await order_one(judge, questions[qid], texts, graded[qid], options, bar, before)

        return await gather_limited(list(candidates), order, limit=judge.in_flight)


@dataclass
class PlannedCalls:
    """Calls one step of the ordering would ask, and their prompt tokens (the dry run's line)."""

    step: str
    calls: float
    tokens_in: float
    prompt_key: str


TokenCount = Callable[[Prompt[Any, Any], Any], int]
"""Prompt tokens of one typed prompt's input, as the gateway would send it."""


async def plan_order(
    options: OrderOptions,
    question: Question,
    relevant: Sequence[str],
    tokens: TokenCount,
    *,
    orderings: int = 3,
    tie_share: float = 0.0,
) -> list[PlannedCalls]:
    """The ordering's plan for one question's relevant texts, without asking the judge.

    ``head``: the head method's calls (:func:`plan_head`), each priced at a prompt holding the
    first passages. ``full``: the pairs the strategy asks on a simulated judge
    (:func:`ragaudit.ordering.simulated_comparisons`), each asked in one or both orders, priced
    at the empty prompt plus twice the mean context.
    """
    n = len(relevant)
    if options.order == "head":
        if not n:
            return []
        calls, size, prompt = plan_head(options.head_method, n, options.head_k, options)
        shown = [Passage(id=i, text=t) for i, t in enumerate(relevant[: min(n, size)], 1)]
        one = tokens(prompt, prompt.input_model(question=question.question, passages=shown))
        return [
            PlannedCalls(f"head ordering ({options.head_method})", calls, calls * one, prompt.key)
        ]
    if options.order != "full":
        return []
    pairs = await simulated_comparisons(
        options.strategy,
        n,
        options.top_k_exact,
        orderings,
        tie_share,
        options_for(options.strategy, dict(options.strategy_options)),
    )
    if not pairs:
        return []

    def pairwise(first: str, second: str) -> int:
        return tokens(
            PAIRWISE, PairwiseInput(question=question.question, context_1=first, context_2=second)
        )

    # A comparison's prompt is the empty prompt plus its two contexts: the mean pair costs the
    # empty prompt plus twice the mean context.
    empty = pairwise("", "")
    mean_context = sum(pairwise(t, "") - empty for t in relevant) / n
    asked = (2 if options.both_orders else 1) * pairs
    return [
        PlannedCalls(
            f"pairwise comparisons ({options.strategy})",
            asked,
            asked * (empty + 2 * mean_context),
            PAIRWISE.key,
        )
    ]


__all__ = [
    "OrderMode",
    "OrderOptions",
    "Ordered",
    "PlannedCalls",
    "TokenCount",
    "by_grade",
    "head_pool",
    "order_one",
    "order_questions",
    "plan_order",
]
