"""What a metric is: a registered unit with its inputs, its needs and an async scorer."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from ragaudit.cache import Gateway


@dataclass(frozen=True)
class Sample:
    """Everything a metric may read for one question."""

    question_id: str
    question: str
    language: str
    response: str | None
    reference: str | None
    contexts: list[str]
    context_ids: list[str]
    reference_contexts: list[str] | None
    reference_context_ids: list[str] | None


@dataclass
class Outcome:
    """A metric's value and what it rests on (reasons, verdicts, statements)."""

    value: float | None
    reason: Any = None
    args: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Deps:
    """The models a metric may call, all through the gateway."""

    gateway: Gateway
    judge: str
    embedder: str
    options: dict[str, Any]


Scorer = Callable[[Sample, Deps], Awaitable[Outcome]]


@dataclass(frozen=True)
class Metric:
    """A registered metric."""

    name: str
    inputs: tuple[str, ...]
    needs_llm: bool
    needs_embeddings: bool
    description: str
    score: Scorer

    def missing(self, sample: Sample) -> str | None:
        """The first required input the sample lacks, or None."""
        for name in self.inputs:
            value = getattr(sample, name)
            if value is None or value == [] or (isinstance(value, str) and not value.strip()):
                return name
        return None


class Skip(Exception):
    """Raised by a scorer when the sample cannot be scored by this metric; the message says why."""


METRICS: dict[str, Metric] = {}


def metric(
    name: str, *, inputs: tuple[str, ...], llm: bool = False, embeddings: bool = False
) -> Callable[[Scorer], Scorer]:
    """Register a scorer under ``name``; its docstring's first line describes it."""

    def deco(fn: Scorer) -> Scorer:
        doc = (fn.__doc__ or "").strip().splitlines()
        METRICS[name] = Metric(name, inputs, llm, embeddings, doc[0] if doc else "", fn)
        return fn

    return deco


__all__ = ["METRICS", "Deps", "Metric", "Outcome", "Sample", "Scorer", "Skip", "metric"]
