"""Versioned canonical-JSON hashing: the memo key and every other content hash."""

from __future__ import annotations

import hashlib
import json
from typing import Any

# Bump when what goes into a key changes, so old entries can never be mistaken for new ones.
KEY_VERSION = "k1"

# The request fields that change what a model answers. Everything else (timeouts, retries,
# api keys, base URLs, metadata) stays out of the key by construction: an allow-list, not a
# deny-list, so a new credential-bearing argument can never leak in.
OUTPUT_FIELDS = frozenset(
    {
        "model",
        "messages",
        "input",
        "temperature",
        "top_p",
        "top_k",
        "n",
        "max_tokens",
        "max_completion_tokens",
        "stop",
        "seed",
        "presence_penalty",
        "frequency_penalty",
        "logit_bias",
        "response_format",
        "tools",
        "tool_choice",
        "functions",
        "function_call",
        "reasoning_effort",
        "dimensions",
        "encoding_format",
        "prompt_version",
        "sample_index",
    }
)


def _default(obj: Any) -> Any:
    if hasattr(obj, "model_dump"):
        return obj.model_dump(mode="json")
    if isinstance(obj, (set, frozenset)):
        return sorted(obj)
    if isinstance(obj, bytes):
        return obj.hex()
    return str(obj)


def canonical_json(obj: Any) -> str:
    """Sorted keys, compact separators, UTF-8 kept: the same value always gives the same text."""
    return json.dumps(
        obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=_default
    )


def canonical_hash(obj: Any) -> str:
    """``k1:`` + SHA-256 of the canonical JSON."""
    digest = hashlib.sha256(canonical_json(obj).encode("utf-8")).hexdigest()
    return f"{KEY_VERSION}:{digest}"


def request_key(request: dict[str, Any]) -> str:
    """The memo key of a model request: only its output-affecting fields."""
    return canonical_hash(
        {k: v for k, v in request.items() if k in OUTPUT_FIELDS and v is not None}
    )


__all__ = ["KEY_VERSION", "OUTPUT_FIELDS", "canonical_hash", "canonical_json", "request_key"]
