"""Pairwise comparisons of one question's candidates, each pair asked in both orders."""

from __future__ import annotations

import asyncio
from typing import Any

from ragaudit.cache import Judged
from ragaudit.dataset import Question
from ragaudit.judging._judge import Judge, Spend, parsed
from ragaudit.prompts import PAIRWISE, PairwiseInput
from ragaudit.windowing import fit_text, json_cost

# Fewer tokens than this left for each context: the question alone fills the window.
_MIN_ROOM = 32
# A cl100k token spans at most a few dozen characters (see the grading's cut).
_CHARS_PER_TOKEN = 32


class PairwiseJudge:
    """Pairwise judge calls for one question: each pair asked once, in both orders.

    ``compare(a, b)`` is the comparison the ordering strategies take: -1 when ``a`` answers the
    question better, 1 when ``b`` does, 0 for a tie, a position-biased disagreement or a failed
    call. Every pair asked is kept as a row for the ``comparisons`` table.
    """

    def __init__(
        self,
        judge: Judge,
        question: Question,
        texts: dict[str, str],
        *,
        both_orders: bool = True,
        bar: Any = None,
    ):
        self.judge, self.question, self.texts, self.bar = judge, question, texts, bar
        self.both_orders = both_orders
        self.rows: list[dict[str, Any]] = []
        self.spend = Spend()
        self.failed = 0
        """Comparisons (pairs) left without a preference because a call failed."""
        self._done: dict[frozenset[str], asyncio.Future[tuple[str, int]]] = {}

    @property
    def calls(self) -> int:
        """Judge answers asked."""
        return self.spend.calls

    async def _ask(self, first: str, second: str, texts: dict[str, str]) -> Judged[Any]:
        inp = PairwiseInput(
            question=self.question.question, context_1=texts[first], context_2=texts[second]
        )
        out = await self.judge.ask(PAIRWISE, inp, self.question.language)
        self.spend.add(out)
        return out

    async def _both(
        self, a: str, b: str, texts: dict[str, str]
    ) -> tuple[Judged[Any], Judged[Any] | None]:
        if self.both_orders:
            ab, ba = await asyncio.gather(self._ask(a, b, texts), self._ask(b, a, texts))
            return ab, ba
        return await self._ask(a, b, texts), None

    def _fitted(self, a: str, b: str) -> tuple[dict[str, str], str] | None:
        """The pair cut to fit one prompt (each context's head), with a note; None if it can't.

        A context that fits in half the room stays whole and the other gets the rest;
        otherwise each gets half. Both orders are asked on the same fitted texts.
        """
        empty = PairwiseInput(question=self.question.question, context_1="", context_2="")
        room = self.judge.room(PAIRWISE, empty, self.question.language)
        if room < 2 * _MIN_ROOM:
            return None
        model = self.judge.model
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
        pa, pb = parsed(ab), parsed(ba)
        votes = []
        if pa is not None:
            votes.append(-1 if pa.better == 1 else 1)
        if pb is not None:
            votes.append(-1 if pb.better == 2 else 1)
        failed = not ab.ok or (ba is not None and not ba.ok)
        self.failed += failed
        # Agreement in both orders is a preference; disagreement is position bias: a tie.
        # A failed call leaves no preference either: the strategies keep the engine order.
        outcome = votes[0] if votes and not failed and all(v == votes[0] for v in votes) else 0
        errors = [j.error for j in (ab, ba) if j is not None and not j.ok and j.error]
        self.rows.append(
            {
                "method": "pairwise",
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


__all__ = ["PairwiseJudge"]
