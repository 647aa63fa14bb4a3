"""Ordering strategies over an async pairwise comparison.

``compare(a, b)`` returns -1 when ``a`` should come first, 1 when ``b`` should, 0 for a tie.
Strategies are registered by name so the config and the benchmarks can pick them. Each is
called as ``await fn(items, compare, top_k=None, **options)`` (``options`` only those the
strategy was registered with, see :func:`options_for`) and returns the ordered ids and a group
number per position: neighbours share a group when the judge called them a tie or, in top-k
mode, when they lie in one block behind the exact head (an order nobody asked for).

A tie carries no information about the order, so wherever a strategy must decide without an
answer it keeps the input order (the engine's): a judge that only ever ties, such as a purely
position-biased one once both orders are asked, leaves the input order as it was.

``sample`` is the default and the one built for a noisy judge; ``insertion`` is the classic
sequential binary insertion; ``merge`` and ``quick`` are the plain parallel alternatives the
benchmark (``bench/bench_sort.py``) measures it against.
"""

from __future__ import annotations

import asyncio
import math
import random
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ragaudit.registry import ORDERINGS

Compare = Callable[[str, str], Awaitable[int]]
Ordering = tuple[list[str], list[int]]
Strategy = Callable[..., Awaitable[Ordering]]
# Runs of the output: a block of one id is exactly placed; a longer block is an unordered set.
Blocks = list[list[str]]

STRATEGIES: dict[str, Strategy] = ORDERINGS.units
"""The registered strategies by name: the ordering registry's own table (``ragaudit.registry``)."""
# The keyword options each strategy takes beyond ``top_k``, by strategy name.
OPTIONS: dict[str, tuple[str, ...]] = {}


def strategy(name: str, *, options: Sequence[str] = ()) -> Callable[[Strategy], Strategy]:
    """Register an ordering strategy under ``name`` (built-in or a plugin's).

    It takes the keyword ``options`` named, read from the ``sort`` section (:func:`options_for`).
    """

    def deco(fn: Strategy) -> Strategy:
        ORDERINGS.add(name, fn)
        OPTIONS[name] = tuple(options)
        return fn

    return deco


def options_for(name: str, settings: Mapping[str, Any]) -> dict[str, Any]:
    """The settings strategy ``name`` takes (the others belong to other strategies)."""
    return {key: settings[key] for key in OPTIONS[name] if key in settings}


def _flatten(blocks: Blocks, tied: Callable[[str, str], bool]) -> Ordering:
    """Ids and group numbers from blocks.

    A block of several ids is one group (unordered); consecutive single ids share a group only
    when the judge called them a tie.
    """
    ordered: list[str] = []
    groups: list[int] = []
    single_before = False
    for block in blocks:
        if not block:
            continue
        single = len(block) == 1
        if single and single_before and tied(ordered[-1], block[0]):
            groups.append(groups[-1])
        else:
            groups.extend([groups[-1] + 1 if groups else 0] * len(block))
        ordered.extend(block)
        single_before = single
    return ordered, groups


class _Recorder:
    """Wraps ``compare`` to remember which pairs the judge tied (for the simple strategies)."""

    def __init__(self, compare: Compare) -> None:
        self.compare = compare
        self.ties: set[frozenset[str]] = set()

    async def __call__(self, a: str, b: str) -> int:
        result = await self.compare(a, b)
        if result == 0:
            self.ties.add(frozenset((a, b)))
        return result

    def tied(self, a: str, b: str) -> bool:
        return frozenset((a, b)) in self.ties


# -- sequential binary insertion and two plain parallel ones, kept for comparison ----------


@strategy("insertion")
async def binary_insertion(
    items: Sequence[str], compare: Compare, *, top_k: int | None = None
) -> Ordering:
    """Sequential binary insertion sort: one comparison at a time.

    A tie sends the item right, as a plain ``if better: left; else: right`` does. With ``top_k``
    the search runs over the first k sorted items only; an item that falls behind them joins the
    unordered block at the end.
    """
    cmp = _Recorder(compare)
    ordered: list[str] = []
    rest: list[str] = []
    for item in items:
        lo, hi = 0, len(ordered)
        while lo < hi:
            mid = (lo + hi) // 2
            if await cmp(item, ordered[mid]) < 0:
                hi = mid
            else:
                lo = mid + 1
        ordered.insert(lo, item)
        if top_k is not None and len(ordered) > top_k:
            rest.append(ordered.pop())
    return _flatten([[x] for x in ordered] + ([rest] if rest else []), cmp.tied)


@strategy("merge")
async def merge_rounds(
    items: Sequence[str], compare: Compare, *, top_k: int | None = None
) -> Ordering:
    """Bottom-up merge sort whose merges at one level all run at once.

    Each merge is sequential, but the merges of a level are independent, so a level costs the
    longest merge, not the sum of them (the last level is one merge of n items, one comparison
    at a time). With ``top_k`` a merge stops after k items and passes the rest on unmerged.
    """
    cmp = _Recorder(compare)
    Run = tuple[list[str], list[str]]  # noqa: N806  (merged head, unmerged rest)

    async def merge(left: Run, right: Run) -> Run:
        (lhead, lrest), (rhead, rrest) = left, right
        out: list[str] = []
        i = j = 0
        while i < len(lhead) and j < len(rhead) and (top_k is None or len(out) < top_k):
            # A tie keeps the left run's item first: stable, like the engine order it came in.
            if await cmp(lhead[i], rhead[j]) <= 0:
                out.append(lhead[i])
                i += 1
            else:
                out.append(rhead[j])
                j += 1
        if top_k is None or len(out) < top_k:
            return out + lhead[i:] + rhead[j:], lrest + rrest
        return out, lhead[i:] + rhead[j:] + lrest + rrest

    runs: list[Run] = [([x], []) for x in items]
    while len(runs) > 1:
        pairs = [(runs[k], runs[k + 1]) for k in range(0, len(runs) - 1, 2)]
        merged = await asyncio.gather(*(merge(a, b) for a, b in pairs))
        runs = list(merged) + ([runs[-1]] if len(runs) % 2 else [])
    head, rest = runs[0] if runs else ([], [])
    return _flatten([[x] for x in head] + ([rest] if rest else []), cmp.tied)


@strategy("quick")
async def parallel_quicksort(
    items: Sequence[str], compare: Compare, *, top_k: int | None = None
) -> Ordering:
    """Quicksort that compares every item of a partition with its pivot at once.

    The pivot is the partition's middle item in input order; a tie keeps the item on the side
    the input order puts it. With ``top_k``, partitions starting at or behind k stay unordered.
    """
    cmp = _Recorder(compare)

    async def qs(xs: list[str], k: int | None) -> Blocks:
        if len(xs) <= 1 or (k is not None and k <= 0):
            return [xs] if xs else []
        mid = len(xs) // 2
        pivot = xs[mid]
        others = xs[:mid] + xs[mid + 1 :]
        results = await asyncio.gather(*(cmp(x, pivot) for x in others))
        above: list[str] = []
        below: list[str] = []
        for i, (x, r) in enumerate(zip(others, results, strict=True)):
            (above if r < 0 or (r == 0 and i < mid) else below).append(x)
        upper, lower = await asyncio.gather(
            qs(above, k), qs(below, None if k is None else k - len(above) - 1)
        )
        return [*upper, [pivot], *lower]

    return _flatten(await qs(list(items), top_k), cmp.tied)


# -- parallel sample sort ---------------------------------------------------------------------


@dataclass
class _Hook:
    """What a bucket's sort offers a visitor.

    ``coarse``: the bucket's own pivots in order when it partitions (then ``admit(x, g)`` puts
    the visitor in sub-bucket g, or with g None lets the sub-buckets close without it), its
    whole order when it is sorted in one go, or None when it is left unordered (top-k mode).
    """

    coarse: list[str] | None
    admit: Callable[[str, int | None], None] | None = None


class _Visitor:
    """An item that tied with the pivot(s) between some buckets, on its way into one of them."""

    def __init__(self, x: str, buckets: list[int]) -> None:
        self.x = x
        self.buckets = buckets
        loop = asyncio.get_running_loop()
        self.hooks: list[asyncio.Future[tuple[list[str], _Hook]]] = [
            loop.create_future() for _ in buckets
        ]
        self.joined: _Hook | None = None

    def offer(self, i: int, members: list[str], hook: _Hook) -> None:
        """Called by the sort of its i-th bucket (of ``members``) once it knows its split."""
        if not self.hooks[i].done():
            self.hooks[i].set_result((members, hook))


class _Board:
    """Every judgement asked so far (each pair once), and the input order that breaks ties."""

    def __init__(self, items: Sequence[str], compare: Compare) -> None:
        self.compare = compare
        self.index = {x: i for i, x in enumerate(items)}
        # said[a][b]: 1 when the judge put a above b, -1 below, 0 for a tie.
        self.said: dict[str, dict[str, int]] = {x: {} for x in items}
        self._pending: dict[frozenset[str], tuple[str, asyncio.Future[int]]] = {}

    def rel(self, a: str, b: str) -> int | None:
        """1 when the judge put ``a`` above ``b``, -1 below, 0 for a tie, None if not asked."""
        return self.said[a].get(b)

    def tied(self, a: str, b: str) -> bool:
        """Whether the judge called ``a`` and ``b`` a tie."""
        return self.said[a].get(b) == 0

    def input_order(self, xs: list[str]) -> list[str]:
        """``xs`` in input order (searches finish in any order; results must not depend on it)."""
        return sorted(xs, key=self.index.__getitem__)

    async def ask(self, a: str, b: str) -> int:
        """``compare(a, b)``, asked once per pair however often and whichever way round."""
        known = self.said[a].get(b)
        if known is not None:
            return -known
        key = frozenset((a, b))
        if key in self._pending:
            first, fut = self._pending[key]
            out = await asyncio.shield(fut)
            return out if first == a else -out
        fut = asyncio.get_running_loop().create_future()
        self._pending[key] = (a, fut)
        try:
            out = await self.compare(a, b)
        except BaseException as exc:
            fut.set_exception(exc)
            fut.exception()  # marked retrieved: the callers sharing it re-raise it themselves
            raise
        finally:
            del self._pending[key]
        self.said[a][b], self.said[b][a] = -out, out
        fut.set_result(out)
        return out


# An answer that both orders agreed on is taken as right with probability 1 - _EPS when
# answers about one item contradict each other (the re-placement in the repair).
_EPS = 0.05
_LOG_RIGHT, _LOG_WRONG = math.log(1 - _EPS), math.log(_EPS)


class _SampleSort:
    """Parallel sample sort for a noisy judge; see :func:`sample_sort`."""

    # Samples up to this size are ordered by asking every pair at once: one round instead of a
    # sequential sort, and each pivot's place rests on all its answers, so one wrong answer
    # cannot misplace a pivot (and with it every item searched against it).
    ROUND_ROBIN_SAMPLE = 16
    # So are subproblems this small: 3 comparisons in one round instead of 2-3 in a row.
    ROUND_ROBIN_LEAF = 3
    # Mean bucket size from which a wrong answer high in a search moves its item far enough to
    # be worth two extra comparisons per bucket.
    CHECK_BUCKET = 3.0
    REPAIR_ROUNDS = 3
    # Re-placing an item stops once every answer still to be had is 90 % predictable; it asks up
    # to three comparisons per round trip.
    LOCATE_DOUBT = 0.1
    LOCATE_PROBES = 3

    def __init__(self, board: _Board, *, visit_ties: bool = False) -> None:
        self.board = board
        # An item that tied with every pivot left in its search goes to the bucket on its
        # input-order side of them, as any tie keeps the input order. Visiting the buckets on
        # both sides instead (search their own pivots once known, join the sub-bucket it lands
        # in) places it better, but it makes the longest chain of the run, as the sub-buckets
        # cannot close until the visitor has searched, and it asks more comparisons; it gains
        # most on a noisy judge and a random input order (bench/bench_sort.py measures it).
        self.visit_ties = visit_ties
        self.checks: list[asyncio.Future[None]] = []
        # The last item each search got an informative answer about (see check_ends).
        self.last_answer: dict[str, str] = {}

    # -- searching ------------------------------------------------------------------------

    async def bracket(
        self,
        x: str,
        seq: Sequence[str],
        lo: int,
        hi: int,
        narrow: Callable[[int, int], None] | None = None,
    ) -> tuple[int, int]:
        """Binary search of ``x`` among ``seq[lo:hi]`` (best first), stepping around ties.

        A tie says nothing, so the search goes on with the middle item of the range that x has
        not tied with. Returns ``(g, g)``, the gap x belongs in (gap g lies before
        ``seq[g]``), or ``(a, b)`` when every item left in range, ``seq[a:b]``, tied with x.
        ``narrow(lo, hi)`` hears each time the range of possible gaps shrinks.
        """
        tied: set[int] = set()
        while lo < hi:
            untied = [i for i in range(lo, hi) if i not in tied]
            if not untied:
                return lo, hi
            mid = untied[len(untied) // 2]
            answer = await self.board.ask(x, seq[mid])
            if answer == 0:
                tied.add(mid)
                continue
            self.last_answer[x] = seq[mid]
            if answer < 0:
                hi = mid
            else:
                lo = mid + 1
            if narrow:
                narrow(lo, hi)
        return lo, lo

    def stable_gap(self, x: str, seq: Sequence[str], lo: int, hi: int) -> int:
        """The gap in ``[lo, hi]`` that keeps ``x`` in input order with ``seq[lo:hi]``."""
        index = self.board.index
        gap = lo
        for i in range(lo, hi):
            if index[seq[i]] < index[x]:
                gap = i + 1
        return gap

    async def locate(self, x: str, seq: Sequence[str]) -> int:
        """The gap of ``seq`` where ``x`` most likely belongs, weighing every answer about it.

        For an item some answer contradicts: each answer counts as right with probability
        1 - eps, and the least predictable comparison is asked next until every remaining one
        is predictable (or a budget of about twice a binary search runs out).
        """
        gaps = len(seq) + 1
        score = [0.0] * gaps  # log-likelihood of each gap
        asked: set[int] = set()

        def learn(pos: int, above: bool) -> None:
            for g in range(gaps):
                score[g] += _LOG_RIGHT if (g <= pos) == above else _LOG_WRONG

        for pos, y in enumerate(seq):
            verdict = self.board.rel(x, y)
            if verdict is not None:
                asked.add(pos)
                if verdict:
                    learn(pos, verdict > 0)
        stable = self.stable_gap(x, seq, 0, len(seq))
        budget = 2 * math.ceil(math.log2(gaps)) + 2
        while True:
            top = max(score)
            weights = [math.exp(s - top) for s in score]
            total = sum(weights)
            # Probability that x belongs above each item; the questions worth asking are the
            # ones whose answer is least predictable. Up to LOCATE_PROBES go at once (near the
            # posterior's median and quartiles): this runs at the very end, when the judge has
            # idle slots, and each round trip is a latency nobody else fills.
            above, mass = [], 0.0
            for pos in range(len(seq)):
                mass += weights[pos]
                above.append(mass / total)
            picks: list[int] = []
            for target in (0.5, 0.25, 0.75)[: self.LOCATE_PROBES]:
                open_ = [
                    pos
                    for pos in range(len(seq))
                    if pos not in asked
                    and pos not in picks
                    and min(above[pos], 1 - above[pos]) > self.LOCATE_DOUBT
                ]
                if open_:
                    picks.append(min(open_, key=lambda pos: abs(above[pos] - target)))
            if not picks or budget <= 0:
                likely = [g for g in range(gaps) if score[g] >= top - 1e-9]
                return min(likely, key=lambda g: (abs(g - stable), g))
            asked.update(picks)
            budget -= len(picks)
            answers = await asyncio.gather(*(self.board.ask(x, seq[pos]) for pos in picks))
            for pos, answer in zip(picks, answers, strict=True):
                if answer:
                    learn(pos, answer < 0)

    # -- sorting --------------------------------------------------------------------------

    async def round_robin(self, xs: list[str]) -> list[str]:
        """Ask every pair at once and order by share of informative wins.

        Then each neighbour pair's own answer may swap it (a tie leaves it as it is).
        """
        board = self.board
        await asyncio.gather(*(board.ask(a, b) for i, a in enumerate(xs) for b in xs[i + 1 :]))

        def share(x: str) -> float:
            verdicts = [board.rel(x, y) for y in xs if y != x]
            wins, losses = verdicts.count(1), verdicts.count(-1)
            return (wins + 0.5) / (wins + losses + 1)

        order = sorted(xs, key=lambda x: (-share(x), board.index[x]))
        for _ in range(len(order)):
            swapped = False
            for i in range(len(order) - 1):
                if board.rel(order[i], order[i + 1]) == -1:
                    order[i], order[i + 1] = order[i + 1], order[i]
                    swapped = True
            if not swapped:
                break
        return order

    async def sort(
        self, xs: list[str], k: int | None = None, visitors: Sequence[tuple[_Visitor, int]] = ()
    ) -> Blocks:
        """Blocks of ``xs`` in order; with ``k`` only the first k positions need be exact.

        ``visitors`` are items of the level above that may join this bucket (see _Visitor):
        each is offered how this sort splits ``xs`` as soon as that is known.
        """

        def offer(hook: _Hook) -> None:
            for visitor, i in visitors:
                visitor.offer(i, xs, hook)

        m = len(xs)
        if k is not None and k <= 0 and m > 1:
            offer(_Hook(None))
            return [xs]
        if m <= self.ROUND_ROBIN_LEAF:
            order = await self.round_robin(xs) if m > 1 else list(xs)
            offer(_Hook(order))
            return [[x] for x in order]
        size = max(1, min(m - 1, round(math.sqrt(m))))
        # Pivots spread over the input order: the engine's order spreads them over the range.
        picked = sorted({i * m // size for i in range(size)})
        chosen = set(picked)
        sample = [xs[i] for i in picked]
        rest = [x for i, x in enumerate(xs) if i not in chosen]
        if len(sample) <= self.ROUND_ROBIN_SAMPLE:
            pivots = await self.round_robin(sample)
        else:
            pivots = _flatten(await self.sort(sample), self.board.tied)[0]
        check = (m - size) / (size + 1) >= self.CHECK_BUCKET
        return await self.partition(rest, pivots, k, check, visitors)

    async def partition(
        self,
        rest: list[str],
        pivots: list[str],
        k: int | None,
        check: bool,
        visitors: Sequence[tuple[_Visitor, int]] = (),
    ) -> Blocks:
        """Place ``rest`` (and any visitors) among the sorted ``pivots``; sort each bucket."""
        gaps = len(pivots) + 1
        members: list[list[str]] = [[] for _ in range(gaps)]
        # Searches that may still add an item to each bucket (visitors included); at zero the
        # bucket is closed.
        open_searches = [len(rest) + len(visitors)] * gaps
        closed = [asyncio.Event() for _ in range(gaps)]
        for g in range(gaps):
            if not open_searches[g]:
                closed[g].set()

        def release(g: int) -> None:
            open_searches[g] -= 1
            if not open_searches[g]:
                closed[g].set()

        def admit(x: str, g: int | None) -> None:
            if g is not None:
                members[g].append(x)
            for gap in range(gaps):
                release(gap)

        for visitor, i in visitors:
            visitor.offer(i, [*rest, *pivots], _Hook(pivots, admit))
        # Items of this level that tie with pivots become visitors of the buckets around them.
        guests: list[list[tuple[_Visitor, int]]] = [[] for _ in range(gaps)]

        async def sort_bucket(j: int) -> Blocks:
            # A bucket is sorted as soon as no running search can still add to it, so buckets
            # that close early do not wait for the slowest search of the level.
            await closed[j].wait()
            kj = None
            if k is not None:
                for i in range(j):
                    await closed[i].wait()
                kj = k - sum(len(members[i]) + 1 for i in range(j))
            blocks = await self.sort(self.board.input_order(members[j]), kj, guests[j])
            if check and blocks:
                # In the background: only the repair, at the very end, needs the answers.
                self.checks.append(asyncio.ensure_future(self.check_ends(blocks, j, pivots)))
            return blocks

        buckets = [asyncio.ensure_future(sort_bucket(j)) for j in range(gaps)]

        async def place(x: str) -> tuple[str, str | None, bool] | None:
            span = [0, gaps - 1]

            def narrow(lo: int, hi: int) -> None:
                for g in range(span[0], span[1] + 1):
                    if not lo <= g <= hi:
                        release(g)
                span[0], span[1] = lo, hi

            a, b = await self.bracket(x, pivots, 0, len(pivots), narrow)
            visitor = None
            if a == b:
                members[a].append(x)
            elif not self.visit_ties:
                # Every answer so far puts it between the pivots around the tied ones. On the
                # wrong side of them it ends next to them, but misses the other bucket's items it
                # should have passed (never compared, so the repair cannot see it).
                members[self.stable_gap(x, pivots, a, b)].append(x)
            else:
                # Tied with pivots[a:b]: it visits the buckets a..b, registered before they can
                # close, and joins one of them as soon as their own pivots are known.
                visitor = _Visitor(x, list(range(a, b + 1)))
                for i, j in enumerate(range(a, b + 1)):
                    guests[j].append((visitor, i))
            for g in range(span[0], span[1] + 1):
                release(g)
            if visitor is None:
                return None
            return await self.visit(visitor, pivots[a:b], pivots[b] if b < len(pivots) else None)

        try:
            placed = await asyncio.gather(*(place(x) for x in rest))
            sorted_buckets = await asyncio.gather(*buckets)
        finally:
            for task in buckets:
                task.cancel()
        return await self.assemble(sorted_buckets, pivots, [p for p in placed if p is not None])

    async def check_ends(self, blocks: Blocks, j: int, pivots: list[str]) -> None:
        """Ask the ends of bucket j against the pivots one step beyond its own.

        An item sent here by a wrong answer high in its search ends at the end of the bucket
        next to the pivot that answer was about (all its later answers pointed that way); the
        next pivot out then contradicts it, and the repair moves it.
        """
        first, last = blocks[0], blocks[-1]
        asks = []
        # When that pivot was the last one its search asked, a wrong answer there moved the item
        # by one bucket at most, which the next pivot out cannot tell: no question then.
        if len(first) == 1 and j >= 2 and self.last_answer.get(first[0]) != pivots[j - 1]:
            asks.append(self.board.ask(first[0], pivots[j - 2]))
        if len(last) == 1 and j + 1 < len(pivots) and self.last_answer.get(last[0]) != pivots[j]:
            asks.append(self.board.ask(last[0], pivots[j + 1]))
        await asyncio.gather(*asks)

    async def visit(
        self, visitor: _Visitor, tied: list[str], below: str | None
    ) -> tuple[str, str | None, bool] | None:
        """Join a visitor to the right bucket, or say where it goes among their items.

        The item tied with the pivots ``tied`` between its buckets (``below`` is the pivot under
        the last one, None at the end). It searches the buckets' own pivots (or whole order, for
        a bucket sorted in one go) with the tied pivots between them, and joins the sub-bucket
        it lands in, to be sorted with it; landing next to an item of a bucket sorted in one go,
        it returns the id it goes right before (None: the end) for the level above to insert,
        or joins the unordered block starting with that id (top-k mode).
        """
        x = visitor.x
        window: list[str] = []
        # regions[g]: the bucket (its hook) and the sub-bucket lying in gap g of the window, or
        # None where no sub-bucket lies (a bucket sorted in one go).
        regions: list[tuple[_Hook, int] | None] = []
        unordered: list[str] | None = None
        for i, _ in enumerate(visitor.buckets):
            members, hook = await visitor.hooks[i]
            if hook.coarse is None:
                unordered = members
                break
            for g, item in enumerate(hook.coarse):
                regions.append((hook, g) if hook.admit else None)
                window.append(item)
            regions.append((hook, len(hook.coarse)) if hook.admit else None)
            if i < len(tied):
                window.append(tied[i])
        if len(regions) == len(window):
            regions.append(None)
        try:
            g, h = await self.bracket(x, window, 0, len(window))
            if g != h:
                g = self.stable_gap(x, window, g, h)
            region = regions[g]
            if region is not None and (admit := region[0].admit) is not None:
                hook, sub = region
                visitor.joined = hook
                admit(x, sub)
                return None
            if g < len(window):
                return x, window[g], False
            if unordered is not None:
                return x, self.board.input_order(unordered)[0], True
            return x, below, False
        finally:
            # Every bucket it did not join must hear so, or its sub-buckets never close.
            for i in range(len(visitor.buckets)):
                _, hook = await visitor.hooks[i]
                if hook.admit is not None and hook is not visitor.joined:
                    hook.admit(x, None)

    async def assemble(
        self,
        sorted_buckets: list[Blocks],
        pivots: list[str],
        inserted: list[tuple[str, str | None, bool]],
    ) -> Blocks:
        """Buckets and pivots in order with the tied items in their slots."""
        board = self.board
        before: dict[str | None, list[str]] = {}
        joins: dict[str, list[str]] = {}
        for x, anchor, join in inserted:
            if join and anchor is not None:
                joins.setdefault(anchor, []).append(x)
            else:
                before.setdefault(anchor, []).append(x)
        # Items that landed in one slot were never compared with each other: sort them.
        slots = list(before)
        done = await asyncio.gather(*(self.sort(board.input_order(before[s])) for s in slots))
        at = dict(zip(slots, done, strict=True))
        out: Blocks = []
        for j, blocks in enumerate(sorted_buckets):
            for block in blocks:
                if len(block) > 1:
                    out.append(board.input_order(block + joins.pop(block[0], [])))
                    continue
                out.extend(at.pop(block[0], []))
                out.append(block)
            if j < len(pivots):
                out.extend(at.pop(pivots[j], []))
                out.append([pivots[j]])
        out.extend(at.pop(None, []))
        return out

    async def repair(self, blocks: Blocks) -> Blocks:
        """Settle the exact head: ask the neighbour pairs never asked, re-place contradicted items.

        An item is suspect when the judge put it above an item now placed before it; of the two,
        the one with the larger share of contradicted answers moves (both when equal), to the
        place all its answers agree on best. A few rounds at most.
        """
        board = self.board
        head = 0
        while head < len(blocks) and len(blocks[head]) == 1:
            head += 1
        order = [b[0] for b in blocks[:head]]
        for _ in range(self.REPAIR_ROUNDS):
            # Neighbours nearly always met during the sort; the few that did not are asked so
            # that every neighbour pair has an answer (and tie groups are complete).
            await asyncio.gather(
                *(
                    board.ask(a, b)
                    for a, b in zip(order, order[1:], strict=False)
                    if board.rel(a, b) is None
                )
            )
            pos = {x: i for i, x in enumerate(order)}
            bad = [
                (x, y)
                for x in order
                for y, v in board.said[x].items()
                if v == 1 and y in pos and pos[y] < pos[x]
            ]
            if not bad:
                break
            count: dict[str, int] = {}
            for pair in bad:
                for z in pair:
                    count[z] = count.get(z, 0) + 1
            share = {
                z: c / max(1, sum(1 for v in board.said[z].values() if v)) for z, c in count.items()
            }
            movers = {z for x, y in bad for z in (x, y) if share[z] >= share[y if z == x else x]}
            base = [x for x in order if x not in movers]
            moving = [x for x in order if x in movers]
            found = await asyncio.gather(*(self.locate(x, base) for x in moving))
            at: dict[int, list[str]] = {}
            for x, g in zip(moving, found, strict=True):
                at.setdefault(g, []).append(x)
            keys = list(at)
            done = await asyncio.gather(*(self.sort(at[g]) for g in keys))
            slots = dict(zip(keys, done, strict=True))
            new: list[str] = []
            for i in range(len(base) + 1):
                for block in slots.get(i, []):
                    new.extend(block)
                if i < len(base):
                    new.append(base[i])
            if new == order:
                break
            order = new
        return [[x] for x in order] + blocks[head:]


@strategy("sample", options=("visit_ties",))
async def sample_sort(
    items: Sequence[str], compare: Compare, *, top_k: int | None = None, visit_ties: bool = False
) -> Ordering:
    """Parallel sample sort for a noisy judge (the default strategy).

    1. About sqrt(n) pivots, spread over the input order, are ordered by asking every pair of
       them at once (each pivot's place rests on all its answers, not on one).
    2. Every other item binary-searches the pivots, all items at once, stepping around ties.
       A bucket is sorted the same way, recursively, as soon as no running search can still
       add to it.
    3. An item that tied with every pivot left in its search joins the bucket on its
       input-order side of them (``visit_ties=True``, config ``sort.visit_ties``, switches on
       the slower alternative: it visits the buckets on both sides, searches their own pivots
       as soon as those are sorted and joins the sub-bucket it lands in).
    4. The ends of each large bucket are asked against the pivots one step out (a wrong answer
       high in a search leaves its item at an end of its bucket). A final repair asks the
       neighbour pairs never asked and re-places every item an answer contradicts, where all
       its answers agree best.

    With ``top_k``, buckets that start at or behind k stay unsorted, one block each, and the
    repair runs over the exact head only.
    """
    board = _Board(items, compare)
    sorter = _SampleSort(board, visit_ties=visit_ties)
    blocks = await sorter.sort(list(items), top_k)
    await asyncio.gather(*sorter.checks)
    blocks = await sorter.repair(blocks)
    return _flatten(blocks, board.tied)


# -- plan (the dry run) ---------------------------------------------------------------

_comparisons_memo: dict[tuple[Any, ...], float] = {}


async def simulated_comparisons(
    strategy: str,
    n: int,
    top_k: int | None = None,
    orderings: int = 3,
    tie_share: float = 0.0,
    options: dict[str, Any] | None = None,
) -> float:
    """Distinct pairs ``strategy`` asks to order ``n`` items, on a simulated judge.

    The judge knows a true order and answers by it, except that it leaves a ``tie_share`` of
    the pairs tied (drawn per pair from a seeded generator). The mean over ``orderings``
    random input orders. ``options``: the strategy's own settings, as the sort stage passes them.
    The ordering's own plan: the dry run counts the pairwise calls through it.
    """
    settings = dict(options or {})
    key = (strategy, n, top_k, orderings, round(tie_share, 6), tuple(sorted(settings.items())))
    if key in _comparisons_memo:
        return _comparisons_memo[key]
    if n < 2:
        return 0.0
    total = 0
    for seed in range(max(1, orderings)):
        items = [f"c{i}" for i in range(n)]
        draw = random.Random(seed)
        truth = {item: rank for rank, item in enumerate(draw.sample(items, n))}
        tied = {
            frozenset((a, b))
            for i, a in enumerate(items)
            for b in items[i + 1 :]
            if draw.random() < tie_share
        }
        asked: set[frozenset[str]] = set()

        async def compare(a: str, b: str) -> int:
            pair = frozenset((a, b))
            asked.add(pair)  # noqa: B023  (each ordering has its own sets)
            if pair in tied:  # noqa: B023
                return 0
            return -1 if truth[a] < truth[b] else 1  # noqa: B023

        await STRATEGIES[strategy](items, compare, top_k=top_k, **settings)
        total += len(asked)
    _comparisons_memo[key] = total / max(1, orderings)
    return _comparisons_memo[key]


__all__ = [
    "OPTIONS",
    "STRATEGIES",
    "Compare",
    "Ordering",
    "Strategy",
    "binary_insertion",
    "merge_rounds",
    "options_for",
    "parallel_quicksort",
    "sample_sort",
    "simulated_comparisons",
    "strategy",
]
