"""Prefect's ephemeral API server, tied to the life of the CLI process.

Without a ``PREFECT_API_URL`` Prefect starts a local API server as a child process
(``SubprocessASGIServer``: uvicorn), in the CLI's own process group and stopped only by an
``atexit`` hook. So a Ctrl-C in the terminal reaches the server too (it dies while the run
goes on, failing on every call), and a ``kill -9`` of the CLI leaves it running, orphaned.

:func:`ephemeral_server` starts that same server itself, before any flow, with two changes:
the server runs in its own session (a terminal's Ctrl-C reaches only the CLI, which then
stops the run in order) and, on Linux, asks the kernel to SIGTERM it when its parent dies
(``PR_SET_PDEATHSIG``), so no crash of the CLI can orphan it. Prefect's clients find the
running instance (it is a per-port singleton) and use it as they would their own. On the
way out, Prefect's event and log workers are drained before the server stops.

The server itself runs through this module's ``main`` (``python -m ragaudit._server``, then
uvicorn exactly as Prefect invokes it) to drop one record: its task-run recorder, cancelled
by the shutdown in the middle of a periodic flush, logs "Error flushing N events" with the
CancelledError's traceback after every successful run. A real flush failure (any other
exception) still prints.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import ctypes.util
import logging
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:  # pragma: no cover - runs in the child between fork and exec
    """SIGTERM this process when its parent dies (Linux); a new session keeps it off the TTY."""
    os.setsid()
    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)


class _PopenTiedToParent:
    """``subprocess`` as Prefect's server module sees it while it starts the server."""

    def __getattr__(self, name: str) -> Any:
        return getattr(subprocess, name)

    @staticmethod
    def Popen(*args: Any, **kwargs: Any) -> subprocess.Popen[Any]:  # noqa: N802 - subprocess's name
        command = list(kwargs.pop("args", None) or args[0])
        args = args[1:]
        at = _index(command, ["-m", "uvicorn"])
        if at is not None:
            command[at + 1] = __name__
        kwargs["args"] = command
        if sys.platform.startswith("linux"):
            kwargs.setdefault("preexec_fn", _die_with_parent)
        else:
            kwargs.setdefault("start_new_session", True)
        return subprocess.Popen(*args, **kwargs)


def _index(items: list[Any], part: list[Any]) -> int | None:
    return next(
        (i for i in range(len(items) - len(part) + 1) if items[i : i + len(part)] == part), None
    )


class _ShutdownFlushFilter(logging.Filter):
    """Drop the task-run recorder's "Error flushing" record when shutdown cancelled the flush."""

    def filter(self, record: logging.LogRecord) -> bool:  # noqa: D102
        error = record.exc_info[1] if record.exc_info else None
        cancelled = isinstance(error, asyncio.CancelledError)
        return not (cancelled and str(record.msg).startswith("Error flushing"))


def main() -> None:
    """Run Prefect's API server (uvicorn, with Prefect's arguments) without the shutdown noise."""
    logging.getLogger("prefect.server.services.task_run_recorder").addFilter(_ShutdownFlushFilter())
    from uvicorn.main import main as uvicorn

    uvicorn.main(args=sys.argv[1:], prog_name="uvicorn")


def _uses_ephemeral_server() -> bool:
    from prefect.settings import PREFECT_API_URL, PREFECT_SERVER_EPHEMERAL_ENABLED

    return not PREFECT_API_URL.value() and bool(PREFECT_SERVER_EPHEMERAL_ENABLED.value())


def _drain_workers() -> None:
    """Send the events and logs Prefect's workers still hold, while the server can take them."""
    from prefect.events.worker import EventsWorker
    from prefect.logging.handlers import APILogWorker

    for worker in (EventsWorker, APILogWorker):
        with contextlib.suppress(Exception):
            worker.drain_all(timeout=5)


@contextlib.contextmanager
def ephemeral_server() -> Iterator[Any]:
    """Run Prefect's ephemeral API server for the block (nothing when an API URL is set).

    Yields:
        The running ``SubprocessASGIServer``, or None when a real server is configured.
    """
    if not _uses_ephemeral_server():
        yield None
        return
    import prefect.server.api.server as prefect_server

    server = prefect_server.SubprocessASGIServer()
    if not server.running:
        # Started from the main thread on purpose: the kernel's parent-death signal follows
        # the thread that forked, and Prefect may otherwise start it from a worker thread.
        real = prefect_server.subprocess
        prefect_server.subprocess = _PopenTiedToParent()  # type: ignore[assignment]
        try:
            server.start()
        finally:
            prefect_server.subprocess = real
    try:
        yield server
    finally:
        _drain_workers()
        server.stop()


__all__ = ["ephemeral_server", "main"]

if __name__ == "__main__":
    main()
