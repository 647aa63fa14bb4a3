"""Registration of ragaudit's own litellm providers.

``fake/…`` serves tests and benchmarks; ``local/…`` the offline smoke-quality judge and embedder.
"""

from __future__ import annotations

import threading
from typing import Any

import litellm

IN_PROCESS = frozenset({"fake", "local"})
"""Providers served inside this process: free, and absent from litellm's price map."""

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

        entries = [
            e for e in (litellm.custom_provider_map or []) if e["provider"] not in IN_PROCESS
        ]
        entries += [
            {"provider": "fake", "custom_handler": FAKE},
            {"provider": "local", "custom_handler": LOCAL},
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
    """Put an in-process model (``fake/…``, ``local/…``) in litellm's price map at $0, once.

    litellm prices every completion after it returns, and looks into why a cost came out 0;
    for a model its map does not hold, that look-up tries several names, each raising, on
    every call: 9 % of the client CPU of a fake-judge score run (py-spy). These models cost
    nothing, and the map now says so. ``kind``: ``completion`` or ``embedding``, the call's.
    """
    if model in _priced:
        return
    with _lock:
        if model in _priced:
            return
        provider = model.split("/", 1)[0]
        entry: dict[str, Any] = {
            "input_cost_per_token": 0.0,
            "output_cost_per_token": 0.0,
            # Without the cache prices litellm warns about every registration, on the console.
            "cache_creation_input_token_cost": 0.0,
            "cache_read_input_token_cost": 0.0,
            "litellm_provider": provider,
            "mode": "embedding" if kind == "embedding" else "chat",
        }
        litellm.register_model({model: entry})
        _priced.add(model)


__all__ = ["IN_PROCESS", "price_at_zero", "register_all"]
