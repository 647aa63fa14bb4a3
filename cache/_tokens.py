"""Token counts and context windows: what a judge holds and what a prompt costs in it.

One tokenizer mapping for every caller, so a prompt is counted the same way where it is
fitted (the stages) and where it is checked before it is sent (the gateway).
"""

from __future__ import annotations

from typing import Any

import litellm

from ragaudit.cache._fake import DEFAULT_WINDOW, FakeOptions

# Without better knowledge a judge is assumed to hold this many tokens (prompt + answer).
FALLBACK_WINDOW = 8192


def context_window(model: str, configured: int | None = None) -> int:
    """Tokens the model holds (prompt + answer): configured, known to us or litellm, or 8,192."""
    if configured:
        return configured
    provider = model.split("/", 1)[0]
    if provider == "fake":
        return FakeOptions.parse(model)[1].window or DEFAULT_WINDOW
    if provider == "local":
        from ragaudit.cache._local import LOCAL_CONTEXT_WINDOW

        return LOCAL_CONTEXT_WINDOW
    try:
        info = litellm.get_model_info(model)
        return int(info.get("max_input_tokens") or info.get("max_tokens") or FALLBACK_WINDOW)
    except Exception:  # litellm does not know every model string (ollama tags, custom names)
        return FALLBACK_WINDOW


def _tokenizer(model: str) -> str:
    """The model name litellm's counter should see for ``model``."""
    # Our own providers have no litellm tokenizer; cl100k over-counts CJK a little, which is
    # the safe side for window packing.
    if model.split("/", 1)[0] in {"fake", "local"}:
        return "gpt-4"
    # litellm picks an OpenAI model's encoding (o200k for gpt-4o, gpt-4.1, the o-series) only
    # from its bare name: "openai/gpt-4o-mini" fell back to cl100k, ~1.8x its Chinese tokens.
    bare = model.rsplit("/", 1)[-1]
    return bare if bare in litellm.open_ai_chat_completion_models else model


def encoding_name(model: str) -> str:
    """The tiktoken encoding litellm's counter uses for ``model`` (cl100k if it cannot map it)."""
    import tiktoken

    try:
        return tiktoken.encoding_name_for_model(_tokenizer(model))
    except KeyError:
        return "cl100k_base"


def count_tokens(model: str, text: str) -> int:
    """Tokens of ``text`` for ``model``: an OpenAI model's own encoding, else tiktoken's cl100k."""
    try:
        return int(litellm.token_counter(model=_tokenizer(model), text=text))
    except Exception:
        return len(text)


def count_prompt(model: str, messages: list[dict[str, Any]]) -> int:
    """Tokens of chat ``messages`` as litellm counts them for ``model`` (framing included)."""
    try:
        return int(litellm.token_counter(model=_tokenizer(model), messages=messages))
    except Exception:  # no tokenizer for this model: characters over-count, the safe side
        return sum(len(str(m.get("content") or "")) + 4 for m in messages)


__all__ = [
    "FALLBACK_WINDOW",
    "context_window",
    "count_prompt",
    "count_tokens",
    "encoding_name",
]
