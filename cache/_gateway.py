"""The one gateway every LLM and embedding call goes through.

On top of litellm it adds what an evaluation needs and litellm's own cache does not give
cheaply: a memo keyed on the output-affecting request only (``Memo``, on diskcache today), an
adaptive per-model concurrency limit, bounded retries with backoff that honours Retry-After,
typed structured output with a bounded number of repairs (one by default) and a prompt budget,
and one call-log row per call.

One gateway serves a memo per process (:func:`shared_gateway`, :func:`open_gateway`), keyed
by the memo's identity (its resolved folder, or its Redis URL without password): its memo
handles and per-loop limits are shared by every run and stage; what belongs to a run (its id,
where its call log goes) is the scope's (:meth:`Gateway.scope`).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import contextvars
import dataclasses
import email.utils
import functools
import json
import logging
import random
import threading
import time
import weakref
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, TypeVar

import litellm
from pydantic import BaseModel, ValidationError

from ragaudit import _env
from ragaudit.cache._calllog import (
    DEFAULT_FLUSH_EVERY,
    DEFAULT_FLUSH_INTERVAL_S,
    CallCounts,
    CallLog,
    CallRecord,
)
from ragaudit.cache._keys import canonical_hash, canonical_json, request_key
from ragaudit.cache._limiter import AdaptiveLimiter, LimitStats
from ragaudit.cache._memo import Memo, MemoLocation, RedisTarget, memo_identity, open_memo
from ragaudit.cache._tokens import context_window, count_prompt, count_tokens
from ragaudit.cache.providers import price_at_zero, provider_record, samples_at_once
from ragaudit.concurrency import await_shared
from ragaudit.errors import ConfigError
from ragaudit.secrets import known_secrets, redact
from ragaudit.secrets import register as register_secret

T = TypeVar("T", bound=BaseModel)
R = TypeVar("R")

# Failures worth another try: the provider is busy, slow or briefly broken. Anything else
# (bad request, auth, context overflow) fails at once: retrying cannot change the answer.
TRANSIENT_ERRORS: tuple[type[BaseException], ...] = (
    litellm.RateLimitError,
    litellm.APIConnectionError,
    litellm.Timeout,
    litellm.ServiceUnavailableError,
    litellm.InternalServerError,
    asyncio.TimeoutError,
)
MAX_RETRY_AFTER_S = 120.0

# Request fields the gateway owns; a caller's value for them is replaced.
_RESERVED = {"num_retries", "max_retries", "timeout", "stream", "caching"}

# A reply cut off at its token budget is kept in the memo only this long: a provider that
# ignores the budget can send megabytes, and a cut-off reply is never a valid answer anyway.
KEPT_CUT_OFF_CHARS = 8000
# A cut-off answer is asked once more with at most this many times its budget (window allowing).
CUT_OFF_WIDEN = 4
# The provider's answers to a request with a rejected key (401 unauthorised, 403 forbidden).
_REJECTED = (litellm.AuthenticationError, litellm.PermissionDeniedError)

log = logging.getLogger("ragaudit.gateway")


class KeyRejected(ConfigError):
    """The provider rejected the model's API key: every further request would be refused too."""


@dataclass
class _Scope:
    stage: str = ""
    run_id: str = ""
    counts: CallCounts = field(default_factory=CallCounts)
    raw: list[str] | None = None
    # The run's own call log (part files in its llm_calls/); None: the gateway's in-memory log.
    log: CallLog | None = None


@dataclass
class _LoopState:
    """What belongs to one event loop: asyncio objects cannot be shared across loops."""

    limiters: dict[str, AdaptiveLimiter] = field(default_factory=dict)


@dataclass
class _Lookup:
    """A completion request, its memo key and what the memo held for it when looked up."""

    scope: _Scope
    request: dict[str, Any]
    prompt_version: str | None
    key: str
    index: int
    """The sample index (0: the first sample, or the one answer)."""
    cached: dict[str, Any] | None
    started: float


_scope: contextvars.ContextVar[_Scope | None] = contextvars.ContextVar(
    "ragaudit_scope", default=None
)


def current_stage() -> str:
    """The stage (or metric task, ``score:<metric>``) whose scope the caller runs in, or ''."""
    scope = _scope.get()
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


@dataclass
class Judged(Generic[T]):
    """A structured judge answer: the parsed value, or why there is none."""

    value: T | None
    raw: str
    status: str
    """``ok``, ``too_long``, ``truncated``, ``no_room`` or ``failed`` (see ``astructured``)."""
    error: str | None = None
    repaired: bool = False
    tokens_in: int = 0
    tokens_out: int = 0
    calls: int = 0
    """Requests sent: 0 (not sent), 1, plus one per repair and one for a cut-off answer asked
    again with more room (at most ``2 + max_repairs``)."""
    prompt_tokens: int = 0
    """The first prompt as :func:`structured_prompt_tokens` counts it (0: no budget given)."""
    repair_prompt_tokens: int | None = None
    """The last repair prompt, counted the same way, when a repair was sent under a budget."""

    @property
    def ok(self) -> bool:
        """Whether ``value`` holds a parsed answer."""
        return self.status == "ok"


def _retry_after(exc: BaseException) -> float | None:
    """Seconds the provider asked us to wait, from the exception's response headers."""
    headers: Any = getattr(exc, "litellm_response_headers", None)
    response = getattr(exc, "response", None)
    if headers is None and response is not None:
        headers = getattr(response, "headers", None)
    if not headers:
        return None
    value = headers.get("retry-after-ms")
    if value is not None:
        with contextlib.suppress(ValueError):
            return float(value) / 1000.0
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return float(value)
    except ValueError:
        pass
    try:
        parsed = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        # A header we cannot read must not turn a retryable rate limit into a crash.
        return None
    return max(0.0, parsed.timestamp() - time.time()) if parsed else None


def extract_json(text: str) -> str:
    """The JSON object inside a reply that may wrap it in prose or a code fence."""
    text = text.strip()
    if text.startswith("```"):
        text = text.strip("`")
        text = text[text.find("\n") + 1 :] if "\n" in text else text
    start = min((i for i in (text.find("{"), text.find("[")) if i >= 0), default=-1)
    if start < 0:
        return text
    end = max(text.rfind("}"), text.rfind("]"))
    return text[start : end + 1] if end > start else text[start:]


@functools.lru_cache(maxsize=512)
def _schema_json(schema: type[BaseModel]) -> str:
    # Generating a JSON schema is a sizeable share of a call's CPU in pydantic, twice per call,
    # which shows with many calls in flight on a loaded machine (bench/bench_sort.py).
    return canonical_json(schema.model_json_schema())


def schema_instruction(schema: type[BaseModel]) -> str:
    """The instruction that asks for JSON of ``schema`` (for models without native schemas)."""
    return "Reply with one JSON object only, no prose, matching this JSON schema:\n" + _schema_json(
        schema
    )


def structured_messages(
    schema: type[BaseModel], messages: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """The messages ``astructured`` sends for ``messages``: the schema instruction first."""
    return [{"role": "system", "content": schema_instruction(schema)}, *messages]


def _response_format(schema: type[BaseModel]) -> dict[str, Any]:
    return {
        "type": "json_schema",
        # A fresh dict per call (litellm may edit it); the canonical key is unchanged.
        "json_schema": {
            "name": schema.__name__,
            "schema": json.loads(_schema_json(schema)),
            "strict": False,
        },
    }


def response_schema_text(schema: type[BaseModel]) -> str:
    """``schema`` as the text a provider may add to the prompt from ``response_format``."""
    return _schema_json(schema)


@functools.lru_cache(maxsize=512)
def _format_tokens(model: str, schema: type[BaseModel]) -> int:
    # Providers that honour response_format natively put the schema into the prompt as well:
    # it is counted once more, as text, on top of the schema message.
    return count_tokens(model, _schema_json(schema))


def _sent_tokens(model: str, schema: type[BaseModel], sent: list[dict[str, Any]]) -> int:
    return count_prompt(model, sent) + _format_tokens(model, schema)


def structured_prompt_tokens(
    model: str, schema: type[BaseModel], messages: list[dict[str, Any]]
) -> int:
    """Tokens of the prompt ``astructured`` sends for ``messages`` (what its budget limits).

    The messages of :func:`structured_messages` as litellm counts them for ``model``, plus the
    schema sent as ``response_format``.
    """
    return _sent_tokens(model, schema, structured_messages(schema, messages))


def _repair_messages(sent: list[dict[str, Any]], raw: str, problem: str) -> list[dict[str, Any]]:
    # The model is shown its own reply and what was wrong with it.
    return [
        *sent,
        {"role": "assistant", "content": raw},
        {
            "role": "user",
            "content": f"That reply is not valid ({problem}). "
            "Reply again with only the JSON object that matches the schema.",
        },
    ]


def _cut_off(response: Any, tokens_out: int, max_tokens: int | None) -> bool:
    """Whether the answer stopped at ``max_tokens`` (litellm maps every provider's reason)."""
    if getattr(response.choices[0], "finish_reason", None) in {"length", "max_tokens"}:
        return True
    # Some providers report no reason: an invalid answer that used the whole budget was cut.
    if not max_tokens:
        return False
    return tokens_out >= max_tokens


def _redacted(value: Any, secrets: list[str]) -> Any:
    """``value`` with every secret in its strings replaced, as the run folder's writer does."""
    if isinstance(value, str):
        for secret in secrets:
            if secret in value:
                value = value.replace(secret, "***")
        return value
    if isinstance(value, dict):
        return {k: _redacted(v, secrets) for k, v in value.items()}
    if isinstance(value, list):
        return [_redacted(v, secrets) for v in value]
    return value


class Gateway:
    """Memoised, logged, rate-limited access to litellm models.

    Most code should not build one: :func:`shared_gateway` and :func:`open_gateway` give the
    process's one gateway for a cache folder.

    Args:
        cache_dir: where the memo is (shared by every run): a diskcache folder or a
            :class:`~ragaudit.cache.RedisTarget`; only a name when ``memo`` is given.
        call_log: where call rows made outside a scope with a ``calls_dir`` go; a fresh
            in-memory one if None.
        concurrency: calls in flight at once per model at most (the adaptive limit's maximum).
        max_retries: retries of a transient failure before it is final.
        max_repairs: re-asks of a structured answer that is not valid JSON of its schema
            (:meth:`astructured`, which every judge answer goes through): an answer costs at
            most ``1 + max_repairs`` calls, one more when a cut-off answer is asked again.
        backoff_s: first backoff delay, doubled per retry, with jitter.
        timeout_s: per-request timeout.
        memo: the memo; the one at ``cache_dir`` (:func:`open_memo`) if None.
        log_every: a scope's call log writes a part file every this many calls ...
        log_interval_s: ... or this many seconds, whichever comes first.
        global_limit: when set, every completion holds a slot of the Prefect global
            concurrency limit ``ragaudit-judge`` (shared by every process of a run).
        global_lease: slots this process leases at once from the global limit and shares
            among its calls (its share of the limit); None: ``min(concurrency, global_limit)``.
    """

    def __init__(
        self,
        cache_dir: MemoLocation,
        call_log: CallLog | None = None,
        *,
        concurrency: int = 8,
        max_retries: int = 4,
        max_repairs: int = 1,
        backoff_s: float = 1.0,
        timeout_s: float = 120.0,
        memo: Memo | None = None,
        log_every: int = DEFAULT_FLUSH_EVERY,
        log_interval_s: float = DEFAULT_FLUSH_INTERVAL_S,
        global_limit: int | None = None,
        global_lease: int | None = None,
    ) -> None:
        from ragaudit.cache import providers

        providers.register_all()
        # Every gateway user fans out many concurrent calls: tune the process for it once.
        _env.tune_for_concurrency()
        self.location = memo_identity(cache_dir)
        """The memo's name without credentials (the registry key)."""
        self.cache_dir = None if isinstance(cache_dir, RedisTarget) else Path(cache_dir)
        self.memo: Memo = memo if memo is not None else open_memo(cache_dir)
        self.log = call_log or CallLog()
        self.concurrency = concurrency
        self.max_retries = max_retries
        self.max_repairs = max_repairs
        self.backoff_s = backoff_s
        self.timeout_s = timeout_s
        self.log_every = log_every
        # Completions take a slot of the Prefect global limit (cache/_global.py) when set.
        self.global_limit = global_limit
        self.global_lease = global_lease
        self.log_interval_s = log_interval_s
        self._users = 0
        # Keyed by the loop object, weakly: a loop's limiters and in-flight calls die with it,
        # and a new loop that happens to get a dead one's id() never inherits them.
        self._loops: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _LoopState] = (
            weakref.WeakKeyDictionary()
        )
        self._loops_lock = threading.Lock()
        self._limit_stats: dict[str, LimitStats] = {}
        # Requests on their way to a provider, by memo key, for every thread and event loop of
        # the process: Prefect runs each metric's task in a thread with its own loop, and two
        # metrics asking one prompt from two threads must pay for it once, whatever the timing.
        self._inflight: dict[str, concurrent.futures.Future[dict[str, Any]]] = {}
        self._inflight_lock = threading.Lock()
        self._memo_lock = threading.Lock()
        self.memo_failure: str | None = None
        """Why the memo stopped working (None: it works); the gateway goes on without it."""
        # Models whose key the provider rejected, with the message every later request gets.
        self._rejected: dict[str, str] = {}

    def configure(self, **settings: Any) -> None:
        """Take new limits and retry settings (a new event loop's limiters start from them)."""
        for name, value in settings.items():
            if name not in _SETTINGS:
                raise TypeError(f"Gateway.configure: unknown setting '{name}'")
            setattr(self, name, value)

    # -- scoping ------------------------------------------------------------------------

    @contextlib.contextmanager
    def scope(
        self, stage: str, *, run_id: str = "", calls_dir: Path | None = None
    ) -> Iterator[CallCounts]:
        """Label the calls made inside with ``stage`` and ``run_id`` and count them.

        Args:
            stage: the stage (or metric task) making the calls.
            run_id: the run they belong to.
            calls_dir: the run's ``llm_calls/`` folder: the calls' rows are written there part
                by part while the scope runs (and the rest when it ends), not kept in memory.

        Yields:
            The scope's call counts.
        """
        log = None
        if calls_dir is not None:
            log = CallLog(
                Path(calls_dir),
                prefix=stage,
                every=self.log_every,
                interval_s=self.log_interval_s,
            )
        new = _Scope(stage=stage, run_id=run_id, log=log)
        token = _scope.set(new)
        try:
            yield new.counts
        finally:
            _scope.reset(token)
            # The calls made so far are kept even when the stage fails: they were paid for.
            if log is not None:
                log.close()

    @contextlib.contextmanager
    def item_scope(self, keep_raw: bool = False) -> Iterator[list[str]]:
        """One scored item; yields the raw replies (kept when ``keep_raw``).

        Counts still go to the enclosing stage scope.
        """
        parent = self._current()
        new = _Scope(
            stage=parent.stage,
            run_id=parent.run_id,
            counts=parent.counts,
            log=parent.log,
            raw=[] if keep_raw else None,
        )
        token = _scope.set(new)
        try:
            yield new.raw if new.raw is not None else []
        finally:
            _scope.reset(token)

    def _record(self, scope: _Scope, record: CallRecord) -> None:
        (scope.log or self.log).add(record)
        counts = scope.counts
        counts.calls += 1
        if record.cache_hit:
            counts.cache_hits += 1
        else:
            counts.provider_calls += 1

    def _current(self) -> _Scope:
        return _scope.get() or _Scope()

    # -- the memo, guarded ----------------------------------------------------------------

    def _memo_get(self, key: str) -> Any | None:
        if self.memo_failure is not None:
            return None
        try:
            return self.memo.get(key)
        except Exception as exc:
            self._memo_failed(exc)
            return None

    def _memo_get_many(self, keys: list[str]) -> list[Any | None]:
        if self.memo_failure is not None:
            return [None] * len(keys)
        get_many = getattr(self.memo, "get_many", None)
        try:
            # One round trip for the batch where the memo offers it (Redis: MGET).
            return (
                list(get_many(keys)) if get_many is not None else [self.memo.get(k) for k in keys]
            )
        except Exception as exc:
            self._memo_failed(exc)
            return [None] * len(keys)

    def _memo_set(self, key: str, value: Any) -> None:
        if self.memo_failure is not None:
            return
        try:
            self.memo.set(key, value)
        except Exception as exc:
            self._memo_failed(exc)

    def _memo_failed(self, exc: BaseException) -> None:
        """Go on without the memo from now on, and say so once.

        An answer already paid for is worth more than the memo entry that failed to keep it:
        the caller still gets it, and the run finishes with every call in its call log. Going
        on costs only what a memo saves a re-run; stopping would throw the run's paid work
        away for a cache. The memo is not tried again: a lost Redis costs its socket timeout
        on every attempt, and a full disk stays full.
        """
        with self._memo_lock:
            if self.memo_failure is not None:
                return
            self.memo_failure = redact(f"{type(exc).__name__}: {exc}")[:500]
        log.warning(
            "the LLM memo at %s is failing (%s): going on without it; answers from here on are "
            "not kept, so a re-run pays for them again",
            self.location,
            self.memo_failure,
        )

    def _stored(self, response: Any) -> dict[str, Any]:
        """``response`` as the memo keeps it: secrets it echoes redacted, a cut-off reply cut."""
        dumped = response.model_dump(mode="json")
        for choice in dumped.get("choices") or []:
            message = choice.get("message") or {}
            content = message.get("content")
            if (
                choice.get("finish_reason") in {"length", "max_tokens"}
                and isinstance(content, str)
                and len(content) > KEPT_CUT_OFF_CHARS
            ):
                message["content"] = content[:KEPT_CUT_OFF_CHARS]
        secrets = sorted(known_secrets(), key=len, reverse=True)
        return _redacted(dumped, secrets) if secrets else dumped

    def _loop_state(self) -> _LoopState:
        # Prefect tasks may each run their own event loop, in their own thread.
        loop = asyncio.get_running_loop()
        state = self._loops.get(loop)
        if state is None:
            with self._loops_lock:
                state = self._loops.setdefault(loop, _LoopState())
        return state

    def _limiter(self, model: str) -> AdaptiveLimiter:
        limiters = self._loop_state().limiters
        limiter = limiters.get(model)
        if limiter is None:
            stats = self._limit_stats.get(model)
            if stats is None:
                stats = self._limit_stats[model] = LimitStats(
                    configured=self.concurrency, lowest=self.concurrency, final=self.concurrency
                )
            limiter = limiters[model] = AdaptiveLimiter(model, self.concurrency, stats)
        return limiter

    def limits_report(self) -> dict[str, dict[str, int]]:
        """Per model: the configured, lowest and final adaptive limits, and the rate limits.

        Over every event loop this gateway served.
        """
        return {model: stats.as_dict() for model, stats in sorted(self._limit_stats.items())}

    # -- completion ---------------------------------------------------------------------

    async def acompletion(
        self,
        *,
        model: str,
        messages: list[dict[str, Any]],
        prompt_version: str | None = None,
        sample_index: int | None = None,
        **params: Any,
    ) -> litellm.ModelResponse:
        """One chat completion through the memo; raises the provider's error after retries."""
        found = self._lookup(model, messages, prompt_version, sample_index, params)
        return await self._complete(found)

    def _lookup(
        self,
        model: str,
        messages: list[dict[str, Any]],
        prompt_version: str | None,
        sample_index: int | None,
        params: dict[str, Any],
    ) -> _Lookup:
        """The request's memo key and the memo's answer to it (nothing recorded or taken)."""
        started = time.perf_counter()
        params = _repeated({k: v for k, v in params.items() if k not in _RESERVED})
        # A key passed as an argument is as secret as one in the environment: a provider may
        # echo it in an error message, which then goes to the call log.
        register_secret(params.get("api_key"))
        request = {"model": model, "messages": messages, **params}
        scope = self._current()
        key = self._key(request, prompt_version, sample_index)
        cached = self._memo_get(key)
        return _Lookup(scope, request, prompt_version, key, sample_index or 0, cached, started)

    async def _complete(self, found: _Lookup) -> litellm.ModelResponse:
        """:meth:`acompletion` from its :meth:`_lookup`, taken with no wait since."""
        scope, key, cached, started = found.scope, found.key, found.cached, found.started
        model = found.request["model"]
        record = CallRecord(
            kind="completion",
            key_hash=key,
            model=model,
            stage=scope.stage,
            run_id=scope.run_id,
            prompt_version=found.prompt_version,
        )
        future = None
        if cached is None:
            cached, pending, future = self._claim(key)
            if pending is not None:
                # The same request is already on its way (two metrics asking one prompt): share
                # its answer instead of paying twice. A failure is shared too, as it would repeat.
                try:
                    cached = await await_shared(pending)
                except Exception:
                    record.latency_s = time.perf_counter() - started
                    record.cache_hit = True
                    record.error = "shared the failure of an identical call in flight"
                    self._record(scope, record)
                    raise
        if cached is not None:
            response = litellm.ModelResponse(**cached)
            record.cache_hit = True
            self._fill_usage(record, response, cost=False)
            record.latency_s = time.perf_counter() - started
            self._record(scope, record)
            self._keep_raw(scope, response)
            return response
        assert future is not None
        try:
            try:
                response = await self._call_provider(record, params=found.request)
            finally:
                record.latency_s = time.perf_counter() - started
                # The row is logged before the answer is memoised: a crash in between leaves a
                # paid call in the log, never one that only the memo knows of.
                self._record(scope, record)
            self._fill_usage(record, response, cost=True)
            dumped = self._stored(response)
            self._memo_set(key, dumped)
        except BaseException as exc:
            self._release(key, future, error=exc)
            raise
        self._release(key, future, value=dumped)
        response = litellm.ModelResponse(**dumped)
        self._keep_raw(scope, response)
        return response

    def _claim(
        self, key: str
    ) -> tuple[
        dict[str, Any] | None,
        concurrent.futures.Future[dict[str, Any]] | None,
        concurrent.futures.Future[dict[str, Any]] | None,
    ]:
        """What to do with a request the memo lacked when looked up.

        Its stored answer, the identical call in flight to wait for, or the new in-flight
        entry this caller now owns: exactly one of the three is not None. The memo is read
        again under the lock: another thread may have answered the request since it was
        looked up, and an answer is memoised before its in-flight entry goes.
        """
        with self._inflight_lock:
            pending = self._inflight.get(key)
            if pending is not None:
                return None, pending, None
            stored = self._memo_get(key)
            if stored is not None:
                return stored, None, None
            future: concurrent.futures.Future[dict[str, Any]] = concurrent.futures.Future()
            self._inflight[key] = future
            return None, None, future

    def _release(
        self,
        key: str,
        future: concurrent.futures.Future[dict[str, Any]],
        *,
        value: dict[str, Any] | None = None,
        error: BaseException | None = None,
    ) -> None:
        """End an owned in-flight entry: every waiter gets ``value`` or ``error``, always."""
        with self._inflight_lock:
            if self._inflight.get(key) is future:
                del self._inflight[key]
        if future.done():
            return
        if error is None:
            future.set_result(value if value is not None else {})
        else:
            future.set_exception(
                error if isinstance(error, Exception) else RuntimeError("the call was cancelled")
            )

    @staticmethod
    def _key(request: dict[str, Any], prompt_version: str | None, sample_index: int | None) -> str:
        """The memo key of ``request``: sample 0 is the request asked once (no index in it).

        The same prompt is the same call, in one row or across rows: a repeat is answered by
        the memo (or shares the identical call in flight). Samples are asked by index
        (:meth:`asamples`); a judge repeat after the first (:func:`judge_repeat`) adds its
        index, so repeat 0 keeps the key a run without repeats has.
        """
        keyed = {**request, "prompt_version": prompt_version, "sample_index": sample_index or None}
        repeat = current_repeat()
        if repeat:
            keyed["judge_repeat"] = repeat
        return request_key(keyed)

    def memo_hit(
        self,
        parse: Callable[[dict[str, Any]], R],
        *,
        model: str,
        messages: list[dict[str, Any]],
        prompt_version: str | None = None,
        sample_index: int | None = None,
        **params: Any,
    ) -> R | None:
        """The memoised answer to a request, as ``parse`` reads it, without building a response.

        For callers that parse replies themselves (ragas's structured calls): a hit costs the
        key and one memo read, where :meth:`acompletion` builds a ``litellm.ModelResponse``
        and the caller's client library parses it again. ``parse`` gets the stored response
        (``ModelResponse.model_dump`` form). When it accepts the answer, the call is recorded
        exactly as an :meth:`acompletion` hit (call-log row, sample index, raw reply). When the
        memo has no answer or ``parse`` raises, None, with nothing recorded or taken, so the
        caller's full path then asks exactly as it would have.
        """
        found = self._lookup(model, messages, prompt_version, sample_index, params)
        return self._parsed_hit(parse, found)

    def _parsed_hit(self, parse: Callable[[dict[str, Any]], R], found: _Lookup) -> R | None:
        """:meth:`memo_hit` from a :meth:`_lookup`."""
        cached, scope = found.cached, found.scope
        if cached is None:
            return None
        try:
            value = parse(cached)
        except Exception:
            return None
        usage = cached.get("usage") or {}
        record = CallRecord(
            kind="completion",
            key_hash=found.key,
            model=found.request["model"],
            stage=scope.stage,
            run_id=scope.run_id,
            prompt_version=found.prompt_version,
            tokens_in=usage.get("prompt_tokens"),
            tokens_out=usage.get("completion_tokens"),
            cache_hit=True,
        )
        record.latency_s = time.perf_counter() - found.started
        self._record(scope, record)
        if scope.raw is not None:
            with contextlib.suppress(Exception):
                scope.raw.append(cached["choices"][0]["message"]["content"] or "")
        return value

    @staticmethod
    def _keep_raw(scope: _Scope, response: Any) -> None:
        if scope.raw is not None:
            with contextlib.suppress(Exception):
                scope.raw.append(response.choices[0].message.content or "")

    async def _send(self, kind: str, params: dict[str, Any]) -> Any:
        if kind != "embedding" and self.global_limit is not None:
            from ragaudit.cache._global import global_slot

            # The process leases its share of the limit (by default as many slots as it can
            # have calls in flight), never more than its own concurrency or the limit itself.
            most = min(self.concurrency, self.global_limit)
            async with global_slot(size=min(self.global_lease or most, most)):
                return await self._send_now(kind, params)
        return await self._send_now(kind, params)

    async def _send_now(self, kind: str, params: dict[str, Any]) -> Any:
        model = params["model"]
        provider = provider_record(model)
        if provider.free:
            price_at_zero(model, kind)
        if kind == "embedding":
            call = litellm.aembedding(**params, timeout=self.timeout_s, num_retries=0)
        else:
            call = litellm.acompletion(
                **params, timeout=self.timeout_s, num_retries=0, stream=False
            )
        if provider.transport_timeout:
            return await call
        # litellm hands ``timeout`` to an in-process handler and leaves it there: the gateway
        # bounds the call itself, and says so as litellm says it for an HTTP provider.
        try:
            async with asyncio.timeout(self.timeout_s):
                return await call
        except TimeoutError:
            raise litellm.Timeout(
                message=f"{model} did not answer within timeout_s={self.timeout_s:g} s",
                model=model,
                llm_provider=provider.prefix,
            ) from None

    async def _call_provider(self, record: CallRecord, *, params: dict[str, Any]) -> Any:
        model = params["model"]
        limiter = self._limiter(model)
        attempt = 0
        while True:
            call = await limiter.acquire()
            # Checked once a slot is held: the calls queued behind the one that was refused
            # are refused here, unsent.
            rejected = self._rejected.get(model)
            if rejected is not None:
                limiter.release(call)
                record.error = rejected
                raise KeyRejected(rejected)
            record.concurrency = limiter.limit
            try:
                response = await self._send(record.kind, params)
            except BaseException as exc:
                # The slot is given back before any backoff: a call waiting out a Retry-After
                # must not hold a place others could use.
                limiter.release(call, rate_limited=isinstance(exc, litellm.RateLimitError))
                if not isinstance(exc, Exception):
                    raise
                if isinstance(exc, _REJECTED):
                    raise self._key_rejected(record, exc) from None
                if not isinstance(exc, TRANSIENT_ERRORS) or attempt >= self.max_retries:
                    record.error = redact(f"{type(exc).__name__}: {exc}")[:2000]
                    raise
                attempt += 1
                record.retries = attempt
                delay = _retry_after(exc)
                if delay is None:
                    delay = self.backoff_s * (2 ** (attempt - 1)) * (0.5 + random.random())
                await asyncio.sleep(min(delay, MAX_RETRY_AFTER_S))
                continue
            limiter.release(call, ok=True)
            return response

    def _key_rejected(self, record: CallRecord, exc: BaseException) -> KeyRejected:
        """The stage's end: the provider refused the model's key, and would refuse every call.

        Every later request of the model is refused here without being sent. The message names
        the model and the provider's status, never the key.
        """
        status = getattr(exc, "status_code", None) or ""
        message = (
            f"the provider rejected the API key of {record.model} (HTTP {status}): "
            "check the key configured for this model; no further request is sent with it"
        )
        self._rejected.setdefault(record.model, message)
        record.error = redact(f"{type(exc).__name__}: {exc}")[:2000]
        return KeyRejected(message)

    @staticmethod
    def _fill_usage(record: CallRecord, response: Any, *, cost: bool) -> None:
        usage = getattr(response, "usage", None)
        if usage is not None:
            record.tokens_in = getattr(usage, "prompt_tokens", None)
            record.tokens_out = getattr(usage, "completion_tokens", None)
        if cost and not provider_record(record.model).free:
            with contextlib.suppress(Exception):
                record.cost_usd = float(litellm.completion_cost(completion_response=response))

    # -- structured output ----------------------------------------------------------------

    async def astructured(
        self,
        *,
        model: str,
        messages: list[dict[str, Any]],
        schema: type[T],
        prompt_version: str,
        sample_index: int | None = None,
        prompt_budget: int | None = None,
        **params: Any,
    ) -> Judged[T]:
        """A completion parsed into ``schema``: at most ``max_repairs`` repairs, then a failure.

        The request is :func:`structured_messages` with ``schema`` as ``response_format``. With
        ``prompt_budget`` (the tokens the prompt may use: the judge's window minus its
        ``max_tokens`` and any reserve, as :func:`structured_prompt_tokens` counts) no prompt
        over it is sent. Statuses: ``ok``; ``too_long`` (the prompt is over the budget, or the
        provider said it is over its window: nothing answered); ``truncated`` (the answer was
        cut off at ``max_tokens`` and asked once more with up to ``CUT_OFF_WIDEN`` times the
        room where the judge's window holds it, then cut off again or without that room: a
        repair would be cut off again, so none is asked); ``no_room`` (invalid output whose
        repair prompt would be over the budget); ``failed`` (invalid after the last repair,
        or the provider failed). So one answer costs at most ``1 + max_repairs`` calls (two by
        default), one more for a cut-off answer. Never raises for a model's failure; raises
        :class:`KeyRejected` when the provider rejected the model's key.

        ``sample_index``: which sample of the request this is (None or 0: the request asked
        once; see :meth:`asamples`). A valid answer in the memo is read without building a
        litellm response (:meth:`memo_hit`); an invalid one is repaired as the first time.
        """
        send = structured_messages(schema, messages)
        params["response_format"] = _response_format(schema)
        out = self._budgeted(model, schema, send, prompt_budget)
        if out.status == "too_long":
            return out
        found = self._lookup(model, send, prompt_version, sample_index, params)
        hit = self._parsed_hit(self._parser(out, schema), found)
        if hit is not None:
            return hit
        # Awaited directly, so nothing else runs before its first request uses ``found``.
        return await self._settle(
            out, schema, model, send, prompt_version, sample_index, prompt_budget, params, found
        )

    async def asamples(
        self,
        *,
        n: int,
        model: str,
        messages: list[dict[str, Any]],
        schema: type[T],
        prompt_version: str,
        prompt_budget: int | None = None,
        **params: Any,
    ) -> list[Judged[T]]:
        """``n`` samples of one structured request (sample indices 0 to n-1), in sample order.

        Each sample is what :meth:`astructured` answers with its ``sample_index``: memoised
        under the same key, repaired and reported the same way. The samples the memo lacks are
        asked in one request with ``n`` choices when the provider returns several
        (:func:`providers.samples_at_once`): one call and one prompt paid instead of n. A
        choice the provider did not return is asked on its own, as is every sample of a
        provider without ``n``.
        """
        send = structured_messages(schema, messages)
        params["response_format"] = _response_format(schema)
        first = self._budgeted(model, schema, send, prompt_budget)
        if first.status == "too_long":
            return [dataclasses.replace(first) for _ in range(n)]
        parse = self._parser(first, schema)
        found: list[Judged[T] | None] = [
            self.memo_hit(
                parse,
                model=model,
                messages=send,
                prompt_version=prompt_version,
                sample_index=i,
                **params,
            )
            for i in range(n)
        ]
        missing = [i for i, judged in enumerate(found) if judged is None]
        replies: dict[int, Any] = {}
        if len(missing) > 1 and samples_at_once(model):
            try:
                replies = await self._choices(model, send, prompt_version, missing, params)
            except KeyRejected:
                raise
            except Exception as exc:  # the provider failed after its retries: every sample did
                error = redact(f"{type(exc).__name__}: {exc}")[:2000]
                for i in missing:
                    found[i] = dataclasses.replace(first, error=error)
                missing = []
        counted = min(replies, default=None)
        # gather: ``_settle`` reports a model's failure in its result and raises only the end of
        # the stage (a rejected key).
        answered = await asyncio.gather(
            *(
                self._settle(
                    # The one request with n choices is counted on its first sample.
                    dataclasses.replace(first, calls=int(i == counted)),
                    schema,
                    model,
                    send,
                    prompt_version,
                    i,
                    prompt_budget,
                    params,
                    reply=replies.get(i),
                )
                for i in missing
            )
        )
        for i, judged in zip(missing, answered, strict=True):
            found[i] = judged
        return [judged for judged in found if judged is not None]

    def _budgeted(
        self, model: str, schema: type[T], send: list[dict[str, Any]], prompt_budget: int | None
    ) -> Judged[T]:
        """A new, unanswered result; ``too_long`` when ``send`` is over ``prompt_budget``."""
        out: Judged[T] = Judged(None, "", "failed")
        if prompt_budget is not None:
            out.prompt_tokens = _sent_tokens(model, schema, send)
            if out.prompt_tokens > prompt_budget:
                out.status = "too_long"
                out.error = (
                    f"prompt of {out.prompt_tokens} tokens is over its budget of "
                    f"{prompt_budget} (the judge's window less the answer's max_tokens)"
                )
        return out

    @staticmethod
    def _parser(out: Judged[T], schema: type[T]) -> Callable[[dict[str, Any]], Judged[T]]:
        """Reads a stored response as a valid answer of ``schema`` (raises when it is not)."""

        def parse(stored: dict[str, Any]) -> Judged[T]:
            raw = stored["choices"][0]["message"]["content"] or ""
            usage = stored.get("usage") or {}
            return Judged(
                schema.model_validate_json(extract_json(raw)),
                raw,
                "ok",
                tokens_in=int(usage.get("prompt_tokens") or 0),
                tokens_out=int(usage.get("completion_tokens") or 0),
                calls=1,
                prompt_tokens=out.prompt_tokens,
            )

        return parse

    async def _choices(
        self,
        model: str,
        send: list[dict[str, Any]],
        prompt_version: str,
        indices: list[int],
        params: dict[str, Any],
    ) -> dict[int, litellm.ModelResponse]:
        """One request for the samples ``indices``; each returned choice, by sample index.

        Each choice is memoised as its sample's own answer (the key a request for that sample
        alone has), so a re-run reads the samples one by one, whichever way they were asked.
        The call's prompt tokens go to the first sample, its reply tokens are shared out.
        A sample already answered or on its way (asked alone by another caller) is left out:
        its own request settles it. Raises the provider's failure after its retries.
        """
        params = _repeated({k: v for k, v in params.items() if k not in _RESERVED})
        register_secret(params.get("api_key"))
        request = {"model": model, "messages": send, **params}
        keys = {i: self._key(request, prompt_version, i) for i in indices}
        with self._inflight_lock:
            free = [
                i
                for i in indices
                if keys[i] not in self._inflight and self._memo_get(keys[i]) is None
            ]
            if len(free) < 2:
                # Nothing left to ask together: each sample is settled by its own request.
                return {}
            owned: dict[int, tuple[str, concurrent.futures.Future[Any]]] = {
                i: (keys[i], concurrent.futures.Future()) for i in free
            }
            for key, future in owned.values():
                self._inflight[key] = future
        indices = free
        scope = self._current()
        record = CallRecord(
            kind="completion",
            key_hash=request_key({**request, "n": len(indices), "prompt_version": prompt_version}),
            model=model,
            stage=scope.stage,
            run_id=scope.run_id,
            prompt_version=prompt_version,
        )
        started = time.perf_counter()
        replies: dict[int, litellm.ModelResponse] = {}
        try:
            try:
                response = await self._call_provider(record, params={**request, "n": len(indices)})
                self._fill_usage(record, response, cost=True)
            finally:
                record.latency_s = time.perf_counter() - started
                self._record(scope, record)  # logged before any choice is memoised
            dumped = self._stored(response)
            choices = (dumped.get("choices") or [])[: len(indices)]
            prompt_tokens, reply_tokens = self._tokens(response)
            for j, (i, choice) in enumerate(zip(indices, choices, strict=False)):
                share = reply_tokens // len(choices) + (j < reply_tokens % len(choices))
                entry = {
                    **dumped,
                    "choices": [{**choice, "index": 0}],
                    "usage": {
                        "prompt_tokens": prompt_tokens if j == 0 else 0,
                        "completion_tokens": share,
                        "total_tokens": share + (prompt_tokens if j == 0 else 0),
                    },
                }
                key, future = owned[i]
                self._memo_set(key, entry)
                self._release(key, future, value=entry)
                replies[i] = litellm.ModelResponse(**entry)
        except BaseException as exc:
            for key, future in owned.values():
                self._release(key, future, error=exc)
            raise
        for i in indices:
            if i not in replies:  # a choice the provider did not return is asked on its own
                key, future = owned[i]
                self._release(key, future, error=RuntimeError("the provider left it out"))
        return replies

    async def _settle(
        self,
        out: Judged[T],
        schema: type[T],
        model: str,
        send: list[dict[str, Any]],
        prompt_version: str,
        sample_index: int | None,
        prompt_budget: int | None,
        params: dict[str, Any],
        found: _Lookup | None = None,
        reply: litellm.ModelResponse | None = None,
    ) -> Judged[T]:
        """Ask ``send`` and repair its answer into ``out``.

        ``found``: the first request's memo lookup, made with no wait since (it is not made
        twice). ``reply``: the first request's answer, already got.
        """
        max_tokens = params.get("max_tokens")
        repairs = self.max_repairs
        attempt, first, widened = 0, True, False
        try:
            while True:
                if first and reply is not None:
                    response = reply  # its call is counted by the caller
                    self._keep_raw(self._current(), reply)
                else:
                    if not first or found is None:
                        found = self._lookup(model, send, prompt_version, sample_index, params)
                    response = await self._complete(found)
                    out.calls += 1
                first = False
                out.raw = response.choices[0].message.content or ""
                t_in, t_out = self._tokens(response)
                out.tokens_in, out.tokens_out = out.tokens_in + t_in, out.tokens_out + t_out
                try:
                    out.value = schema.model_validate_json(extract_json(out.raw))
                except ValidationError as exc:
                    problem = _short_validation(exc)
                else:
                    out.status, out.repaired = "ok", bool(attempt)
                    return out
                if _cut_off(response, t_out, max_tokens):
                    room = None if widened else self._room(model, schema, send, max_tokens)
                    if isinstance(room, int):
                        # Asked once more with room for the whole answer; a repair would only
                        # be cut off again.
                        widened, max_tokens = True, room
                        params = {**params, "max_tokens": room}
                        continue
                    out.status = "truncated"
                    why = "after asking again with more room" if widened else room
                    out.error = f"answer cut off at max_tokens={max_tokens} ({why}): {problem}"
                    return out
                if attempt == repairs:
                    out.error = (
                        f"invalid output after {repairs} repair{'s' * (repairs != 1)}: {problem}"
                    )
                    return out
                send = _repair_messages(send, out.raw, problem)
                if prompt_budget is not None:
                    tokens = _sent_tokens(model, schema, send)
                    if tokens > prompt_budget:
                        out.status = "no_room"
                        out.error = (
                            f"invalid output and no room to repair it (repair prompt of "
                            f"{tokens} tokens, budget {prompt_budget}): {problem}"
                        )
                        return out
                    out.repair_prompt_tokens = tokens
                out.repaired = True
                attempt += 1
        except KeyRejected:
            raise  # the stage's end, not this answer's
        except litellm.ContextWindowExceededError as exc:
            # The provider's tokenizer counts more than ours: a smaller prompt can still succeed.
            out.status = "too_long"
            out.error = redact(f"context window exceeded: {exc}")[:2000]
        except Exception as exc:  # provider failure after retries, or a non-transient error
            out.error = redact(f"{type(exc).__name__}: {exc}")[:2000]
        return out

    @staticmethod
    def _room(
        model: str, schema: type[BaseModel], send: list[dict[str, Any]], max_tokens: int | None
    ) -> int | str:
        """The larger ``max_tokens`` to ask a cut-off answer again with, or why there is none."""
        if not max_tokens:
            return "no max_tokens was set, so the provider's own limit cut it"
        window = context_window(model)
        prompt = _sent_tokens(model, schema, send)
        room = min(window - prompt, CUT_OFF_WIDEN * max_tokens)
        if room <= max_tokens:
            return (
                f"the judge's window of {window} tokens, with a prompt of {prompt}, "
                "has no room to ask again with more"
            )
        return room

    @staticmethod
    def _tokens(response: Any) -> tuple[int, int]:
        usage = getattr(response, "usage", None)
        if usage is None:
            return 0, 0
        return int(getattr(usage, "prompt_tokens", 0) or 0), int(
            getattr(usage, "completion_tokens", 0) or 0
        )

    # -- embeddings ---------------------------------------------------------------------

    async def aembed(self, texts: Sequence[str], *, model: str) -> list[list[float]]:
        """Embed ``texts``: memo hits per text, one provider call for the misses.

        A text another caller is embedding at the same moment (in any thread) is not asked
        again: its vector is shared, as identical completions in flight are. So a text is paid
        for once, whichever rows of which metrics ask for it and in what order.
        """
        keys = [request_key({"model": model, "input": t}) for t in texts]
        out: list[list[float] | None] = self._memo_get_many(keys)
        scope = self._current()
        record = CallRecord(
            kind="embedding",
            key_hash=canonical_hash(keys),
            model=model,
            stage=scope.stage,
            run_id=scope.run_id,
        )
        started = time.perf_counter()
        owned: dict[str, concurrent.futures.Future[Any]] = {}
        shared: dict[str, concurrent.futures.Future[Any]] = {}
        ask: list[int] = []  # the first index of each text this call asks for
        with self._inflight_lock:
            for i, key in enumerate(keys):
                if out[i] is not None or key in owned or key in shared:
                    continue
                pending = self._inflight.get(key)
                if pending is not None:
                    shared[key] = pending
                    continue
                stored = self._memo_get(key)
                if stored is not None:
                    out[i] = stored
                    continue
                owned[key] = self._inflight[key] = concurrent.futures.Future()
                ask.append(i)
        if owned:
            try:
                try:
                    response = await self._call_provider(
                        record, params={"model": model, "input": [texts[i] for i in ask]}
                    )
                finally:
                    record.latency_s = time.perf_counter() - started
                    self._record(scope, record)
                usage = getattr(response, "usage", None)
                record.tokens_in = getattr(usage, "prompt_tokens", None) if usage else None
                items = sorted(
                    response.data, key=lambda d: d["index"] if isinstance(d, dict) else d.index
                )
                for i, item in zip(ask, items, strict=True):
                    vector = list(item["embedding"] if isinstance(item, dict) else item.embedding)
                    out[i] = vector
                    self._memo_set(keys[i], vector)
                    self._release(keys[i], owned[keys[i]], value=vector)  # type: ignore[arg-type]
            except BaseException as exc:
                for key, future in owned.items():
                    self._release(key, future, error=exc)
                raise
        found = {keys[i]: v for i in range(len(keys)) if (v := out[i]) is not None}
        for key, future in shared.items():
            found[key] = await await_shared(future)
        if not owned:
            record.cache_hit = True
            record.latency_s = time.perf_counter() - started
            self._record(scope, record)
        return [found[key] for key in keys]

    async def drain(self, timeout_s: float = 10.0) -> None:
        """Before this event loop ends: run litellm's pending callbacks, give back leases.

        litellm queues a success callback per provider call and runs them in a worker bound
        to one loop; what is still queued when a loop ends is carried to the next loop and
        kept there: in a process that runs one loop per run, the queue grew by the last
        calls of every run (never freed, up to 50,000 entries). The loop's idle leases of
        the global limit go back while Prefect's client is still open.
        """
        from litellm.litellm_core_utils.logging_worker import GLOBAL_LOGGING_WORKER

        with contextlib.suppress(Exception):
            await asyncio.wait_for(GLOBAL_LOGGING_WORKER.flush(), timeout_s)
        if self.global_limit is not None:
            from ragaudit.cache._global import give_back_leases

            await give_back_leases()

    def stats(self) -> dict[str, Any]:
        """Where the memo is, its entries and its bytes."""
        return self.memo.stats()

    def close(self) -> None:
        """Close the memo's handles."""
        self.memo.close()


def _repeated(params: dict[str, Any]) -> dict[str, Any]:
    """``params`` as the current judge repeat asks them: a later repeat at its temperature."""
    found = _repeat.get()
    if found is None:
        return params
    return {**params, "temperature": found.temperature}


def _short_validation(exc: ValidationError) -> str:
    errs = exc.errors()
    if not errs:
        return str(exc)[:300]
    first = errs[0]
    loc = ".".join(str(p) for p in first.get("loc", ())) or "(root)"
    more = f" (+{len(errs) - 1} more)" if len(errs) > 1 else ""
    return f"{loc}: {first.get('msg', '')}{more}"[:300]


# What ``configure`` (and the registry's settings) may change.
_SETTINGS = frozenset(
    {
        "concurrency",
        "max_retries",
        "max_repairs",
        "backoff_s",
        "timeout_s",
        "log_every",
        "log_interval_s",
        "global_limit",
        "global_lease",
    }
)

# The live gateway of each memo, by identity. Weak: a gateway nobody uses any more is freed with
# its memo handles and per-loop state; no run ever pins one for the life of the process.
_live: weakref.WeakValueDictionary[str, Gateway] = weakref.WeakValueDictionary()
_live_lock = threading.Lock()


def shared_gateway(cache_dir: MemoLocation, **settings: Any) -> Gateway:
    """The process's gateway for a memo: the live one (taking ``settings``) or a new one.

    ``cache_dir`` is a diskcache folder or a :class:`~ragaudit.cache.RedisTarget`. The
    gateway lives as long as someone holds it (a flow through :func:`open_gateway`, a stage's
    context); two users of one memo at the same time always share one gateway.
    """
    key = memo_identity(cache_dir)
    with _live_lock:
        gateway = _live.get(key)
        if gateway is None:
            target = cache_dir if isinstance(cache_dir, RedisTarget) else key
            gateway = Gateway(target, **settings)
            _live[key] = gateway
        elif settings:
            gateway.configure(**settings)
        return gateway


@contextlib.contextmanager
def open_gateway(cache_dir: MemoLocation, **settings: Any) -> Iterator[Gateway]:
    """Hold the shared gateway of a memo for the block; the last holder closes its memo.

    Users are counted, so nested holders (a flow and a subflow) keep it open until the outer
    one ends.
    """
    gateway = shared_gateway(cache_dir, **settings)
    with _live_lock:
        gateway._users += 1
    try:
        yield gateway
    finally:
        with _live_lock:
            gateway._users -= 1
            last = gateway._users == 0
        if last:
            gateway.close()


def live_gateways() -> dict[str, Gateway]:
    """The gateways alive in this process, by memo identity (see :func:`memo_identity`)."""
    with _live_lock:
        return dict(_live.items())


__all__ = [
    "Gateway",
    "Judged",
    "TRANSIENT_ERRORS",
    "current_repeat",
    "extract_json",
    "judge_repeat",
    "live_gateways",
    "open_gateway",
    "response_schema_text",
    "schema_instruction",
    "shared_gateway",
    "structured_messages",
    "structured_prompt_tokens",
]
