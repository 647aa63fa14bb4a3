"""The LLM gateway: every completion and embedding goes through here (SPEC §3)."""

from ragaudit.cache._calllog import CALL_LOG_SCHEMA, CallCounts, CallLog, CallRecord
from ragaudit.cache._gateway import TRANSIENT_ERRORS, Gateway, Judged, extract_json
from ragaudit.cache._keys import KEY_VERSION, canonical_hash, canonical_json, request_key

__all__ = [
    "CALL_LOG_SCHEMA",
    "KEY_VERSION",
    "TRANSIENT_ERRORS",
    "CallCounts",
    "CallLog",
    "CallRecord",
    "Gateway",
    "Judged",
    "canonical_hash",
    "canonical_json",
    "extract_json",
    "request_key",
]
