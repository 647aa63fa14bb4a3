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
    # Our own providers have no litellm tokenizer; cl100k over-counts CJK a little, which is
    # the safe side for window packing.
    return "gpt-4" if model.split("/", 1)[0] in {"fake", "local"} else model


def count_tokens(model: str, text: str) -> int:
    """Tokens of ``text`` for ``model`` (tiktoken's cl100k for models litellm cannot map)."""
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


__all__ = ["FALLBACK_WINDOW", "context_window", "count_prompt", "count_tokens"]
