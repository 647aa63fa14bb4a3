"""Scripted judges and samples for the metric tests."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from ragaudit.cache import Gateway
from ragaudit.cache._fake import FakeRequest
from ragaudit.metrics import Deps, Sample, resolve
from ragaudit.tasks.score import score_rows

_RAGAS_INPUT = (
    "Now perform the same with the following input\ninput: ",
    "现在请对下面的输入完成同样的任务\n输入: ",
)


def payload(req: FakeRequest) -> dict[str, Any]:
    """The real input of a judge request: ragas's layout (English or ours in Chinese), or ours."""
    text = req.user
    for marker in _RAGAS_INPUT:
        if marker in text:
            start = text.rindex(marker) + len(marker)
            return json.JSONDecoder().raw_decode(text[start:])[0]
    return req.payload


Responder = Callable[[FakeRequest, dict[str, Any]], Any]


def judge(**steps: Responder | Any) -> Callable[[FakeRequest], Any]:
    """A fake responder: ``TitleOfReplySchema=value`` or ``=fn(request, input)`` per judge step."""

    def respond(req: FakeRequest) -> Any:
        if req.title not in steps:
            return None
        step = steps[req.title]
        return step(req, payload(req)) if callable(step) else step

    return respond


def make_deps(gateway: Gateway, **options: Any) -> Deps:
    return Deps.of(gateway=gateway, judge="fake/judge", embedder="fake/embed", options=options)


def sample(
    language: str = "en",
    question: str = "What is the capital of France?",
    response: str | None = "Paris is the capital of France.",
    reference: str | None = "Paris is the capital and largest city of France.",
    contexts: list[str] | None = None,
    reference_contexts: list[str] | None = None,
    qid: str = "q1",
) -> Sample:
    contexts = (
        contexts
        if contexts is not None
        else ["Paris is the capital of France.", "Berlin is in Germany."]
    )
    return Sample(
        qid,
        question,
        language,
        response,
        reference,
        contexts,
        [f"c{i}" for i in range(len(contexts))],
        reference_contexts,
        None,
    )


async def score(name: str, s: Sample, deps: Deps, window: int = 100_000) -> dict[str, Any]:
    """One row of metric ``name`` (through the stage's row function: statuses, trace, k)."""
    return (await score_rows(resolve(name, deps.options), [s], deps, window=window))[0]
