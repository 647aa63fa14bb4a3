"""The memo key of a model request: the canonical hash of its output-affecting fields."""

from __future__ import annotations

from typing import Any

from ragaudit.hashing import KEY_VERSION, canonical_hash, canonical_json

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
        "judge_repeat",
        "judge_recheck",
        "provider_variant",
    }
)


def request_key(request: dict[str, Any]) -> str:
    """The memo key of a model request: only its output-affecting fields."""
    return canonical_hash(
        {k: v for k, v in request.items() if k in OUTPUT_FIELDS and v is not None}
    )


__all__ = ["KEY_VERSION", "OUTPUT_FIELDS", "canonical_hash", "canonical_json", "request_key"]
