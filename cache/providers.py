"""What the gateway knows about each model's provider: one record per model prefix.

A model string's prefix (``fake/…``, ``local/…``, ``openai/…``) names its provider. The record
says what the gateway, token counting and the dry run need: the context window, how tokens
are counted, whether ``n`` samples come in one call, whether the provider runs in this process
(free, outside litellm's price map, bounded in time by the gateway itself) or behind litellm's
HTTP client (priced by litellm, bounded by the transport's timeout). ``fake`` (tests and
benchmarks) and ``local`` (the offline smoke-quality judge and embedder) are ragaudit's own;
any other prefix gets a record built from litellm's metadata for the model.
"""

from __future__ import annotations

import difflib
import functools
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import litellm

from ragaudit.errors import ConfigError

if TYPE_CHECKING:
    from ragaudit.config import ModelsConfig

# Without better knowledge a judge is assumed to hold this many tokens (prompt + answer).
FALLBACK_WINDOW = 8192

# The litellm model whose tokenizer counts a provider without one of its own in litellm:
# tiktoken's cl100k, which over-counts CJK a little, the safe side for window packing.
CL100K = "gpt-4"

OwnCounter = tuple[str, Callable[[list[dict[str, Any]]], int], Callable[[str], int]]
"""A provider's exact counting rule: its description, a prompt counter and a text counter."""


@dataclass(frozen=True)
class Provider:
    """One provider's record (see the module docstring)."""

    prefix: str
    in_process: bool
    """Served inside this process: free, and the gateway bounds each call's time itself
    (litellm's ``timeout`` reaches only HTTP transports)."""
    window: Callable[[str], int]
    """Tokens a model holds (prompt + answer)."""
    samples: Callable[[str], bool]
    """Whether a model answers ``n`` choices of one prompt in one call."""
    tokenizer: Callable[[str], str]
    """The model name litellm's counter should see for a model."""
    own_counter: Callable[[str], OwnCounter] | None = None
    """The provider's exact counting rule for a model (raises when its files are missing);
    None: litellm's counter."""
    variant: Callable[[str], str | None] = lambda model: None
    """What, outside the request, changes a model's answers in this process (the offline
    judge's llama.cpp options and model file from the environment), for the memo key; None:
    nothing, and the key is the request's alone."""

    @property
    def free(self) -> bool:
        """Whether calls cost nothing (in-process providers are free; litellm prices others)."""
        return self.in_process

    @property
    def transport_timeout(self) -> bool:
        """Whether litellm's HTTP client enforces the request timeout for this provider."""
        return not self.in_process


# -- ragaudit's own providers ---------------------------------------------------------------


def _fake_window(model: str) -> int:
    from ragaudit.cache._fake import DEFAULT_WINDOW, FakeOptions

    return FakeOptions.parse(model)[1].window or DEFAULT_WINDOW


def _fake_counter(model: str) -> OwnCounter:
    from ragaudit.cache import _fake

    return (
        "the fake provider's rule (words and CJK characters)",
        _fake.count_prompt_tokens,
        _fake.count_text_tokens,
    )


def _local_window(model: str) -> int:
    from ragaudit.cache._local import LOCAL_CONTEXT_WINDOW

    return LOCAL_CONTEXT_WINDOW


def _local_counter(model: str) -> OwnCounter:
    from ragaudit.cache import _local, _local_embed

    if model in _local_embed.EMBEDDING_MODELS:
        _local_embed.count_text_tokens("", model)  # its packages missing: raises, caller says so
        return (
            "multilingual-e5-small's own tokenizer",
            functools.partial(_local.count_prompt_tokens, json_answer=True),
            functools.partial(_local_embed.count_text_tokens, model=model),
        )
    # Loaded here, once, so a missing file shows when the rule is asked for, not mid-count.
    _local.count_text_tokens(model, "")
    if model == _local.EMBEDDING_MODEL:
        rule = "MiniLM's own tokenizer"
    else:
        rule = "Gemma's own tokenizer (the vocabulary of the provider's GGUF)"
    # Every judge call counted this way asks for a JSON schema (the gateway's structured
    # call), which changes the local prompt's closing cue.
    return (
        rule,
        functools.partial(_local.count_prompt_tokens, json_answer=True),
        functools.partial(_local.count_text_tokens, model),
    )


def _local_variant(model: str) -> str | None:
    from ragaudit.cache import _local

    return _local.answer_variant(model)


FAKE_PROVIDER = Provider(
    prefix="fake",
    in_process=True,
    window=_fake_window,
    samples=lambda model: True,  # the fake answers n choices in one call
    tokenizer=lambda model: CL100K,
    own_counter=_fake_counter,
)
LOCAL_PROVIDER = Provider(
    prefix="local",
    in_process=True,
    window=_local_window,
    samples=lambda model: False,  # llama.cpp generates one completion per call
    tokenizer=lambda model: CL100K,
    own_counter=_local_counter,
    variant=_local_variant,
)

_records: dict[str, Provider] = {p.prefix: p for p in (FAKE_PROVIDER, LOCAL_PROVIDER)}

IN_PROCESS = frozenset(p.prefix for p in _records.values() if p.in_process)
"""Prefixes of the providers served inside this process."""


# -- any other provider: from litellm's metadata --------------------------------------------


def _litellm_window(model: str) -> int:
    try:
        info = litellm.get_model_info(model)
        return int(info.get("max_input_tokens") or info.get("max_tokens") or FALLBACK_WINDOW)
    except Exception:  # litellm does not know every model string (ollama tags, custom names)
        return FALLBACK_WINDOW


@functools.lru_cache(maxsize=64)
def _litellm_samples(model: str) -> bool:
    # litellm's list of the OpenAI parameters each provider supports says whether it has ``n``
    # (Anthropic's API, for one, has none); a model litellm cannot place gets one per call.
    register_all()  # litellm's banner for a model it cannot place stays off the console
    try:
        name, provider, _, _ = litellm.get_llm_provider(model)
        supported = litellm.get_supported_openai_params(model=name, custom_llm_provider=provider)
    except Exception:
        return False
    return "n" in (supported or ())


def _litellm_tokenizer(model: str) -> str:
    # litellm picks an OpenAI model's encoding (o200k for gpt-4o, gpt-4.1, the o-series) only
    # from its bare name: "openai/gpt-4o-mini" fell back to cl100k, ~1.8x its Chinese tokens.
    bare = model.rsplit("/", 1)[-1]
    return bare if bare in litellm.open_ai_chat_completion_models else model


def _litellm_provider(prefix: str) -> Provider:
    return Provider(
        prefix=prefix,
        in_process=False,
        window=_litellm_window,
        samples=_litellm_samples,
        tokenizer=_litellm_tokenizer,
    )


def _prefix(model: str) -> str:
    return model.split("/", 1)[0] if "/" in model else ""


def provider_record(model: str) -> Provider:
    """The record of ``model``'s provider: ragaudit's own, or the default litellm record."""
    prefix = _prefix(model)
    found = _records.get(prefix)
    if found is None:
        found = _default_records.get(prefix)
        if found is None:
            found = _default_records.setdefault(prefix, _litellm_provider(prefix))
    return found


_default_records: dict[str, Provider] = {}


def _provider_names() -> list[str]:
    """Every prefix a model string may start with: ragaudit's own, then litellm's."""
    return list(_records) + [getattr(p, "value", str(p)) for p in litellm.provider_list]


def check_judges(models: ModelsConfig) -> None:
    """Refuse a judge, juror or generator whose provider cannot be routed, before any call.

    litellm resolves the provider from the model string alone, offline; a string it cannot
    route would otherwise fail every one of its calls at run time, after the others were paid.
    The registry's own prefixes (``fake``, ``local``) are routed here, not by litellm.
    """
    litellm.suppress_debug_info = True  # its provider-list banner, printed on every refusal
    named = [("models.judge", models.judge), ("models.generator", models.generator)]
    named += [(f"models.jury[{i}]", m) for i, m in enumerate(models.jury)]
    for field, model in named:
        if model is None or _prefix(model) in _records:
            continue
        try:
            litellm.get_llm_provider(model)
        except Exception:
            guess = _prefix(model) or model
            close = difflib.get_close_matches(guess, _provider_names(), n=3, cutoff=0.6)
            hint = f"did you mean {' or '.join(f'{c}/' for c in close)}? " if close else ""
            raise ConfigError(
                f"{field}: {model!r} names no known provider; {hint}write provider/model with "
                f"a provider of ragaudit's ({', '.join(f'{p}/' for p in _records)}) or of "
                "litellm's (e.g. openai/gpt-4o-mini, anthropic/claude-3-5-haiku-latest, "
                "ollama/qwen2.5:7b; all in litellm.provider_list)"
            ) from None


def samples_at_once(model: str) -> bool:
    """Whether ``model``'s provider returns several samples of one prompt in one call (``n``)."""
    return provider_record(model).samples(model)


# -- registration with litellm --------------------------------------------------------------

_lock = threading.Lock()
_registered = False
_priced: set[str] = set()


def register_all() -> None:
    """Add the ``fake`` and ``local`` providers to litellm once per process."""
    global _registered
    with _lock:
        if _registered:
            return
        from ragaudit.cache._fake import FAKE
        from ragaudit.cache._local import LOCAL
        from ragaudit.cache._local_embed import LocalRouter

        entries = [
            e for e in (litellm.custom_provider_map or []) if e["provider"] not in IN_PROCESS
        ]
        entries += [
            {"provider": "fake", "custom_handler": FAKE},
            {"provider": "local", "custom_handler": LocalRouter(LOCAL)},
        ]
        litellm.custom_provider_map = entries
        # litellm prints a "Give Feedback / Get Help" banner to stdout on every provider error;
        # the gateway already logs each failure once, redacted, on its call-log row.
        litellm.suppress_debug_info = True
        # litellm reads the map into its provider list when it routes; refresh it explicitly.
        from litellm.utils import custom_llm_setup

        custom_llm_setup()
        _registered = True


def price_at_zero(model: str, kind: str = "completion") -> None:
    """Put a free model (``fake/…``, ``local/…``) in litellm's price map at $0, once.

    litellm prices every completion after it returns, and looks into why a cost came out 0;
    for a model its map does not hold, that look-up tries several names, each raising, on
    every call, a visible share of the client CPU of a fake-judge score run. These models cost
    nothing, and the map now says so. ``kind``: ``completion`` or ``embedding``, the call's.
    """
    if model in _priced:
        return
    with _lock:
        if model in _priced:
            return
        entry: dict[str, Any] = {
            "input_cost_per_token": 0.0,
            "output_cost_per_token": 0.0,
            # Without the cache prices litellm warns about every registration, on the console.
            "cache_creation_input_token_cost": 0.0,
            "cache_read_input_token_cost": 0.0,
            "litellm_provider": _prefix(model),
            "mode": "embedding" if kind == "embedding" else "chat",
        }
        litellm.register_model({model: entry})
        _priced.add(model)


__all__ = [
    "CL100K",
    "FAKE_PROVIDER",
    "FALLBACK_WINDOW",
    "IN_PROCESS",
    "LOCAL_PROVIDER",
    "OwnCounter",
    "check_judges",
    "Provider",
    "price_at_zero",
    "provider_record",
    "register_all",
    "samples_at_once",
]
