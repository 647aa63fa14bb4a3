"""The LLM gateway: memo keys, memo hits, samples, secrets, retries, structured output,
embeddings, the call log and the concurrency limit — all on the scripted ``fake`` provider."""

from __future__ import annotations

import asyncio
import email.utils
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import litellm
import pyarrow.parquet as pq
import pytest
from pydantic import BaseModel

from ragaudit.cache import (
    CALL_LOG_SCHEMA,
    KEY_VERSION,
    Gateway,
    count_prompt,
    forget_counts,
    request_key,
    structured_prompt_tokens,
)
from ragaudit.cache._calllog import CALL_LOG_SCHEMA_VERSION
from ragaudit.cache._fake import EMBED_DIM, FakeRequest, _fake_vector
from ragaudit.cache._keys import OUTPUT_FIELDS
from ragaudit.cache._retry import retry_after as _retry_after
from ragaudit.cache._structured import _format_tokens

SECRET = "sk-test-SECRET123456789"
MSGS = [{"role": "user", "content": "What is the capital of France?"}]


def user(text: str) -> list[dict[str, Any]]:
    return [{"role": "user", "content": text}]


@pytest.fixture
def make_gateway(tmp_path: Path) -> Iterator[Any]:
    """``make_gateway(max_retries=…, concurrency=…)`` → a Gateway on a fresh memo, closed after."""
    made: list[Gateway] = []

    def factory(**kw: Any) -> Gateway:
        kw.setdefault("backoff_s", 0.0)
        kw.setdefault("max_retries", 2)
        gw = Gateway(tmp_path / "cache", **kw)
        made.append(gw)
        return gw

    yield factory
    for gw in made:
        gw.close()


@pytest.fixture
def gateway(make_gateway: Any) -> Gateway:
    return make_gateway()


# -- memo keys ------------------------------------------------------------------------------


BASE_REQUEST: dict[str, Any] = {
    "model": "openai/gpt-4o-mini",
    "messages": MSGS,
    "temperature": 0.0,
    "response_format": {"type": "json_object"},
    "prompt_version": "relevance-v1",
    "sample_index": 1,
}


def test_key_ignores_dict_order_and_has_version_prefix() -> None:
    reordered = dict(reversed(list(BASE_REQUEST.items())))
    assert list(reordered) != list(BASE_REQUEST)
    key = request_key(BASE_REQUEST)
    assert key == request_key(reordered)
    assert KEY_VERSION == "k1"
    assert key.startswith("k1:")
    assert len(key.split(":", 1)[1]) == 64  # a SHA-256 hex digest
    # Nested dicts are canonicalised too.
    fmt = {"json_schema": {"b": 1, "a": 2}, "type": "json_schema"}
    fmt_reordered = {"type": "json_schema", "json_schema": {"a": 2, "b": 1}}
    assert request_key({**BASE_REQUEST, "response_format": fmt}) == request_key(
        {**BASE_REQUEST, "response_format": fmt_reordered}
    )


@pytest.mark.parametrize(
    ("field", "other"),
    [
        ("model", "openai/gpt-4o"),
        ("messages", user("What is the capital of Spain?")),
        ("messages", [{"role": "system", "content": "x"}, *MSGS]),
        ("temperature", 0.7),
        ("response_format", {"type": "text"}),
        ("prompt_version", "relevance-v2"),
        ("sample_index", 2),
    ],
)
def test_key_changes_with_output_fields(field: str, other: Any) -> None:
    assert field in OUTPUT_FIELDS
    assert request_key({**BASE_REQUEST, field: other}) != request_key(BASE_REQUEST)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("timeout", 5.0),
        ("num_retries", 7),
        ("max_retries", 7),
        ("api_key", SECRET),
        ("api_base", "http://127.0.0.1:9/v1"),
        ("metadata", {"run": "x"}),
        ("extra_headers", {"Authorization": f"Bearer {SECRET}"}),
    ],
)
def test_key_ignores_non_output_fields(field: str, value: Any) -> None:
    assert field not in OUTPUT_FIELDS
    assert request_key({**BASE_REQUEST, field: value}) == request_key(BASE_REQUEST)


def test_output_fields_allow_list_has_no_credential_or_transport_field() -> None:
    for name in OUTPUT_FIELDS:
        assert not any(
            word in name for word in ("key", "base", "timeout", "retr", "header", "auth")
        )


# -- memo hits ------------------------------------------------------------------------------


async def test_second_identical_call_is_a_memo_hit(gateway: Gateway, fake: Any) -> None:
    first = await gateway.acompletion(model="fake/judge", messages=MSGS, temperature=0.0)
    assert fake.stats.calls == 1
    second = await gateway.acompletion(model="fake/judge", messages=MSGS, temperature=0.0)
    assert fake.stats.calls == 1
    assert second.choices[0].message.content == first.choices[0].message.content
    assert "capital of France" in first.choices[0].message.content
    rows = gateway.log.rows()
    assert [r.cache_hit for r in rows] == [False, True]
    assert rows[0].key_hash == rows[1].key_hash
    assert rows[1].tokens_in == rows[0].tokens_in and rows[1].tokens_out == rows[0].tokens_out
    assert gateway.log.counts.as_dict() == {"calls": 2, "cache_hits": 1, "provider_calls": 1}


async def test_an_in_process_model_is_priced_at_zero_in_litellms_map(
    gateway: Gateway, fake: Any, caplog: pytest.LogCaptureFixture
) -> None:
    # litellm prices every completion and looks into why a cost came out 0; for a model its
    # map does not hold, that look-up raised its way through several names on every call.
    model = "fake/judge?latency=0.0001"
    with pytest.raises(Exception):  # noqa: B017, PT011  (litellm raises a bare Exception)
        litellm.get_model_info(model)
    await gateway.acompletion(model=model, messages=MSGS)
    info = litellm.get_model_info(model)
    assert info["input_cost_per_token"] == 0.0 and info["output_cost_per_token"] == 0.0
    # litellm warns about an entry without cache prices (on the console of every run)
    assert not [r for r in caplog.records if "register_model" in r.getMessage()]


async def test_memo_ignores_transport_arguments(gateway: Gateway, fake: Any) -> None:
    await gateway.acompletion(model="fake/judge", messages=MSGS, timeout=3, metadata={"a": 1})
    await gateway.acompletion(
        model="fake/judge",
        messages=MSGS,
        timeout=99,
        num_retries=5,
        metadata={"b": 2},
        api_key=SECRET,
    )
    assert fake.stats.calls == 1
    assert [r.cache_hit for r in gateway.log.rows()] == [False, True]


async def test_memo_survives_a_new_gateway_on_the_same_folder(make_gateway: Any, fake: Any) -> None:
    gw1 = make_gateway()
    first = await gw1.acompletion(model="fake/judge", messages=MSGS)
    gw1.close()
    gw2 = make_gateway()
    again = await gw2.acompletion(model="fake/judge", messages=MSGS)
    assert fake.stats.calls == 1
    assert gw2.log.rows()[0].cache_hit
    assert again.choices[0].message.content == first.choices[0].message.content


async def test_stage_scope_labels_and_counts_rows(gateway: Gateway, fake: Any) -> None:
    with gateway.scope("sort") as counts:
        await gateway.acompletion(model="fake/judge", messages=user("a"))
        await gateway.acompletion(model="fake/judge", messages=user("b"))
    with gateway.scope("score") as score_counts:
        await gateway.acompletion(model="fake/judge", messages=user("a"))
    assert counts.as_dict() == {"calls": 2, "cache_hits": 0, "provider_calls": 2}
    assert score_counts.as_dict() == {"calls": 1, "cache_hits": 1, "provider_calls": 0}
    assert [r.stage for r in gateway.log.rows()] == ["sort", "sort", "score"]


# -- sample index ---------------------------------------------------------------------------


async def test_identical_calls_in_one_item_scope_share_one_answer(
    gateway: Gateway, fake: Any
) -> None:
    # A metric that asks one prompt twice for a row (noise sensitivity, when the answer's
    # statements are the reference's) pays once: samples are asked by index, not by repeat.
    with gateway.scope("score") as counts:
        with gateway.item_scope(keep_raw=True) as raw:
            for _ in range(3):
                await gateway.acompletion(model="fake/judge", messages=MSGS)
        assert fake.stats.calls == 1
        assert len(raw) == 3  # every answer the row got, raw
        assert len({r.key_hash for r in gateway.log.rows()}) == 1
        assert [r.cache_hit for r in gateway.log.rows()] == [False, True, True]
    # Item scopes count into their stage.
    assert counts.as_dict() == {"calls": 3, "cache_hits": 2, "provider_calls": 1}


async def test_identical_calls_outside_a_scope_share_one_memo_entry(
    gateway: Gateway, fake: Any
) -> None:
    for _ in range(3):
        await gateway.acompletion(model="fake/judge", messages=MSGS)
    assert fake.stats.calls == 1
    assert len({r.key_hash for r in gateway.log.rows()}) == 1
    assert gateway.stats()["entries"] == 1


async def test_sample_zero_is_the_request_asked_once(gateway: Gateway, fake: Any) -> None:
    await gateway.acompletion(model="fake/judge", messages=MSGS)
    await gateway.acompletion(model="fake/judge", messages=MSGS, sample_index=0)
    await gateway.acompletion(model="fake/judge", messages=MSGS, sample_index=1)
    assert fake.stats.calls == 2  # sample 0 was the call without an index; sample 1 is new
    assert [r.cache_hit for r in gateway.log.rows()] == [False, True, False]


# -- secrets --------------------------------------------------------------------------------


def _all_bytes(folder: Path) -> bytes:
    return b"".join(p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file())


async def test_no_secret_in_key_log_parquet_or_memo(
    gateway: Gateway, fake: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    with gateway.scope("sort"):
        await gateway.acompletion(
            model="fake/judge", messages=MSGS, api_key=SECRET, metadata={"token": SECRET}
        )
        await gateway.acompletion(model="fake/judge", messages=MSGS, api_key=SECRET)
        await gateway.aembed(["some text"], model="fake/embed")
    rows = gateway.log.rows()
    assert len(rows) == 3 and rows[1].cache_hit
    for row in rows:
        assert SECRET not in repr(row)
    assert SECRET not in gateway.log.rows()[0].key_hash
    out = tmp_path / "calls.parquet"
    assert gateway.log.flush(out) == 3
    assert SECRET.encode() not in out.read_bytes()
    assert SECRET not in repr(pq.read_table(out).to_pylist())
    gateway.memo.close()  # flush SQLite's WAL into the files
    memo_bytes = _all_bytes(tmp_path / "cache")
    assert len(memo_bytes) > 0
    assert SECRET.encode() not in memo_bytes
    assert (
        b"capital of France" in memo_bytes or b"Fake answer" in memo_bytes
    )  # the memo is readable


async def test_provider_error_is_redacted_in_call_log(
    make_gateway: Any, fake: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    gateway = make_gateway(max_retries=1)

    def leaky(req: FakeRequest) -> Any:
        raise ValueError(f"invalid api key {SECRET} for this account")

    with fake.script(leaky), pytest.raises(litellm.APIConnectionError):
        await gateway.acompletion(model="fake/judge", messages=MSGS, api_key=SECRET)
    # litellm wraps a handler's exception as a (transient) connection error: retried once.
    assert fake.stats.calls == 2
    (row,) = gateway.log.rows()
    assert row.retries == 1
    assert row.error and "invalid api key ***" in row.error
    assert SECRET not in row.error
    out = tmp_path / "calls.parquet"
    gateway.log.flush(out)
    assert SECRET not in repr(pq.read_table(out).to_pylist())
    assert gateway.stats()["entries"] == 0  # a failed call is never memoised


async def test_api_key_argument_is_redacted_even_without_env_var(
    make_gateway: Any, fake: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = "sk-only-passed-as-argument-98765"
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    gateway = make_gateway(max_retries=0)

    def leaky(req: FakeRequest) -> Any:
        raise ValueError(f"Incorrect API key provided: {secret}")

    with fake.script(leaky), pytest.raises(litellm.APIConnectionError):
        await gateway.acompletion(model="fake/judge", messages=MSGS, api_key=secret)
    (row,) = gateway.log.rows()
    assert row.error and "Incorrect API key provided: ***" in row.error
    assert secret not in row.error


# -- retries and backoff --------------------------------------------------------------------


async def test_transient_errors_are_retried_until_success(make_gateway: Any, fake: Any) -> None:
    gateway = make_gateway(max_retries=6)
    prompts = [f"question number {i}" for i in range(12)]
    replies = await asyncio.gather(
        *(gateway.acompletion(model="fake/judge?errors=0.5", messages=user(p)) for p in prompts)
    )
    assert [r.choices[0].message.content for r in replies] == [
        f"Fake answer to: {p}" for p in prompts
    ]
    rows = gateway.log.rows()
    assert len(rows) == len(prompts)
    assert all(r.error is None for r in rows)
    assert any(r.retries > 0 for r in rows)
    assert all(r.retries <= 6 for r in rows)
    # Every attempt reached the provider once: successes plus the failed attempts retried.
    assert fake.stats.calls == sum(r.retries + 1 for r in rows)
    assert fake.stats.errors == sum(r.retries for r in rows)


async def test_retries_are_bounded_then_the_error_is_raised(make_gateway: Any, fake: Any) -> None:
    gateway = make_gateway(max_retries=2)
    with pytest.raises(litellm.RateLimitError):
        await gateway.acompletion(model="fake/judge?errors=1.0", messages=MSGS)
    assert fake.stats.calls == 3
    (row,) = gateway.log.rows()
    assert row.retries == 2
    assert row.error and row.error.startswith("RateLimitError")
    assert not row.cache_hit
    assert gateway.log.counts.provider_calls == 1
    assert gateway.stats()["entries"] == 0


async def test_non_transient_error_is_not_retried(make_gateway: Any, fake: Any) -> None:
    gateway = make_gateway(max_retries=5)

    def bad_request(req: FakeRequest) -> Any:
        raise litellm.BadRequestError(
            message="context too long", model="fake/judge", llm_provider="fake"
        )

    with fake.script(bad_request), pytest.raises(litellm.BadRequestError):
        await gateway.acompletion(model="fake/judge", messages=MSGS)
    assert fake.stats.calls == 1
    (row,) = gateway.log.rows()
    assert row.retries == 0 and "context too long" in (row.error or "")


async def test_retry_after_of_the_fake_rate_limit_is_honoured(
    make_gateway: Any, fake: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    slept: list[float] = []
    real_sleep = asyncio.sleep

    async def recording_sleep(delay: float, *args: Any) -> None:
        slept.append(delay)
        await real_sleep(0)

    # Large backoff: if Retry-After were ignored the recorded delays would be ~100 s.
    gateway = make_gateway(max_retries=2, backoff_s=100.0)
    monkeypatch.setattr("ragaudit.cache._gateway.asyncio.sleep", recording_sleep)
    with pytest.raises(litellm.RateLimitError):
        await gateway.acompletion(model="fake/judge?errors=1.0", messages=MSGS)
    assert slept == [0.001, 0.001]


def _rate_limit(headers: dict[str, str]) -> litellm.RateLimitError:
    return litellm.RateLimitError(
        message="slow down",
        llm_provider="openai",
        model="gpt-4o-mini",
        response=httpx.Response(
            429, headers=headers, request=httpx.Request("POST", "http://127.0.0.1:9/v1")
        ),
    )


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({"retry-after": "3"}, 3.0),
        ({"retry-after-ms": "1500"}, 1.5),
        ({"Retry-After": "0.25"}, 0.25),
        ({"retry-after-ms": "200", "retry-after": "9"}, 0.2),
        ({}, None),
        ({"retry-after": "soon"}, None),
    ],
)
def test_retry_after_header(headers: dict[str, str], expected: float | None) -> None:
    assert _retry_after(_rate_limit(headers)) == expected


def test_retry_after_http_date() -> None:
    when = email.utils.formatdate(time.time() + 30, usegmt=True)
    delay = _retry_after(_rate_limit({"retry-after": when}))
    assert delay is not None and 20.0 < delay <= 30.0
    past = email.utils.formatdate(time.time() - 30, usegmt=True)
    assert _retry_after(_rate_limit({"retry-after": past})) == 0.0


async def test_unparseable_retry_after_falls_back_to_backoff(
    make_gateway: Any, fake: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    gateway = make_gateway(max_retries=3)
    attempts = {"n": 0}

    def flaky(req: FakeRequest) -> Any:
        attempts["n"] += 1
        if attempts["n"] == 1:
            raise _rate_limit({"retry-after": "tomorrow-ish"})
        return "fine"

    with fake.script(flaky):
        reply = await gateway.acompletion(model="fake/judge", messages=MSGS)
    assert reply.choices[0].message.content == "fine"
    (row,) = gateway.log.rows()
    assert row.retries == 1 and row.error is None


# -- structured output ----------------------------------------------------------------------


class Verdict(BaseModel):
    relevant: bool
    score: int
    reason: str


async def test_structured_ok(gateway: Gateway, fake: Any) -> None:
    judged = await gateway.astructured(
        model="fake/judge", messages=MSGS, schema=Verdict, prompt_version="v1"
    )
    assert judged.ok and judged.status == "ok"
    assert isinstance(judged.value, Verdict)
    assert not judged.repaired and judged.error is None
    assert judged.tokens_in > 0 and judged.tokens_out > 0
    # The schema reached the provider as a json_schema response format.
    (req,) = fake.stats.requests
    assert req.title == "Verdict"


async def test_structured_scripted_value_and_code_fence(gateway: Gateway, fake: Any) -> None:
    def fenced(req: FakeRequest) -> Any:
        return 'Sure!\n```json\n{"relevant": false, "score": 3, "reason": "off topic"}\n```'

    with fake.script(fenced):
        judged = await gateway.astructured(
            model="fake/judge", messages=MSGS, schema=Verdict, prompt_version="v1"
        )
    assert judged.ok
    assert judged.value == Verdict(relevant=False, score=3, reason="off topic")
    assert "Sure!" in judged.raw


async def test_structured_repairs_once(gateway: Gateway, fake: Any) -> None:
    def broken_then_fixed(req: FakeRequest) -> Any:
        if "not valid" in req.user:
            return {"relevant": True, "score": 4, "reason": "fixed"}
        return '{"relevant": true, "score": 4, "reas'

    with fake.script(broken_then_fixed):
        judged = await gateway.astructured(
            model="fake/judge", messages=MSGS, schema=Verdict, prompt_version="v1"
        )
    assert judged.ok and judged.repaired
    assert judged.value == Verdict(relevant=True, score=4, reason="fixed")
    assert fake.stats.calls == 2
    repair = fake.stats.requests[1]
    assert repair.messages[-2] == {
        "role": "assistant",
        "content": '{"relevant": true, "score": 4, "reas',
    }
    # Both calls are memoised: asking again costs nothing.
    with fake.script(broken_then_fixed):
        again = await gateway.astructured(
            model="fake/judge", messages=MSGS, schema=Verdict, prompt_version="v1"
        )
    assert again.ok and again.repaired and fake.stats.calls == 2


async def test_structured_always_invalid_fails_with_field(gateway: Gateway, fake: Any) -> None:
    def wrong_type(req: FakeRequest) -> Any:
        return {"relevant": True, "score": "very high", "reason": "x"}

    with fake.script(wrong_type):
        judged = await gateway.astructured(
            model="fake/judge", messages=MSGS, schema=Verdict, prompt_version="v1"
        )
    assert judged.status == "failed" and not judged.ok
    assert judged.value is None
    assert judged.repaired
    assert judged.error and "score" in judged.error and "after 1 repair:" in judged.error
    assert "very high" in judged.raw
    assert fake.stats.calls == 2  # one answer, one repair, no more


def invalid_until(valid_after: int) -> Any:
    """A judge whose first ``valid_after`` replies to a request chain are cut off mid-JSON."""

    def respond(req: FakeRequest) -> Any:
        repairs = sum("not valid" in m["content"] for m in req.messages if m["role"] == "user")
        if repairs >= valid_after:
            return {"relevant": True, "score": 4, "reason": f"after {repairs}"}
        return '{"relevant": true, "score": 4, "reas'

    return respond


@pytest.mark.parametrize("repairs", [0, 1, 2, 3])
async def test_structured_repairs_up_to_max_repairs(
    make_gateway: Any, fake: Any, repairs: int
) -> None:
    gateway = make_gateway(max_repairs=repairs)
    # A judge that needs exactly ``repairs`` re-asks is answered within 1 + repairs calls ...
    with fake.script(invalid_until(repairs)):
        judged = await gateway.astructured(
            model="fake/judge", messages=MSGS, schema=Verdict, prompt_version="v1"
        )
    assert judged.ok and judged.calls == repairs + 1 == fake.stats.calls
    assert judged.value == Verdict(relevant=True, score=4, reason=f"after {repairs}")
    assert judged.repaired == bool(repairs)
    # Each repair shows the judge the whole exchange so far: every bad reply and its note.
    last = fake.stats.requests[-1].messages
    assert [m["role"] for m in last[len(last) - 2 * repairs :]] == ["assistant", "user"] * repairs
    # ... and one that needs one more is unscored after exactly 1 + repairs calls.
    fake.reset(keep_requests=True)
    with fake.script(invalid_until(repairs + 1)):
        judged = await gateway.astructured(
            model="fake/judge",
            messages=user("another question"),
            schema=Verdict,
            prompt_version="v1",
        )
    assert judged.status == "failed" and judged.value is None
    assert judged.calls == repairs + 1 == fake.stats.calls
    assert judged.error and f"after {repairs} repair" in judged.error


def test_max_repairs_is_a_gateway_setting(make_gateway: Any) -> None:
    gateway = make_gateway()
    assert gateway.max_repairs == 1  # at most two calls per answer unless configured
    gateway.configure(max_repairs=3)
    assert gateway.max_repairs == 3


async def test_structured_provider_failure_is_explicit(make_gateway: Any, fake: Any) -> None:
    gateway = make_gateway(max_retries=1)
    judged = await gateway.astructured(
        model="fake/judge?errors=1.0", messages=MSGS, schema=Verdict, prompt_version="v1"
    )
    assert judged.status == "failed" and judged.value is None
    assert (
        judged.error and "RateLimitError" in judged.error and "simulated rate limit" in judged.error
    )
    assert fake.stats.calls == 2


async def test_structured_malformed_reply_from_fake_option(gateway: Gateway, fake: Any) -> None:
    # ``malformed=1.0`` cuts every reply in half: the repair is cut too, so the call fails.
    judged = await gateway.astructured(
        model="fake/judge?malformed=1.0", messages=MSGS, schema=Verdict, prompt_version="v1"
    )
    assert judged.status == "failed" and judged.repaired
    assert fake.stats.malformed == 2


# -- samples of one request ------------------------------------------------------------------


def numbered() -> Any:
    """A responder that numbers its answers, so the samples of one request differ."""
    answers = iter(range(100))
    return lambda req: {"relevant": True, "score": next(answers), "reason": "r"}


async def ask_samples(gateway: Gateway, model: str = "fake/judge", n: int = 3) -> list[Any]:
    return await gateway.asamples(
        n=n, model=model, messages=MSGS, schema=Verdict, prompt_version="v1", temperature=0.3
    )


async def test_samples_are_one_call_memoised_as_separate_samples(
    gateway: Gateway, fake: Any
) -> None:
    with fake.script(numbered()), gateway.scope("score") as counts:
        judged = await ask_samples(gateway)
    assert [j.value.score for j in judged] == [0, 1, 2]  # sample order: choice order
    assert fake.stats.calls == 1 and fake.stats.requests[0].params["n"] == 3
    assert counts.provider_calls == 1 and [j.calls for j in judged] == [1, 0, 0]
    (row,) = gateway.log.rows()
    assert row.tokens_in == sum(j.tokens_in for j in judged) > 0
    assert row.tokens_out == sum(j.tokens_out for j in judged) > 0
    # Each choice is its sample's own memo entry: one sample asked alone is a memo hit.
    alone = await gateway.astructured(
        model="fake/judge",
        messages=MSGS,
        schema=Verdict,
        prompt_version="v1",
        sample_index=2,
        temperature=0.3,
    )
    assert alone.value.score == 2 and fake.stats.calls == 1
    again = await ask_samples(gateway)
    assert [j.value.score for j in again] == [0, 1, 2] and fake.stats.calls == 1


async def test_samples_one_by_one_where_the_provider_has_no_n(
    gateway: Gateway, fake: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("ragaudit.cache._structured.samples_at_once", lambda model: False)
    with fake.script(numbered()):
        judged = await ask_samples(gateway)
    assert sorted(j.value.score for j in judged) == [0, 1, 2]
    assert fake.stats.calls == 3 and all("n" not in r.params for r in fake.stats.requests)
    assert [j.calls for j in judged] == [1, 1, 1]
    # The same keys either way: asked together now, every sample is in the memo already.
    monkeypatch.undo()
    assert [j.ok for j in await ask_samples(gateway)] == [True] * 3 and fake.stats.calls == 3


async def test_samples_a_provider_did_not_return_are_asked_alone(
    gateway: Gateway, fake: Any
) -> None:
    with fake.script(numbered()):
        judged = await ask_samples(gateway, "fake/judge?choices=1")
    assert judged[0].value.score == 0 and all(j.ok for j in judged)
    assert [r.params.get("n") for r in fake.stats.requests] == [3, None, None]


async def test_samples_are_repaired_one_by_one(gateway: Gateway, fake: Any) -> None:
    # Every choice of the one request is cut off; each sample's repair is its own request.
    judged = await ask_samples(gateway, "fake/judge?malformed=1.0")
    assert [j.status for j in judged] == ["failed"] * 3 and all(j.repaired for j in judged)
    assert fake.stats.calls == 1 + 3
    assert [j.calls for j in judged] == [2, 1, 1]


async def test_samples_share_the_provider_failure(make_gateway: Any, fake: Any) -> None:
    gateway = make_gateway(max_retries=1)
    judged = await ask_samples(gateway, "fake/judge?errors=1.0")
    assert [j.status for j in judged] == ["failed"] * 3
    assert all("simulated rate limit" in (j.error or "") for j in judged)
    assert fake.stats.calls == 2  # the one request and its retry: not once per sample


async def test_samples_over_the_budget_are_not_sent(gateway: Gateway, fake: Any) -> None:
    judged = await gateway.asamples(
        n=3, model="fake/judge", messages=MSGS, schema=Verdict, prompt_version="v1", prompt_budget=5
    )
    assert [j.status for j in judged] == ["too_long"] * 3 and fake.stats.calls == 0


def sent_tokens(req: FakeRequest) -> int:
    """A request as the provider received it, counted as ``structured_prompt_tokens`` counts."""
    return count_prompt("fake/judge", req.messages) + _format_tokens("fake/judge", Verdict)


async def test_structured_counts_exactly_what_it_sends(gateway: Gateway, fake: Any) -> None:
    def broken_then_fixed(req: FakeRequest) -> Any:
        if "not valid" in req.user:
            return {"relevant": True, "score": 4, "reason": "fixed"}
        return '{"relevant": true, "score": 4, "reas'

    counted = structured_prompt_tokens("fake/judge", Verdict, MSGS)
    with fake.script(broken_then_fixed):
        judged = await gateway.astructured(
            model="fake/judge",
            messages=MSGS,
            schema=Verdict,
            prompt_version="v1",
            prompt_budget=counted + 100,
        )
    assert judged.ok and judged.repaired and judged.calls == 2
    first, repair = fake.stats.requests
    assert judged.prompt_tokens == counted == sent_tokens(first)
    assert judged.repair_prompt_tokens == sent_tokens(repair) <= counted + 100


async def test_a_budgeted_prompt_is_tokenized_once(
    gateway: Gateway, fake: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A caller fits its prompt (structured_prompt_tokens), then the gateway checks the budget:
    # the same messages are not tokenized a second time, nor is the schema message per call.
    forget_counts()
    tokenized: list[str] = []
    real = litellm.token_counter

    def spy(*args: Any, **kwargs: Any) -> int:
        tokenized.extend(m["content"] for m in kwargs.get("messages") or [])
        if kwargs.get("text") is not None:
            tokenized.append(kwargs["text"])
        return real(*args, **kwargs)

    monkeypatch.setattr(litellm, "token_counter", spy)
    first, second = user("Is Paris the capital?"), user("Is Lyon the capital?")
    counted = structured_prompt_tokens("fake/judge", Verdict, first)
    fitted = len(tokenized)
    judged = await gateway.astructured(
        model="fake/judge",
        messages=first,
        schema=Verdict,
        prompt_version="v1",
        prompt_budget=counted + 100,
    )
    assert judged.ok and judged.prompt_tokens == counted == sent_tokens(fake.stats.requests[0])
    assert len(tokenized) == fitted  # the check counted nothing again
    again = await gateway.astructured(
        model="fake/judge",
        messages=second,
        schema=Verdict,
        prompt_version="v1",
        prompt_budget=counted + 100,
    )
    assert again.ok and again.prompt_tokens == sent_tokens(fake.stats.requests[1])
    assert tokenized[fitted:] == ["Is Lyon the capital?"]  # only the new message


async def test_structured_prompt_over_its_budget_is_not_sent(gateway: Gateway, fake: Any) -> None:
    counted = structured_prompt_tokens("fake/judge", Verdict, MSGS)
    judged = await gateway.astructured(
        model="fake/judge",
        messages=MSGS,
        schema=Verdict,
        prompt_version="v1",
        prompt_budget=counted - 1,
    )
    assert judged.status == "too_long" and judged.value is None and judged.calls == 0
    assert judged.prompt_tokens == counted
    assert f"{counted} tokens" in judged.error and f"budget of {counted - 1}" in judged.error
    assert fake.stats.calls == 0
    fits = await gateway.astructured(
        model="fake/judge",
        messages=MSGS,
        schema=Verdict,
        prompt_version="v1",
        prompt_budget=counted,
    )
    assert fits.ok and fake.stats.calls == 1


async def test_structured_repair_without_room_is_not_sent(gateway: Gateway, fake: Any) -> None:
    def broken(req: FakeRequest) -> Any:
        return '{"relevant": true, "score": 4, "reas'

    counted = structured_prompt_tokens("fake/judge", Verdict, MSGS)
    with fake.script(broken):
        judged = await gateway.astructured(
            model="fake/judge",
            messages=MSGS,
            schema=Verdict,
            prompt_version="v1",
            prompt_budget=counted + 5,  # the first prompt fits, the repair (reply + note) not
        )
    assert judged.status == "no_room" and judged.calls == 1 and fake.stats.calls == 1
    assert "no room to repair" in judged.error and "Invalid JSON" in judged.error
    assert judged.repair_prompt_tokens is None


async def test_structured_answer_cut_off_at_max_tokens_is_not_repaired(
    gateway: Gateway, fake: Any
) -> None:
    def long_reason(req: FakeRequest) -> Any:
        return {"relevant": True, "score": 4, "reason": "because " * 200}

    with fake.script(long_reason):
        judged = await gateway.astructured(
            model="fake/judge",
            messages=MSGS,
            schema=Verdict,
            prompt_version="v1",
            max_tokens=40,
        )
    # The fake stops at max_tokens with finish_reason "length", as a real model does: asked
    # once more with four times the room, cut off again, and never repaired.
    assert judged.status == "truncated" and judged.calls == 2 and fake.stats.calls == 2
    assert "max_tokens=160" in judged.error and not judged.repaired


async def test_structured_provider_context_overflow_is_too_long(
    gateway: Gateway, fake: Any
) -> None:
    def strict(req: FakeRequest) -> Any:
        raise litellm.ContextWindowExceededError(
            message="prompt too long", model="fake/judge", llm_provider="fake"
        )

    with fake.script(strict):
        judged = await gateway.astructured(
            model="fake/judge", messages=MSGS, schema=Verdict, prompt_version="v1"
        )
    assert judged.status == "too_long" and "context window exceeded" in judged.error
    assert fake.stats.calls == 1  # not a transient error: never retried


# -- embeddings -----------------------------------------------------------------------------


async def test_embeddings_memo_per_text(gateway: Gateway, fake: Any) -> None:
    texts = ["the cat sat on the mat", "stock markets fell sharply"]
    vectors = await gateway.aembed(texts, model="fake/embed")
    assert len(vectors) == 2 and all(len(v) == EMBED_DIM for v in vectors)
    assert vectors[0] == pytest.approx(_fake_vector(texts[0]))
    assert fake.stats.embeddings == 2

    again = await gateway.aembed(texts, model="fake/embed")
    assert again == vectors
    assert fake.stats.embeddings == 2
    assert gateway.log.rows()[-1].cache_hit

    mixed = await gateway.aembed([texts[1], "a brand new sentence", texts[0]], model="fake/embed")
    assert fake.stats.embeddings == 3  # only the miss was sent
    assert mixed[0] == vectors[1] and mixed[2] == vectors[0]
    assert mixed[1] == pytest.approx(_fake_vector("a brand new sentence"))
    rows = gateway.log.rows()
    assert [r.kind for r in rows] == ["embedding"] * 3
    assert [r.cache_hit for r in rows] == [False, True, False]
    assert gateway.log.counts.as_dict() == {"calls": 3, "cache_hits": 1, "provider_calls": 2}


async def test_embedding_keys_depend_on_the_model(gateway: Gateway, fake: Any) -> None:
    await gateway.aembed(["hello world"], model="fake/embed")
    await gateway.aembed(["hello world"], model="fake/embed-other")
    assert fake.stats.embeddings == 2


# -- call log -------------------------------------------------------------------------------


async def test_call_log_flush_writes_versioned_parquet(
    gateway: Gateway, fake: Any, tmp_path: Path
) -> None:
    with gateway.scope("sort", run_id="run-1"):
        await gateway.acompletion(model="fake/judge", messages=MSGS, prompt_version="p1")
        await gateway.acompletion(model="fake/judge", messages=MSGS, prompt_version="p1")
    with gateway.scope("score"):
        await gateway.aembed(["x y z"], model="fake/embed")

    sort_path = tmp_path / "calls" / "sort.parquet"
    assert gateway.log.flush(sort_path, stage="sort") == 2
    assert [r.stage for r in gateway.log.rows()] == ["score"]  # other stages stay pending
    table = pq.read_table(sort_path)
    assert table.schema.equals(CALL_LOG_SCHEMA, check_metadata=True)
    assert table.schema.metadata[b"schema_version"] == str(CALL_LOG_SCHEMA_VERSION).encode()
    rows = table.to_pylist()
    assert [r["cache_hit"] for r in rows] == [False, True]
    assert {r["run_id"] for r in rows} == {"run-1"}
    assert {r["prompt_version"] for r in rows} == {"p1"}
    assert all(r["kind"] == "completion" and r["model"] == "fake/judge" for r in rows)
    assert all(r["key_hash"].startswith("k1:") for r in rows)
    assert rows[0]["tokens_in"] > 0 and rows[0]["tokens_out"] > 0
    assert rows[0]["cost_usd"] is None  # the fake provider has no price

    rest = tmp_path / "calls" / "rest.parquet"
    assert gateway.log.flush(rest) == 1
    assert gateway.log.rows() == []
    assert gateway.log.flush(tmp_path / "calls" / "empty.parquet") == 0
    assert not (tmp_path / "calls" / "empty.parquet").exists()
    # Counters are totals of the gateway's life, not of the pending rows.
    assert gateway.log.counts.as_dict() == {"calls": 3, "cache_hits": 1, "provider_calls": 2}


# -- concurrency ----------------------------------------------------------------------------


async def _max_in_flight(
    gateway: Gateway, fake: Any, monkeypatch: pytest.MonkeyPatch, n: int
) -> int:
    state = {"now": 0, "max": 0}
    original = fake.acompletion

    async def counting(*args: Any, **kwargs: Any) -> Any:
        state["now"] += 1
        state["max"] = max(state["max"], state["now"])
        try:
            return await original(*args, **kwargs)
        finally:
            state["now"] -= 1

    monkeypatch.setattr(fake, "acompletion", counting)
    await asyncio.gather(
        *(
            gateway.acompletion(model="fake/judge?latency=0.05", messages=user(f"q{i}"))
            for i in range(n)
        )
    )
    assert fake.stats.calls == n
    assert state["now"] == 0
    return state["max"]


async def test_concurrency_limit_per_model(
    make_gateway: Any, fake: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    gateway = make_gateway(concurrency=2)
    assert await _max_in_flight(gateway, fake, monkeypatch, 10) == 2


async def test_concurrency_limit_allows_parallel_calls(
    make_gateway: Any, fake: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The control of the test above: the wrapper does see calls overlap when allowed to.
    gateway = make_gateway(concurrency=5)
    assert await _max_in_flight(gateway, fake, monkeypatch, 10) == 5


async def test_identical_calls_in_flight_share_one_provider_call(tmp_path, fake) -> None:
    gw = Gateway(tmp_path / "cache", backoff_s=0.0, concurrency=8)
    msgs = [{"role": "user", "content": "same prompt asked by two metrics at once"}]
    replies = await asyncio.gather(
        *(gw.acompletion(model="fake/judge?latency=0.05", messages=msgs) for _ in range(4))
    )
    assert fake.stats.calls == 1
    assert len({r.choices[0].message.content for r in replies}) == 1
    assert gw.log.counts.as_dict() == {"calls": 4, "cache_hits": 3, "provider_calls": 1}


async def test_a_shared_failure_reaches_every_waiter(tmp_path, fake) -> None:
    gw = Gateway(tmp_path / "cache", backoff_s=0.0, max_retries=0)
    msgs = [{"role": "user", "content": "always rate limited"}]
    results = await asyncio.gather(
        *(
            gw.acompletion(model="fake/judge?latency=0.05&errors=1", messages=msgs)
            for _ in range(3)
        ),
        return_exceptions=True,
    )
    assert fake.stats.calls == 1
    assert all(isinstance(r, litellm.RateLimitError) for r in results)
    rows = gw.log.rows()
    assert len(rows) == 3 and all(r.error for r in rows)


@pytest.mark.parametrize(
    ("every", "interval_s"),
    [(50, 3600.0), (10_000, 0.0)],
    ids=["the 50th row", "the timer"],
)
async def test_every_paid_call_keeps_its_tokens_and_cost_when_its_part_is_written_at_once(
    make_gateway: Any,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    every: int,
    interval_s: float,
) -> None:
    """A part written as a row arrives (the 50th row; a timer already due) holds it whole."""
    # litellm's own scripted answers under priced model names: tokens and a price, no network.
    real_embedding = litellm.aembedding

    async def embedding(**kw: Any) -> Any:
        return await real_embedding(**kw, mock_response=[0.1, 0.2])

    monkeypatch.setattr(litellm, "aembedding", embedding)
    gateway = make_gateway(log_every=every, log_interval_s=interval_s)
    calls = tmp_path / "llm_calls"
    with gateway.scope("sort", run_id="r", calls_dir=calls):
        for n in range(50):
            await gateway.acompletion(
                model="openai/gpt-4o-mini", messages=user(f"question {n}"), mock_response="ok"
            )
        await gateway.aembed(["a passage"], model="openai/text-embedding-3-small")
    rows = [r for part in sorted(calls.glob("*.parquet")) for r in pq.read_table(part).to_pylist()]
    paid = [r for r in rows if not r["cache_hit"]]
    assert len(paid) == 51
    assert all(r["tokens_in"] and r["tokens_out"] is not None for r in paid), paid
    assert all(r["cost_usd"] and r["cost_usd"] > 0 for r in paid), paid
