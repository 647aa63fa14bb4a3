"""The LLM gateway: every completion and embedding goes through here."""

from ragaudit.cache._calllog import CALL_LOG_SCHEMA, CallCounts, CallLog, CallRecord
from ragaudit.cache._fake import FakeRequest, register_fake_answer
from ragaudit.cache._gateway import (
    TRANSIENT_ERRORS,
    Gateway,
    Judged,
    KeyRejected,
    extract_json,
    live_gateways,
    open_gateway,
    shared_gateway,
    structured_messages,
    structured_prompt_tokens,
)
from ragaudit.cache._keys import KEY_VERSION, canonical_hash, canonical_json, request_key
from ragaudit.cache._limiter import AdaptiveLimiter, LimitStats
from ragaudit.cache._memo import (
    DiskMemo,
    Memo,
    MemoLocation,
    RedisMemo,
    RedisTarget,
    memo_identity,
    open_memo,
    safe_url,
)
from ragaudit.cache._tokens import (
    FALLBACK_WINDOW,
    context_window,
    count_prompt,
    count_text,
    count_tokens,
    encoding_name,
    forget_counts,
)

__all__ = [
    "FakeRequest",
    "CALL_LOG_SCHEMA",
    "FALLBACK_WINDOW",
    "KEY_VERSION",
    "TRANSIENT_ERRORS",
    "AdaptiveLimiter",
    "CallCounts",
    "CallLog",
    "CallRecord",
    "DiskMemo",
    "Gateway",
    "Judged",
    "KeyRejected",
    "LimitStats",
    "Memo",
    "MemoLocation",
    "RedisMemo",
    "RedisTarget",
    "canonical_hash",
    "canonical_json",
    "context_window",
    "count_prompt",
    "count_text",
    "count_tokens",
    "encoding_name",
    "FakeRequest",
    "extract_json",
    "forget_counts",
    "live_gateways",
    "memo_identity",
    "open_memo",
    "open_gateway",
    "register_fake_answer",
    "request_key",
    "safe_url",
    "shared_gateway",
    "structured_messages",
    "structured_prompt_tokens",
]
