"""What every answer source provides, the registry, and the retrying runner around them."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence
from typing import Any, Protocol, runtime_checkable

from pydantic import BaseModel

from ragaudit.config import AnswerConfig
from ragaudit.dataset import Question
from ragaudit.errors import ConfigError
from ragaudit.registry import ANSWER_SOURCES
from ragaudit.secrets import redact

log = logging.getLogger(__name__)

# A Retry-After beyond this is not waited for: the question is marked failed instead.
MAX_DELAY_S = 60.0


class AnswerError(Exception):
    """An answer could not be had this time.

    Attributes:
        retryable: Another attempt may succeed (timeouts, 5xx, 429, an empty answer).
        retry_after: Seconds the service asked to wait, if it said.
        skipped: Not a failure: there is no answer to have (the column is empty).
    """

    def __init__(
        self,
        message: str,
        *,
        retryable: bool = True,
        retry_after: float | None = None,
        skipped: bool = False,
    ) -> None:
        super().__init__(message)
        self.retryable = retryable
        self.retry_after = retry_after
        self.skipped = skipped


class CitedAnswer(str):
    """An answer whose numbered citation markers point at ``citation_ids``.

    Marker 1 cites the first id: what a service returns that lists the documents it cites.
    """

    citation_ids: list[str]

    def __new__(cls, text: str, citation_ids: list[str]) -> CitedAnswer:  # noqa: D102
        out = super().__new__(cls, text)
        out.citation_ids = citation_ids
        return out


@runtime_checkable
class AnswerSource(Protocol):
    """The system under test, asked one question at a time."""

    name: str

    async def answer(self, question: Question) -> str:
        """The system's answer to ``question`` (raises :class:`AnswerError` or anything else)."""
        ...

    async def aclose(self) -> None:
        """Release connections."""
        ...


SourceFactory = Callable[[AnswerConfig, Any], AnswerSource]
"""``factory(config, options)``: the source built from ``collect.answers`` and the source's own
options (``collect.answers.options``, validated by the options model it was registered with)."""


def register_source(
    name: str, *, options: type[BaseModel] | None = None
) -> Callable[[SourceFactory], SourceFactory]:
    """Decorator: make an answer source constructible by ``name`` (built-in or a plugin's).

    ``options`` is the source's options model; ``collect.answers.options`` is checked against
    it when the config loads.
    """
    return ANSWER_SOURCES.register(name, options=options)


def source_names() -> Sequence[str]:
    """Names ``collect.answers.source`` may use."""
    return sorted(ANSWER_SOURCES.names())


def make_source(config: AnswerConfig) -> AnswerSource:
    """Build the configured answer source with the options the config holds for it.

    Raises:
        ConfigError: Unknown source, or a source whose settings are incomplete.
    """
    try:
        factory = ANSWER_SOURCES.get(config.source)
        options = ANSWER_SOURCES.build_options(config.source, config.options)
    except (KeyError, ValueError) as exc:
        raise ConfigError(f"collect.answers.source: {exc.args[0]}") from None
    return factory(config, options)


def _row(run_id: str, q: Question, source: str, **values: Any) -> dict[str, Any]:
    return {"run_id": run_id, "question_id": q.question_id, "source": source, **values}


async def answer_one(
    source: AnswerSource, q: Question, config: AnswerConfig, run_id: str
) -> dict[str, Any]:
    """One question's ``answers`` row: ``ok`` with the response, ``skipped`` or ``failed`` with why.

    Attempts are bounded (``retries + 1``), each limited to ``timeout_s``; the delay before a
    retry doubles from ``backoff_s`` and honours the service's Retry-After.
    """
    started = time.perf_counter()
    attempts = config.retries + 1
    last = ""
    for attempt in range(attempts):
        delay = config.backoff_s * 2**attempt
        try:
            async with asyncio.timeout(config.timeout_s):
                text = await source.answer(q)
            if not isinstance(text, str) or not text.strip():
                got = "None" if text is None else f"{type(text).__name__} {str(text)[:80]!r}"
                raise AnswerError(f"the source returned {got}, not an answer")
            return _row(
                run_id,
                q,
                source.name,
                response=text.strip(),
                status="ok",
                latency_s=time.perf_counter() - started,
                citation_ids=getattr(text, "citation_ids", None),
            )
        except AnswerError as exc:
            if exc.skipped:
                return _row(
                    run_id,
                    q,
                    source.name,
                    status="skipped",
                    error=redact(str(exc)),
                    latency_s=time.perf_counter() - started,
                )
            last = str(exc)
            if exc.retry_after is not None:
                if exc.retry_after > MAX_DELAY_S:
                    last += f" (asked to retry after {exc.retry_after:g} s)"
                    break
                delay = max(delay, exc.retry_after)
            if not exc.retryable:
                attempts = attempt + 1
                break
        except TimeoutError:
            last = f"no complete answer within {config.timeout_s:g} s"
        except Exception as exc:  # a failing system under test must not stop the other questions
            last = f"{type(exc).__name__}: {exc}"
        if attempt + 1 < attempts:
            await asyncio.sleep(min(delay, MAX_DELAY_S))
    error = redact(f"after {attempts} attempt{'s' if attempts > 1 else ''}: {last}")[:1000]
    log.warning("collect: question '%s': no answer from %s (%s)", q.question_id, source.name, error)
    return _row(
        run_id,
        q,
        source.name,
        status="failed",
        error=error,
        latency_s=time.perf_counter() - started,
    )


ANSWER_FAILURE_SHARE = 0.5
"""Share of questions without an answer above which a run is ``completed_with_failures``."""


def answer_failure_warnings(statuses: Sequence[str]) -> list[str]:
    """One warning when the system under test failed to answer most questions, else none.

    ``statuses`` are the ``answers`` table's statuses; ``skipped`` rows (no answer wanted) do
    not count. Scores over the few answers that came back describe the system no better than a
    judge that failed on most of its calls: the run says so and its exit status does too.
    """
    counted = [s for s in statuses if s != "skipped"]
    failed = sum(s == "failed" for s in counted)
    if not counted or failed / len(counted) <= ANSWER_FAILURE_SHARE:
        return []
    return [
        f"the system under test failed to answer {failed} of {len(counted)} questions "
        f"({failed / len(counted):.0%}; see the answers table's errors): its scores rest on "
        "the few answers that came back"
    ]


__all__ = [
    "ANSWER_FAILURE_SHARE",
    "answer_failure_warnings",
    "MAX_DELAY_S",
    "AnswerError",
    "AnswerSource",
    "CitedAnswer",
    "answer_one",
    "make_source",
    "register_source",
    "source_names",
]
