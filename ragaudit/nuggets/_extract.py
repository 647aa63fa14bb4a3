"""Nuggets from all of a question's relevant contexts, map-reduce within the judge's window.

*Map*: the contexts (split where one is longer than a prompt holds, never truncated) are
packed first-fit decreasing into prompts that fill the window less the instruction and the
answer budget; each group is asked for its nuggets, vital or okay, with the positions of the
contexts that state each one, which the code maps back to context ids. The groups are asked in
parallel, not as a chain: every context is read once, and no group waits for another.

*Reduce*: the nuggets of all groups are merged in rounds. A merge prompt holds as many nuggets
as fit with room for an answer as long as its input; the judge returns one nugget per fact and
the inputs each stands for, and the code takes the union of their context ids. An input the
judge leaves out is kept as it was, so a merge can drop repetition but never a fact. Rounds
continue until one prompt holds them all; a round that removes nothing is retried once with the
nuggets interleaved differently across prompts, then stops with a note.

Finally the list is capped at ``max_nuggets``: vital before okay, then by how many contexts
state a nugget (a fact many sources repeat is more likely central).
"""

from __future__ import annotations

import asyncio
import random
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

from ragaudit.cache import structured_messages
from ragaudit.judging import Judge
from ragaudit.prompts import Prompt
from ragaudit.prompts.nuggets import (
    EXTRACT,
    MERGE_NUGGETS,
    ExtractInput,
    MergeNuggetsInput,
)
from ragaudit.windowing import (
    CallCounts,
    PlannedCalls,
    QuestionJudge,
    WindowedWriter,
    pack,
    verified,
)

# Tokens one merged nugget's framing adds to the answer besides its text: the JSON keys, the
# importance and a few input positions.
_PER_NUGGET = 24


@dataclass
class Nugget:
    """One atomic fact, its importance and the ids of the contexts that state it."""

    text: str
    importance: str
    context_ids: list[str]

    def as_row(self) -> dict[str, Any]:
        """The nugget as a plain dict (what the nuggets table and the metrics read)."""
        return {"text": self.text, "importance": self.importance, "context_ids": self.context_ids}


@dataclass
class NuggetResult(CallCounts):
    """A question's nuggets and how they were made (with the calls it took)."""

    nuggets: list[Nugget]
    status: str
    """``ok``; ``partial`` (some contexts or merges failed: the nuggets may miss facts);
    ``insufficient`` (no context holds a fact that answers the question); ``failed``."""
    notes: list[str] = field(default_factory=list)
    extracted: int = 0
    """Nuggets the map step wrote, before merging."""
    capped: int = 0
    """Nuggets left out by the cap."""
    failed_groups: int = 0
    """Groups of contexts whose nuggets could not be extracted."""
    failed_merges: int = 0
    """Merges that failed (their inputs were kept unmerged)."""


class NuggetExtractor(WindowedWriter):
    """Extracts one question's nuggets within the judge's window.

    Args:
        setup: the question, its judge and the room its prompts get (``answer_tokens``: the
            budget of one extraction call).
        max_nuggets: the cap on the final list (vital first).
    """

    map_prompt = EXTRACT
    merge_prompt = MERGE_NUGGETS

    def __init__(self, setup: QuestionJudge, *, max_nuggets: int = 30) -> None:
        super().__init__(setup)
        self.max_nuggets = max_nuggets
        self.result = self.spent = NuggetResult([], "ok")

    def map_input(self, texts: list[str]) -> ExtractInput:
        """The extraction prompt's input: the question and the contexts."""
        return ExtractInput(question=self.question, contexts=texts)

    def merge_input(self, texts: list[str]) -> MergeNuggetsInput:
        """The merge prompt's input: the question and the nuggets' texts."""
        return MergeNuggetsInput(question=self.question, nuggets=texts)

    def _fits(self, prompt: Prompt, inp: BaseModel, max_tokens: int) -> bool:
        return self.fits(self.render(prompt, inp)[1], max_tokens)

    async def _ask(
        self, prompt: Prompt, inp: BaseModel, max_tokens: int
    ) -> tuple[Any, str, str | None]:
        """One structured call: (value, ``ok``/``split``/``failed``, error)."""
        judged, outcome = await self.ask(prompt, prompt.messages(inp, self.lang), max_tokens)
        return judged.value if judged.ok else None, outcome, judged.error

    # -- map ------------------------------------------------------------------------------

    def pieces(self, contexts: list[tuple[str, str]]) -> list[tuple[str, str, int]]:
        """(context id, text, prompt cost) per context, split where one prompt cannot hold it."""
        out = []
        for cid, text in contexts:
            if text and text.strip():
                out += [(cid, part, cost) for part, cost in self.fit_text(text, self.usable)]
        return out

    def groups(self, pieces: list[tuple[str, str, int]]) -> list[list[tuple[str, str, int]]]:
        """Pieces packed into prompts that fill the window; each checked on its rendering."""
        packed = [[pieces[i] for i in g] for g in pack([p[2] for p in pieces], self.usable)]
        position = {id(p): k for k, p in enumerate(pieces)}
        return verified(packed, self._extract_fits, lambda p: p[2], lambda p: position[id(p)])

    def _extract_input(self, group: list[tuple[str, str, int]]) -> ExtractInput:
        return self.map_input([p[1] for p in group])

    def _extract_fits(self, group: list[tuple[str, str, int]]) -> bool:
        return self._fits(EXTRACT, self._extract_input(group), self.answer_tokens)

    async def extract(self, group: list[tuple[str, str, int]], depth: int = 0) -> list[Nugget]:
        """The nuggets of one group, asked again in halves when its answer does not fit."""
        value, outcome, error = await self._ask(
            EXTRACT, self._extract_input(group), self.answer_tokens
        )
        if outcome == "split" and len(group) > 1 and depth < 6:
            mid = len(group) // 2
            a, b = await asyncio.gather(
                self.extract(group[:mid], depth + 1), self.extract(group[mid:], depth + 1)
            )
            return a + b
        if outcome != "ok":
            self.result.failed_groups += 1
            self.result.notes.append(
                f"nuggets of {len(group)} context piece(s) ({', '.join(p[0] for p in group)}) "
                f"not extracted: {error}"
            )
            return []
        found, unsourced = [], 0
        for n in value.nuggets:
            ids = [group[k - 1][0] for k in n.sources if 1 <= k <= len(group)]
            if not n.text.strip():
                continue
            if not ids:
                # A fact no given context states is the judge's own: it is no ground truth.
                unsourced += 1
                continue
            found.append(Nugget(n.text.strip(), n.importance, list(dict.fromkeys(ids))))
        if unsourced:
            self.result.notes.append(
                f"{unsourced} nugget(s) named no context of their prompt and were left out"
            )
        return found

    # -- reduce ---------------------------------------------------------------------------

    def _merge_input(self, group: list[Nugget]) -> MergeNuggetsInput:
        return self.merge_input([n.text for n in group])

    def _merge_budget(self, group: list[Nugget]) -> int:
        # An answer as long as its inputs, so a judge that merges nothing still fits.
        return sum(self.cost(n.text) + _PER_NUGGET for n in group) + _PER_NUGGET

    def merge_groups(self, nuggets: list[Nugget], interleave: int = 0) -> list[list[Nugget]]:
        """Nuggets in consecutive runs (or interleaved) whose merge prompt and answer fit."""
        capacity = self.window - self.reserve - self.merge_overhead - _PER_NUGGET
        costs = [2 * (self.cost(n.text) + _PER_NUGGET) for n in nuggets]
        total = sum(costs)
        n_groups = max(1, -(-total // max(1, capacity)))
        order = list(range(len(nuggets)))
        if interleave:
            random.Random(interleave).shuffle(order)
        groups: list[list[Nugget]] = [[] for _ in range(n_groups)]
        used = [0] * n_groups
        for i in order:
            g = min(range(n_groups), key=lambda k: used[k])
            groups[g].append(nuggets[i])
            used[g] += costs[i]
        out = []
        for group in groups:
            # Balanced groups may still run over on rendering: halve the ones that do.
            out += self._fitted(group)
        return [g for g in out if g]

    def _fitted(self, group: list[Nugget]) -> list[list[Nugget]]:
        if len(group) <= 1 or self._fits(
            MERGE_NUGGETS, self._merge_input(group), self._merge_budget(group)
        ):
            return [group]
        mid = len(group) // 2
        return self._fitted(group[:mid]) + self._fitted(group[mid:])

    async def merge(self, group: list[Nugget]) -> list[Nugget]:
        """One de-duplicated list from ``group``; every input the judge left out is kept."""
        if len(group) <= 1:
            return group
        value, outcome, error = await self._ask(
            MERGE_NUGGETS, self._merge_input(group), self._merge_budget(group)
        )
        if outcome == "split" and len(group) > 2:
            mid = len(group) // 2
            a, b = await asyncio.gather(self.merge(group[:mid]), self.merge(group[mid:]))
            return a + b
        if outcome != "ok":
            self.result.failed_merges += 1
            self.result.notes.append(f"a merge of {len(group)} nuggets failed, kept: {error}")
            return group
        out: list[Nugget] = []
        used: set[int] = set()
        for m in value.nuggets:
            members = [k - 1 for k in m.merged_from if 1 <= k <= len(group) and k - 1 not in used]
            if not members or not m.text.strip():
                continue
            used.update(members)
            ids = list(dict.fromkeys(i for k in members for i in group[k].context_ids))
            vital = m.importance == "vital" or any(group[k].importance == "vital" for k in members)
            out.append(Nugget(m.text.strip(), "vital" if vital else "okay", ids))
        out += [n for k, n in enumerate(group) if k not in used]
        return out

    async def reduce(self, nuggets: list[Nugget]) -> list[Nugget]:
        """Merge rounds until one prompt holds every nugget, or no round removes any."""
        retried = False
        while len(nuggets) > 1:
            groups = self.merge_groups(nuggets, interleave=1 if retried else 0)
            merged = await asyncio.gather(*(self.merge(g) for g in groups))
            after = [n for m in merged for n in m]
            if len(groups) == 1:
                return after
            if len(after) >= len(nuggets):
                if retried:
                    self.result.notes.append(
                        f"{len(after)} nuggets do not fit one merge prompt and a round removed "
                        "no duplicate: some facts may be listed twice"
                    )
                    return after
                retried = True
            nuggets = after
        return nuggets

    # -- the whole ------------------------------------------------------------------------

    def cap(self, nuggets: list[Nugget]) -> list[Nugget]:
        """At most ``max_nuggets``: vital first, then by the number of contexts stating it."""
        order = sorted(
            range(len(nuggets)),
            key=lambda k: (nuggets[k].importance != "vital", -len(nuggets[k].context_ids), k),
        )
        kept = [nuggets[k] for k in order[: self.max_nuggets]]
        self.result.capped = len(nuggets) - len(kept)
        if self.result.capped:
            self.result.notes.append(
                f"{self.result.capped} nugget(s) over the cap of {self.max_nuggets} left out"
            )
        return kept

    def plan(self, contexts: list[tuple[str, str]], stand_in: str) -> PlannedCalls | None:
        """The requests :meth:`run` sends for ``contexts`` if every nugget were ``stand_in``.

        The map calls are exactly :meth:`run`'s; the merge is one call over a nugget per
        context, which the rounds are while the nuggets fit one prompt. None when :meth:`run`
        sends nothing (no context, or the window leaves too little room for one). Calls
        nothing: what the dry run counts.
        """
        contexts = [(i, t) for i, t in contexts if t and t.strip()]
        if not contexts or self.too_small():
            return None
        answers = [
            structured_messages(
                EXTRACT.output_model, self.render(EXTRACT, self._extract_input(g))[0]
            )
            for g in self.groups(self.pieces(contexts))
        ]
        merges = []
        if len(contexts) > 1:
            inp = self.merge_input([stand_in] * len(contexts))
            merges.append(
                structured_messages(MERGE_NUGGETS.output_model, self.render(MERGE_NUGGETS, inp)[0])
            )
        return PlannedCalls(answers, merges)

    async def run(self, contexts: list[tuple[str, str]]) -> NuggetResult:
        """The nuggets of ``contexts`` (id, text), in the order the judge's lists give them."""
        r = self.result
        small = self.too_small()
        if small:
            r.status = "failed"
            r.notes.append(small)
            return r
        if not contexts:
            r.status = "insufficient"
            r.notes.append("no relevant context")
            return r
        groups = self.groups(self.pieces(contexts))
        found = await asyncio.gather(*(self.extract(g) for g in groups))
        nuggets = [n for f in found for n in f]
        r.extracted = len(nuggets)
        if not nuggets:
            r.status = "failed" if r.failed_groups else "insufficient"
            if not r.failed_groups:
                r.notes.append("no relevant context holds a fact that answers the question")
            return r
        r.nuggets = self.cap(await self.reduce(nuggets))
        # A failed merge keeps its inputs: the list is complete, perhaps with repeats.
        r.status = "partial" if r.failed_groups else "ok"
        return r


async def extract_nuggets(
    judge: Judge,
    question: str,
    lang: str,
    contexts: list[tuple[str, str]],
    *,
    answer_tokens: int = 1024,
    reserve_tokens: int = 0,
    max_nuggets: int = 30,
) -> NuggetResult:
    """The nuggets of one question from its relevant ``contexts`` (id, text)."""
    setup = QuestionJudge(judge, question, lang, answer_tokens, reserve_tokens)
    return await NuggetExtractor(setup, max_nuggets=max_nuggets).run(contexts)


__all__ = ["Nugget", "NuggetExtractor", "NuggetResult", "extract_nuggets"]
