"""What every stage shares: its context (config, run folder, gateway) and its result."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import time
from collections.abc import Awaitable, Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from ragaudit.cache import (
    Gateway,
    MemoLocation,
    RedisTarget,
    context_window,
    open_gateway,
    shared_gateway,
)
from ragaudit.config import RunConfig
from ragaudit.errors import ConfigError
from ragaudit.runfolder import RunFolder
from ragaudit.secrets import resolve_secret

T = TypeVar("T")
R = TypeVar("R")


def _gateway_settings(config: RunConfig) -> dict[str, Any]:
    m = config.models
    return {
        "concurrency": m.concurrency,
        "max_retries": m.max_retries,
        "backoff_s": m.backoff_s,
        "timeout_s": m.timeout_s,
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


@dataclass
class StageContext:
    """Everything a stage needs at run time."""

    config: RunConfig
    run: RunFolder
    gateway: Gateway

    @property
    def judge(self) -> str:
        """The judge model string."""
        return self.config.models.judge_model

    def window(self) -> int:
        """The judge's context window."""
        return context_window(self.judge, self.config.models.judge_context_window)


@dataclass
class StageResult:
    """What a stage task returns: the tables it wrote (name → content hash) and its LLM counts."""

    stage: str
    tables: dict[str, str]
    llm: dict[str, int]
    seconds: float
    task_seconds: float = 0.0


def file_digest(path: Path) -> str:
    """SHA-256 of a file's bytes (the fingerprint downstream task caches key on)."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def make_context(config_json: str, run_root: str, run_id: str) -> StageContext:
    """Rebuild the stage context inside a task from its serialisable inputs."""
    config = RunConfig.model_validate_json(config_json)
    run = RunFolder(run_root, run_id)
    return StageContext(config=config, run=run, gateway=gateway_for(config))


async def run_stage(
    stage: str, ctx: StageContext, work: Callable[[StageContext], Awaitable[Iterable[str]]]
) -> StageResult:
    """Run ``work`` (which writes tables and returns their names) in the run's gateway scope.

    The scope writes the stage's call log to the run's ``llm_calls/`` as it goes.
    """
    started = time.perf_counter()
    with ctx.gateway.scope(stage, run_id=ctx.run.run_id, calls_dir=ctx.run.calls_dir) as counts:
        try:
            names = list(await work(ctx))
        finally:
            await ctx.gateway.drain()
    return StageResult(
        stage=stage,
        tables={n: file_digest(ctx.run.table_path(n)) for n in names},
        llm=counts.as_dict(),
        seconds=time.perf_counter() - started,
    )


async def gather_limited(
    items: Iterable[T], fn: Callable[[T], Awaitable[R]], limit: int
) -> list[R]:
    """``fn`` over ``items`` with at most ``limit`` running at once, results in input order."""
    sem = asyncio.Semaphore(limit)

    async def one(item: T) -> R:
        async with sem:
            return await fn(item)

    return list(await asyncio.gather(*(one(i) for i in items)))


def dumps(obj: Any) -> str:
    """Compact JSON text for a Parquet string column."""
    return json.dumps(obj, ensure_ascii=False, default=str)


__all__ = [
    "StageContext",
    "StageResult",
    "dumps",
    "file_digest",
    "gateway_for",
    "gather_limited",
    "hold_gateway",
    "make_context",
    "memo_location",
    "run_stage",
]
