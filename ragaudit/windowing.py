"""Writers that map-reduce a question's contexts within the judge's window.

A reference answer (:mod:`ragaudit.reference`) and a nugget list (:mod:`ragaudit.nuggets`) are
written the same way: contexts are cut where one is longer than a prompt holds (never
truncated), packed first-fit decreasing into prompts that fill the window less the instruction
and the answer budget, answered in parallel, and the answers merged in rounds. This module is
what the two share: cutting text (:func:`split_text`, :func:`fit_text`), packing
(:func:`pack`), the question's judge and room (:class:`QuestionJudge`), and the writer base
(:class:`WindowedWriter`) that renders and counts prompts exactly as the gateway sends them,
checks packed groups on their rendering, asks the judge and keeps the call accounts.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

from pydantic import BaseModel

from ragaudit.cache import Judged, count_tokens, structured_prompt_tokens
from ragaudit.prompts import Prompt

if TYPE_CHECKING:
    # Only its type: ragaudit.judging cuts its own prompts with the helpers below.
    from ragaudit.judging import Judge

T = TypeVar("T")

# Gateway statuses whose inputs can succeed when asked in smaller parts.
SPLIT_STATUSES = frozenset({"too_long", "truncated", "no_room"})
# Fewer usable tokens than this per prompt: the window cannot hold a useful context.
MIN_USABLE = 64

# Where text may be cut, coarsest first: paragraphs, lines, sentences, clauses and words.
# Zero-width splits keep every character, so the pieces join back to the text exactly; a
# space starts the next unit, as BPE vocabularies do (" word" is one token, "word " two).
_BREAKS = (
    re.compile(r"(?<=\n\n)"),
    re.compile(r"(?<=\n)"),
    re.compile(r"(?<=[。！？；])|(?<=[.!?;])(?= )"),
    re.compile(r"(?<=[，、：])|(?= )"),
)


def _hard_cut(text: str, budget: int, model: str) -> list[tuple[str, int]]:
    """Cut text that has no break points by characters (never inside a character)."""
    out: list[tuple[str, int]] = []
    chars_per_token = len(text) / max(1, count_tokens(model, text))
    rest = text
    while rest:
        cut = min(len(rest), max(1, int(budget * chars_per_token)))
        n = count_tokens(model, rest[:cut])
        while cut > 1 and n > budget:
            cut = max(1, cut * 9 // 10)
            n = count_tokens(model, rest[:cut])
        out.append((rest[:cut], n))
        rest = rest[cut:]
    return out


def _units(text: str, budget: int, model: str, level: int = 0) -> list[tuple[str, int]]:
    """``text`` as consecutive units of at most ``budget`` tokens each, with their counts."""
    n = count_tokens(model, text)
    if n <= budget:
        return [(text, n)]
    while level < len(_BREAKS):
        parts = [p for p in _BREAKS[level].split(text) if p]
        level += 1
        if len(parts) > 1:
            return [u for p in parts for u in _units(p, budget, model, level)]
    return _hard_cut(text, budget, model)


def _accumulate(units: list[tuple[str, int]], budget: int, model: str) -> list[str]:
    groups: list[list[tuple[str, int]]] = []
    used = budget + 1
    for unit in units:
        if used + unit[1] > budget:
            groups.append([])
            used = 0
        groups[-1].append(unit)
        used += unit[1]
    out: list[str] = []
    for group in groups:
        text = "".join(u for u, _ in group)
        # Summed counts are an estimate: BPE may merge differently across the join of two units.
        if len(group) == 1 or count_tokens(model, text) <= budget:
            out.append(text)
        else:
            mid = len(group) // 2
            out += _accumulate(group[:mid], budget, model) + _accumulate(group[mid:], budget, model)
    return out


def split_text(text: str, budget: int, model: str) -> list[str]:
    """Cut ``text`` into pieces of at most ``budget`` tokens that join back to it exactly.

    Cuts fall at paragraph, line, sentence, clause or word ends when possible, and between
    characters only inside a run with none of them.
    """
    if budget < 1:
        raise ValueError(f"split_text: budget must be at least 1 token, got {budget}")
    if not text:
        return []
    return _accumulate(_units(text, budget, model), budget, model)


def json_cost(model: str, text: str) -> int:
    """Tokens ``text`` adds to a prompt as a JSON list element (quotes, escapes, separator)."""
    return count_tokens(model, json.dumps(text, ensure_ascii=False)) + 1


def fit_text(text: str, limit: int, model: str, raw: int | None = None) -> list[tuple[str, int]]:
    """``text`` in consecutive parts whose :func:`json_cost` is at most ``limit``, with the costs.

    The parts join back to ``text`` exactly (see :func:`split_text`).
    """
    if raw is None:
        whole = json_cost(model, text)
        if whole <= limit:
            return [(text, whole)]
        raw = limit - 2
    out: list[tuple[str, int]] = []
    for part in split_text(text, max(1, raw), model):
        c = json_cost(model, part)
        if c <= limit or len(part) <= 1 or raw <= 1:
            out.append((part, c))
        else:  # escapes made the JSON form longer than the text: cut this part tighter
            out += fit_text(part, limit, model, raw - (c - limit))
    return out


def pack(sizes: list[int], capacity: int) -> list[list[int]]:
    """First-fit decreasing: indices grouped so that no group's sizes sum above ``capacity``.

    An item larger than ``capacity`` gets a group of its own (callers split such items first).

    Ties keep input order and each group lists its indices in input order, so a seeded
    shuffle before packing still decides the order contexts appear in within a prompt.
    """
    order = sorted(range(len(sizes)), key=lambda i: (-sizes[i], i))
    groups: list[list[int]] = []
    room: list[int] = []
    for i in order:
        for g, free in enumerate(room):
            if sizes[i] <= free:
                groups[g].append(i)
                room[g] -= sizes[i]
                break
        else:
            groups.append([i])
            room.append(capacity - sizes[i])
    return [sorted(g) for g in groups]


def verified(
    groups: list[list[T]],
    fits: Callable[[list[T]], bool],
    cost: Callable[[T], int],
    position: Callable[[T], Hashable],
) -> list[list[T]]:
    """``groups`` with every multi-item group checked on its rendered prompt (``fits``).

    Packing sums per-item costs, which can under-count a full prompt by a few tokens (BPE
    merges across the JSON separators). A group over the window gives up its smallest items,
    which go to the emptiest group that still fits (placed by ``position``, their input
    order), else to a group of their own: one extra call at most, where halving the group
    would cost one per over-full group.
    """
    out: list[list[T]] = []
    spill: list[T] = []
    for group in groups:
        group = list(group)
        while len(group) > 1 and not fits(group):
            spill.append(group.pop(min(range(len(group)), key=lambda k: cost(group[k]))))
        out.append(group)
    for item in sorted(spill, key=lambda p: -cost(p)):
        for group in sorted(out, key=lambda g: sum(cost(p) for p in g)):
            trial = sorted([*group, item], key=position)  # type: ignore[arg-type]
            if fits(trial):
                group[:] = trial
                break
        else:
            out.append([item])
    return out


@dataclass(frozen=True)
class QuestionJudge:
    """One question, its judge and the room its prompts get.

    What the writers of the judge's map-reduce prompts (a reference answer, the nuggets) are
    built with.

    Attributes:
        judge: the judge every call goes through (its model, window and temperature).
        question: the question text.
        lang: the question's language; it picks the prompt set.
        answer_tokens: the answer budget (``max_tokens``) of one map call.
        reserve_tokens: tokens kept free in every prompt for what the counter cannot see.
    """

    judge: Judge
    question: str
    lang: str
    answer_tokens: int = 1024
    reserve_tokens: int = 0


@dataclass(frozen=True)
class PlannedCalls:
    """The judge requests one writer makes, as the gateway sends them.

    ``answers`` are the map calls (one per group of contexts), ``merges`` the merge calls of
    every round; each is the structured call's messages, its schema message first.
    """

    answers: list[list[dict[str, Any]]]
    merges: list[list[dict[str, Any]]]


@dataclass(kw_only=True)
class CallCounts:
    """What a writer asked of the judge: calls (map and merge), tokens, its largest prompt."""

    calls: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    map_calls: int = 0
    merge_calls: int = 0
    max_prompt_tokens: int = 0
    """The largest prompt sent plus its answer budget and reserve (at most the window)."""


class WindowedWriter:
    """A question's map-reduce writer within the judge's window: sizes, checks, calls, counts.

    A subclass names its map and merge prompts and how texts become their inputs; it gets the
    prompts' sizes, the contexts cut to fit, a check of a group on its rendering, and one
    structured call that keeps :attr:`spent`.

    Args:
        setup: the question, its judge and the room its prompts get (``answer_tokens``: the
            budget of one map call).
    """

    map_prompt: ClassVar[Prompt[Any, Any]]
    merge_prompt: ClassVar[Prompt[Any, Any]]

    def __init__(self, setup: QuestionJudge) -> None:
        if setup.judge.window is None:
            raise ValueError(f"judge {setup.judge.model}: a windowed writer needs its window")
        self.judge = setup.judge
        self.model = setup.judge.model
        self.window: int = setup.judge.window
        self.question = setup.question
        self.lang = self.map_prompt.language(setup.lang)
        self.answer_tokens = setup.answer_tokens
        self.reserve = setup.reserve_tokens
        self.spent = CallCounts()
        self.map_overhead = self.render(self.map_prompt, self.map_input([]))[1]
        self.merge_overhead = self.render(self.merge_prompt, self.merge_input([]))[1]

    def map_input(self, texts: list[str]) -> BaseModel:
        """The map prompt's input holding ``texts`` (contexts)."""
        raise NotImplementedError

    def merge_input(self, texts: list[str]) -> BaseModel:
        """The merge prompt's input holding ``texts`` (what the map step wrote)."""
        raise NotImplementedError

    # -- sizes ----------------------------------------------------------------------------

    @property
    def usable(self) -> int:
        """Context tokens one map prompt holds: window - answer budget - reserve - the rest."""
        return self.window - self.answer_tokens - self.reserve - self.map_overhead

    def too_small(self) -> str | None:
        """Why the window holds no useful context (the question fails without a call), or None."""
        if self.usable >= MIN_USABLE:
            return None
        return (
            f"the judge's window ({self.window} tokens) minus the answer budget "
            f"({self.answer_tokens}), the reserve ({self.reserve}) and the instruction "
            f"({self.map_overhead}) leaves {self.usable} tokens for contexts"
        )

    def cost(self, text: str) -> int:
        """Tokens ``text`` adds to a prompt as a JSON list element (quotes, escapes, separator)."""
        return json_cost(self.model, text)

    def fit_text(self, text: str, limit: int) -> list[tuple[str, int]]:
        """``text`` in consecutive parts whose :meth:`cost` is at most ``limit``, with the costs."""
        return fit_text(text, limit, self.model)

    def render(self, prompt: Prompt[Any, Any], inp: BaseModel) -> tuple[list[dict[str, Any]], int]:
        """The prompt's messages and its tokens, counted as the gateway sends them.

        The count includes the schema message and the response format the gateway adds.
        """
        messages = prompt.messages(inp, self.lang)
        return messages, structured_prompt_tokens(self.model, prompt.output_model, messages)

    def fits(self, prompt_tokens: int, max_tokens: int) -> bool:
        """Whether a prompt of ``prompt_tokens`` with an answer of ``max_tokens`` fits."""
        return prompt_tokens + max_tokens + self.reserve <= self.window

    # -- the call -------------------------------------------------------------------------

    async def ask(
        self, prompt: Prompt[Any, Any], messages: list[dict[str, Any]], max_tokens: int
    ) -> tuple[Judged[Any], str]:
        """One structured judge call, counted: (the judgement, ``ok``/``split``/``failed``).

        ``split``: the answer did not fit (cut off at its budget, the provider found the prompt
        too long, or invalid output had no room for its repair): smaller inputs can succeed.
        """
        judged = await self.judge.send(
            messages,
            prompt.output_model,
            prompt.key,
            max_tokens=max_tokens,
            prompt_budget=self.window - max_tokens - self.reserve,
        )
        s = self.spent
        s.calls += judged.calls
        if prompt is self.map_prompt:
            s.map_calls += judged.calls
        else:
            s.merge_calls += judged.calls
        s.tokens_in += judged.tokens_in
        s.tokens_out += judged.tokens_out
        sent = [judged.prompt_tokens] if judged.calls else []
        if judged.repair_prompt_tokens is not None:
            sent.append(judged.repair_prompt_tokens)
        for tokens in sent:
            s.max_prompt_tokens = max(s.max_prompt_tokens, tokens + max_tokens + self.reserve)
        outcome = "ok" if judged.ok else "split" if judged.status in SPLIT_STATUSES else "failed"
        return judged, outcome


__all__ = [
    "MIN_USABLE",
    "SPLIT_STATUSES",
    "CallCounts",
    "PlannedCalls",
    "QuestionJudge",
    "WindowedWriter",
    "fit_text",
    "json_cost",
    "pack",
    "split_text",
    "verified",
]
