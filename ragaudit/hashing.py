"""Versioned canonical-JSON hashing: the memo key and every other content hash.

It lives outside ``ragaudit.cache`` because importing that package loads litellm (seconds of a
cold start), and ``compare``/``runs`` hash question sets without calling any model.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

# Bump when what goes into a key changes, so old entries can never be mistaken for new ones.
KEY_VERSION = "k1"


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


__all__ = ["KEY_VERSION", "canonical_hash", "canonical_json"]
