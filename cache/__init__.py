"""The LLM gateway: every completion and embedding goes through here."""

import logging

from ragaudit._env import log_to_current_stderr
from ragaudit.cache._calllog import CALL_LOG_SCHEMA, CallCounts, CallLog, CallRecord
from ragaudit.cache._config import (
    gateway_for,
    global_lease,
    hold_gateway,
    items_in_flight,
    memo_location,
)
from ragaudit.cache._context import current_repeat, judge_recheck, judge_repeat
from ragaudit.cache._fake import FakeRequest, register_fake_answer
from ragaudit.cache._global import ensure_global_limit
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
from ragaudit.cache._registry import live_gateways, open_gateway, shared_gateway
from ragaudit.cache._retry import TRANSIENT_ERRORS, KeyRejected
from ragaudit.cache._structured import (
    Gateway,
    Judged,
    extract_json,
    response_schema_text,
    schema_instruction,
    structured_messages,
    structured_prompt_tokens,
)
from ragaudit.cache._tokens import (
    FALLBACK_WINDOW,
    Counter,
    context_window,
    count_prompt,
    count_text,
    count_tokens,
    encoding_name,
    forget_counts,
    usage_counter,
)

# litellm's loggers hold the stderr of the moment litellm was imported (``_env`` says why).
log_to_current_stderr(
    *(
        h
        for n in ("LiteLLM", "LiteLLM Router", "LiteLLM Proxy")
        for h in logging.getLogger(n).handlers
    )
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
    "Counter",
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
    "ensure_global_limit",
    "FakeRequest",
    "current_repeat",
    "extract_json",
    "judge_recheck",
    "judge_repeat",
    "forget_counts",
    "gateway_for",
    "global_lease",
    "hold_gateway",
    "items_in_flight",
    "live_gateways",
    "memo_identity",
    "memo_location",
    "open_memo",
    "open_gateway",
    "register_fake_answer",
    "request_key",
    "response_schema_text",
    "safe_url",
    "schema_instruction",
    "shared_gateway",
    "structured_messages",
    "structured_prompt_tokens",
    "usage_counter",
]
