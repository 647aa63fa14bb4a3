"""The gateway's core: every LLM and embedding call, memoised, retried, limited and logged.

On top of litellm it adds what an evaluation needs and litellm's own cache does not give
cheaply: a memo keyed on the output-affecting request only (``Memo``, on diskcache today), an
adaptive per-model concurrency limit, bounded retries with backoff that honours Retry-After
(``_retry``), one call-log row per call, and one provider call for identical requests in flight
at once (``_inflight``). Typed structured output is built on it (``_structured``, where the
:class:`Gateway` users hold is); the process's one gateway per memo is ``_registry``'s.

What belongs to a run (its id, where its call log goes) is the scope's (:meth:`scope`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import litellm

from ragaudit import _env
from ragaudit.cache._calllog import (
    DEFAULT_FLUSH_EVERY,
    DEFAULT_FLUSH_INTERVAL_S,
    CallCounts,
    CallLog,
    CallRecord,
)
from ragaudit.cache._context import (
    Scope,
    current_recheck,
    current_repeat,
    current_scope,
    repeated,
    scope_var,
)
from ragaudit.cache._inflight import Claim, InFlight
from ragaudit.cache._keys import canonical_hash, request_key
from ragaudit.cache._limiter import AdaptiveLimiter, LimitStats
from ragaudit.cache._memo import Memo, MemoLocation, RedisTarget, memo_identity, open_memo
from ragaudit.cache._retry import (
    MAX_RETRY_AFTER_S,
    REJECTED,
    TRANSIENT_ERRORS,
    KeyRejected,
    retry_after,
)
from ragaudit.cache.providers import price_at_zero, provider_record
from ragaudit.concurrency import PerLoop, await_shared
from ragaudit.secrets import known_secrets, redact
from ragaudit.secrets import register as register_secret

R = TypeVar("R")

# Request fields the gateway owns; a caller's value for them is replaced.
_RESERVED = {"num_retries", "max_retries", "timeout", "stream", "caching"}

# A reply cut off at its token budget is kept in the memo only this long: a provider that
# ignores the budget can send megabytes, and a cut-off reply is never a valid answer anyway.
KEPT_CUT_OFF_CHARS = 8000

log = logging.getLogger("ragaudit.gateway")


@dataclass
class _LoopState:
    """What belongs to one event loop: asyncio objects cannot be shared across loops."""

    limiters: dict[str, AdaptiveLimiter] = field(default_factory=dict)


@dataclass
class Lookup:
    """A completion request, its memo key and what the memo held for it when looked up."""

    scope: Scope
    request: dict[str, Any]
    prompt_version: str | None
    key: str
    index: int
    """The sample index (0: the first sample, or the one answer)."""
    cached: dict[str, Any] | None
    started: float


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


class GatewayCore:
    """Memoised, logged, rate-limited access to litellm models.

    Users hold a :class:`~ragaudit.cache.Gateway` (this core with structured output), and most
    code should not build one: :func:`shared_gateway` and :func:`open_gateway` give the
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
        # A loop's limiters die with it (Prefect tasks may each run their own loop).
        self._loops: PerLoop[_LoopState] = PerLoop(_LoopState)
        self._limit_stats: dict[str, LimitStats] = {}
        self._inflight = InFlight()
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
        new = Scope(stage=stage, run_id=run_id, log=log)
        token = scope_var.set(new)
        try:
            yield new.counts
        finally:
            scope_var.reset(token)
            # The calls made so far are kept even when the stage fails: they were paid for.
            if log is not None:
                log.close()

    @contextlib.contextmanager
    def item_scope(self, keep_raw: bool = False) -> Iterator[list[str]]:
        """One scored item; yields the raw replies (kept when ``keep_raw``).

        Counts still go to the enclosing stage scope.
        """
        parent = self._current()
        new = Scope(
            stage=parent.stage,
            run_id=parent.run_id,
            counts=parent.counts,
            log=parent.log,
            raw=[] if keep_raw else None,
        )
        token = scope_var.set(new)
        try:
            yield new.raw if new.raw is not None else []
        finally:
            scope_var.reset(token)

    def _record(self, scope: Scope, record: CallRecord) -> None:
        (scope.log or self.log).add(record)
        counts = scope.counts
        counts.calls += 1
        if record.cache_hit:
            counts.cache_hits += 1
        else:
            counts.provider_calls += 1

    def _current(self) -> Scope:
        return current_scope()

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

    def _limiter(self, model: str) -> AdaptiveLimiter:
        limiters = self._loops.get().limiters
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
    ) -> Lookup:
        """The request's memo key and the memo's answer to it (nothing recorded or taken)."""
        started = time.perf_counter()
        request = self._request(model, messages, params)
        scope = self._current()
        key = self._key(request, prompt_version, sample_index)
        cached = self._memo_get(key)
        return Lookup(scope, request, prompt_version, key, sample_index or 0, cached, started)

    @staticmethod
    def _request(
        model: str, messages: list[dict[str, Any]], params: dict[str, Any]
    ) -> dict[str, Any]:
        """The request as sent and keyed: the gateway's own fields dropped, the repeat's added."""
        params = repeated({k: v for k, v in params.items() if k not in _RESERVED})
        # A key passed as an argument is as secret as one in the environment: a provider may
        # echo it in an error message, which then goes to the call log.
        register_secret(params.get("api_key"))
        return {"model": model, "messages": messages, **params}

    async def _complete(self, found: Lookup) -> litellm.ModelResponse:
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
        claim = None
        if cached is None:
            (claim,) = self._inflight.claim([key], self._memo_get)
            cached, pending = claim.stored, claim.pending
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
        assert claim is not None and claim.owned is not None
        try:
            # The row is logged before the answer is memoised (a crash in between leaves a
            # paid call in the log, never one that only the memo knows of), and after its
            # usage is filled in: the log may write the row at once (a part, its journal), and
            # a later change to the record would never reach the file.
            try:
                response = await self._call_provider(record, params=found.request)
            except BaseException:
                record.latency_s = time.perf_counter() - started
                self._record(scope, record)
                raise
            record.latency_s = time.perf_counter() - started
            self._fill_usage(record, response, cost=True)
            self._record(scope, record)
            dumped = self._stored(response)
            self._memo_set(key, dumped)
        except BaseException as exc:
            self._inflight.release(claim, error=exc)
            raise
        self._inflight.release(claim, value=dumped)
        response = litellm.ModelResponse(**dumped)
        self._keep_raw(scope, response)
        return response

    @staticmethod
    def _key(request: dict[str, Any], prompt_version: str | None, sample_index: int | None) -> str:
        """The memo key of ``request``: sample 0 is the request asked once (no index in it).

        The same prompt is the same call, in one row or across rows: a repeat is answered by
        the memo (or shares the identical call in flight). Samples are asked by index
        (:meth:`asamples`); a judge repeat after the first (:func:`judge_repeat`) adds its
        index, so repeat 0 keeps the key a run without repeats has.
        """
        keyed = {**request, "prompt_version": prompt_version, "sample_index": sample_index or None}
        model = request.get("model")
        if isinstance(model, str):
            # Settings outside the request that change this model's answers (None: none, so
            # the key stays the request's): a bench's llama.cpp options must not reuse, or
            # leave behind, answers under the shipped judge's key.
            keyed["provider_variant"] = provider_record(model).variant(model)
        repeat = current_repeat()
        if repeat:
            keyed["judge_repeat"] = repeat
        recheck = current_recheck()
        if recheck:
            keyed["judge_recheck"] = recheck
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

    def _parsed_hit(self, parse: Callable[[dict[str, Any]], R], found: Lookup) -> R | None:
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
    def _keep_raw(scope: Scope, response: Any) -> None:
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
                if isinstance(exc, REJECTED):
                    raise self._key_rejected(record, exc) from None
                if not isinstance(exc, TRANSIENT_ERRORS) or attempt >= self.max_retries:
                    record.error = redact(f"{type(exc).__name__}: {exc}")[:2000]
                    raise
                attempt += 1
                record.retries = attempt
                delay = retry_after(exc)
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
        found: dict[str, Any] = {k: v for k, v in zip(keys, out, strict=True) if v is not None}
        owned: dict[str, Claim] = {}
        shared: list[Claim] = []
        for claim in self._inflight.claim([k for k in keys if k not in found], self._memo_get):
            if claim.owned is not None:
                owned[claim.key] = claim
            elif claim.pending is not None:
                shared.append(claim)
            else:
                found[claim.key] = claim.stored
        first: dict[str, int] = {}
        for i, key in enumerate(keys):
            first.setdefault(key, i)
        ask = [first[key] for key in owned]  # the first index of each text this call asks for
        if owned:
            try:
                try:
                    response = await self._call_provider(
                        record, params={"model": model, "input": [texts[i] for i in ask]}
                    )
                    # Before the row is logged, as for a completion (:meth:`_complete`).
                    self._fill_usage(record, response, cost=True)
                finally:
                    record.latency_s = time.perf_counter() - started
                    self._record(scope, record)
                items = sorted(
                    response.data, key=lambda d: d["index"] if isinstance(d, dict) else d.index
                )
                for i, item in zip(ask, items, strict=True):
                    vector = list(item["embedding"] if isinstance(item, dict) else item.embedding)
                    found[keys[i]] = vector
                    self._memo_set(keys[i], vector)
                    self._inflight.release(owned[keys[i]], value=vector)
            except BaseException as exc:
                for claim in owned.values():
                    self._inflight.release(claim, error=exc)
                raise
        for claim in shared:
            assert claim.pending is not None
            found[claim.key] = await await_shared(claim.pending)
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
