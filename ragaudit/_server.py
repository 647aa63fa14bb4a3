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

The server takes seconds to start (its app's imports, its database), and so does this process
before its first stage (the flow engine, the gateway, the stage modules). The two overlap: the
server is spawned first, with the command Prefect's ``SubprocessASGIServer`` runs, before
this process imports Prefect's server module (seconds of its own); that import and the
caller's ``prepare`` run in a thread while the child starts; the running server is then handed
to Prefect as its ``SubprocessASGIServer`` instance, which every Prefect client looks up.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import ctypes
import ctypes.util
import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from typing import Any

_PR_SET_PDEATHSIG = 1
# What Prefect's ``SubprocessASGIServer`` sets for its server (no UI; the ephemeral mode).
_SERVER_ENV = {
    "PREFECT_UI_ENABLED": "0",
    "PREFECT__SERVER_EPHEMERAL": "1",
    "PREFECT__SERVER_FINAL": "1",
}
# uvicorn's exit status when its port is taken: Prefect then starts it on another port.
_PORT_IN_USE = 3


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


def server_command(port: int) -> list[str]:
    """The command Prefect's ``SubprocessASGIServer`` runs for its API server on ``port``."""
    import prefect

    return [
        sys.executable,
        "-m",
        "uvicorn",
        "--app-dir",
        str(prefect.__module_path__.parent),
        "--factory",
        "prefect.server.api.server:create_app",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--log-level",
        "error",
        "--lifespan",
        "on",
    ]


def _server_env() -> dict[str, str]:
    from prefect.settings import get_current_settings

    settings = get_current_settings().to_environment_variables(exclude_unset=True)
    return {**os.environ, **_SERVER_ENV, **settings}


def _free_port() -> int:
    with contextlib.closing(socket.socket(socket.AF_INET, socket.SOCK_STREAM)) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _spawn(port: int) -> subprocess.Popen[Any]:
    # From the main thread on purpose: the kernel's parent-death signal follows the thread
    # that forked.
    return _PopenTiedToParent.Popen(server_command(port), env=_server_env())


def _healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/health", timeout=2) as reply:
            return bool(reply.status == 200)
    except (urllib.error.URLError, OSError):
        return False


def _wait_until_up(
    process: subprocess.Popen[Any], port: int, timeout_s: float, given_up: Callable[[], bool]
) -> tuple[subprocess.Popen[Any], int] | None:
    """Poll the server's health as Prefect does: (process, port) once it answers.

    None when ``given_up()`` says the run will not start; the server is then stopped.

    Raises:
        RuntimeError: The server exited, or did not answer in ``timeout_s`` (it is stopped).
    """
    deadline = time.monotonic() + timeout_s
    problem = (
        f"did not answer within {timeout_s:.0f} s "
        "(PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS)"
    )
    while time.monotonic() < deadline:
        code = process.poll()
        if code == _PORT_IN_USE:
            port = _free_port()
            process = _spawn(port)
            continue
        if code is not None:
            problem = f"exited with code {code}"
            break
        if given_up():
            break
        if _healthy(f"http://127.0.0.1:{port}/api"):
            return process, port
        time.sleep(0.1)
    _stop(process)
    if given_up():
        return None
    raise RuntimeError(f"Prefect's ephemeral API server {problem}")


def _stop(process: subprocess.Popen[Any]) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


class _Background(threading.Thread):
    """Runs ``work`` while the server starts; :meth:`result` re-raises what it raised."""

    def __init__(self, work: Callable[[], None]) -> None:
        super().__init__(name="ragaudit-prepare", daemon=True)
        self.work = work
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self.work()
        except BaseException as exc:  # noqa: BLE001 - handed to the main thread
            self.error = exc

    def result(self) -> None:
        self.join()
        if self.error is not None:
            raise self.error


@contextlib.contextmanager
def ephemeral_server(prepare: Callable[[], None] | None = None) -> Iterator[Any]:
    """Run Prefect's ephemeral API server for the block (nothing when an API URL is set).

    ``prepare`` runs in a thread while the server starts (checks that may fail, imports the
    run needs next): the block starts when both are done; what ``prepare`` raises stops the
    server at once and is raised here. No import runs in two threads at once: this thread
    only waits for the server meanwhile.

    Yields:
        The running ``SubprocessASGIServer``, or None when a real server is configured.
    """
    if not _uses_ephemeral_server():
        if prepare is not None:
            prepare()
        yield None
        return
    loaded = sys.modules.get("prefect.server.api.server")
    if loaded is not None and loaded.SubprocessASGIServer().running:
        # This process already runs one (an earlier run in the same interpreter).
        if prepare is not None:
            prepare()
        yield loaded.SubprocessASGIServer()
        return
    from prefect.settings import PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS

    timeout = float(PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS.value())
    port = _free_port()
    process = _spawn(port)

    def work() -> None:
        if prepare is not None:
            prepare()
        import prefect.server.api.server  # noqa: F401  (its app: while the server starts)

    background = _Background(work)
    background.start()
    try:
        up = _wait_until_up(process, port, timeout, lambda: background.error is not None)
    except BaseException:  # a Ctrl-C while it starts: the server goes with the run
        _stop(process)
        raise
    finally:
        background.join()
    if up is None or background.error is not None:
        if up is not None:
            _stop(up[0])
        background.result()
    assert up is not None
    import prefect.server.api.server as prefect_server

    # Prefect's own instance for the default port, as its start() leaves it: its clients and
    # its event and log workers find this server through it, and it is stopped at exit.
    server = prefect_server.SubprocessASGIServer()
    server.port, server.server_process = up[1], up[0]
    server.running = True
    atexit.register(server.stop)
    try:
        yield server
    finally:
        _drain_workers()
        server.stop()


__all__ = ["ephemeral_server", "main", "server_command"]

if __name__ == "__main__":
    main()
