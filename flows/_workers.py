"""Worker processes of a Dask or Ray cluster, made ready before the first batch reaches them.

A fresh process pays, once, for what its first batch task touches for the first time: the
heavy imports (litellm, ragas, the metrics), Prefect's installed collections (Prefect loads
them all, prefect-ray importing ray, the first time a task reads its result-storage block),
tiktoken's cl100k table and litellm's token counter (every prompt is counted), litellm's
provider modules (imported by its first completion) and anyio's asyncio backend (Prefect's
engine). On two cores under load that was seconds per worker, paid by every worker's first
batch at the same time, on the same cores. :func:`warm` does it before the first batch
instead: Dask runs it as each worker starts (its ``preload``, :func:`dask_setup`), and the
flow runs it on every worker before its first batch (:func:`warm_dask` for a cluster it was
given, whose workers may not preload it; :func:`warm_ray`, which also has Ray start its worker
processes), where it costs nothing on workers that are already warm.
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


def prepare() -> None:
    """Import what a batch task needs and load the tables it reads; no thread, no event loop.

    Safe in a process that others are forked from (the local cluster's forkserver): it
    leaves no thread, lock or loop behind for a child to inherit half-held.
    """
    for name in WORKER_PRELOAD:
        importlib.import_module(name)
    from prefect.plugins import load_prefect_collections

    load_prefect_collections()
    import tiktoken

    tiktoken.get_encoding("cl100k_base")


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
        prepare()
        # A loop of its own, in a thread of its own: the caller may be running one (Dask
        # calls its hooks in the worker's event loop; a flow's cluster start runs in one).
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            pool.submit(asyncio.run, _warm_async()).result()
        _warmed = True
        return time.perf_counter() - started


def use_forkserver() -> None:
    """Have local Dask clusters fork their workers from one prepared process.

    Dask spawns each worker as a fresh interpreter, so every worker imported litellm, ragas,
    Prefect (and, through Prefect's collections, ray) itself: on two cores, n workers paid n
    times those seconds, all at once, and a cluster's start grew with its workers. A
    forkserver imports them once (:mod:`ragaudit.flows._prepared`) and forks every worker
    from that state, copy-on-write; each worker then only does the part of :func:`warm` that
    needs an event loop. The forkserver lives as long as this process and serves every
    cluster it starts.

    A forked worker takes its environment from the forkserver, i.e. from this process when
    its first cluster started; variables set later reach workers through Dask's
    ``distributed.nanny.environ``.
    """
    import dask
    from distributed.utils import get_mp_context

    with _lock:
        dask.config.set({"distributed.worker.multiprocessing-method": "forkserver"})
        # Dask sets its own preload list on its first call (only then); ours replaces it and
        # takes effect when the forkserver starts, with the first worker.
        get_mp_context().set_forkserver_preload(["distributed", "ragaudit.flows._prepared"])


def start_forkserver() -> float:
    """Start the forkserver of :func:`use_forkserver` now; the seconds it took to be ready.

    It starts with the first worker otherwise; a bench starts it alone to time it apart.
    """
    from distributed.utils import get_mp_context

    use_forkserver()
    started = time.perf_counter()
    # A no-op child: it is forked once the server has imported what it preloads.
    child = get_mp_context().Process(target=int)
    child.start()
    child.join()
    return time.perf_counter() - started


async def _warm_async() -> None:
    import anyio
    import litellm

    from ragaudit.cache import count_prompt
    from ragaudit.cache.providers import register_all

    register_all()
    await anyio.sleep(0)  # anyio's asyncio backend, as Prefect's engine loads it
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


__all__ = [
    "WORKER_PRELOAD",
    "dask_setup",
    "prepare",
    "start_forkserver",
    "use_forkserver",
    "warm",
    "warm_dask",
    "warm_ray",
]
