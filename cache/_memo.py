"""The memo the gateway keeps its answers in: a small protocol and its diskcache implementation.

The gateway talks to a memo only through :class:`Memo`, so a shared store (Redis, for several
machines) can replace the local disk without touching the gateway.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import diskcache

# Large enough never to evict an answer someone paid for during a study; diskcache culls the
# least recently stored entries beyond it.
DEFAULT_SIZE_LIMIT = 2**34


@runtime_checkable
class Memo(Protocol):
    """A key-value store of JSON-compatible answers, keyed by canonical request hashes."""

    def get(self, key: str) -> Any | None:
        """The value stored under ``key``, or None."""
        ...

    def set(self, key: str, value: Any) -> None:
        """Store ``value`` under ``key``."""
        ...

    def close(self) -> None:
        """Release the store's handles (a later call may open them again)."""
        ...

    def stats(self) -> dict[str, Any]:
        """Where the store is, its entries and its size in bytes."""
        ...


class DiskMemo:
    """A :class:`Memo` on a diskcache folder (SQLite index + files), safe across processes.

    Args:
        path: the folder; created if missing.
        size_limit: bytes kept before diskcache culls old entries.
    """

    def __init__(self, path: Path | str, *, size_limit: int = DEFAULT_SIZE_LIMIT) -> None:
        self.path = Path(path)
        self._cache = diskcache.Cache(str(self.path), size_limit=size_limit)

    def get(self, key: str) -> Any | None:  # noqa: D102
        return self._cache.get(key)

    def set(self, key: str, value: Any) -> None:  # noqa: D102
        self._cache.set(key, value)

    def close(self) -> None:
        """Close the SQLite connections; diskcache reopens them if the memo is used again."""
        self._cache.close()

    def stats(self) -> dict[str, Any]:  # noqa: D102
        return {"path": str(self.path), "entries": len(self._cache), "bytes": self._cache.volume()}

    def __len__(self) -> int:
        return len(self._cache)


__all__ = ["DEFAULT_SIZE_LIMIT", "DiskMemo", "Memo"]
