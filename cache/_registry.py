"""The process's one gateway per memo, shared by every run and stage using the memo at once.

Its memo handles and per-loop limits are shared; a run's own things are its scope's. Keyed by
the memo's identity (its resolved folder, or its Redis URL without password).
"""

from __future__ import annotations

import contextlib
import threading
import weakref
from collections.abc import Iterator
from typing import Any

from ragaudit.cache._memo import MemoLocation, RedisTarget, memo_identity
from ragaudit.cache._structured import Gateway

# The live gateway of each memo, by identity. Weak: a gateway nobody uses any more is freed with
# its memo handles and per-loop state; no run ever pins one for the life of the process.
_live: weakref.WeakValueDictionary[str, Gateway] = weakref.WeakValueDictionary()
_live_lock = threading.Lock()


def shared_gateway(cache_dir: MemoLocation, **settings: Any) -> Gateway:
    """The process's gateway for a memo: the live one (taking ``settings``) or a new one.

    ``cache_dir`` is a diskcache folder or a :class:`~ragaudit.cache.RedisTarget`. The
    gateway lives as long as someone holds it (a flow through :func:`open_gateway`, a stage's
    context); two users of one memo at the same time always share one gateway.
    """
    key = memo_identity(cache_dir)
    with _live_lock:
        gateway = _live.get(key)
        if gateway is None:
            target = cache_dir if isinstance(cache_dir, RedisTarget) else key
            gateway = Gateway(target, **settings)
            _live[key] = gateway
        elif settings:
            gateway.configure(**settings)
        return gateway


@contextlib.contextmanager
def open_gateway(cache_dir: MemoLocation, **settings: Any) -> Iterator[Gateway]:
    """Hold the shared gateway of a memo for the block; the last holder closes its memo.

    Users are counted, so nested holders (a flow and a subflow) keep it open until the outer
    one ends.
    """
    gateway = shared_gateway(cache_dir, **settings)
    with _live_lock:
        gateway._users += 1
    try:
        yield gateway
    finally:
        with _live_lock:
            gateway._users -= 1
            last = gateway._users == 0
        if last:
            gateway.close()


def live_gateways() -> dict[str, Gateway]:
    """The gateways alive in this process, by memo identity (see :func:`memo_identity`)."""
    with _live_lock:
        return dict(_live.items())


__all__ = ["live_gateways", "open_gateway", "shared_gateway"]
