"""What a metric is: a registered unit with its inputs, its needs, its options and an async scorer.

A metric's module is its only home: the :func:`metric` decorator records the scorer with its
inputs, whether it calls a judge or an embedder, its options model (a frozen pydantic model
whose fields carry the defaults and their documentation), its prompt-window model (``window``),
its cost model for the dry run (``cost``) and what its values mean (direction, range, label,
default threshold, place in lists: a :class:`ragaudit.registry.MetricInfo` the registry holds,
which reports and the config read without importing a scorer). Built-in metrics and a user's
own module register the same way; a user's module is named in ``score.plugins`` (or under the
``ragaudit.metrics`` entry-point group) and imported before the config's metrics are checked.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict, ValidationError

from ragaudit.config import migrate_score_options
from ragaudit.registry import METRICS as REGISTRY
from ragaudit.registry import MetricInfo, NoOptions

if TYPE_CHECKING:
    from ragaudit.cache import Gateway
    from ragaudit.judging import Judge


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
    answerability: str | None = None
    """The turn's label (``dataset.ANSWERABILITY``), given by the set or judged by the
    ground_truth stage; None: not labelled (a conditioned metric then scores as it always did)."""
    answerability_source: str | None = None
    """Where the label came from: ``given`` (the question set) or ``judged``."""
    answerability_error: str | None = None
    """Why the judge gave no label (the turn's conditioned scores then fail with it)."""


@dataclass
class Outcome:
    """A metric's value and what it rests on (reasons, verdicts, statements)."""

    value: float | None
    reason: Any = None
    args: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Deps:
    """The models a metric may call, all through the gateway, and the run's score options."""

    llm: Judge
    """The judge every judge call of a metric goes through (ours and ragas's): its model, its
    window (None: prompts not checked against one), answer budget and temperature."""
    embedder: str
    options: dict[str, Any]
    english_only_embedder: bool = False
    """The embedder cannot read Chinese (MiniLM): embedding scores of Chinese rows
    are skipped with that reason instead of reported."""

    @classmethod
    def of(
        cls,
        gateway: Gateway,
        judge: str,
        embedder: str,
        options: dict[str, Any],
        *,
        temperature: float = 0.0,
        max_output_tokens: int = 1024,
        window: int | None = None,
        english_only_embedder: bool = False,
    ) -> Deps:
        """Deps whose judge is ``judge`` behind ``gateway`` with these limits."""
        # Imported here: registering the metrics imports no gateway (litellm).
        from ragaudit.judging import Judge

        llm = Judge(
            gateway=gateway,
            model=judge,
            window=window,
            max_tokens=max_output_tokens,
            temperature=temperature,
        )
        return cls(llm, embedder, options, english_only_embedder)

    @property
    def gateway(self) -> Gateway:
        """The gateway every call goes through (the embedder's too)."""
        return self.llm.gateway

    @property
    def judge(self) -> str:
        """The judge model string."""
        return self.llm.model

    @property
    def temperature(self) -> float:
        """Sampling temperature of single-sample judge calls."""
        return self.llm.temperature

    @property
    def max_output_tokens(self) -> int:
        """Answer budget of one judge call (also reserved when fitting contexts to the window)."""
        return self.llm.max_tokens

    @property
    def window(self) -> int | None:
        """The judge's context window (None: not checked).

        Our own prompts over it less ``max_output_tokens`` are not sent.
        """
        return self.llm.window

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


Scorer = Callable[..., Awaitable[Outcome]]
"""``score(sample, deps)``, or ``score(sample, deps, options)`` for a metric with options."""
WindowFn = Callable[["Sample", "Deps"], Window]


class Options(BaseModel):
    """Base of a metric's options: frozen, unknown names rejected; a docstring per field."""

    model_config = ConfigDict(frozen=True, extra="forbid")


class CostSheet(Protocol):
    """What a metric's cost model reads and writes for one row in a dry run."""

    @property
    def assume(self) -> Any:
        """The dry run's assumptions (reply lengths: ``statement_tokens``, ``verdict_tokens``)."""

    def tally(
        self,
        step: str,
        kind: str,
        calls: float,
        tokens_in: float,
        tokens_out: float,
        prior: str | None = None,
    ) -> None:
        """Add ``calls`` of one step (``kind`` ``completion`` or ``embedding``) to the lines.

        ``prior`` names the assumption ``tokens_out`` rests on, which the judge's logged
        replies to this metric replace where the record has them.
        """

    def observed_reply(self, prior: str) -> float | None:
        """Mean tokens of the judge's logged replies to this metric (None: no record)."""

    def chat_tokens(self, system: str, user: str) -> int:
        """Prompt tokens of a judge call with these system and user messages."""

    def text_tokens(self, model: str, text: str) -> int:
        """Tokens of ``text`` for ``model`` (a context in a prompt, a text to embed)."""

    def once(self, key: str) -> bool:
        """Whether a request several metrics share is counted here (the first to ask it).

        ``key`` names what it asks, of which row; the memo answers the metrics asking it later.
        """


CostFn = Callable[..., None]
"""``cost(sample, deps, sheet)``, or ``cost(sample, deps, options, sheet)`` with options: the
calls one row will make, told to ``sheet`` without calling any model."""


@dataclass(frozen=True)
class Metric:
    """A registered metric, bound to its options (the defaults until :meth:`bind`)."""

    name: str
    inputs: tuple[str, ...]
    needs_llm: bool
    needs_embeddings: bool
    description: str
    scorer: Scorer
    info: MetricInfo = MetricInfo()
    """What its values mean: direction, range, label, default threshold, place in lists."""
    window: WindowFn | None = None
    """How the judge prompt grows with the contexts (None: the contexts are not in a prompt)."""
    options_model: type[BaseModel] = NoOptions
    """The options the metric takes (a frozen pydantic model; its defaults are the metric's)."""
    options: BaseModel | None = None
    """The options this metric was built with (``options_model``'s defaults when unbound)."""
    cost: CostFn | None = None
    """The dry run's model of the calls one row makes (None: one call of the largest prompt)."""
    conditioned: bool = False
    """Whether its values on a labelled turn are conditioned on the turn's answerability (an
    answer metric: MTRAG's rule, applied by :mod:`ragaudit.scoring`, not by the scorer)."""

    @property
    def higher_is_better(self) -> bool:
        """Whether larger values are better (its registration's :class:`MetricInfo`)."""
        return self.info.higher_is_better

    @property
    def takes_options(self) -> bool:
        """Whether the scorer and cost model receive the options."""
        return self.options_model is not NoOptions

    def bind(self, options: dict[str, Any] | None = None) -> Metric:
        """This metric built with ``options`` (validated by its options model).

        Raises:
            ValueError: an unknown option or an invalid value; the message names the metric.
        """
        try:
            built = self.options_model.model_validate(options or {})
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in e['loc']) or 'options'}: {e['msg']}"
                for e in exc.errors()
            )
            known = ", ".join(self.options_model.model_fields) or "none"
            raise ValueError(f"metric '{self.name}': {problems} (its options: {known})") from None
        return replace(self, options=built)

    def settings(self) -> dict[str, Any]:
        """The options this metric was built with, as plain values (the defaults when unbound)."""
        return (self.options or self.options_model()).model_dump(mode="json")

    async def score(self, sample: Sample, deps: Deps) -> Outcome:
        """Score one sample with the options the metric was built with."""
        if self.takes_options:
            return await self.scorer(sample, deps, self.options or self.options_model())
        return await self.scorer(sample, deps)

    def estimate(self, sample: Sample, deps: Deps, sheet: CostSheet) -> None:
        """Tell ``sheet`` the calls scoring ``sample`` makes; the rough model without ``cost``."""
        if self.cost is None:
            rough_cost(self, sample, deps, sheet)
        elif self.takes_options:
            self.cost(sample, deps, self.options or self.options_model(), sheet)
        else:
            self.cost(sample, deps, sheet)

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


METRICS: dict[str, Metric] = REGISTRY.units
"""The registered metrics by name: the metric registry's own table (``ragaudit.registry``)."""
# Metrics that exist only through a run's config (user-defined aspects): name, options → Metric.
FACTORIES: list[Callable[[str, dict[str, Any]], Metric | None]] = []
ENTRY_POINTS = REGISTRY.group
"""Entry-point group under which an installed package names modules that register metrics."""


def metric(
    name: str,
    *,
    inputs: tuple[str, ...],
    llm: bool = False,
    embeddings: bool = False,
    window: WindowFn | None = None,
    options: type[BaseModel] | None = None,
    cost: CostFn | None = None,
    higher_is_better: bool = True,
    range: tuple[float, float] = (0.0, 1.0),
    threshold: float | None = None,
    order: int | None = None,
    label: str = "",
    conditioned: bool = False,
) -> Callable[[Scorer], Scorer]:
    """Register a scorer under ``name``; its docstring's first line describes it.

    ``options`` is the metric's options model: the scorer (and ``cost``) then take the built
    options as their third argument, and the config's ``score.metrics`` entry
    ``{name: {option: value}}`` is checked against it when the config loads. ``cost`` models
    the calls of one row for the dry run (``rough_cost`` when absent).

    What its values mean is declared here too, once (:class:`ragaudit.registry.MetricInfo`):
    ``higher_is_better`` (compare's verdicts, flags, worst rows), ``range`` (the charts' axes
    and colours), ``threshold`` (its default in ``report.thresholds``),
    ``order`` (its place in lists, smallest first) and ``label`` (its name in reports; ""
    for ``name``). Reports read them from the registry without importing a scorer.

    ``conditioned``: an answer metric whose value on a turn labelled with its answerability
    follows MTRAG's rule (full credit for declining an unanswerable turn, none for declining
    an answerable one; :mod:`ragaudit.metrics._answerability`).

    Raises:
        ValueError: an empty range, or a threshold outside it.
    """
    try:
        info = MetricInfo(higher_is_better, range, label, threshold, order)
    except ValueError as exc:
        raise ValueError(f"metric '{name}': {exc}") from None

    def deco(fn: Scorer) -> Scorer:
        doc = (fn.__doc__ or "").strip().splitlines()
        # An installed package's metric is named <package>/<name>: its rows carry that name.
        qualified = REGISTRY.qualify(name, fn.__module__)
        unit = Metric(
            qualified,
            inputs,
            llm,
            embeddings,
            doc[0] if doc else "",
            fn,
            info,
            window,
            options or NoOptions,
            None,
            cost,
            conditioned,
        )
        REGISTRY.add(qualified, unit, unit.options_model, module=fn.__module__, info=info)
        return fn

    return deco


def load_plugins(modules: Iterable[str] = ()) -> None:
    """Import the modules that register metrics: the built-ins, the entry points, ``modules``.

    Raises:
        ValueError: a module cannot be imported; the message names it.
    """
    REGISTRY.load(modules)


def _unbound(name: str, score_options: dict[str, Any]) -> Metric:
    if name in METRICS:
        return METRICS[name]
    for factory in FACTORIES:
        found = factory(name, score_options)
        if found is not None:
            return found
    raise KeyError(
        f"unknown metric '{name}' (known: {', '.join(METRICS)}; "
        "user aspects are 'aspect_<name>' with <name> defined in score.aspects)"
    )


def resolve(name: str, options: dict[str, Any] | None = None) -> Metric:
    """The metric called ``name`` built with the run's options for it.

    ``options`` is the run's score section as a dict: ``metric_options[name]`` holds the
    metric's options, ``plugins`` the modules to import first, ``aspects`` the user's aspects;
    an old flat key (``answer_relevancy_strictness`` …) still sets its metric's option.

    Raises:
        KeyError: no such metric; the message lists what exists.
        ValueError: an option the metric does not take, or an invalid value.
    """
    raw = dict(options or {})
    # An old flat key applies to the metric asked for, listed or not.
    raw["metrics"] = (*(raw.get("metrics") or ()), name)
    score_options = migrate_score_options(raw)
    load_plugins(score_options.get("plugins") or ())
    found = _unbound(name, score_options)
    return found.bind((score_options.get("metric_options") or {}).get(name))


def check_score(score_options: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Every metric a score section names, with its options, checked before any call.

    Returns each listed metric's options as it will be built with them (defaults filled in).

    Raises:
        ValueError: an unknown metric (the message lists the known ones), an unknown option or
            an invalid value, or a plugin module that cannot be imported.
    """
    built: dict[str, dict[str, Any]] = {}
    for name in score_options.get("metrics") or ():
        try:
            m = resolve(name, score_options)
        except KeyError as exc:
            raise ValueError(exc.args[0]) from None
        if m.takes_options:
            built[name] = m.settings()
    extra = set(score_options.get("metric_options") or {}) - set(score_options.get("metrics") or ())
    if extra:
        raise ValueError(
            f"options given for {', '.join(sorted(extra))}, which score.metrics does not list"
        )
    return built


def rough_cost(m: Metric, s: Sample, deps: Deps, sheet: CostSheet) -> None:
    """One call of the metric's largest prompt per row (every context for a prompt per context)."""
    texts = [s.question, s.response or "", s.reference or ""]
    if m.needs_llm:
        if m.window is not None:
            spec = m.window(s, deps)
            base = sheet.chat_tokens(*spec.messages[:2])
            ctx = [sheet.text_tokens(deps.judge, c) for c in s.contexts]
            if spec.mode == "each":
                sheet.tally("judge (rough)", "completion", len(ctx), len(ctx) * base + sum(ctx), 0)
            else:
                sheet.tally("judge (rough)", "completion", 1, base + sum(ctx), 0)
        else:
            tokens = sum(sheet.text_tokens(deps.judge, t) for t in texts)
            verdict = sheet.assume.verdict_tokens
            sheet.tally("judge (rough)", "completion", 1, tokens, verdict, "verdict_tokens")
    if m.needs_embeddings:
        tokens = sum(sheet.text_tokens(deps.embedder, t) for t in texts[1:])
        sheet.tally("embeddings (rough)", "embedding", 1, tokens, 0)


__all__ = [
    "ENTRY_POINTS",
    "FACTORIES",
    "METRICS",
    "CostFn",
    "CostSheet",
    "Deps",
    "JudgeError",
    "Metric",
    "NoOptions",
    "Options",
    "Outcome",
    "Sample",
    "Scorer",
    "Skip",
    "Window",
    "WindowFn",
    "check_score",
    "load_plugins",
    "metric",
    "resolve",
    "rough_cost",
]
