"""A real ``prefect server start`` on loopback for integration tests, driven only from outside.

Everything talks to it through subprocesses (the ``prefect`` CLI with ``PREFECT_API_URL``) and
its REST API over httpx, so the test process's own Prefect settings stay with the session's
``prefect_test_harness``. Every process started here runs in its own process group and is
killed with its children on :meth:`PrefectServer.stop`, whatever state the test left.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def tail(path: Path, lines: int = 40) -> str:
    """The last lines of a log file (for failure messages)."""
    if not path.is_file():
        return f"({path} not written)"
    return "\n".join(path.read_text(encoding="utf-8", errors="replace").splitlines()[-lines:])


class PrefectServer:
    """One Prefect server with its own ``PREFECT_HOME``, plus the workers started against it."""

    def __init__(self, root: Path, extra_env: dict[str, str] | None = None) -> None:
        self.root = root
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/api"
        env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
        env.update(
            PREFECT_HOME=str(root / "prefect-home"),
            PREFECT_API_URL=self.url,
            PREFECT_SERVER_ANALYTICS_ENABLED="false",
            DO_NOT_TRACK="1",
            PREFECT_UI_ENABLED="false",
            PREFECT_LOGGING_LEVEL="WARNING",
            # The scheduler service looks for due schedules every 60 s by default and a worker
            # polls every 15 s: too slow for a test that waits on a one-minute schedule.
            PREFECT_SERVER_SERVICES_SCHEDULER_LOOP_SECONDS="5",
            PREFECT_WORKER_QUERY_SECONDS="2",
            PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS="120",
        )
        env.update(extra_env or {})
        self.env = env
        self.procs: list[tuple[subprocess.Popen[bytes], Path]] = []
        self.http = httpx.Client(base_url=self.url, timeout=30)

    def spawn(self, args: list[str], log_name: str, cwd: Path | None = None) -> Path:
        """Start a long-running process in its own process group; returns its log file."""
        log = self.root / f"{log_name}.log"
        with log.open("wb") as out:
            proc = subprocess.Popen(
                args,
                cwd=cwd,
                env=self.env,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self.procs.append((proc, log))
        return log

    def start(self, timeout: float = 150) -> None:
        """Start the server and wait until its health endpoint answers."""
        log = self.spawn(
            [
                sys.executable,
                "-m",
                "prefect",
                "server",
                "start",
                "--host",
                "127.0.0.1",
                "--port",
                str(self.port),
            ],
            "server",
        )
        proc = self.procs[-1][0]

        def healthy() -> bool:
            if proc.poll() is not None:
                raise AssertionError(f"prefect server exited ({proc.returncode}):\n{tail(log)}")
            with contextlib.suppress(httpx.HTTPError):
                return self.http.get("/health").status_code == 200
            return False

        self.wait(healthy, timeout, lambda: f"prefect server not healthy:\n{tail(log)}")

    def prefect(
        self, *args: str, cwd: Path | None = None, timeout: float = 240
    ) -> subprocess.CompletedProcess[str]:
        """Run one ``prefect`` CLI command against the server; fails the test on a non-zero exit."""
        return self.run([sys.executable, "-m", "prefect", "--no-prompt", *args], cwd, timeout)

    def run(
        self, args: list[str], cwd: Path | None = None, timeout: float = 240
    ) -> subprocess.CompletedProcess[str]:
        """Run a command with the server's environment; fails the test on a non-zero exit."""
        done = subprocess.run(
            args, cwd=cwd, env=self.env, capture_output=True, text=True, timeout=timeout
        )
        if done.returncode != 0:
            raise AssertionError(
                f"{' '.join(args[2:])} exited {done.returncode}:\n"
                f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
            )
        return done

    def api(self, path: str, body: dict[str, Any] | None = None) -> Any:
        """POST ``body`` to an API path (the ``/filter`` endpoints) and return the JSON."""
        response = self.http.post(path, json=body or {})
        response.raise_for_status()
        return response.json()

    @staticmethod
    def wait(
        check: Callable[[], Any], timeout: float, message: Callable[[], str], every: float = 2.0
    ) -> Any:
        """Poll ``check`` until it returns something truthy; fail with ``message()`` on timeout."""
        deadline = time.monotonic() + timeout
        while True:
            value = check()
            if value:
                return value
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out after {timeout:.0f} s: {message()}")
            time.sleep(every)

    def logs(self) -> str:
        """The tails of every process's log."""
        return "\n".join(f"--- {log.name}\n{tail(log)}" for _, log in self.procs)

    def stop(self) -> None:
        """Stop every process started here, workers first; SIGKILL what does not exit."""
        self.http.close()
        for proc, _ in reversed(self.procs):
            for sig, grace in ((signal.SIGINT, 10), (signal.SIGTERM, 5), (signal.SIGKILL, 5)):
                if proc.poll() is not None:
                    break
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, sig)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(grace)
            # Children (a worker's flow-run processes) share the group: make sure none is left.
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
        self.procs.clear()
