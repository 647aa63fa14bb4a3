"""Ordering strategies over an async pairwise comparison.

``compare(a, b)`` returns -1 when ``a`` should come first, 1 when ``b`` should, 0 for a tie.
Strategies are registered by name so the config and the benchmarks can pick them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence

Compare = Callable[[str, str], Awaitable[int]]
Strategy = Callable[[Sequence[str], Compare], Awaitable[tuple[list[str], list[int]]]]

STRATEGIES: dict[str, Strategy] = {}


def strategy(name: str) -> Callable[[Strategy], Strategy]:
    """Register an ordering strategy under ``name``."""

    def deco(fn: Strategy) -> Strategy:
        STRATEGIES[name] = fn
        return fn

    return deco


def _tie_groups(ordered: list[str], tied: set[frozenset[str]]) -> list[int]:
    """Group numbers: neighbours the judge called a tie share a group."""
    groups: list[int] = []
    for i, item in enumerate(ordered):
        if i and frozenset((ordered[i - 1], item)) in tied:
            groups.append(groups[-1])
        else:
            groups.append(groups[-1] + 1 if groups else 0)
    return groups


@strategy("merge")
async def merge_rounds(items: Sequence[str], compare: Compare) -> tuple[list[str], list[int]]:
    """Bottom-up merge sort whose merges at one level all run at once.

    Each merge is sequential, but the merges of a level are independent, so a level costs the
    longest merge, not the sum of them.
    """
    tied: set[frozenset[str]] = set()

    async def cmp(a: str, b: str) -> int:
        result = await compare(a, b)
        if result == 0:
            tied.add(frozenset((a, b)))
        return result

    async def merge(left: list[str], right: list[str]) -> list[str]:
        out: list[str] = []
        i = j = 0
        while i < len(left) and j < len(right):
            # A tie keeps the left run's item first: stable, like the engine order it came in.
            if await cmp(left[i], right[j]) <= 0:
                out.append(left[i])
                i += 1
            else:
                out.append(right[j])
                j += 1
        return out + left[i:] + right[j:]

    runs = [[x] for x in items]
    while len(runs) > 1:
        pairs = [(runs[k], runs[k + 1]) for k in range(0, len(runs) - 1, 2)]
        merged = await asyncio.gather(*(merge(a, b) for a, b in pairs))
        runs = list(merged) + ([runs[-1]] if len(runs) % 2 else [])
    ordered = runs[0] if runs else []
    return ordered, _tie_groups(ordered, tied)


@strategy("insertion")
async def binary_insertion(items: Sequence[str], compare: Compare) -> tuple[list[str], list[int]]:
    """The seed's sequential binary insertion sort: one comparison at a time."""
    tied: set[frozenset[str]] = set()
    ordered: list[str] = []
    for item in items:
        lo, hi = 0, len(ordered)
        while lo < hi:
            mid = (lo + hi) // 2
            result = await compare(item, ordered[mid])
            if result == 0:
                tied.add(frozenset((item, ordered[mid])))
            if result < 0:
                hi = mid
            else:
                lo = mid + 1
        ordered.insert(lo, item)
    return ordered, _tie_groups(ordered, tied)


__all__ = ["STRATEGIES", "Compare", "binary_insertion", "merge_rounds", "strategy"]
