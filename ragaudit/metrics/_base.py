"""What a metric is: a registered unit with its inputs, its needs and an async scorer."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from ragaudit import directions

if TYPE_CHECKING:
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
    nuggets: list[dict[str, Any]] | None = None
    """The question's nuggets (``text``, ``importance``, ``context_ids``), vital first; None
    when the run has no nuggets table."""
    nuggets_note: str | None = None
    """Why the question has no nuggets (or an incomplete list), from the nuggets table."""
    citation_ids: list[str] | None = None
    """What the response's numbered citation markers point at (marker n → the n-th id), when
    the answer source listed its cited documents; else markers number the contexts."""
    citations: list[list[str]] | None = None
    """Context ids cited per sentence of the response, when the answer source gave them (else
    the citation metrics parse the response's markers)."""


@dataclass
class Outcome:
    """A metric's value and what it rests on (reasons, verdicts, statements)."""

    value: float | None
    reason: Any = None
    args: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Deps:
    """The models a metric may call, all through the gateway, and the run's score options."""

    gateway: Gateway
    judge: str
    embedder: str
    options: dict[str, Any]
    temperature: float = 0.0
    """Sampling temperature of single-sample judge calls."""
    max_output_tokens: int = 1024
    """Answer budget of one judge call (also reserved when fitting contexts to the window)."""
    window: int | None = None
    """The judge's context window; our own prompts over it less ``max_output_tokens`` are not
    sent (None: not checked)."""
    english_only_embedder: bool = False
    """The embedder cannot read Chinese (the offline MiniLM): embedding scores of Chinese rows
    are skipped with that reason instead of reported."""

    @property
    def prompt_budget(self) -> int | None:
        """Prompt tokens a judge request may hold: the window less the answer budget."""
        return None if self.window is None else self.window - self.max_output_tokens

    def option(self, name: str, default: Any = None) -> Any:
        """A score option from the run's config (``score.<name>``)."""
        value = self.options.get(name)
        return default if value is None else value


@dataclass(frozen=True)
class Window:
    """The largest judge request a metric sends for a sample, with its contexts left out.

    ``messages`` are the request's texts (system and user) rendered with empty contexts;
    ``mode`` says how the k contexts enter it: ``joined`` (all in one prompt) or ``each``
    (one prompt per context, so only the largest counts).
    """

    messages: list[str]
    mode: Literal["joined", "each"]


Scorer = Callable[["Sample", "Deps"], Awaitable[Outcome]]
WindowFn = Callable[["Sample", "Deps"], Window]


@dataclass(frozen=True)
class Metric:
    """A registered metric."""

    name: str
    inputs: tuple[str, ...]
    needs_llm: bool
    needs_embeddings: bool
    description: str
    score: Scorer
    higher_is_better: bool = True
    """Whether larger values are better; registered metrics take it from ``ragaudit.directions``."""
    window: WindowFn | None = None
    """How the judge prompt grows with the contexts (None: the contexts are not in a prompt)."""

    def missing(self, sample: Sample) -> str | None:
        """The first required input the sample lacks, or None."""
        for name in self.inputs:
            value = getattr(sample, name)
            if value is None or value == [] or (isinstance(value, str) and not value.strip()):
                return name
        return None


class Skip(Exception):
    """Raised by a scorer when the sample cannot be scored by this metric; the message says why."""


class JudgeError(Exception):
    """The judge's answers cannot give a score (none parsed, none usable); the message says why."""


METRICS: dict[str, Metric] = {}
# Metrics that exist only through a run's config (user-defined aspects): name, options → Metric.
FACTORIES: list[Callable[[str, dict[str, Any]], Metric | None]] = []


def metric(
    name: str,
    *,
    inputs: tuple[str, ...],
    llm: bool = False,
    embeddings: bool = False,
    window: WindowFn | None = None,
) -> Callable[[Scorer], Scorer]:
    """Register a scorer under ``name``; its docstring's first line describes it.

    Its direction is declared in ``ragaudit.directions`` (a metric whose smaller values are
    better goes into ``LOWER_IS_BETTER``), where reports read it without importing scorers.
    """

    def deco(fn: Scorer) -> Scorer:
        doc = (fn.__doc__ or "").strip().splitlines()
        METRICS[name] = Metric(
            name,
            inputs,
            llm,
            embeddings,
            doc[0] if doc else "",
            fn,
            directions.higher_is_better(name),
            window,
        )
        return fn

    return deco


def resolve(name: str, options: dict[str, Any] | None = None) -> Metric:
    """The metric called ``name``: registered, or defined by the run's config (``options``).

    Raises:
        KeyError: no such metric; the message lists what exists.
    """
    if name in METRICS:
        return METRICS[name]
    for factory in FACTORIES:
        found = factory(name, options or {})
        if found is not None:
            return found
    raise KeyError(
        f"unknown metric '{name}' (known: {', '.join(sorted(METRICS))}; "
        "user aspects are 'aspect_<name>' with <name> defined in score.aspects)"
    )


__all__ = [
    "FACTORIES",
    "METRICS",
    "Deps",
    "JudgeError",
    "Metric",
    "Outcome",
    "Sample",
    "Scorer",
    "Skip",
    "Window",
    "WindowFn",
    "metric",
    "resolve",
]
