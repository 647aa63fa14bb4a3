"""Typed structured output on the gateway's core: the :class:`Gateway` every caller holds.

A judge answer is JSON of a pydantic schema. The request carries the schema (an instruction,
and ``response_format`` for providers that honour it); an invalid answer is repaired a bounded
number of times, a cut-off one asked once more with more room, a prompt over its budget never
sent; what could not be parsed is a :class:`Judged` with its status and error, never a guess.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import litellm
from pydantic import BaseModel, ValidationError

from ragaudit.cache._calllog import CallRecord
from ragaudit.cache._gateway import GatewayCore, Lookup
from ragaudit.cache._keys import canonical_json, request_key
from ragaudit.cache._retry import KeyRejected
from ragaudit.cache._tokens import context_window, count_prompt, count_tokens
from ragaudit.cache.providers import samples_at_once
from ragaudit.secrets import redact

T = TypeVar("T", bound=BaseModel)

# A cut-off answer is asked once more with at most this many times its budget (window allowing).
CUT_OFF_WIDEN = 4


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
    memo: bool = False
    """Read from the memo: no request of this answer reached a provider now."""

    @property
    def ok(self) -> bool:
        """Whether ``value`` holds a parsed answer."""
        return self.status == "ok"


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


def _short_validation(exc: ValidationError) -> str:
    errs = exc.errors()
    if not errs:
        return str(exc)[:300]
    first = errs[0]
    loc = ".".join(str(p) for p in first.get("loc", ())) or "(root)"
    more = f" (+{len(errs) - 1} more)" if len(errs) > 1 else ""
    return f"{loc}: {first.get('msg', '')}{more}"[:300]


class Gateway(GatewayCore):
    """The gateway: memoised, logged, rate-limited litellm calls, and typed answers on them.

    Most code should not build one: :func:`shared_gateway` and :func:`open_gateway` give the
    process's one gateway for a cache folder (see :class:`GatewayCore` for its arguments).
    """

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
            hit.memo = True
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
        for judged in found:
            if judged is not None:
                judged.memo = True
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
        request = self._request(model, send, params)
        keys = {self._key(request, prompt_version, i): i for i in indices}
        claims = self._inflight.claim(list(keys), self._memo_get, together=2)
        owned = {keys[c.key]: c for c in claims if c.owned is not None}
        if not owned:
            # Nothing left to ask together: each sample is settled by its own request.
            return {}
        indices = list(owned)
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
            prompt_tokens, reply_tokens = usage_tokens(response)
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
                self._memo_set(owned[i].key, entry)
                self._inflight.release(owned[i], value=entry)
                replies[i] = litellm.ModelResponse(**entry)
        except BaseException as exc:
            for claim in owned.values():
                self._inflight.release(claim, error=exc)
            raise
        for i in indices:
            if i not in replies:  # a choice the provider did not return is asked on its own
                self._inflight.release(owned[i], error=RuntimeError("the provider left it out"))
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
        found: Lookup | None = None,
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
                t_in, t_out = usage_tokens(response)
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


def usage_tokens(response: Any) -> tuple[int, int]:
    """The prompt and reply tokens the provider reported for ``response`` (0 when it did not)."""
    usage = getattr(response, "usage", None)
    if usage is None:
        return 0, 0
    return int(getattr(usage, "prompt_tokens", 0) or 0), int(
        getattr(usage, "completion_tokens", 0) or 0
    )


__all__ = [
    "CUT_OFF_WIDEN",
    "Gateway",
    "Judged",
    "extract_json",
    "response_schema_text",
    "schema_instruction",
    "structured_messages",
    "structured_prompt_tokens",
]
