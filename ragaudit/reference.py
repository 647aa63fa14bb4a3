"""Reference answers within the judge's window: split, pack, answer, merge without loss.

*fast* shuffles the contexts (seeded), packs them first-fit decreasing into prompts that fill
the judge's window minus the instruction and the answer budget, and answers the groups in
parallel; *slow* answers from each context alone, where "unknown" answers are dropped. Both
then merge the partial answers in rounds until one remains.

Exact about the window: every prompt is counted as the gateway sends it
(:func:`~ragaudit.cache.structured_prompt_tokens`: its schema message, the instruction, the
question, the contexts or partial answers as JSON, and the schema as ``response_format``) and
``prompt + max_tokens + reserve <= window`` is checked before the call; the gateway checks the
same budget again and never sends a prompt or a repair over it. A context longer than a
prompt holds is split, never truncated.

Lossless in the merge: a merge is given an answer budget as large as its inputs, so a judge
that compresses nothing still fits; partial answers are grouped so that inputs plus that
budget fit the window. An answer cut off at its budget (``truncated``), a prompt the provider
finds too long (``too_long``) and invalid output with no room for its repair (``no_room``) are
asked again on smaller inputs; a merge of two that still does not fit keeps both side by
side. When the remaining partial answers are too large to merge within the window, the
reference is those answers side by side (a ``join`` node): longer than one call could write,
but complete.
"""

from __future__ import annotations

import asyncio
import random
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from ragaudit.cache import FakeRequest, register_fake_answer, structured_messages
from ragaudit.lang import tokens as text_tokens
from ragaudit.prompts import Prompt
from ragaudit.prompts.reference import ANSWER_GROUP, MERGE, UNKNOWN, GroupAnswerInput, MergeInput
from ragaudit.windowing import PlannedCalls, QuestionJudge, WindowedWriter, pack, verified

# Below this many tokens a piece is not cut further when its answer does not fit: a few dozen
# tokens of context whose answer overflows a budget means the judge is not answering, and
# halving again would only multiply calls.
_MIN_SPLIT = 48
# Tokens a merged answer adds around the partial answers' text (its JSON object and key).
_FRAMING = 16


def relevant_context_ids(
    ranking: dict[str, Any] | None, candidates: list[dict[str, Any]]
) -> list[str]:
    """The ids a question's ground truth is written from, most relevant first.

    The sort stage's relevant ids when it ran, else every candidate in engine order.
    """
    if ranking is None:
        return [c["context_id"] for c in sorted(candidates, key=lambda c: c["engine_rank"])]
    # A candidate whose relevance verdict failed is not known to be irrelevant: dropping it
    # could lose the one context that holds a fact, so it follows the relevant ones.
    return list(dict.fromkeys([*ranking["ordered_ids"], *(ranking.get("unjudged_ids") or [])]))


def _is_unknown(answer: str) -> bool:
    """Whether an answer only says "unknown" (in any language we prompt in)."""
    core = answer.strip().strip("。.!！\"'“”").strip().lower()
    return not core or core in {u.lower() for u in UNKNOWN.values()}


@dataclass
class _Piece:
    """A context (or part of one) or a partial answer, with the context ids it rests on."""

    text: str
    ids: list[str]
    node: int
    cost: int
    """Tokens this text adds to a prompt as one element of a JSON list."""


class ReferenceWriter(WindowedWriter):
    """Writes one question's reference answer and keeps its merge tree and counts.

    Args:
        setup: the question, its judge and the room its prompts get (``answer_tokens``: the
            budget of an answer written from contexts).
    """

    map_prompt = ANSWER_GROUP
    merge_prompt = MERGE

    def __init__(self, setup: QuestionJudge) -> None:
        self.nodes: list[dict[str, Any]] = []
        self.lost: list[str] = []
        self.notes: list[str] = []
        self.root: int | None = None
        # A judge that fills any budget would have its inputs halved down to crumbs: splitting
        # may at most double the planned answer calls (plus a little for small questions).
        self._splits_left = 0
        self._rendered: dict[tuple[str, tuple[int, ...]], tuple[list[dict[str, Any]], int]] = {}
        super().__init__(setup)

    def map_input(self, texts: list[str]) -> BaseModel:
        """The answer prompt's input: the question and the contexts."""
        return GroupAnswerInput(question=self.question, contexts=texts)

    def merge_input(self, texts: list[str]) -> BaseModel:
        """The merge prompt's input: the question and the partial answers."""
        return MergeInput(question=self.question, partial_answers=texts)

    # -- sizes ----------------------------------------------------------------------------

    def _render_group(
        self, prompt: Prompt, group: list[_Piece], *, keep: bool = True
    ) -> tuple[list[dict[str, Any]], int]:
        # Checking a group and then sending it would render and count it twice: the check keeps
        # its rendering (``keep``) and the call takes it.
        key = (prompt.name, tuple(p.node for p in group))
        found = self._rendered.get(key) if keep else self._rendered.pop(key, None)
        if found is None:
            texts = [p.text for p in group]
            inp = self.map_input(texts) if prompt is ANSWER_GROUP else self.merge_input(texts)
            found = self.render(prompt, inp)
            if keep:
                self._rendered[key] = found
        return found

    # -- the tree -------------------------------------------------------------------------

    def _node(self, kind: str, ids: list[str], children: list[int], **extra: Any) -> int:
        self.nodes.append(
            {
                "node": len(self.nodes),
                "kind": kind,
                "context_ids": ids,
                "children": children,
                **extra,
            }
        )
        return len(self.nodes) - 1

    # -- calls ----------------------------------------------------------------------------

    async def _call(
        self,
        prompt: Prompt,
        messages: list[dict[str, Any]],
        prompt_tokens: int,
        max_tokens: int,
        kind: str,
        ids: list[str],
        children: list[int],
    ) -> tuple[Any, str, int]:
        """A structured judge call: (value or None, ``ok``/``split``/``failed``, tree node).

        ``split``: the answer did not fit (cut off at its budget, the provider found the prompt
        too long, or invalid output had no room for its repair): smaller inputs can succeed.
        """
        node = self._node(
            kind,
            list(dict.fromkeys(ids)),
            children,
            status="ok",
            prompt_tokens=prompt_tokens,
            max_tokens=max_tokens,
            text=None,
            error=None,
        )
        record = self.nodes[node]
        judged, outcome = await self.ask(prompt, messages, max_tokens)
        if judged.repair_prompt_tokens is not None:
            record["repair_prompt_tokens"] = judged.repair_prompt_tokens
        if judged.ok:
            record["text"] = getattr(judged.value, "answer", None)
        record["status"], record["error"] = outcome, None if judged.ok else judged.error
        return judged.value, outcome, node

    # -- map step -------------------------------------------------------------------------

    def context_pieces(self, contexts: list[tuple[str, str]]) -> list[_Piece]:
        """Each context as one piece, or split into pieces that each fit one prompt."""
        pieces = []
        for cid, text in contexts:
            if not text or not text.strip():
                continue
            parts = self.fit_text(text, self.usable)
            for k, (part, cost) in enumerate(parts, start=1):
                extra = {"part": f"{k}/{len(parts)}"} if len(parts) > 1 else {}
                node = self._node("context", [cid], [], status="ok", tokens=cost, **extra)
                pieces.append(_Piece(part, [cid], node, cost))
        return pieces

    def map_groups(self, pieces: list[_Piece]) -> list[list[_Piece]]:
        """Pieces packed first-fit decreasing into prompts that fill the window, each checked."""
        groups = [[pieces[i] for i in g] for g in pack([p.cost for p in pieces], self.usable)]
        return self._verified(groups, self._answer_fits)

    def _answer_fits(self, group: list[_Piece]) -> bool:
        return self.fits(self._render_group(ANSWER_GROUP, group)[1], self.answer_tokens)

    def _verified(self, groups: list[list[_Piece]], fits: Any) -> list[list[_Piece]]:
        return verified(groups, fits, lambda p: p.cost, lambda p: p.node)

    async def answer(self, group: list[_Piece]) -> list[_Piece]:
        """Partial answers from ``group`` (several when it had to be asked in parts)."""
        messages, tokens = self._render_group(ANSWER_GROUP, group, keep=False)
        if not self.fits(tokens, self.answer_tokens):
            # The summed piece costs under-counted this prompt: ask in smaller parts, unsent.
            return await self._answer_in_parts(group)
        ids = [i for p in group for i in p.ids]
        value, outcome, node = await self._call(
            ANSWER_GROUP,
            messages,
            tokens,
            self.answer_tokens,
            "answer",
            ids,
            [p.node for p in group],
        )
        if outcome == "split":
            return await self._answer_in_parts(group)
        if outcome == "failed":
            self.lost.append(
                f"answer from {len(group)} context piece(s) failed: {self.nodes[node]['error']}"
            )
            return []
        if not value.answerable or _is_unknown(value.answer):
            self.nodes[node]["status"] = "unknown"
            return []
        text = value.answer.strip()
        return [_Piece(text, list(dict.fromkeys(ids)), node, self.cost(text))]

    def _piece_node(self, whole: _Piece, tokens: int) -> int:
        return self._node("piece", whole.ids, [whole.node], status="ok", tokens=tokens)

    async def _answer_in_parts(self, group: list[_Piece]) -> list[_Piece]:
        if self._splits_left <= 0:
            self.lost.append(
                f"answer from {len(group)} context piece(s) did not fit {self.answer_tokens} "
                "tokens and the question's split allowance is spent"
            )
            return []
        self._splits_left -= 1
        if len(group) > 1:
            mid = len(group) // 2
            a, b = await asyncio.gather(self.answer(group[:mid]), self.answer(group[mid:]))
            return a + b
        piece = group[0]
        if piece.cost < _MIN_SPLIT:
            self.lost.append(
                f"no answer of context {piece.ids[0]} fits {self.answer_tokens} tokens"
            )
            return []
        parts = self.fit_text(piece.text, piece.cost // 2 + 1)
        halves = [_Piece(t, piece.ids, self._piece_node(piece, c), c) for t, c in parts]
        answers = await asyncio.gather(*(self.answer([h]) for h in halves))
        return [p for a in answers for p in a]

    # -- merge step -----------------------------------------------------------------------

    def merge_groups(self, partials: list[_Piece]) -> list[list[_Piece]]:
        """Partial answers grouped so that inputs plus an answer as long as them fit a prompt."""
        capacity = self.window - self.reserve - self.merge_overhead - _FRAMING
        groups = [[partials[i] for i in g] for g in pack([2 * p.cost for p in partials], capacity)]
        return self._verified(groups, self._merge_fits)

    def _merge_fits(self, group: list[_Piece]) -> bool:
        need = sum(p.cost for p in group) + _FRAMING
        return self.fits(self._render_group(MERGE, group)[1], need)

    async def merge(self, group: list[_Piece]) -> list[_Piece]:
        """One merged answer of ``group``, or fewer pieces than it had: never a dropped one."""
        if len(group) == 1:
            return group
        messages, tokens = self._render_group(MERGE, group, keep=False)
        need = sum(p.cost for p in group) + _FRAMING
        if not self.fits(tokens, need):
            return await self._merge_in_parts(group)
        ids = [i for p in group for i in p.ids]
        value, outcome, node = await self._call(
            MERGE, messages, tokens, need, "merge", ids, [p.node for p in group]
        )
        if outcome == "ok" and _is_unknown(value.answer):
            # An empty merge of non-empty answers would lose them all.
            outcome = self.nodes[node]["status"] = "failed"
            self.nodes[node]["error"] = "empty merged answer"
        if outcome == "ok":
            text = value.answer.strip()
            return [_Piece(text, list(dict.fromkeys(ids)), node, self.cost(text))]
        if outcome == "split":
            return await self._merge_in_parts(group)
        # Smaller merges would not help a judge that cannot merge: keep the inputs as they are.
        self.notes.append(f"a merge failed, its inputs kept unmerged: {self.nodes[node]['error']}")
        return [self.join(group, "merge_failed")]

    async def _merge_in_parts(self, group: list[_Piece]) -> list[_Piece]:
        if len(group) == 2:
            return [self.join(group, "merge_failed")]
        mid = len(group) // 2
        a, b = await asyncio.gather(self.merge(group[:mid]), self.merge(group[mid:]))
        return a + b

    def join(self, group: list[_Piece], status: str) -> _Piece:
        """The pieces side by side, unmerged (no call): nothing is lost, nothing rewritten."""
        ids = list(dict.fromkeys(i for p in group for i in p.ids))
        text = "\n\n".join(p.text for p in group)
        node = self._node("join", ids, [p.node for p in group], status=status)
        return _Piece(text, ids, node, self.cost(text))

    # -- the whole ------------------------------------------------------------------------

    async def write(
        self, contexts: list[tuple[str, str]], mode: str, seed: int
    ) -> tuple[str | None, str, list[str]]:
        """The reference answer from ``contexts`` (id, text): (answer, status, supporting ids)."""
        small = self.too_small()
        if small:
            self.lost.append(small)
            return None, "failed", []
        rank = {cid: k for k, (cid, _) in enumerate(contexts)}
        groups = self.first_groups(contexts, mode, seed)
        self._splits_left = len(groups) + 16
        answers = await asyncio.gather(*(self.answer(g) for g in groups))
        self._rendered.clear()  # renderings of groups that were tried but not sent
        partials = [p for a in answers for p in a]
        if not partials:
            return None, ("failed" if self.lost else "insufficient"), []
        # Merge in rounds rather than as answers arrive: the grouping then depends only on the
        # inputs, so a re-run asks the same prompts and the memo answers them.
        while len(partials) > 1:
            groups = self.merge_groups(partials)
            if all(len(g) == 1 for g in groups):
                break
            merged = await asyncio.gather(*(self.merge(g) for g in groups))
            self._rendered.clear()  # renderings of groups that were tried but not sent
            partials = [p for m in merged for p in m]
        final = partials[0] if len(partials) == 1 else self.join(partials, "too_large_to_merge")
        support = sorted(set(final.ids), key=lambda i: rank.get(i, len(rank)))
        self.root = final.node
        return final.text, ("partial" if self.lost else "ok"), support

    def first_groups(
        self, contexts: list[tuple[str, str]], mode: str, seed: int
    ) -> list[list[_Piece]]:
        """The groups of contexts the map calls answer, as :meth:`write` forms them.

        One per context (``slow``), or the contexts shuffled by ``seed`` and packed to fill the
        window (``fast``).
        """
        order = list(contexts)
        if mode == "fast":
            random.Random(seed).shuffle(order)
        pieces = self.context_pieces(order)
        return [[p] for p in pieces] if mode == "slow" else self.map_groups(pieces)

    def _sent(self, prompt: Prompt, group: list[_Piece]) -> list[dict[str, Any]]:
        return structured_messages(
            prompt.output_model, self._render_group(prompt, group, keep=False)[0]
        )

    def plan(
        self, contexts: list[tuple[str, str]], mode: str, seed: int, stand_in: str
    ) -> PlannedCalls | None:
        """The requests :meth:`write` sends for ``contexts`` if every answer were ``stand_in``.

        The map calls are exactly :meth:`write`'s; the merge rounds group answers of
        ``stand_in``'s size, as :meth:`write` groups the real ones. None when the window leaves
        too little room for contexts (:meth:`write` fails such a question without a call).
        Calls nothing: what the dry run counts.
        """
        if self.too_small():
            return None
        groups = self.first_groups(contexts, mode, seed)
        answers = [self._sent(ANSWER_GROUP, g) for g in groups]
        merges: list[list[dict[str, Any]]] = []
        size = self.cost(stand_in)
        partials = [_Piece(stand_in, [], len(self.nodes) + i, size) for i in range(len(groups))]
        while len(partials) > 1:
            rounds = self.merge_groups(partials)
            if all(len(g) == 1 for g in rounds):
                break
            merges += [self._sent(MERGE, g) for g in rounds if len(g) > 1]
            base = max(p.node for p in partials) + 1
            partials = [_Piece(stand_in, [], base + i, size) for i in range(len(rounds))]
        return PlannedCalls(answers, merges)

    def tree(self) -> dict[str, Any]:
        """The merge tree with its sizes, as stored in the ``merge_tree`` column."""
        return {
            "version": 2,
            "window": self.window,
            "answer_tokens": self.answer_tokens,
            "usable_tokens": self.usable,
            "map_calls": self.spent.map_calls,
            "merge_calls": self.spent.merge_calls,
            "max_prompt_tokens": self.spent.max_prompt_tokens,
            "root": self.root,
            "nodes": self.nodes,
        }


# -- the offline fake judge's answers to the group and merge prompts ------------------------
# Here, with the algorithm that asks them, not beside the prompts: the prompt modules are plain
# data that reports import without the gateway.


@register_fake_answer("GroupAnswer")
def _fake_group_answer(req: FakeRequest) -> dict[str, Any]:
    """The first line of every context sharing a token with the question; none: unanswerable."""
    p = req.payload
    asked = set(text_tokens(p.get("question", "")))
    useful = [c for c in p.get("contexts", []) if asked & set(text_tokens(c))]
    if not useful:
        return {"answerable": False, "answer": ""}
    return {"answerable": True, "answer": " ".join(c.split("\n")[0][:200] for c in useful)}


@register_fake_answer("MergedAnswer")
def _fake_merge(req: FakeRequest) -> dict[str, Any]:
    """The partial answers joined, each once, in their order."""
    parts = req.payload.get("partial_answers", [])
    return {"answer": " ".join(dict.fromkeys(parts))}


__all__ = ["ReferenceWriter", "relevant_context_ids"]
