"""Nugget assignment and TREC's recall scores.

The answer is judged against the nuggets in batches (:data:`NUGGETS_PER_CALL` a call), each
nugget ``support``, ``partial_support`` or ``not_support``. The four scores are TREC 2024 RAG's
(AutoNuggetizer): over the vital nuggets or all of them, *strict* counts only ``support`` and
the other form gives ``partial_support`` half a point.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from ragaudit.prompts.nugget_assignment import AssignInput, Assignments

NUGGETS_PER_CALL = 10
"""Nuggets judged in one call: few enough that the judge keeps track of each one."""

_POINTS = {"support": 1.0, "partial_support": 0.5, "not_support": 0.0}

SCORES = (
    "nugget_recall_strict_vital",
    "nugget_recall_vital",
    "nugget_recall_strict_all",
    "nugget_recall_all",
)


class AssignmentError(Exception):
    """The judge's verdicts do not cover the nuggets asked about; the message says which."""


async def assign_nuggets(
    judge: Callable[[AssignInput], Awaitable[Assignments]],
    question: str,
    answer: str,
    nuggets: list[dict[str, Any]],
    per_call: int = NUGGETS_PER_CALL,
) -> list[dict[str, Any]]:
    """Each nugget with its ``verdict`` and ``reason``, the batches asked in parallel.

    Raises:
        AssignmentError: a batch's answer gave no verdict for some nugget of it.
    """
    batches = [nuggets[i : i + per_call] for i in range(0, len(nuggets), per_call)]

    async def one(batch: list[dict[str, Any]]) -> list[dict[str, Any]]:
        out = await judge(
            AssignInput(question=question, answer=answer, nuggets=[n["text"] for n in batch])
        )
        by_position = {a.nugget: a for a in out.assignments}
        missing = [k for k in range(1, len(batch) + 1) if k not in by_position]
        if missing:
            raise AssignmentError(
                f"the judge gave no verdict for nugget(s) {missing} of a batch of {len(batch)}"
            )
        return [
            {**n, "verdict": by_position[k].verdict, "reason": by_position[k].reason}
            for k, n in enumerate(batch, start=1)
        ]

    done = await asyncio.gather(*(one(b) for b in batches))
    return [n for b in done for n in b]


def nugget_scores(assigned: list[dict[str, Any]]) -> dict[str, float | None]:
    """TREC's four nugget recall scores of judged nuggets (None where there is no nugget).

    ``strict`` counts ``support`` as 1 and the rest as 0; the other form counts
    ``partial_support`` as 0.5. ``vital`` scores divide by the vital nuggets, ``all`` by all.
    """

    def mean(items: list[dict[str, Any]], strict: bool) -> float | None:
        if not items:
            return None
        points = [
            (1.0 if n["verdict"] == "support" else 0.0) if strict else _POINTS[n["verdict"]]
            for n in items
        ]
        return sum(points) / len(points)

    vital = [n for n in assigned if n["importance"] == "vital"]
    return {
        "nugget_recall_strict_vital": mean(vital, True),
        "nugget_recall_vital": mean(vital, False),
        "nugget_recall_strict_all": mean(assigned, True),
        "nugget_recall_all": mean(assigned, False),
    }


__all__ = ["NUGGETS_PER_CALL", "SCORES", "AssignmentError", "assign_nuggets", "nugget_scores"]
