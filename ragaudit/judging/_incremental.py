"""An incremental head order: the previous run's judged head, kept where nothing changed.

A scheduled re-evaluation sees mostly the candidates it saw the night before. Ordering the
head afresh re-asks every listwise window that holds one new candidate anywhere, which on small
pools is every window. Here the previous run's head is the starting point instead:

- a candidate is *kept* when its id, its text and its grade are what they were; anything else
  (a new id, a changed text, a changed grade) is *new*;
- kept head members keep their relative order, whatever happens around them;
- new candidates of the head pool (:func:`ragaudit.judging.head_pool`) are placed into the
  head by one listwise call holding them and the kept head members (each goes below as many
  kept members as the answer ranks above it); when the head lost members and the new ones do
  not fill it, the next kept pool members (by the previous order) join that call as
  challengers that may only take the empty places at the bottom;
- a head with nothing new and nothing to fill is reused as it was, with no call at all.

One listwise call rather than binary insertion with pairwise calls: a pairwise comparison is
asked in both orders, so placing one candidate in a head of ten takes about seven two-passage
prompts, while the listwise call shows each passage once (``bench/bench_judging.py`` measures
both). When the new candidates and the kept head are more than one call holds (``sort.window``),
or the call fails, the head is ordered afresh.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from ragaudit.judging._head import HeadMethod, SetJudge
from ragaudit.prompts import LISTWISE
from ragaudit.registry import HEAD_METHODS

HeadSource = Literal["reused", "inserted", "fresh"]


def head_signature(judge_model: str, temperature: float, head_method: str) -> dict[str, object]:
    """What a judged head depends on beyond its candidates: the judge and the prompt versions.

    Two runs' heads of one question are interchangeable only when these are equal (and the
    method, which the ``ranking`` table records per question).
    """
    method: HeadMethod = HEAD_METHODS.get(head_method)
    return {
        "judge": judge_model,
        "temperature": temperature,
        # The prompts a head may rest on: its method's own, and the listwise call that
        # inserts new candidates into it.
        "prompt_versions": sorted({method.prompt.key, LISTWISE.key}),
    }


@dataclass(frozen=True)
class PreviousHead:
    """One question's judged head in the previous run, and what of it can be trusted now.

    Attributes:
        head: The previous run's exactly ordered head, best first.
        ordered: The previous run's whole judged order (head, then the rest by grade).
        texts: Each previous candidate's text, by id.
        grades: Each previous candidate's grade, by id (absent: its verdict failed).
    """

    head: tuple[str, ...]
    ordered: tuple[str, ...]
    texts: Mapping[str, str] = field(default_factory=dict)
    grades: Mapping[str, int] = field(default_factory=dict)

    def kept(self, texts: Mapping[str, str], grades: Mapping[str, int]) -> set[str]:
        """The candidates of now whose id, text and grade are what they were."""
        return {
            c
            for c, text in texts.items()
            if self.texts.get(c) == text
            and c in grades
            and c in self.grades
            and self.grades[c] == grades[c]
        }


@dataclass
class Placement:
    """What the incremental order of one head came to.

    Attributes:
        head: The head, best first (None: it must be ordered afresh).
        source: ``reused`` (no call) or ``inserted`` (one call placed new candidates).
        reason: Why it must be ordered afresh (when ``head`` is None).
    """

    head: list[str] | None
    source: HeadSource = "reused"
    reason: str | None = None


async def incremental_head(
    previous: PreviousHead,
    pool: Sequence[str],
    relevant: Sequence[str],
    texts: Mapping[str, str],
    grades: Mapping[str, int],
    judge: SetJudge,
    k: int,
    window: int,
) -> Placement:
    """The head of ``pool`` (best first, at most ``k``) built from ``previous``'s head.

    Args:
        previous: The previous run's head of this question.
        pool: The candidates the head is chosen from now (grade groups from the best down).
        relevant: Every relevant candidate now.
        texts: Each candidate's text now.
        grades: Each judged candidate's grade now.
        judge: The question's setwise/listwise judge (its calls are the ``comparisons`` rows).
        k: Head size (``sort.head_k``).
        window: Most candidates one listwise call may hold (``sort.window``).
    """
    kept = previous.kept(texts, grades)
    is_relevant = set(relevant)
    head = [c for c in previous.head if c in kept and c in is_relevant]
    if not head:
        return Placement(None, reason="no member of the previous head is unchanged")
    in_head = set(head)
    new = [c for c in pool if c not in kept]
    vacancies = k - len(head) - len(new)
    # Kept pool members the previous run put below its head, best first by its order: only they
    # can take a place the head lost and the new candidates leave empty.
    earlier = {c: i for i, c in enumerate(previous.ordered)}
    fill = sorted(
        (c for c in pool if c in kept and c not in in_head and c in earlier),
        key=earlier.__getitem__,
    )
    room = window - len(head) - len(new)
    challengers = fill[: max(0, min(room, 2 * vacancies))] if vacancies > 0 else []
    if not new and not challengers:
        return Placement(head[:k], "reused")
    if room < 0:
        return Placement(
            None,
            reason=f"{len(new)} new candidates and {len(head)} kept head members are more than "
            f"one listwise call holds ({window})",
        )
    ranked = await judge.rank([*head, *new, *challengers], salt="insert")
    if ranked is None:
        return Placement(None, reason="the insertion call failed")
    # Each newcomer goes below as many kept members as the answer ranks above it; the kept
    # members' order is the previous run's, whatever this answer says of it.
    slot: dict[str, int] = {}
    above = 0
    for c in ranked:
        if c in in_head:
            above += 1
        else:
            slot[c] = above
    for c in challengers:
        slot[c] = len(head)  # judged below every kept member before: never above one now
    placed: list[str] = []
    by_slot: dict[int, list[str]] = {}
    for c in ranked:
        if c in slot:
            by_slot.setdefault(slot[c], []).append(c)
    for i in range(len(head) + 1):
        placed += by_slot.get(i, [])
        if i < len(head):
            placed.append(head[i])
    return Placement(placed[:k], "inserted")


__all__ = ["HeadSource", "Placement", "PreviousHead", "head_signature", "incremental_head"]
