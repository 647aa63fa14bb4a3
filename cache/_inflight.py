"""Requests on their way to a provider, shared by every caller that asks the same one.

For every thread and event loop of the process: Prefect runs each metric's task in a thread
with its own loop, and two metrics asking one prompt from two threads must pay for it once,
whatever the timing.
"""

from __future__ import annotations

import concurrent.futures
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

Pending = concurrent.futures.Future[Any]


@dataclass
class Claim:
    """What a caller does with a request the memo lacked when looked up.

    At most one of the three is set: the stored answer (another caller answered it since),
    the identical call in flight to wait for, or the new in-flight entry this caller owns and
    must :meth:`InFlight.release`. None of them: the request was left to another request.
    """

    key: str
    stored: Any | None = None
    pending: Pending | None = None
    owned: Pending | None = None


class InFlight:
    """The in-flight requests of one memo, by memo key."""

    def __init__(self) -> None:
        self._pending: dict[str, Pending] = {}
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._pending)

    def claim(
        self, keys: Sequence[str], stored: Callable[[str], Any | None], *, together: int = 1
    ) -> list[Claim]:
        """A :class:`Claim` per distinct key of ``keys``, in their order, taken under one lock.

        ``stored`` reads the memo: it is read again under the lock, since another thread may
        have answered the request since it was looked up, and an answer is memoised before its
        in-flight entry goes. With ``together``, no key is owned unless at least that many
        would be (one request asking them together is worth it only then): the others are
        claimed as ever, the rest left unowned.
        """
        claims: list[Claim] = []
        with self._lock:
            seen: set[str] = set()
            for key in keys:
                if key in seen:
                    continue
                seen.add(key)
                pending = self._pending.get(key)
                if pending is not None:
                    claims.append(Claim(key, pending=pending))
                    continue
                answer = stored(key)
                claims.append(Claim(key, stored=answer) if answer is not None else Claim(key))
            free = [c for c in claims if c.stored is None and c.pending is None]
            if len(free) >= together:
                for claim in free:
                    claim.owned = self._pending[claim.key] = concurrent.futures.Future()
        return claims

    def release(
        self,
        claim: Claim,
        *,
        value: Any | None = None,
        error: BaseException | None = None,
    ) -> None:
        """End an owned entry: every waiter gets ``value`` or ``error``, always."""
        future = claim.owned
        if future is None:
            return
        with self._lock:
            if self._pending.get(claim.key) is future:
                del self._pending[claim.key]
        if future.done():
            return
        if error is None:
            future.set_result(value if value is not None else {})
        else:
            future.set_exception(
                error if isinstance(error, Exception) else RuntimeError("the call was cancelled")
            )


__all__ = ["Claim", "InFlight", "Pending"]
