"""Registration of ragaudit's own litellm providers.

``fake/…`` serves tests and benchmarks; ``local/…`` the offline smoke-quality judge and embedder.
"""

from __future__ import annotations

import threading

import litellm

_lock = threading.Lock()
_registered = False


def register_all() -> None:
    """Add the ``fake`` and ``local`` providers to litellm once per process."""
    global _registered
    with _lock:
        if _registered:
            return
        from ragaudit.cache._fake import FAKE
        from ragaudit.cache._local import LOCAL

        entries = [
            e for e in (litellm.custom_provider_map or []) if e["provider"] not in {"fake", "local"}
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


__all__ = ["register_all"]
