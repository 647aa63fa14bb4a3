"""The memo the gateway keeps its answers in: a small protocol and its two stores.

The gateway talks to a memo only through :class:`Memo`. :class:`DiskMemo` (diskcache: SQLite
plus files, safe for several processes on one machine) is the default; :class:`RedisMemo`
serves workers on many machines from one Redis. Where a memo lives is a *location*: a folder,
or a :class:`RedisTarget`; :func:`memo_identity` names it without credentials (the gateway
registry's key) and :func:`open_memo` opens it.
"""

from __future__ import annotations

import numbers
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import diskcache
import msgpack

from ragaudit.errors import ConfigError
from ragaudit.secrets import redact, url_password
from ragaudit.secrets import register as register_secret

# Large enough never to evict an answer someone paid for during a study; diskcache culls the
# least recently stored entries beyond it.
DEFAULT_SIZE_LIMIT = 2**34


@runtime_checkable
class Memo(Protocol):
    """A key-value store of JSON-compatible answers, keyed by canonical request hashes.

    A memo may also offer ``get_many(keys)`` (one round trip for a batch of embeddings) and
    ``clear()`` (``ragaudit cache clear``); the gateway uses ``get_many`` when it is there.
    """

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

    def get_many(self, keys: list[str]) -> list[Any | None]:
        """The values of ``keys`` in order (None where missing)."""
        return [self._cache.get(k) for k in keys]

    def clear(self) -> int:
        """Delete every entry (safe while other processes use the folder); returns how many."""
        return int(self._cache.clear())

    def __len__(self) -> int:
        return len(self._cache)


# -- Redis -------------------------------------------------------------------------------------

DEFAULT_PREFIX = "ragaudit:memo"
_SCAN_BATCH = 1000


def safe_url(url: str) -> str:
    """``url`` without its password (kept: scheme, user, host, port, database, other options).

    What may be shown of a Redis URL: in the registry key, stats, logs and error messages.
    """
    parts = urlsplit(url)
    netloc = parts.netloc
    if "@" in netloc:
        userinfo, _, hostport = netloc.rpartition("@")
        user = userinfo.split(":", 1)[0]
        netloc = f"{user}@{hostport}" if user else hostport
    query = urlencode([(k, v) for k, v in parse_qsl(parts.query) if k.lower() != "password"])
    return urlunsplit((parts.scheme, netloc, parts.path, query, ""))


@dataclass(frozen=True)
class RedisTarget:
    """Where a :class:`RedisMemo` lives: a Redis URL and a key prefix.

    Args:
        url: ``redis://[user[:password]@]host:port/db``, ``rediss://…`` (TLS) or
            ``unix:///path.sock``; may hold a password, which is never shown (``repr`` hides
            the URL; :meth:`identity` drops the password).
        prefix: every key is ``<prefix>:<versioned request hash>``.
        ttl_s: seconds an entry lives; None keeps it until deleted or evicted by the server.
        source: the config field the URL came from, named in every error.
    """

    url: str = field(repr=False)
    prefix: str = DEFAULT_PREFIX
    ttl_s: int | None = None
    source: str = "cache.redis_url"

    def identity(self) -> str:
        """The memo's name without credentials: ``redis://host:port/db prefix``."""
        return f"{safe_url(self.url)} {self.prefix}"


MemoLocation = Path | str | RedisTarget
"""A diskcache folder or a :class:`RedisTarget`."""


def memo_identity(location: MemoLocation) -> str:
    """One name per memo, without credentials: the resolved folder or the Redis identity."""
    if isinstance(location, RedisTarget):
        return location.identity()
    return str(Path(location).expanduser().resolve())


def open_memo(location: MemoLocation) -> Memo:
    """The memo at ``location`` (a Redis memo checks at once that its server answers)."""
    if isinstance(location, RedisTarget):
        return RedisMemo(
            location.url, prefix=location.prefix, ttl_s=location.ttl_s, source=location.source
        )
    return DiskMemo(Path(location).expanduser().resolve())


def _default(obj: Any) -> Any:
    # Vectors may come back as numpy scalars or arrays; a response as a pydantic model.
    if isinstance(obj, numbers.Real):
        return float(obj)
    if hasattr(obj, "tolist"):
        return obj.tolist()
    if hasattr(obj, "model_dump"):
        return obj.model_dump(mode="json")
    raise TypeError(f"cannot store a {type(obj).__name__} in the memo")


def _pack(value: Any) -> bytes:
    return msgpack.packb(value, default=_default)


def _unpack(raw: Any) -> Any:
    return msgpack.unpackb(raw)


class RedisMemo:
    """A :class:`Memo` on a Redis server, shared by every process and machine that reaches it.

    Values are stored as MessagePack: exact for floats, and an embedding takes 9 bytes a float
    where JSON text takes ~19 (``bench/bench_memo.py``). Keys are ``<prefix>:<request key>``,
    and the request key carries its version, so a change of hashing never reads old answers.
    The connection is checked when the memo opens: an unreachable server is one
    :class:`~ragaudit.errors.ConfigError` naming the config field, not a failure deep inside
    the first stage.

    Args:
        url: the Redis URL (may hold a password: it is registered as a secret and never shown).
        prefix: key prefix; two prefixes on one server are two memos.
        ttl_s: seconds each entry lives; None: no expiry.
        source: the config field named in errors.
        timeout_s: connect and per-command timeout.
    """

    def __init__(
        self,
        url: str,
        *,
        prefix: str = DEFAULT_PREFIX,
        ttl_s: int | None = None,
        source: str = "cache.redis_url",
        timeout_s: float = 5.0,
    ) -> None:
        import redis

        register_secret(url)
        register_secret(url_password(url))
        self.location = safe_url(url)
        self.prefix = prefix
        self.ttl_s = ttl_s
        self.source = source
        self._errors: tuple[type[BaseException], ...] = (redis.RedisError, OSError)
        try:
            self._client = redis.Redis.from_url(
                url, socket_timeout=timeout_s, socket_connect_timeout=timeout_s
            )
            self._client.ping()
        except self._errors as exc:
            raise self._error("cannot reach", exc) from None
        except ValueError as exc:  # a malformed URL: its text may hold the password
            raise ConfigError(f"{source}: not a Redis URL ({redact(str(exc))})") from None

    def _error(self, what: str, exc: BaseException) -> ConfigError:
        reason = redact(f"{type(exc).__name__}: {exc}")[:300]
        return ConfigError(f"{self.source}: {what} Redis at {self.location} ({reason})")

    def _key(self, key: str) -> str:
        return f"{self.prefix}:{key}"

    def get(self, key: str) -> Any | None:  # noqa: D102
        try:
            raw = self._client.get(self._key(key))
        except self._errors as exc:
            raise self._error("lost", exc) from None
        return None if raw is None else _unpack(raw)

    def get_many(self, keys: list[str]) -> list[Any | None]:
        """The values of ``keys`` in order (None where missing), in one round trip."""
        if not keys:
            return []
        try:
            raws = self._client.mget([self._key(k) for k in keys])
        except self._errors as exc:
            raise self._error("lost", exc) from None
        return [None if raw is None else _unpack(raw) for raw in raws]

    def set(self, key: str, value: Any) -> None:  # noqa: D102
        try:
            self._client.set(self._key(key), _pack(value), ex=self.ttl_s)
        except self._errors as exc:
            raise self._error("lost", exc) from None

    def _scan(self) -> Iterator[list[bytes]]:
        batch: list[bytes] = []
        for name in self._client.scan_iter(match=f"{self.prefix}:*", count=_SCAN_BATCH):
            batch.append(name)
            if len(batch) >= _SCAN_BATCH:
                yield batch
                batch = []
        if batch:
            yield batch

    def stats(self) -> dict[str, Any]:
        """Where the memo is, its entries and the bytes of their values.

        Walks the prefix with SCAN (and one pipelined STRLEN per thousand keys): the server
        stays responsive, and this is asked by ``ragaudit cache stats``, never per call.
        """
        entries = size = 0
        try:
            for batch in self._scan():
                pipe = self._client.pipeline(transaction=False)
                for name in batch:
                    pipe.strlen(name)
                size += sum(int(n) for n in pipe.execute())
                entries += len(batch)
        except self._errors as exc:
            raise self._error("lost", exc) from None
        return {"path": f"{self.location} {self.prefix}", "entries": entries, "bytes": size}

    def clear(self) -> int:
        """Delete every entry under the prefix (nothing else on the server); returns how many."""
        deleted = 0
        try:
            for batch in self._scan():
                deleted += int(self._client.unlink(*batch))
        except self._errors as exc:
            raise self._error("lost", exc) from None
        return deleted

    def close(self) -> None:
        """Drop the pooled connections; the next call connects again."""
        self._client.connection_pool.disconnect()

    def __len__(self) -> int:
        return int(self.stats()["entries"])


__all__ = [
    "DEFAULT_PREFIX",
    "DEFAULT_SIZE_LIMIT",
    "DiskMemo",
    "Memo",
    "MemoLocation",
    "RedisMemo",
    "RedisTarget",
    "memo_identity",
    "open_memo",
    "safe_url",
    "url_password",
]
