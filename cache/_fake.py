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
concurrency quota). With ``FAKE_PROVIDER_SHARED_COUNT`` set to a file path, the in-flight count
(and ``capacity``) is shared by every process that uses the fake through that file, which also
keeps the peak, calls and refusals: how a benchmark sees what a provider would see from many
workers at once (:class:`SharedCount`). Like a real model it stops at ``max_tokens``
(cl100k tokens): the reply is cut there with ``finish_reason="length"``. It answers ``n``
choices in one call (at most ``choices`` of them, when set). Never used by the demo: its
answers mean nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
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
from typing import Any
from urllib.parse import parse_qsl

import httpx
import litellm
from litellm.llms.custom_llm import CustomLLM

from ragaudit.lang import count_tokens, sentences, tokens

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


def overlap(question: str, text: str) -> float:
    """Share of the question's distinct tokens found in ``text`` (0 when the question has none)."""
    q = set(tokens(question))
    return len(q & set(tokens(text))) / len(q) if q else 0.0


# -- answers of our own judges --------------------------------------------------------------


def _relevance(req: FakeRequest) -> dict[str, Any]:
    p = req.payload
    score = overlap(p.get("question", ""), p.get("context", ""))
    return {"relevant": score >= 0.3, "reason": f"token overlap {score:.2f}"}


def _pairwise(req: FakeRequest) -> dict[str, Any]:
    p = req.payload
    q = p.get("question", "")
    a, b = overlap(q, p.get("context_1", "")), overlap(q, p.get("context_2", ""))
    return {"better": 1 if a >= b else 2, "reason": f"overlap {a:.2f} vs {b:.2f}"}


def _group_answer(req: FakeRequest) -> dict[str, Any]:
    p = req.payload
    q = p.get("question", "")
    useful = [c for c in p.get("contexts", []) if overlap(q, c) > 0]
    if not useful:
        return {"answerable": False, "answer": ""}
    return {"answerable": True, "answer": " ".join(c.split("\n")[0][:200] for c in useful)}


def _merge(req: FakeRequest) -> dict[str, Any]:
    parts = req.payload.get("partial_answers", [])
    return {"answer": " ".join(dict.fromkeys(parts))}


def _rag_answer(req: FakeRequest) -> dict[str, Any]:
    """The reference pipeline's generator: the retrieved sentences closest to the question.

    So the answer depends on what was retrieved and on nothing else.
    """
    p = req.payload
    # overlap() by hand: the question's tokens once, each sentence's overlap once.
    asked = set(tokens(p.get("question", "")))
    found = []
    for i, c in enumerate(p.get("contexts", [])):
        for s in sentences(c):
            score = len(asked & set(tokens(s))) / len(asked) if asked else 0.0
            if score > 0:
                found.append((score, i, s))
    best = sorted(found, key=lambda t: (-t[0], t[1]))[:2]
    if not best:
        return {"answer": "I do not know."}
    return {"answer": " ".join(s for _, _, s in sorted(best, key=lambda t: t[1]))[:400]}


OWN_JUDGES: dict[str, Responder] = {
    "RelevanceVerdict": _relevance,
    "PairwisePreference": _pairwise,
    "GroupAnswer": _group_answer,
    "MergedAnswer": _merge,
    "RagAnswer": _rag_answer,
}


def register_fake_answer(title: str) -> Callable[[Responder], Responder]:
    """Register the fake judge's default answer to a response schema titled ``title``.

    The seam through which a prompt or a metric keeps its fake answers beside itself: the
    module that defines the schema registers its responder when it is imported, which is
    always before the fake provider can be asked that prompt. A later registration replaces
    an earlier one of the same title.
    """

    def register(responder: Responder) -> Responder:
        OWN_JUDGES[title] = responder
        return responder

    return register


# -- an oracle: a judge that answers from known labels ---------------------------------------


@dataclass
class Oracle:
    """A responder that answers the judge steps of the calibrated metrics from known labels.

    ``relevant`` maps (question, context) to whether the context helps answer the question;
    ``supported`` maps an answer to whether its contexts support it (faithfulness takes the
    whole answer as its one statement); ``answered`` maps an answer to its question and whether
    it answers it (answer relevancy). ``flip`` is the chance that one verdict is
    turned around, drawn per verdict from ``seed``: a judge of known, independent error.
    Anything it has no label for falls through to the other responders.
    """

    relevant: dict[tuple[str, str], bool] = field(default_factory=dict)
    supported: dict[str, bool] = field(default_factory=dict)
    answered: dict[str, tuple[str, bool]] = field(default_factory=dict)
    flip: float = 0.0
    seed: int = 0

    @classmethod
    def from_calibration(cls, inputs: Any, flip: float = 0.0, seed: int = 0) -> Oracle:
        """The oracle of a calibration's inputs: every label and scenario verdict it holds.

        ``inputs`` is a ``ragaudit.calibration.CalibrationInputs``: its labelled items give
        the verdicts of their metric (a label of at least ½ is good), its scenario rows the
        relevance of each fixed context and of each gold context.
        """
        oracle = cls(flip=flip, seed=seed)
        for item in inputs.labelled:
            s = item.sample
            good = item.label >= 0.5
            if item.metric == "faithfulness":
                oracle.supported[s.response] = good
            elif item.metric == "answer_relevancy":
                oracle.answered[s.response] = (s.question, good)
            elif item.metric == "context_relevance":
                oracle.relevant[(s.question, s.contexts[0])] = good
        for row in inputs.scenarios:
            meta = row.metadata["scenario"]
            for text, rel in zip(row.retrieved_contexts, meta["relevant"], strict=True):
                oracle.relevant[(row.question, text)] = rel
            for g in row.reference_contexts:
                oracle.relevant[(row.question, g)] = True
        return oracle

    def _bit(self, truth: bool, *key: Any) -> bool:
        wrong = self.flip > 0 and _unit("oracle", self.seed, *key) < self.flip
        return truth != wrong

    def _known(self, question: str, text: str) -> list[tuple[str, bool]]:
        """The labelled contexts of ``question`` found in ``text`` (longest first, no overlap)."""
        found = []
        for (q, ctx), rel in self.relevant.items():
            if q == question and ctx and ctx in text:
                found.append((ctx, rel))
        return found

    def __call__(self, req: FakeRequest) -> Any:
        """The labelled answer to ``req``, or None."""
        inp = req.judge_input
        title = req.title
        if title == "StatementGeneratorOutput" and inp.get("answer") in self.supported:
            return {"statements": [inp["answer"]]}
        if title == "NLIStatementOutput" and all(
            s in self.supported for s in inp.get("statements", [])
        ):
            return {
                "statements": [
                    {
                        "statement": s,
                        "reason": "oracle",
                        "verdict": int(self._bit(self.supported[s], s)),
                    }
                    for s in inp["statements"]
                ]
            }
        if title == "AnswerRelevanceOutput" and inp.get("response") in self.answered:
            question, relevant = self.answered[inp["response"]]
            if self._bit(relevant, inp["response"]):
                return {"question": question, "noncommittal": 0}
            return {"question": "unrelated", "noncommittal": 1}
        question = inp.get("question", inp.get("user_input", ""))
        if (
            title == "ContextPrecisionOutput"
            and (question, inp.get("context", "")) in self.relevant
        ):
            truth = self.relevant[(question, inp["context"])]
            return {"reason": "oracle", "verdict": int(self._bit(truth, question, inp["context"]))}
        if title == "RelevanceGrade" and (question, inp.get("context", "")) in self.relevant:
            truth = self.relevant[(question, inp["context"])]
            # A label is yes/no: the grades at the ends of the 0-3 scale.
            grade = 3 if self._bit(truth, question, inp["context"]) else 0
            return {"grade": grade, "reason": "oracle"}
        if title == "PairwisePreference":
            one = self.relevant.get((question, inp.get("context_1", "")))
            two = self.relevant.get((question, inp.get("context_2", "")))
            if one is not None and two is not None and one != two:
                better = 1 if self._bit(one, question, inp["context_1"], inp["context_2"]) else 2
                return {"better": better, "reason": "oracle"}
        if title == "ContextRelevanceOutput":
            known = self._known(question, inp.get("context", ""))
            if known:
                share = sum(r for _, r in known) / len(known)
                rating = min(2, max(0, int(2 * share + 0.5)))
                if self._bit(True, question, inp["context"]) is False:
                    rating = 2 - rating
                return {"rating": rating}
        if title == "ContextRecallOutput":
            gold = [c for (q, c), r in self.relevant.items() if q == question and r]
            if gold:
                return {
                    "classifications": [
                        {
                            "statement": g[:200],
                            "reason": "oracle",
                            "attributed": int(self._bit(g in inp.get("context", ""), question, g)),
                        }
                        for g in gold
                    ]
                }
        return None


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
SHARED_ENV = "FAKE_PROVIDER_SHARED_COUNT"


class SharedCount:
    """Calls in flight across processes, kept in one JSON file under an exclusive ``flock``."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = os.fspath(path)

    def _update(self, change: Callable[[dict[str, int]], bool]) -> bool:
        with open(self.path, "a+", encoding="utf-8") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX)
            fh.seek(0)
            text = fh.read()
            state = json.loads(text) if text else {}
            for k in ("in_flight", "peak", "calls", "refused"):
                state.setdefault(k, 0)
            ok = change(state)
            fh.seek(0)
            fh.truncate()
            fh.write(json.dumps(state))
            fh.flush()
            return ok

    def enter(self, capacity: int) -> bool:
        """Count one call in flight, or count a refusal when ``capacity`` are (0: no cap)."""

        def change(state: dict[str, int]) -> bool:
            if capacity and state["in_flight"] >= capacity:
                state["refused"] += 1
                return False
            state["in_flight"] += 1
            state["calls"] += 1
            state["peak"] = max(state["peak"], state["in_flight"])
            return True

        return self._update(change)

    def leave(self) -> None:
        """One call is no longer in flight."""

        def change(state: dict[str, int]) -> bool:
            state["in_flight"] -= 1
            return True

        self._update(change)

    def read(self) -> dict[str, int]:
        """The counts: ``in_flight``, ``peak``, ``calls``, ``refused``."""
        out: dict[str, int] = {}
        self._update(lambda state: bool(out.update(state)) or True)
        return out


def _shared() -> SharedCount | None:
    path = os.environ.get(SHARED_ENV)
    return SharedCount(path) if path else None


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
            if (
                req.options.wrong
                and _unit("wrong", req.digest(), req.options.seed) < req.options.wrong
            ):
                value = _flip(value)
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
        return FakeRequest(name, list(messages), schema, dict(optional_params), options)

    async def acompletion(
        self, model: str, messages: list, *args: Any, **kwargs: Any
    ) -> litellm.ModelResponse:  # noqa: D102
        optional_params = kwargs.get("optional_params") or {}
        req = self._request(model, messages, optional_params)
        shared = _shared()
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
    "Oracle",
    "SHARED_ENV",
    "SharedCount",
    "count_prompt_tokens",
    "count_text_tokens",
    "instance_of",
    "overlap",
]
