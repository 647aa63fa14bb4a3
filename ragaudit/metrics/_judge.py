"""The judge's side of a score: the per-row trace of parsed answers, and our own typed prompts.

Every structured answer a metric gets (ragas's and ours) is appended to the row's trace as
``{"step", "output"}`` (or ``{"step", "error"}``), so a score row keeps the statements, verdicts
and ratings it rests on, whichever metric produced them.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel

from ragaudit.metrics._base import Deps, JudgeError, Window
from ragaudit.prompts import Prompt

if TYPE_CHECKING:
    # The gateway (litellm) is imported where a request is built: registering the metrics
    # then imports none of it.
    from ragaudit.cache import Judged

_steps: contextvars.ContextVar[list[dict[str, Any]] | None] = contextvars.ContextVar(
    "ragaudit_metric_steps", default=None
)


@contextlib.contextmanager
def trace() -> Iterator[list[dict[str, Any]]]:
    """Collect the judge steps of one scored row (tasks started inside share the list)."""
    steps: list[dict[str, Any]] = []
    token = _steps.set(steps)
    try:
        yield steps
    finally:
        _steps.reset(token)


def steps() -> list[dict[str, Any]]:
    """The current row's judge steps so far (empty outside :func:`trace`)."""
    return _steps.get() or []


def record(
    step: str, output: Any = None, error: str | None = None, *, sample_index: int | None = None
) -> None:
    """Append one judge step to the current row's trace (no-op outside :func:`trace`).

    Samples of one request (``sample_index``) run concurrently and finish in any order; each
    is placed after the earlier samples of the same step, so a trace reads in sample order
    however the calls completed.
    """
    steps = _steps.get()
    if steps is None:
        return
    entry: dict[str, Any] = {"step": step}
    if sample_index:  # sample 0 is every unsampled call too: only later samples are marked
        entry["sample"] = sample_index
    if error is not None:
        entry["error"] = error
    else:
        entry["output"] = (
            output.model_dump(mode="json") if isinstance(output, BaseModel) else output
        )
    at = len(steps)
    if sample_index is not None:
        while (
            at > 0
            and steps[at - 1]["step"] == step
            and steps[at - 1].get("sample", 0) > sample_index
        ):
            at -= 1
    steps.insert(at, entry)


async def ask(
    deps: Deps,
    prompt: Prompt,
    inp: BaseModel,
    language: str,
    *,
    sample_index: int = 0,
    temperature: float | None = None,
) -> Any:
    """One of our typed prompts through the judge; the parsed answer, else :class:`JudgeError`."""
    messages = prompt.messages(inp, prompt.language(language))
    judged = await deps.llm.send(
        messages,
        prompt.output_model,
        prompt.key,
        temperature=temperature,
        sample_index=sample_index,
    )
    return settled(prompt.name, judged, sample_index=sample_index)


async def ask_samples(
    deps: Deps,
    prompt: Prompt,
    inp: BaseModel,
    language: str,
    n: int,
    *,
    temperature: float | None = None,
) -> list[Any]:
    """``n`` samples of one of our typed prompts, asked together (the judge's ``samples``).

    The parsed answers in sample order, each traced; else :class:`JudgeError` for the first
    sample that has none (after every sample is traced).
    """
    messages = prompt.messages(inp, prompt.language(language))
    answers = await deps.llm.samples(
        n, messages, prompt.output_model, prompt.key, temperature=temperature
    )
    values, failure = [], None
    for index, judged in enumerate(answers):
        try:
            values.append(settled(prompt.name, judged, sample_index=index))
        except JudgeError as exc:
            failure = failure or exc
    if failure is not None:
        raise failure
    return values


def settled(step: str, judged: Judged[Any], *, sample_index: int | None = None) -> Any:
    """The parsed answer of ``judged``, traced as ``step``; else :class:`JudgeError`, traced."""
    if not judged.ok:
        record(step, error=judged.error, sample_index=sample_index)
        raise JudgeError(f"{step}: {judged.error}")
    record(step, judged.value, sample_index=sample_index)
    return judged.value


def own_window(
    prompt: Prompt, inp: BaseModel, language: str, mode: Literal["joined", "each"]
) -> Window:
    """The request :func:`ask` would send for ``inp`` (contexts left empty by the caller).

    The schema sent as ``response_format`` is counted as one more text, as the gateway counts
    it against the prompt budget.
    """
    lang = prompt.language(language)
    return structured_window(prompt.output_model, prompt.messages(inp, lang), mode)


def structured_window(
    schema: type[BaseModel], messages: list[dict[str, Any]], mode: Literal["joined", "each"]
) -> Window:
    """The texts the gateway's structured call sends for ``messages``, as a :class:`Window`.

    Its schema message, the messages, and the schema once more as ``response_format`` (counted
    as a text, as the gateway counts it against the prompt budget).
    """
    from ragaudit.cache import response_schema_text, structured_messages

    sent = structured_messages(schema, messages)
    return Window([m["content"] for m in sent] + [response_schema_text(schema)], mode)


__all__ = [
    "ask",
    "ask_samples",
    "own_window",
    "record",
    "settled",
    "steps",
    "structured_window",
    "trace",
]
