"""Points in worker processes: Prefect's process-pool task runner, its workers forked warm.

One event loop runs one core's worth of Python: the client side of a point (litellm,
instructor, the memo, the call log, parquet) costs about as much CPU as its calls wait on the
provider, so points sharing the flow's loop queue behind each other's CPU. In processes they
use every core.

Prefect's :class:`~prefect.task_runners.ProcessPoolTaskRunner` starts its workers with
``spawn``: each imports litellm, ragas, prefect and lancedb again (5 s of CPU on a quiet
machine, 15 s on a loaded one), more than a point costs. :class:`PointRunner` starts them with
``forkserver`` instead: one server process imports everything once and warms what the first
point would otherwise pay for (:mod:`ragaudit.ablation._preload`), then every worker is a fork
of it, ready in milliseconds. The server lives as long as the process that started it, so a
second ablation in the same process forks from it again.

The provider's limit is shared honestly: each of ``n`` workers gets ``models.concurrency // n``
calls in flight (:func:`worker_config`), so together they never exceed the configured limit.
"""

from __future__ import annotations

import multiprocessing
import multiprocessing.forkserver
import threading
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from typing import Any

from prefect import task_runners
from prefect.task_runners import ProcessPoolTaskRunner

from ragaudit.config import RunConfig

PRELOAD = "ragaudit.ablation._preload"
"""The module the fork server imports before it forks any worker."""


def _forkserver() -> Any:
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload([PRELOAD])
    return context


def start_worker_server(wait: bool = False) -> None:
    """Start the workers' fork server now rather than with the first worker.

    Its imports then overlap with whatever this process does meanwhile (the CLI starts it
    before the Prefect server). With ``wait``, returns once it has preloaded and forked a
    first process.
    """
    context = _forkserver()
    if not wait:
        multiprocessing.forkserver.ensure_running()
        return
    first = context.Process(target=_nothing)
    first.start()
    first.join()


def _nothing() -> None:
    """A worker that only proves the fork server is ready."""


def worker_config(config: RunConfig, workers: int) -> RunConfig:
    """``config`` for one of ``workers`` processes: its share of the provider's limit.

    Every process has its own gateway and its own per-model limit; the provider sees their sum.
    """
    share = max(1, config.models.concurrency // max(1, workers))
    models = config.models.model_copy(update={"concurrency": share})
    return config.model_copy(update={"models": models})


class PointRunner(ProcessPoolTaskRunner):
    """Prefect's process-pool task runner with workers forked from a preloaded server.

    Everything else is Prefect's: the task runs in the worker through Prefect's task engine
    under the flow run's context, its events and logs are forwarded to the parent.
    """

    def __enter__(self) -> PointRunner:
        # ProcessPoolTaskRunner.__enter__ with the start method changed: it hard-codes "spawn".
        task_runners.TaskRunner.__enter__(self)
        context = _forkserver()
        self._subprocess_message_queue = context.Queue()
        self._message_forwarding_thread = threading.Thread(
            target=self._forward_subprocess_messages,
            name="ProcessPoolTaskRunnerMessageForwarder",
            daemon=True,
        )
        self._message_forwarding_thread.start()
        try:
            self._executor = ProcessPoolExecutor(
                max_workers=self._max_workers,
                mp_context=context,
                initializer=task_runners._initialize_process_pool_worker,
                initargs=(self._subprocess_message_queue, None, ()),
            )
            self._resolver_executor = ThreadPoolExecutor(max_workers=self._max_workers)
        except Exception:
            if self._executor is not None:
                self._executor.shutdown(cancel_futures=True, wait=True)
                self._executor = None
            self._stop_message_forwarding()
            raise
        return self

    def submit(  # type: ignore[override]
        self,
        task: Any,
        parameters: dict[str, Any],
        wait_for: Any = None,
        dependencies: Any = None,
    ) -> Any:
        """Submit ``task`` to a worker, telling it the API of this process's Prefect server.

        Without a ``PREFECT_API_URL`` the parent talks to an ephemeral server it started
        itself, which is no setting a worker inherits: each worker would start a server of its
        own (seconds of CPU, and its runs invisible to the parent's).
        """
        from prefect.settings import PREFECT_API_URL, get_current_settings, temporary_settings

        if get_current_settings().api.url is not None:
            return super().submit(task, parameters, wait_for, dependencies)
        from prefect.client.orchestration import get_client

        url = str(get_client(sync_client=True).api_url)
        # The runner serialises the settings with the first task it submits and reuses them.
        with temporary_settings(updates={PREFECT_API_URL: url}):
            return super().submit(task, parameters, wait_for, dependencies)


__all__ = ["PRELOAD", "PointRunner", "start_worker_server", "worker_config"]
