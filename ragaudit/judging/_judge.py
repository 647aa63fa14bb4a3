"""The judge as every algorithm sees it: a gateway, a model and its window, asked in one place.

:class:`Judge` is the only way library code asks the judge: grading and ordering
(:meth:`Judge.ask`), the windowed writers of references and nuggets, our metrics' typed prompts
and the ragas bridge (:meth:`Judge.send`, :meth:`Judge.samples`). A stage builds it once from
the config (:meth:`Judge.from_config`: the window, the answer budget and the temperature worked
out there) and hands it, or the grader it stands for, to what it runs.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from pydantic import BaseModel

from ragaudit.cache import (
    Gateway,
    Judged,
    context_window,
    judge_repeat,
    structured_messages,
    structured_prompt_tokens,
)
from ragaudit.concurrency import gather_limited
from ragaudit.config import ModelsConfig
from ragaudit.prompts import Prompt

T = TypeVar("T")
R = TypeVar("R")
V = TypeVar("V", bound=BaseModel)

# Tokens kept free when a context is cut to fit: BPE may merge a few tokens differently where
# the cut text meets the prompt's JSON.
FIT_SLACK = 8


@dataclass(frozen=True)
class Judge:
    """One judge model behind the gateway, with what every judge call needs.

    Attributes:
        gateway: The gateway every call goes through (memo, limits, call log).
        model: The judge model string.
        window: The judge's context window in tokens (None: prompts are not checked against
            one, as a metric scored outside a run).
        max_tokens: The answer's ``max_tokens``.
        temperature: Sampling temperature.
        in_flight: Items (candidates, questions) worked on at once; the gateway's own limit
            bounds the calls.
        repeat: Which judge repeat of each request this judge asks (0: the request asked
            once, the memo key of a judge without repeats); the gateway's ``judge_repeat``
            keys and samples it, as it does a metric's repeats.
    """

    gateway: Gateway
    model: str
    window: int | None
    max_tokens: int
    temperature: float = 0.0
    in_flight: int = 64
    repeat: int = 0

    @classmethod
    def from_config(
        cls, models: ModelsConfig, gateway: Gateway, in_flight: int, model: str | None = None
    ) -> Judge:
        """The judge a run with ``models`` asks: the judge model, or ``model`` (a grader).

        The one place a run's judge window, answer budget and temperature are worked out.

        Args:
            models: The config's ``models`` section (judge model, its window, answer limits).
            gateway: The gateway every call goes through (None: a dry run, which only sizes).
            in_flight: Items worked on at once.
            model: Another grading model (a jury member) with the same limits.
        """
        model = model or models.judge_model
        return cls(
            gateway=gateway,
            model=model,
            window=context_window(model, models.judge_context_window),
            max_tokens=models.max_output_tokens,
            temperature=models.temperature,
            in_flight=in_flight,
        )

    def member(self, models: ModelsConfig, model: str) -> Judge:
        """The judge ``model`` of a jury this judge sits on, as a run with ``models`` asks it.

        This judge for its own model; another member with the same gateway and limits and its
        own window (:meth:`from_config`).
        """
        if model == self.model:
            return self
        return Judge.from_config(models, self.gateway, self.in_flight, model=model)

    @property
    def budget(self) -> int | None:
        """Tokens a judge prompt may use: the window less the answer's ``max_tokens``."""
        return None if self.window is None else self.window - self.max_tokens

    async def send(
        self,
        messages: list[dict[str, Any]],
        schema: type[V],
        prompt_version: str,
        *,
        max_tokens: int | None = None,
        prompt_budget: int | None = None,
        temperature: float | None = None,
        sample_index: int | None = None,
    ) -> Judged[V]:
        """One structured answer to ``messages`` (never raises for the model).

        ``max_tokens`` (default: the judge's) and the prompt budget that goes with it (default:
        the window less it) are a writer's own when it reserves its answer room itself.
        """
        max_tokens = self.max_tokens if max_tokens is None else max_tokens
        if prompt_budget is None and self.window is not None:
            prompt_budget = self.window - max_tokens
        return await self._structured(
            model=self.model,
            messages=messages,
            schema=schema,
            prompt_version=prompt_version,
            sample_index=sample_index,
            prompt_budget=prompt_budget,
            temperature=self.temperature if temperature is None else temperature,
            max_tokens=max_tokens,
        )

    async def samples(
        self,
        n: int,
        messages: list[dict[str, Any]],
        schema: type[V],
        prompt_version: str,
        *,
        temperature: float | None = None,
    ) -> list[Judged[V]]:
        """``n`` samples of one structured request, in sample order (the gateway's ``asamples``)."""
        return await self._samples(
            n,
            model=self.model,
            messages=messages,
            schema=schema,
            prompt_version=prompt_version,
            prompt_budget=self.budget,
            temperature=self.temperature if temperature is None else temperature,
            max_tokens=self.max_tokens,
        )

    async def _structured(self, **request: Any) -> Judged[Any]:
        # The one place a judge request leaves for the gateway (a CountingJudge counts it).
        return await self.gateway.astructured(**request)

    async def _samples(self, n: int, **request: Any) -> list[Judged[Any]]:
        return await self.gateway.asamples(n=n, **request)

    async def ask(self, prompt: Prompt[Any, V], inp: BaseModel, language: str) -> Judged[V]:
        """One structured judge answer to ``prompt`` on ``inp`` (never raises for the model)."""
        with judge_repeat(self.repeat, self.temperature):
            return await self.send(prompt.messages(inp, language), prompt.output_model, prompt.key)

    def room(self, prompt: Prompt[Any, Any], empty: BaseModel, language: str) -> int:
        """Tokens left for the contexts: the budget less the prompt rendered with them empty."""
        if self.budget is None:
            raise ValueError(f"judge {self.model}: no window to fit contexts to")
        fixed = structured_prompt_tokens(
            self.model, prompt.output_model, prompt.messages(empty, language)
        )
        return self.budget - fixed - FIT_SLACK


@dataclass(frozen=True)
class PlannedRequest:
    """One request a judge-using algorithm would send: what a dry run counts."""

    model: str
    messages: list[dict[str, Any]]
    """As the gateway sends them: the schema message first."""
    prompt_version: str
    max_tokens: int


def _no_answer(schema: type[BaseModel]) -> Any:
    return None


@dataclass(frozen=True)
class CountingJudge(Judge):
    """A judge that counts instead of calling: what an algorithm's ``plan`` runs it with.

    Every request the algorithm sends is appended to ``requests`` as the gateway would send
    it; a prompt over the budget is refused as the gateway refuses it (``too_long``, not sent),
    so the algorithm cuts its inputs exactly as it does in a run. Each request is answered
    with ``answer(schema)``, a stand-in (None: a failed answer).
    """

    requests: list[PlannedRequest] = field(default_factory=list, compare=False)
    answer: Callable[[type[BaseModel]], Any] = field(default=_no_answer, compare=False)

    @classmethod
    def like(
        cls,
        judge: Judge,
        answer: Callable[[type[BaseModel]], Any],
        requests: list[PlannedRequest],
    ) -> CountingJudge:
        """``judge`` (model, window, budgets, repeat) counting into ``requests``."""
        same = {f.name: getattr(judge, f.name) for f in dataclasses.fields(Judge)}
        return cls(**same, requests=requests, answer=answer)

    async def _structured(self, **request: Any) -> Judged[Any]:
        """The stand-in answer to a request, counted; none for one over its budget."""
        model, schema, messages = request["model"], request["schema"], request["messages"]
        budget = request["prompt_budget"]
        tokens = structured_prompt_tokens(model, schema, messages)
        if budget is not None and tokens > budget:
            error = f"prompt of {tokens} tokens is over its budget of {budget}"
            return Judged(None, "", "too_long", error, prompt_tokens=tokens)
        sent = structured_messages(schema, messages)
        version, max_tokens = request["prompt_version"], request["max_tokens"]
        self.requests.append(PlannedRequest(model, sent, version, max_tokens))
        value = self.answer(schema)
        status = "ok" if value is not None else "failed"
        return Judged(value, "", status, calls=1, prompt_tokens=tokens)

    async def _samples(self, n: int, **request: Any) -> list[Judged[Any]]:
        return [await self._structured(**request) for _ in range(n)]


@dataclass
class Spend:
    """What one phase of one question asked of the judge."""

    calls: int = 0
    """Judge answers asked (a prompt over the window is not asked); memo hits and grades the
    judgment store held count as answers."""
    prompt_tokens: int = 0
    """Prompt tokens of those answers, as the gateway counts them (memo and store hits
    included)."""
    failed: int = 0
    """Answers that came back without a usable value."""

    def add(self, judged: Judged[Any]) -> None:
        """Count one answer."""
        if judged.calls or judged.ok:
            self.calls += 1
            self.prompt_tokens += judged.prompt_tokens
        if not judged.ok:
            self.failed += 1


def parsed(judged: Judged[V] | None) -> V | None:
    """The parsed answer of a judgement that succeeded; None for a failed or missing one."""
    return judged.value if judged is not None and judged.ok else None


def shown_order(ids: Sequence[str], salt: str = "") -> list[str]:
    """The order a set of candidates is shown in one prompt: a shuffle seeded by their ids.

    It depends on which ids are shown and on nothing else (not the engine's order, not the
    order the algorithm holds them in), so the same set is the same prompt, a memo hit, and a
    judge's preference for a position falls on a different candidate from one set to the next.
    ``salt`` gives the same set another layout (to ask it again with independent position bias).
    """
    seed = salt + "\x1d" + "\x1f".join(sorted(ids))
    return sorted(ids, key=lambda c: hashlib.sha256(f"{seed}\x1e{c}".encode()).digest())


def stable_key(cid: str) -> bytes:
    """A per-id sort key independent of any input order (where no better order is known)."""
    return hashlib.sha256(cid.encode()).digest()


__all__ = [
    "CountingJudge",
    "Judge",
    "PlannedRequest",
    "Spend",
    "gather_limited",
    "parsed",
    "shown_order",
    "stable_key",
]
