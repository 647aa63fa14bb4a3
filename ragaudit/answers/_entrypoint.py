"""The ``entrypoint`` answer source: a Python function (``package.module:function``).

The function takes ``(question, filters)`` and returns the answer text; it may be async. A
sync function runs in a worker thread so that a slow chain (a LangChain ``invoke``, say)
does not hold up the event loop, and several questions are answered at once.
"""

from __future__ import annotations

import asyncio
import importlib
import inspect
from collections.abc import Callable
from typing import Any

from ragaudit.answers._base import register_source
from ragaudit.config import AnswerConfig
from ragaudit.dataset import Question
from ragaudit.errors import ConfigError


def resolve_entrypoint(spec: str) -> Callable[..., Any]:
    """``package.module:function`` → the function.

    Raises:
        ConfigError: Malformed, not importable, or not callable.
    """
    module_name, _, attr = spec.partition(":")
    if not module_name or not attr:
        raise ConfigError(f"collect.answers.entrypoint: '{spec}' is not 'package.module:function'")
    try:
        fn = importlib.import_module(module_name)
        for part in attr.split("."):
            fn = getattr(fn, part)
    except (ImportError, AttributeError) as exc:
        raise ConfigError(f"collect.answers.entrypoint: cannot load '{spec}' ({exc})") from None
    if not callable(fn):
        raise ConfigError(f"collect.answers.entrypoint: '{spec}' is not callable")
    return fn


class EntrypointSource:
    """Calls a Python function per question."""

    name = "entrypoint"

    def __init__(self, fn: Callable[..., Any]) -> None:
        """Answer with ``fn(question, filters)``."""
        self.fn = fn
        self.is_async = inspect.iscoroutinefunction(fn)

    async def answer(self, question: Question) -> str:
        """The function's return value for this question."""
        if self.is_async:
            return await self.fn(question.question, dict(question.filters))
        out = await asyncio.to_thread(self.fn, question.question, dict(question.filters))
        if inspect.isawaitable(out):  # a sync wrapper handing back a coroutine
            out = await out
        return out

    async def aclose(self) -> None:
        """Nothing to release."""


@register_source("entrypoint")
def _entrypoint(config: AnswerConfig, options: object) -> EntrypointSource:
    if not config.entrypoint:
        raise ConfigError(
            "collect.answers.entrypoint: required when collect.answers.source is 'entrypoint'"
        )
    return EntrypointSource(resolve_entrypoint(config.entrypoint))


__all__ = ["EntrypointSource", "resolve_entrypoint"]
