"""The gateway a run config asks for: its memo's location and the gateway's settings."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from ragaudit.cache._memo import MemoLocation, RedisTarget
from ragaudit.cache._registry import open_gateway, shared_gateway
from ragaudit.cache._structured import Gateway
from ragaudit.config import RunConfig
from ragaudit.errors import ConfigError
from ragaudit.secrets import resolve_secret


def global_lease(config: RunConfig) -> int | None:
    """Slots one process leases at once from ``models.global_limit`` (None: no limit).

    Its fair share among the run's worker processes, at most its own concurrency: when every
    process leased as many slots as it can run calls, the first ones to ask held the whole
    limit and renewed it as soon as they gave it back, while the others slept out the Prefect
    server's Retry-After (which grows with every refusal); a worker left waiting until the
    others were done then ran its batches alone, on its own concurrency, below the limit.
    """
    m, scale = config.models, config.scale
    if m.global_limit is None:
        return None
    processes = 1 if scale.task_runner == "default" else scale.workers
    return max(1, min(m.concurrency, m.global_limit // processes))


def _gateway_settings(config: RunConfig) -> dict[str, Any]:
    m = config.models
    return {
        "concurrency": m.concurrency,
        "max_retries": m.max_retries,
        "max_repairs": m.max_repairs,
        "backoff_s": m.backoff_s,
        "timeout_s": m.timeout_s,
        "global_limit": m.global_limit,
        "global_lease": global_lease(config),
    }


def memo_location(config: RunConfig) -> MemoLocation:
    """Where the config's memo lives: its cache folder, or its Redis (URL read from the env)."""
    c = config.cache
    if c.backend == "disk":
        return config.cache_dir
    if c.redis_url_env:
        url = resolve_secret(env=c.redis_url_env, field="cache.redis_url_env")
        source = f"cache.redis_url_env ({c.redis_url_env})"
    else:
        url, source = c.redis_url, "cache.redis_url"
    if not url:  # the config's validator asks for one of the two; a hand-built config may not
        raise ConfigError("cache: backend 'redis' needs cache.redis_url or cache.redis_url_env")
    return RedisTarget(url, prefix=c.redis_prefix, ttl_s=c.ttl_s, source=source)


def gateway_for(config: RunConfig) -> Gateway:
    """The process's gateway for the config's memo (one per memo, shared by runs)."""
    return shared_gateway(memo_location(config), **_gateway_settings(config))


@contextlib.contextmanager
def hold_gateway(config: RunConfig) -> Iterator[Gateway]:
    """Hold the config's gateway for the block (a flow's duration); the last holder closes it."""
    with open_gateway(memo_location(config), **_gateway_settings(config)) as gateway:
        yield gateway


def items_in_flight(config: RunConfig) -> int:
    """Items (rows, candidates, questions) to work on at once to keep the gateway busy.

    An item makes its judge calls one after another (statements, then verdicts), so keeping
    the gateway's limit busy takes several items per call slot; many more only hold memory.
    """
    return max(8, 4 * config.models.concurrency)


__all__ = ["gateway_for", "global_lease", "hold_gateway", "items_in_flight", "memo_location"]
