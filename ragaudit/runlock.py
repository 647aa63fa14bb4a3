"""Guards of a run folder: a run id is a folder name, and one process at a time writes a run.

A run id names one folder under the runs root. One that holds a path separator or ``..``, or
is absolute, would put the run (or part of it: the manifest in one folder, the tables in
another) outside the runs root, so :func:`check_run_id` refuses it before anything is written.

:class:`RunLock` is the lock of one run folder, ``<run>/.lock``. The exclusion itself is an
``flock`` on that file: the kernel drops it when its process dies, however it dies, so a run
killed with ``kill -9`` leaves no lock that blocks its resume. The file's content (pid, host,
start time, command line) only names the holder in the message a second writer gets. Two
processes writing one run both pay for every call and leave a manifest and call logs that
disagree, so the second is refused at once rather than queued behind the first.

:func:`file_lock` (and :func:`afile_lock` for a coroutine) is the one way ragaudit takes a file
lock: the run's lock above, the labels store's and the append-only part stores' (``partstore``).
Each acquisition opens the lock file anew: ``flock`` belongs to an open file description, so two
acquisitions exclude each other across processes *and* across threads of one process.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import errno
import fcntl
import json
import os
import socket
import sys
import threading
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

from ragaudit.errors import ConfigError, RagauditError, clip, os_error_message

LOCK_NAME = ".lock"
"""The lock file inside a run folder."""

COMPLETE_STATUSES = ("completed", "completed_with_failures")
"""Manifest statuses of a run that ran every stage it was asked for to its end (the statuses
``runfolder.run_state`` calls complete; here, under the config, for its defaults)."""

_NAME_MAX_BYTES = 200
"""Longest run id in UTF-8 bytes: a folder name (255 at most) with room for temp suffixes."""


def check_run_id(run_id: str) -> str:
    """Return ``run_id`` when it is a plain folder name; else raise one clear error.

    Raises:
        ConfigError: The id is empty, ``.``/``..``, starts with ``.``, absolute, holds a path
            separator or a control character, or is too long for a folder name.
    """
    problem = None
    if not isinstance(run_id, str) or not run_id.strip():
        problem = "it is empty"
    elif run_id in {".", ".."}:
        problem = "it names a folder outside the runs root"
    elif run_id.startswith("."):
        # A hidden folder: no listing (``ls``, the viewer) would show the run.
        problem = "it starts with '.' (a hidden folder)"
    elif os.path.isabs(run_id) or "/" in run_id or "\\" in run_id:
        problem = "it is a path (a run id is one folder name under runs_root: no '/' or '\\')"
    elif not run_id.isprintable():
        problem = "it holds control characters"
    elif len(run_id.encode("utf-8")) > _NAME_MAX_BYTES:
        problem = f"it is longer than {_NAME_MAX_BYTES} bytes"
    if problem:
        raise ConfigError(f"run id '{clip(run_id)}': {problem}")
    return run_id


class RunLocked(RagauditError):
    """Another live process is writing the run."""


class LockBusy(RagauditError):
    """A lock taken without waiting is held by another open of its file."""


def _open_lock(path: Path) -> int:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        return os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as exc:
        # A read-only or full runs root: one line, before anything else is tried.
        raise RagauditError(os_error_message(exc, path)) from None


def _flock(fd: int, path: Path, wait: bool) -> None:
    """Lock ``fd`` exclusively; without ``wait`` a held lock is :class:`LockBusy`."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
    except OSError as exc:
        if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
            raise
        raise LockBusy(f"{path}: locked by another process") from None


@contextlib.contextmanager
def file_lock(path: Path | str, *, wait: bool = True) -> Iterator[int]:
    """Hold an exclusive lock on the file ``path`` (created when missing) for the block.

    Waits for the holder to let go, or raises :class:`LockBusy` at once without ``wait``. The
    kernel drops the lock when its process dies, however it dies.
    """
    path = Path(path)
    fd = _open_lock(path)
    try:
        _flock(fd, path, wait)
        yield fd
    finally:
        os.close(fd)  # closing the only open of the description drops the lock


@contextlib.asynccontextmanager
async def afile_lock(path: Path | str) -> AsyncIterator[int]:
    """:func:`file_lock` for a coroutine: the wait happens in a thread, the loop keeps running.

    The lock belongs to the open file, not to the thread that waited for it, so it is held by
    the coroutine's block wherever the wait ran.
    """
    path = Path(path)
    fd = _open_lock(path)
    try:
        await asyncio.to_thread(_flock, fd, path, True)
        yield fd
    finally:
        os.close(fd)


def _holder(path: Path) -> dict[str, Any]:
    """What the lock file says about its holder ({} when unreadable)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def describe_holder(holder: dict[str, Any]) -> str:
    """``pid 123 on host h since … (ragaudit run …)`` from a lock file's content."""
    if not holder:
        return "another process (its lock file names none)"
    text = f"pid {holder.get('pid')} on host {holder.get('host')}"
    if holder.get("started_at"):
        text += f" since {holder['started_at']}"
    if holder.get("command"):
        text += f" ({clip(holder['command'], 120)})"
    return text


class RunLock:
    """The one-writer lock of the run folder ``run_dir``.

    Re-entrant within a process (the CLI takes it before Prefect starts, the flow takes it
    again for callers that come without the CLI); a second process is refused.
    """

    # Per process: run folder → (open file, holders). flock locks belong to an open file, so
    # a second open in the same process would refuse the process itself.
    _held: dict[str, tuple[int, int]] = {}
    _guard = threading.Lock()

    def __init__(self, run_dir: Path | str) -> None:
        self.run_dir = Path(run_dir)
        self.path = self.run_dir / LOCK_NAME

    def acquire(self) -> None:
        """Take the lock, or raise :class:`RunLocked` naming the process that holds it.

        Raises:
            RunLocked: A live process holds the run.
            RagauditError: The run folder cannot be created or written (naming the errno).
        """
        key = str(self.run_dir.resolve())
        with self._guard:
            if key in self._held:
                fd, count = self._held[key]
                self._held[key] = (fd, count + 1)
                return
            while True:
                fd = _open_lock(self.path)
                try:
                    _flock(fd, self.path, wait=False)
                except LockBusy:
                    os.close(fd)
                    raise RunLocked(
                        f"run {self.run_dir.name} is already running: "
                        f"{describe_holder(_holder(self.path))}; wait for it to finish or stop "
                        "it, then re-run to resume"
                    ) from None
                except BaseException:
                    os.close(fd)
                    raise
                # The file may have been replaced between the open and the lock (a holder that
                # finished and a third process): lock the file that is at the path now.
                try:
                    same = os.fstat(fd).st_ino == os.stat(self.path).st_ino
                except FileNotFoundError:
                    same = False
                if same:
                    break
                os.close(fd)
            holder = {
                "pid": os.getpid(),
                "host": socket.gethostname(),
                "started_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
                "command": " ".join(sys.argv)[:500],
            }
            os.ftruncate(fd, 0)
            os.pwrite(fd, json.dumps(holder).encode("utf-8"), 0)
            self._held[key] = (fd, 1)

    def release(self) -> None:
        """Let go of one hold; the last one unlocks (the file stays, naming the last holder)."""
        key = str(self.run_dir.resolve())
        with self._guard:
            if key not in self._held:
                return
            fd, count = self._held[key]
            if count > 1:
                self._held[key] = (fd, count - 1)
                return
            del self._held[key]
            with contextlib.suppress(OSError):
                fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)

    def __enter__(self) -> RunLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def is_held(run_dir: Path | str) -> bool:
    """Whether a live process (this one included) holds the run folder's lock now.

    Probed with a shared ``flock`` that is released at once: the kernel grants it only when no
    process holds the exclusive one, and a holder killed with ``kill -9`` holds nothing.
    """
    path = Path(run_dir) / LOCK_NAME
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError:
        return True
    finally:
        os.close(fd)  # closing the file drops the probe's shared lock
    return False


@contextlib.contextmanager
def hold_run(run_dir: Path | str) -> Iterator[RunLock]:
    """Hold the run folder's lock for the block."""
    with RunLock(run_dir) as lock:
        yield lock


__all__ = [
    "COMPLETE_STATUSES",
    "LOCK_NAME",
    "LockBusy",
    "RunLock",
    "RunLocked",
    "check_run_id",
    "afile_lock",
    "describe_holder",
    "file_lock",
    "hold_run",
    "is_held",
]
