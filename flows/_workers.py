"""Worker processes of a Dask or Ray cluster, made ready before the first batch reaches them.

A fresh process pays, once, for what its first batch task touches for the first time: the
heavy imports (litellm, ragas, the metrics), Prefect's installed collections (Prefect loads
them all, prefect-ray importing ray, the first time a task reads its result-storage block),
tiktoken's cl100k table and litellm's token counter (every prompt is counted), instructor's
and ragas's litellm adapters (built with the first judge), litellm's provider modules
(imported by its first completion) and anyio's asyncio backend (Prefect's engine). On two
cores under load that was seconds per worker, paid by every worker's first batch at the same
time, on the same cores. :func:`warm` does it before the first batch instead: Dask runs it
as each worker starts (its ``preload``, :func:`dask_setup`), and the flow runs it on every
worker before its first batch (:func:`warm_dask` for a cluster it was given, whose workers may
not preload it; :func:`warm_ray`, which also has Ray start its worker processes), where it
costs nothing on workers that are already warm.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import importlib
import threading
import time
from typing import Any

WORKER_PRELOAD = ("litellm", "ragas", "ragaudit.metrics", "ragaudit.flows.evaluate")
"""Modules every worker imports before its first batch."""

# Model strings whose (mocked) completions walk litellm's two routes: a provider it knows and
# a custom provider (the route of ``fake`` and ``local``). litellm answers a ``mock_response``
# itself: no provider is called, nothing leaves the process.
_ROUTES = ("openai/ragaudit-warm-up", "fake/ragaudit-warm-up")

_lock = threading.Lock()
_warmed = False


def warm() -> float:
    """Do, in this process and once, what its first batch task would otherwise do first.

    Returns:
        Seconds it took (0.0 when the process was already warm).
    """
    global _warmed
    with _lock:
        if _warmed:
            return 0.0
        started = time.perf_counter()
        for name in WORKER_PRELOAD:
            importlib.import_module(name)
        from prefect.plugins import load_prefect_collections

        load_prefect_collections()
        import tiktoken

        tiktoken.get_encoding("cl100k_base")
        # A loop of its own, in a thread of its own: the caller may be running one.
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            pool.submit(asyncio.run, _warm_async()).result()
        _warmed = True
        return time.perf_counter() - started


async def _warm_async() -> None:
    import anyio
    import litellm
    from pydantic import BaseModel
    from ragas.llms import llm_factory

    from ragaudit.cache import count_prompt
    from ragaudit.cache.providers import register_all
    from ragaudit.metrics._ragas import _instructor_system

    register_all()
    await anyio.sleep(0)  # anyio's asyncio backend, as Prefect's engine loads it

    class _Reply(BaseModel):
        ok: bool

    # What llm_factory builds for litellm is ragas's instructor LLM, which has the client.
    llm: Any = llm_factory(_ROUTES[0], provider="litellm", client=litellm.acompletion)
    _instructor_system(llm.client.provider, llm.client.mode, _Reply)
    messages = [{"role": "user", "content": "warm-up"}]
    for model in _ROUTES:
        count_prompt(model, messages)
        await litellm.acompletion(model=model, messages=messages, mock_response="ok")
    # litellm queues a logging callback per completion on this loop; run them before it ends
    # rather than have them carried to the first task's loop.
    from litellm.litellm_core_utils.logging_worker import GLOBAL_LOGGING_WORKER

    await asyncio.wait_for(GLOBAL_LOGGING_WORKER.flush(), 10.0)


async def _warm_off_loop() -> float:
    # Dask calls its hooks in the worker's event loop: warm in a thread, leaving the loop free
    # for the worker's heartbeats.
    return await asyncio.to_thread(warm)


async def dask_setup(worker: Any) -> None:
    """Dask's preload hook: warm the worker before it takes tasks."""
    await _warm_off_loop()


def warm_dask(client: Any) -> float:
    """Warm every worker of a Dask cluster; the seconds the slowest took."""
    taken = client.run(_warm_off_loop)
    return max(taken.values(), default=0.0)


def _warm_ray_worker() -> float:
    took = warm()
    # Keep this CPU a moment: the other warm-up tasks go to worker processes of their own
    # rather than to this one, free again at once.
    time.sleep(1.0)
    return took


def warm_ray() -> float:
    """Start and warm a worker process per CPU of the Ray cluster; the slowest's seconds.

    Ray starts its worker processes when tasks need them: the first batches would wait for
    that, then warm up inside.
    """
    import ray

    cpus = int(ray.cluster_resources().get("CPU", 1))
    task = ray.remote(num_cpus=1)(_warm_ray_worker)
    return max(ray.get([task.remote() for _ in range(cpus)]), default=0.0)


__all__ = ["WORKER_PRELOAD", "dask_setup", "warm", "warm_dask", "warm_ray"]
