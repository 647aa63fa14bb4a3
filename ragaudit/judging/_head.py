"""Ordering only the head: the top k of the graded candidates, with setwise or listwise calls.

Two built-in methods, registered by name in ``ragaudit.registry.HEAD_METHODS`` (a plugin's
registers the same way, with :func:`head_method`; ``sort.head_method`` names one):

- ``setwise``: a heap whose every sift is one call choosing the best of a node and its
  children (``sort.set_size`` candidates a call); the top k are taken off the heap one by one.
- ``window``: listwise windows of ``sort.window`` candidates slid from the bottom of the pool
  to its top, each call putting its window in order, so the best rise to the head in one pass
  (one more pass per further ``window - step`` positions when k is larger).

A call that fails changes nothing (the pool keeps its order there), and is counted. Within one
prompt the candidates are shown in an order shuffled from their ids (:func:`shown_order`).
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol

from ragaudit.dataset import Question
from ragaudit.judging._judge import Judge, Spend, parsed, shown_order
from ragaudit.prompts import LISTWISE, SETWISE, ListwiseInput, Passage, Prompt, SetwiseInput
from ragaudit.registry import HEAD_METHODS as REGISTRY
from ragaudit.windowing import fit_text


class HeadSettings(Protocol):
    """The ``sort`` settings a head method reads (``OrderOptions`` carries them)."""

    @property
    def window(self) -> int:
        """Candidates per listwise call."""
        ...

    @property
    def votes(self) -> int:
        """Further listwise answers on the top window."""
        ...

    @property
    def set_size(self) -> int:
        """Candidates per setwise call."""
        ...


OrderFn = Callable[[list[str], "SetJudge", int, HeadSettings], Awaitable[list[str]]]


@dataclass(frozen=True)
class HeadMethod:
    """A registered head method: how it orders a pool, and what that asks (for the dry run).

    Attributes:
        name: Its name (``sort.head_method``; the ``ranking`` table records ``head:<name>``).
        order: Puts the top ``k`` of a pool first, asking the judge.
        calls: The calls it asks for a pool of ``n`` and a head of ``k``.
        shown: The passages one call shows.
        prompt: The prompt its calls use: its version is part of what a stored head rests on.
    """

    name: str
    order: OrderFn
    calls: Callable[[int, int, HeadSettings], int]
    shown: Callable[[HeadSettings], int]
    prompt: Prompt[Any, Any]


HEAD_METHODS: dict[str, HeadMethod] = REGISTRY.units
"""The registered head methods by name: the registry's own table (``ragaudit.registry``)."""


def head_method(
    name: str,
    *,
    prompt: Prompt[Any, Any],
    calls: Callable[[int, int, HeadSettings], int],
    shown: Callable[[HeadSettings], int],
) -> Callable[[OrderFn], OrderFn]:
    """Register the decorated ordering function as head method ``name`` (built-in or a plugin's).

    It is called as ``order(pool, judge, k, settings)`` and returns the pool with its top ``k``
    first.
    """

    def deco(fn: OrderFn) -> OrderFn:
        qualified = REGISTRY.qualify(name, fn.__module__)
        REGISTRY.add(
            qualified, HeadMethod(qualified, fn, calls, shown, prompt), module=fn.__module__
        )
        return fn

    return deco


class SetJudge:
    """Setwise and listwise calls for one question, each kept as a ``comparisons`` row."""

    def __init__(self, judge: Judge, question: Question, texts: dict[str, str]) -> None:
        self.judge, self.question, self.texts = judge, question, texts
        self.rows: list[dict[str, Any]] = []
        self.spend = Spend()

    def _passages(self, ids: list[str], salt: str = "") -> tuple[list[str], list[Passage]]:
        shown = shown_order(ids, salt)
        return shown, [Passage(id=i, text=self.texts[c]) for i, c in enumerate(shown, start=1)]

    async def _ask(
        self, prompt: Any, model: Any, ids: list[str], salt: str = ""
    ) -> tuple[list[str], Any, str | None]:
        """One setwise/listwise answer; over the window, asked again on each passage's head.

        Each passage then gets an equal share of the room left by the prompt without them,
        and the row's note says so.
        """
        q = self.question
        shown, passages = self._passages(ids, salt)
        out = await self.judge.ask(
            prompt, model(question=q.question, passages=passages), q.language
        )
        note = None
        if out.status == "too_long" and not out.calls:
            # Not sent (over the window by our count): only the answer on the heads counts.
            empty = [Passage(id=i, text="") for i in range(1, len(shown) + 1)]
            room = self.judge.room(prompt, model(question=q.question, passages=empty), q.language)
            share = room // max(1, len(shown)) - 4  # each passage's JSON keys and separators
            if share >= 16:
                cut = [
                    Passage(
                        id=p.id, text=fit_text(p.text[: share * 32], share, self.judge.model)[0][0]
                    )
                    for p in passages
                ]
                out = await self.judge.ask(
                    prompt, model(question=q.question, passages=cut), q.language
                )
                note = f"set over the judge's window: each passage cut to {share} tokens"
        self.spend.add(out)
        return shown, out, note

    def _row(
        self, method: str, shown: list[str], chosen: list[str] | None, out: Any, note: str | None
    ) -> None:
        v = parsed(out)
        self.rows.append(
            {
                "method": method,
                "first_id": shown[0],
                "second_id": shown[1] if len(shown) > 1 else None,
                "shown_ids": shown,
                "chosen_ids": chosen,
                "reason_ab": v.reason if v is not None else None,
                "outcome": "ok" if chosen is not None else "none",
                "status": "ok" if chosen is not None else "failed",
                "error": None if chosen is not None else (out.error or f"status {out.status}"),
                "note": note,
            }
        )

    async def best(self, ids: list[str]) -> str | None:
        """The id the judge finds best among ``ids``; None when the call failed."""
        shown, out, note = await self._ask(SETWISE, SetwiseInput, ids)
        v = parsed(out)
        chosen = shown[v.best - 1] if v is not None and 1 <= v.best <= len(shown) else None
        if chosen is None and out.ok:
            out.error = f"answer names passage {v.best if v else '?'}, not one shown"
            self.spend.failed += 1
        self._row("setwise", shown, None if chosen is None else [chosen], out, note)
        return chosen

    async def rank(self, ids: list[str], salt: str = "") -> list[str] | None:
        """``ids`` in the judge's order, best first; None when the call failed.

        Ids the answer leaves out follow in the order they had; repeated and unknown ids in
        the answer are dropped. ``salt`` shows the same ids in another order.
        """
        shown, out, note = await self._ask(LISTWISE, ListwiseInput, ids, salt)
        v = parsed(out)
        ranked: list[str] | None = None
        if v is not None:
            named = [shown[i - 1] for i in dict.fromkeys(v.ranking) if 1 <= i <= len(shown)]
            if named:
                ranked = named + [c for c in ids if c not in set(named)]
            else:
                out.error = "answer names no passage shown"
                self.spend.failed += 1
        self._row("listwise", shown, ranked, out, note)
        return ranked


async def setwise_heap(pool: list[str], judge: SetJudge, k: int, *, set_size: int = 4) -> list[str]:
    """The top ``k`` of ``pool`` by a heap with ``set_size - 1`` children a node.

    Sifts of one level of the heap touch disjoint subtrees, so they are asked at once.
    """
    arr = list(pool)
    d = max(1, set_size - 1)

    async def sift(i: int, n: int) -> None:
        while True:
            kids = [c for c in range(d * i + 1, d * i + 1 + d) if c < n]
            if not kids:
                return
            best = await judge.best([arr[i]] + [arr[c] for c in kids])
            if best is None or best == arr[i]:
                return
            c = next(c for c in kids if arr[c] == best)
            arr[i], arr[c] = arr[c], arr[i]
            i = c

    n = len(arr)
    last = (n - 2) // d  # the last node with a child
    # Nodes by depth, deepest first: a node's sift only runs below it, over heaps built before.
    depth_of: dict[int, list[int]] = {}
    for i in range(last + 1):
        depth, j = 0, i
        while j > 0:
            j, depth = (j - 1) // d, depth + 1
        depth_of.setdefault(depth, []).append(i)
    for depth in sorted(depth_of, reverse=True):
        await asyncio.gather(*(sift(i, n) for i in depth_of[depth]))
    head: list[str] = []
    while arr and len(head) < k:
        head.append(arr[0])
        n -= 1
        arr[0] = arr[n]
        arr.pop()
        await sift(0, n)
    return head + [c for c in pool if c not in set(head)]


async def sliding_window(
    pool: list[str], judge: SetJudge, k: int, *, window: int = 20, votes: int = 2
) -> list[str]:
    """``pool`` with its top ``k`` put first by listwise windows slid from the bottom up.

    The window moves up by half its size, so each pass brings the best half-window to the top;
    a larger ``k`` takes more passes, each starting below the positions already settled. Then
    the top window is asked ``votes`` more times, each shown in another order, and put in the
    order of its mean position over all those answers: one listwise answer misplaces a few
    neighbours, and answers shown in different orders misplace different ones.
    """
    arr = list(pool)
    n = len(arr)
    w = max(2, window)
    step = max(1, w // 2)
    start = 0
    while start < min(k, n) and n - start > 1:
        end = n
        while True:
            lo = max(start, end - w)
            ranked = await judge.rank(arr[lo:end])
            if ranked is not None:
                arr[lo:end] = ranked
            if lo == start:
                break
            end -= step
        start += w - step
    top = arr[: min(n, max(w, k))]
    if votes > 0 and len(top) > 1:
        answers = await asyncio.gather(*(judge.rank(top, f"vote {v}") for v in range(votes)))
        orders = [top] + [a for a in answers if a is not None]
        mean = {c: sum(o.index(c) for o in orders) / len(orders) for c in top}
        arr[: len(top)] = sorted(top, key=lambda c: mean[c])  # stable: ties keep the pass's order
    return arr


def window_calls(n: int, k: int, window: int = 20, votes: int = 2) -> int:
    """Listwise calls :func:`sliding_window` asks for a pool of ``n`` (for the dry run)."""
    w = max(2, window)
    step = max(1, w // 2)
    calls, start = 0, 0
    while start < min(k, n) and n - start > 1:
        end = n
        while True:
            calls += 1
            if max(start, end - w) == start:
                break
            end -= step
        start += w - step
    return calls + (votes if min(n, max(w, k)) > 1 else 0)


def setwise_calls(n: int, k: int, set_size: int = 4) -> int:
    """About the setwise calls :func:`setwise_heap` asks for ``n`` (for the dry run).

    Building asks once per node with a child (a sift that moves asks again below, not
    counted); each of the k extractions sifts down the heap's depth.
    """
    d = max(1, set_size - 1)
    if n < 2:
        return 0
    depth = max(1, math.ceil(math.log(n * (d - 1) + 1, d))) if d > 1 else n
    return (n - 2) // d + 1 + min(k, n) * depth


@head_method(
    "setwise",
    prompt=SETWISE,
    calls=lambda n, k, s: setwise_calls(n, k, s.set_size),
    shown=lambda s: s.set_size,
)
async def _setwise(pool: list[str], judge: SetJudge, k: int, s: HeadSettings) -> list[str]:
    return await setwise_heap(pool, judge, k, set_size=s.set_size)


@head_method(
    "window",
    prompt=LISTWISE,
    calls=lambda n, k, s: window_calls(n, k, s.window, s.votes),
    shown=lambda s: s.window,
)
async def _window(pool: list[str], judge: SetJudge, k: int, s: HeadSettings) -> list[str]:
    return await sliding_window(pool, judge, k, window=s.window, votes=s.votes)


def plan_head(
    method: str, n: int, k: int, settings: HeadSettings
) -> tuple[int, int, Prompt[Any, Any]]:
    """The head's plan for a pool of ``n``: (calls, passages shown per call, the prompt).

    Raises:
        KeyError: no such head method; the message lists the known ones.
    """
    unit: HeadMethod = REGISTRY.get(method)
    return unit.calls(n, k, settings), unit.shown(settings), unit.prompt


__all__ = [
    "HEAD_METHODS",
    "HeadMethod",
    "HeadSettings",
    "SetJudge",
    "head_method",
    "plan_head",
    "setwise_calls",
    "setwise_heap",
    "sliding_window",
    "window_calls",
]
