"""A throwaway ``redis-server`` on loopback: for the tests' fixture and the memo benchmark."""

from __future__ import annotations

import contextlib
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nobody listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def redis_server(folder: Path, timeout_s: float = 20.0) -> Iterator[str]:
    """Run ``redis-server`` with nothing persisted, in ``folder``; yields its URL.

    Raises:
        FileNotFoundError: redis-server is not installed.
        RuntimeError: it did not answer within ``timeout_s`` (its log's tail is included).
    """
    import redis

    exe = shutil.which("redis-server")
    if exe is None:
        raise FileNotFoundError("redis-server is not installed (make system-deps installs it)")
    port = free_port()
    log_path = folder / "redis.log"
    # An empty --save and no AOF: nothing is written but the log, all in ``folder``.
    args = [exe, "--bind", "127.0.0.1", "--port", str(port), "--save", "", "--appendonly", "no"]
    with log_path.open("wb") as log:
        proc = subprocess.Popen([*args, "--dir", str(folder)], stdout=log, stderr=subprocess.STDOUT)
    try:
        client = redis.Redis(host="127.0.0.1", port=port, socket_connect_timeout=0.5)
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                client.ping()
                break
            except redis.ConnectionError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    tail = log_path.read_text(errors="replace")[-2000:]
                    message = f"redis-server did not start on port {port}:\n{tail}"
                    raise RuntimeError(message) from None
                time.sleep(0.05)
        client.close()
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
