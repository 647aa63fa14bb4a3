"""Registration of ragaudit's own litellm providers.

``fake/…`` serves tests and benchmarks; ``local/…`` the offline smoke-quality judge and embedder.
"""

from __future__ import annotations

import functools
import threading
from typing import Any

import litellm

IN_PROCESS = frozenset({"fake", "local"})
"""Providers served inside this process: free, and absent from litellm's price map."""

# Whether the in-process providers answer ``n`` choices in one call: the fake does; llama.cpp
# generates one completion per call.
_IN_PROCESS_N = {"fake": True, "local": False}

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
        from ragaudit.cache._local_embed import LocalRouter

        entries = [
            e for e in (litellm.custom_provider_map or []) if e["provider"] not in IN_PROCESS
        ]
        entries += [
            {"provider": "fake", "custom_handler": FAKE},
            {"provider": "local", "custom_handler": LocalRouter(LOCAL)},
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


@functools.lru_cache(maxsize=64)
def samples_at_once(model: str) -> bool:
    """Whether ``model``'s provider returns several samples of one prompt in one call (``n``).

    litellm's list of the OpenAI parameters each provider supports says so for the others
    (Anthropic's API, for one, has no ``n``); a model litellm cannot place gets one sample per
    call.
    """
    register_all()  # litellm's banner for a model it cannot place stays off the console
    provider = model.split("/", 1)[0] if "/" in model else ""
    if provider in _IN_PROCESS_N:
        return _IN_PROCESS_N[provider]
    try:
        name, provider, _, _ = litellm.get_llm_provider(model)
        supported = litellm.get_supported_openai_params(model=name, custom_llm_provider=provider)
    except Exception:
        return False
    return "n" in (supported or ())


__all__ = ["IN_PROCESS", "price_at_zero", "register_all", "samples_at_once"]
