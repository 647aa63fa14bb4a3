"""A scripted, deterministic litellm provider for tests and benchmarks: ``fake/<name>``.

It answers every prompt the project sends. With a response schema (``response_format``
json_schema, or instructor's JSON mode, which embeds the schema in the system message) it
returns a schema-valid instance; our own judges get lexical-overlap heuristics, anything else
a generic instance. Tests script exact answers with :meth:`FakeProvider.script`.

Behaviour is set per model string, e.g. ``fake/judge?latency=0.2&errors=0.2&malformed=0.1``:
``latency`` seconds per call, ``errors`` chance of a transient (retryable) failure per
attempt, ``malformed`` chance of a broken JSON reply per distinct request, ``wrong`` chance
of flipping a boolean/choice answer, ``window`` the context window it reports. Rate limits
(HTTP 429 with a ``Retry-After`` of ``retry_after`` seconds, answered at once):
``ratelimit`` chance that a distinct request's first attempt is refused, and ``capacity``
calls of the model in flight at once, beyond which every call is refused (a provider's
concurrency quota). A :class:`Gate` (``FAKE.gate``, or one a file builds, named by
``FAKE_PROVIDER_GATE`` for worker processes) admits every call besides: the tests' and
benchmarks' seam for counting calls in flight across processes, as a provider would see them
from many workers at once. Like a real model it stops at ``max_tokens``
(cl100k tokens): the reply is cut there with ``finish_reason="length"``. It answers ``n``
choices in one call (at most ``choices`` of them, when set). ``regress=<metric>:<share>``
(several joined by ``,``) turns that share of the judge's replies inside the metric's score
task (``score:<metric>``) against the answer, so that metric's mean drops: a regression to
compare against, for tests and demos. Never used by the demo: its answers mean nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hashlib
import json
import math
import os
import re
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol
from urllib.parse import parse_qsl

import httpx
import litellm
from litellm.llms.custom_llm import CustomLLM

from ragaudit.cache._context import current_repeat, current_stage
from ragaudit.lang import count_tokens, tokens

EMBED_DIM = 64
DEFAULT_WINDOW = 8192


@dataclass(frozen=True)
class FakeOptions:
    """Per-model behaviour parsed from the model string's query part."""

    latency: float = 0.0
    errors: float = 0.0
    malformed: float = 0.0
    wrong: float = 0.0
    window: int = DEFAULT_WINDOW
    seed: int = 0
    ratelimit: float = 0.0
    retry_after: float = 0.05
    capacity: int = 0
    choices: int = 0
    """The most choices one call returns for ``n`` (0: all; 1: a provider that ignores ``n``)."""
    regress: str = ""
    """``metric:share[,metric:share]``: that share of the metric's judge replies made worse."""

    def regressed(self, stage: str) -> float:
        """The share of replies to worsen in ``stage`` (0 when its metric is not regressed)."""
        if not self.regress or not stage.startswith("score:"):
            return 0.0
        # A batched or partial task is ``score:<metric>@b0000``: the same metric.
        metric = stage.removeprefix("score:").split("@", 1)[0]
        for item in self.regress.split(","):
            name, _, share = item.partition(":")
            if name.strip() == metric:
                return float(share or 1.0)
        return 0.0

    @classmethod
    def parse(cls, model: str) -> tuple[str, FakeOptions]:
        """``judge?latency=0.2`` → (``judge``, options)."""
        name, _, query = model.partition("?")
        name = name.split("/", 1)[-1]
        values: dict[str, Any] = {}
        for key, value in parse_qsl(query):
            if key not in cls.__dataclass_fields__:
                raise ValueError(f"fake provider: unknown option '{key}' in model '{model}'")
            whole = key in {"window", "seed", "capacity", "choices"}
            if key == "regress":
                values[key] = value
            else:
                values[key] = int(value) if whole else float(value)
        return name, cls(**values)


@dataclass
class FakeRequest:
    """What a responder sees of one call."""

    model: str
    messages: list[dict[str, Any]]
    schema: dict[str, Any] | None
    params: dict[str, Any]
    options: FakeOptions
    stage: str = ""
    """The gateway scope the call was made in (``score:faithfulness``), or ''."""
    repeat: int = 0
    """The judge repeat the call belongs to (0: the first, or the only one)."""

    @property
    def system(self) -> str:
        """The first system message's text."""
        return next((_text(m) for m in self.messages if m.get("role") == "system"), "")

    @property
    def user(self) -> str:
        """The last user message's text."""
        return next((_text(m) for m in reversed(self.messages) if m.get("role") == "user"), "")

    @property
    def title(self) -> str:
        """The response schema's title (a pydantic model's class name), or ''."""
        return (self.schema or {}).get("title", "")

    @property
    def payload(self) -> dict[str, Any]:
        """The JSON input our typed prompts put after the last ``Input:`` / ``输入:``.

        Searched from the last user message back, so a repair request (whose last user
        message is the repair note) still finds the original input.
        """
        for message in reversed(self.messages):
            if message.get("role") == "user":
                found = _last_input(_text(message))
                if found:
                    return found
        return {}

    @property
    def judge_input(self) -> dict[str, Any]:
        """The input of any judge prompt: ragas's layout (English, or ours in Chinese), or ours."""
        for message in reversed(self.messages):
            if message.get("role") != "user":
                continue
            text = _text(message)
            for marker in _RAGAS_INPUT:
                if marker in text:
                    start = text.rindex(marker) + len(marker)
                    with contextlib.suppress(json.JSONDecodeError):
                        found = json.JSONDecoder().raw_decode(text[start:])[0]
                        if isinstance(found, dict):
                            return found
        return self.payload

    def digest(self) -> str:
        """A stable hash of the request."""
        blob = json.dumps(
            [self.model, self.messages], sort_keys=True, ensure_ascii=False, default=str
        )
        return hashlib.sha256(blob.encode()).hexdigest()


Responder = Callable[[FakeRequest], Any]


def _text(message: dict[str, Any]) -> str:
    content = message.get("content") or ""
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return str(content)


_RAGAS_INPUT = (
    "Now perform the same with the following input\ninput: ",
    "现在请对下面的输入完成同样的任务\n输入: ",
)
_INPUT = re.compile(r"(?:Input|输入): (\{.*?\})\s*\n(?:Output|输出):", re.DOTALL)


def _last_input(text: str) -> dict[str, Any]:
    found = _INPUT.findall(text)
    if not found:
        return {}
    with contextlib.suppress(json.JSONDecodeError):
        return json.loads(found[-1])
    return {}


def count_prompt_tokens(messages: list[dict[str, Any]]) -> int:
    """Prompt tokens the fake provider reports for ``messages`` (words and CJK characters)."""
    return sum(count_tokens(_text(m)) for m in messages)


def count_text_tokens(text: str) -> int:
    """Tokens the fake provider reports for a reply or an embedded text."""
    return count_tokens(text)


def _unit(*parts: Any) -> float:
    """A deterministic number in [0, 1) from ``parts``."""
    digest = hashlib.sha256("|".join(map(str, parts)).encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def _schema_from_instructor(system: str) -> dict[str, Any] | None:
    """Instructor's JSON mode puts the schema in the system message after ``json_schema:``."""
    idx = system.find("json_schema:")
    if idx < 0:
        return None
    start = system.find("{", idx)
    if start < 0:
        return None
    with contextlib.suppress(json.JSONDecodeError):
        obj, _ = json.JSONDecoder().raw_decode(system[start:])
        return obj
    return None


OWN_JUDGES: dict[str, Responder] = {}
"""Default answers by response-schema title, registered beside the prompts that ask them."""


def register_fake_answer(title: str) -> Callable[[Responder], Responder]:
    """Register the fake judge's default answer to a response schema titled ``title``.

    The seam through which a prompt or a metric keeps its fake answers beside itself: the
    module that asks the prompt registers its responder when it is imported, which is always
    before the fake provider can be asked that prompt. A later registration replaces
    an earlier one of the same title.
    """

    def register(responder: Responder) -> Responder:
        OWN_JUDGES[title] = responder
        return responder

    return register


def instance_of(schema: dict[str, Any], root: dict[str, Any] | None = None, seed: str = "") -> Any:
    """A deterministic, valid instance of a JSON schema (the subset pydantic emits)."""
    root = root or schema
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        return instance_of(root.get("$defs", {}).get(name, {}), root, seed)
    for combo in ("anyOf", "oneOf", "allOf"):
        if combo in schema:
            options = [s for s in schema[combo] if s.get("type") != "null"] or schema[combo]
            return instance_of(options[0], root, seed)
    if "const" in schema:
        return schema["const"]
    if "enum" in schema:
        return schema["enum"][int(_unit(seed) * len(schema["enum"]))]
    kind = schema.get("type", "object")
    if kind == "object":
        props = schema.get("properties", {})
        return {k: instance_of(v, root, f"{seed}.{k}") for k, v in props.items()}
    if kind == "array":
        low = schema.get("minItems", 1)
        return [
            instance_of(schema.get("items", {}), root, f"{seed}[{i}]") for i in range(max(1, low))
        ]
    if kind == "integer":
        return int(schema.get("minimum", 1) if "minimum" in schema else 1)
    if kind == "number":
        return float(schema.get("minimum", 1.0) if "minimum" in schema else 1.0)
    if kind == "boolean":
        return True
    text = f"fake {seed.strip('.') or 'text'}"
    return text[: schema.get("maxLength", len(text))]


def _flip(value: Any) -> Any:
    """Turn a judgement around (for the ``wrong`` option)."""
    if isinstance(value, dict):
        if "better" in value:
            return {**value, "better": 3 - value["better"]}
        if "relevant" in value:
            return {**value, "relevant": not value["relevant"]}
        if "verdict" in value and value["verdict"] in (0, 1):
            return {**value, "verdict": 1 - value["verdict"]}
        if "grade" in value and value["grade"] in (0, 1, 2, 3):
            # A relevance grade mirrored (0↔3, 1↔2): always across the relevant cut.
            return {**value, "grade": 3 - value["grade"]}
        if isinstance(value.get("grades"), list):
            return {**value, "grades": [_flip(g) for g in value["grades"]]}
    return value


_WORSE = {"verdict": 0, "attributed": 0, "relevant": False, "supported": False, "noncommittal": 1}
"""The judgement fields that decide a ragas-style score, set against the answer."""


def _worsen(value: Any) -> Any:
    """A reply with every deciding judgement turned against the answer (for ``regress``)."""
    if isinstance(value, list):
        return [_worsen(v) for v in value]
    if isinstance(value, dict):
        return {
            k: (_WORSE[k] if k in _WORSE and isinstance(v, bool | int) else _worsen(v))
            for k, v in value.items()
        }
    return value


def _fake_vector(text: str, dim: int = EMBED_DIM) -> list[float]:
    """Hashed bag-of-tokens: texts sharing words get close vectors."""
    vec = [0.0] * dim
    for tok, n in Counter(tokens(text)).items():
        h = int.from_bytes(hashlib.md5(tok.encode()).digest()[:4], "big")
        vec[h % dim] += n * (1.0 if (h >> 8) & 1 else -1.0)
    norm = math.sqrt(sum(v * v for v in vec)) or 1.0
    return [v / norm for v in vec]


# Not a RAGAUDIT_* name: those are read as config overrides.
GATE_ENV = "FAKE_PROVIDER_GATE"


class Gate(Protocol):
    """Admission of each fake call, across processes: a test's or benchmark's instrument."""

    def enter(self, capacity: int) -> bool:
        """Count one call in flight, or refuse it (False) when ``capacity`` are (0: no cap)."""
        ...

    def leave(self) -> None:
        """One call is no longer in flight."""
        ...


@functools.lru_cache(maxsize=8)
def _load_gate(spec: str) -> Gate:
    # ``<python file>::<argument>``: the file's ``gate(argument)`` builds it. A file path, not
    # a module name, so a worker process finds it whatever its sys.path.
    import importlib.util

    path, _, argument = spec.partition("::")
    module_spec = importlib.util.spec_from_file_location("_fake_provider_gate", path)
    if module_spec is None or module_spec.loader is None:
        raise ValueError(f"{GATE_ENV}: cannot load {path!r}")
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    return module.gate(argument)


def _gate() -> Gate | None:
    """The gate of this process: the one installed on ``FAKE``, else the one the env names."""
    if FAKE.gate is not None:
        return FAKE.gate
    spec = os.environ.get(GATE_ENV)
    return _load_gate(spec) if spec else None


@dataclass
class _Stats:
    calls: int = 0
    errors: int = 0
    malformed: int = 0
    embeddings: int = 0
    rate_limited: int = 0
    max_in_flight: int = 0
    requests: list[FakeRequest] = field(default_factory=list)


class FakeProvider(CustomLLM):
    """The ``fake`` litellm provider (see the module docstring)."""

    def __init__(self) -> None:
        super().__init__()
        self._responders: list[Responder] = []
        self._attempts: Counter[str] = Counter()
        self._refused: set[str] = set()
        self._in_flight: Counter[str] = Counter()
        self._lock = threading.Lock()
        self.stats = _Stats()
        self.keep_requests = False
        self.gate: Gate | None = None
        """What admits each call besides the model's own options (a test's instrument)."""

    # -- scripting --------------------------------------------------------------------

    @contextlib.contextmanager
    def script(self, responder: Responder) -> Iterator[FakeProvider]:
        """Within the block, ``responder(request)`` answers first (None falls through)."""
        self._responders.insert(0, responder)
        try:
            yield self
        finally:
            self._responders.remove(responder)

    def reset(self, *, keep_requests: bool = False) -> None:
        """Forget counters, attempts and recorded requests."""
        with self._lock:
            self._attempts.clear()
            self._refused.clear()
            self._in_flight.clear()
            self.stats = _Stats()
            self.keep_requests = keep_requests

    # -- answering --------------------------------------------------------------------

    def answer(self, req: FakeRequest) -> str:
        """The reply text for ``req`` (before malformation)."""
        for responder in self._responders:
            out = responder(req)
            if out is not None:
                return _render(out)
        if req.schema is not None:
            judge = OWN_JUDGES.get(req.title)
            value = judge(req) if judge else instance_of(req.schema, seed=req.title)
            # A real judge samples anew on each repeat; this one, deterministic, draws its
            # mistakes per repeat (repeat 0 draws as a run without repeats always did).
            draw = ("wrong", req.digest(), req.options.seed) + ((req.repeat,) if req.repeat else ())
            if req.options.wrong and _unit(*draw) < req.options.wrong:
                value = _flip(value)
            share = req.options.regressed(req.stage)
            if share and _unit("regress", req.digest(), req.options.seed) < share:
                value = _worsen(value)
            return json.dumps(value, ensure_ascii=False)
        return f"Fake answer to: {req.user[:200]}"

    def _request(self, model: str, messages: list, optional_params: dict) -> FakeRequest:
        name, options = FakeOptions.parse(model)
        fmt = optional_params.get("response_format") or {}
        schema = None
        if isinstance(fmt, dict) and fmt.get("type") == "json_schema":
            schema = (fmt.get("json_schema") or {}).get("schema")
        if schema is None:
            system = next((_text(m) for m in messages if m.get("role") == "system"), "")
            schema = _schema_from_instructor(system)
        return FakeRequest(
            name,
            list(messages),
            schema,
            dict(optional_params),
            options,
            current_stage(),
            current_repeat(),
        )

    async def acompletion(
        self, model: str, messages: list, *args: Any, **kwargs: Any
    ) -> litellm.ModelResponse:  # noqa: D102
        optional_params = kwargs.get("optional_params") or {}
        req = self._request(model, messages, optional_params)
        shared = _gate()
        if shared is not None and not shared.enter(req.options.capacity):
            with self._lock:
                self.stats.calls += 1
                self.stats.rate_limited += 1
            raise _rate_limited(model, req.options.retry_after)
        try:
            self._admit(model, req)
            try:
                if req.options.latency:
                    await asyncio.sleep(req.options.latency)
                return self._respond(model, req)
            finally:
                with self._lock:
                    self._in_flight[model] -= 1
        finally:
            if shared is not None:
                shared.leave()

    def _admit(self, model: str, req: FakeRequest) -> None:
        """Count the call in flight, or refuse it with a 429 (``ratelimit``, ``capacity``)."""
        opts = req.options
        digest = req.digest()
        with self._lock:
            over = bool(opts.capacity) and self._in_flight[model] >= opts.capacity
            # Once per distinct request, decided by its content: the same batch is refused the
            # same way on every run, whatever order its calls arrive in.
            first = digest not in self._refused
            chosen = opts.ratelimit and _unit("ratelimit", digest, opts.seed) < opts.ratelimit
            if over or (chosen and first):
                self._refused.add(digest)
                self.stats.calls += 1
                self.stats.rate_limited += 1
                refused = True
            else:
                self._in_flight[model] += 1
                self.stats.max_in_flight = max(self.stats.max_in_flight, self._in_flight[model])
                refused = False
        if refused:
            raise _rate_limited(model, opts.retry_after)

    def completion(
        self, model: str, messages: list, *args: Any, **kwargs: Any
    ) -> litellm.ModelResponse:  # noqa: D102
        optional_params = kwargs.get("optional_params") or {}
        req = self._request(model, messages, optional_params)
        if req.options.latency:
            time.sleep(req.options.latency)
        return self._respond(model, req)

    def _respond(self, model: str, req: FakeRequest) -> litellm.ModelResponse:
        digest = req.digest()
        with self._lock:
            self._attempts[digest] += 1
            attempt = self._attempts[digest]
            self.stats.calls += 1
            if self.keep_requests:
                self.stats.requests.append(req)
        opts = req.options
        if opts.errors and _unit("error", digest, attempt, opts.seed) < opts.errors:
            with self._lock:
                self.stats.errors += 1
            raise _rate_limited(model, 0.001)
        # ``n`` choices, each answered as a request of its own would be (a scripted responder
        # is asked once per choice); a malformed request spoils every choice.
        malformed = bool(opts.malformed) and _unit("malformed", digest, opts.seed) < opts.malformed
        choices, completion_tokens = [], 0
        n = max(1, int(req.params.get("n") or 1))
        for index in range(min(n, opts.choices) if opts.choices else n):
            text, tokens, finish = self._reply(req, malformed)
            choices.append(
                {
                    "index": index,
                    "finish_reason": finish,
                    "message": {"role": "assistant", "content": text},
                }
            )
            completion_tokens += tokens
        prompt_tokens = count_prompt_tokens(req.messages)
        response = litellm.ModelResponse(
            model=model,
            choices=choices,
            usage={
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
            },
        )
        # Free, and said so: otherwise litellm searches its price list for the unknown model on
        # every call (a sixth of a call's CPU), which a priced real model never pays.
        response._hidden_params["response_cost"] = 0.0
        return response

    def _reply(self, req: FakeRequest, malformed: bool) -> tuple[str, int, str]:
        """One choice: its text, completion tokens and finish reason."""
        text = self.answer(req)
        if malformed:
            with self._lock:
                self.stats.malformed += 1
            text = text[: max(1, len(text) // 2)]  # a reply cut off mid-JSON
        finish, completion_tokens = "stop", count_tokens(text)
        budget = req.params.get("max_tokens")
        if budget:
            # A real model stops at its budget: the reply is cut there, and says so.
            encoded = _cl100k().encode(text, disallowed_special=())
            if len(encoded) > budget:
                text, finish = _cl100k().decode(encoded[:budget]), "length"
                completion_tokens = budget
        return text, completion_tokens, finish

    # -- embeddings ---------------------------------------------------------------------

    async def aembedding(
        self, model: str, input: list, *args: Any, **kwargs: Any
    ) -> litellm.EmbeddingResponse:  # noqa: A002, D102
        _, options = FakeOptions.parse(model)
        if options.latency:
            await asyncio.sleep(options.latency)
        return self.embedding(model, input)

    def embedding(
        self, model: str, input: list, *args: Any, **kwargs: Any
    ) -> litellm.EmbeddingResponse:  # noqa: A002, D102
        texts = [input] if isinstance(input, str) else list(input)
        with self._lock:
            self.stats.embeddings += len(texts)
        return litellm.EmbeddingResponse(
            model=model,
            data=[
                {"object": "embedding", "index": i, "embedding": _fake_vector(t)}
                for i, t in enumerate(texts)
            ],
            usage=litellm.Usage(
                prompt_tokens=sum(count_text_tokens(t) for t in texts), total_tokens=0
            ),
        )


@functools.lru_cache(maxsize=1)
def _cl100k() -> Any:
    import tiktoken

    return tiktoken.get_encoding("cl100k_base")


def _rate_limited(model: str, retry_after: float) -> litellm.RateLimitError:
    return litellm.RateLimitError(
        message="fake: simulated rate limit (429)",
        llm_provider="fake",
        model=model,
        response=httpx.Response(
            429,
            headers={"retry-after-ms": str(round(retry_after * 1000))},
            request=httpx.Request("POST", "http://fake.invalid/v1/chat"),
        ),
    )


def _render(out: Any) -> str:
    if isinstance(out, str):
        return out
    if hasattr(out, "model_dump_json"):
        return out.model_dump_json()
    return json.dumps(out, ensure_ascii=False)


FAKE = FakeProvider()

__all__ = [
    "EMBED_DIM",
    "FAKE",
    "FakeOptions",
    "FakeProvider",
    "FakeRequest",
    "GATE_ENV",
    "Gate",
    "count_prompt_tokens",
    "count_text_tokens",
    "instance_of",
]
