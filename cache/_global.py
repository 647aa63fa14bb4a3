"""The judge's limit across processes: a Prefect global concurrency limit.

Every worker of a distributed run has its own gateway and its own per-process limit; what the
provider allows is shared. Prefect's global concurrency limits hold that count on the Prefect
server, so every worker that talks to the same API takes its slots from one pool. Off by
default: each slot costs two API requests (acquire and release).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

JUDGE_LIMIT = "ragaudit-judge"
"""Name of the global concurrency limit on judge (completion) calls."""


async def ensure_global_limit(limit: int, name: str = JUDGE_LIMIT) -> None:
    """Create the limit ``name`` with ``limit`` slots, or set an existing one to it (active)."""
    from prefect.client.orchestration import get_client

    async with get_client() as client:
        await client.upsert_global_concurrency_limit_by_name(name, limit)


@contextlib.asynccontextmanager
async def global_slot(name: str = JUDGE_LIMIT) -> AsyncIterator[None]:
    """Hold one slot of the global limit ``name`` for the block (waits while all are taken)."""
    from prefect.concurrency.asyncio import concurrency

    # strict: a missing limit is an error, not silently no limit at all.
    async with concurrency(name, occupy=1, strict=True):
        yield


__all__ = ["JUDGE_LIMIT", "ensure_global_limit", "global_slot"]
