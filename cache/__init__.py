"""The LLM gateway: every completion and embedding goes through here (SPEC §3)."""

from ragaudit.cache._calllog import CALL_LOG_SCHEMA, CallCounts, CallLog, CallRecord
from ragaudit.cache._gateway import (
    TRANSIENT_ERRORS,
    Gateway,
    Judged,
    extract_json,
    structured_messages,
    structured_prompt_tokens,
)
from ragaudit.cache._keys import KEY_VERSION, canonical_hash, canonical_json, request_key
from ragaudit.cache._tokens import FALLBACK_WINDOW, context_window, count_prompt, count_tokens

__all__ = [
    "CALL_LOG_SCHEMA",
    "KEY_VERSION",
    "TRANSIENT_ERRORS",
    "CallCounts",
    "CallLog",
    "CallRecord",
    "FALLBACK_WINDOW",
    "Gateway",
    "Judged",
    "canonical_hash",
    "canonical_json",
    "context_window",
    "count_prompt",
    "count_tokens",
    "extract_json",
    "request_key",
    "structured_messages",
    "structured_prompt_tokens",
]
