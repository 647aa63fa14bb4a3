"""What a call belongs to: its stage's scope (run, counts, call log) and its judge repeat.

Contexts, not arguments: a stage's or a repeat's calls include those ragas makes, which no
argument of ours reaches.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from ragaudit.cache._calllog import CallCounts, CallLog


@dataclass
class Scope:
    """The stage (or metric task) calls are made for, and where their rows and counts go."""

    stage: str = ""
    run_id: str = ""
    counts: CallCounts = field(default_factory=CallCounts)
    raw: list[str] | None = None
    # The run's own call log (part files in its llm_calls/); None: the gateway's in-memory log.
    log: CallLog | None = None


scope_var: contextvars.ContextVar[Scope | None] = contextvars.ContextVar(
    "ragaudit_scope", default=None
)


def current_scope() -> Scope:
    """The caller's scope (a fresh, unnamed one outside every scope)."""
    return scope_var.get() or Scope()


def current_stage() -> str:
    """The stage (or metric task, ``score:<metric>``) whose scope the caller runs in, or ''."""
    scope = scope_var.get()
    return scope.stage if scope is not None else ""


@dataclass(frozen=True)
class _Repeat:
    index: int
    temperature: float


# Which judge repeat the caller's requests belong to. A context, not an argument: a repeat is
# every call one metric makes for one row (ragas's prompts, our typed prompts, a metric's own
# samples), and threading an argument through each metric would miss the calls ragas makes.
_repeat: contextvars.ContextVar[_Repeat | None] = contextvars.ContextVar(
    "ragaudit_repeat", default=None
)


def current_repeat() -> int:
    """The judge repeat the caller's requests belong to (0: the first, or the only one)."""
    found = _repeat.get()
    return found.index if found is not None else 0


@contextlib.contextmanager
def judge_repeat(index: int, temperature: float) -> Iterator[None]:
    """Within the block, every completion is judge repeat ``index`` of its request.

    Repeat 0 is the request as asked once: its memo key and temperature are untouched, so a
    run with one repeat reads and writes exactly the entries it always did. A later repeat
    adds its index to the memo key (independent of a metric's own ``sample_index``, which
    stays in the key beside it, so a metric that samples n times makes n distinct requests in
    every repeat) and is asked at ``temperature``: at the deterministic temperature every
    repeat would be the same answer.
    """
    token = _repeat.set(_Repeat(index, temperature) if index > 0 else None)
    try:
        yield
    finally:
        _repeat.reset(token)


# The re-check a request belongs to: a tag that makes an already memoised request a new call.
_recheck: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "ragaudit_recheck", default=None
)


def current_recheck() -> str | None:
    """The re-check tag of the caller's requests (None outside :func:`judge_recheck`)."""
    return _recheck.get()


@contextlib.contextmanager
def judge_recheck(tag: str) -> Iterator[None]:
    """Within the block, every completion is asked of the provider again under ``tag``.

    A drift check asks the judge grades it gave before, to see whether the model behind the
    name still answers the same: the memo would hand back the old answer, so the tag joins the
    memo key (the request and its temperature are unchanged). The re-asked answer is memoised
    under the tagged key, so a crashed check resumes without paying twice, and the next
    check (another tag) asks afresh.
    """
    token = _recheck.set(tag or None)
    try:
        yield
    finally:
        _recheck.reset(token)


def repeated(params: dict[str, Any]) -> dict[str, Any]:
    """``params`` as the current judge repeat asks them: a later repeat at its temperature."""
    found = _repeat.get()
    if found is None:
        return params
    return {**params, "temperature": found.temperature}


__all__ = [
    "Scope",
    "current_recheck",
    "current_repeat",
    "current_scope",
    "current_stage",
    "judge_recheck",
    "judge_repeat",
    "repeated",
    "scope_var",
]
