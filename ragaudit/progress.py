"""Progress reporting from stages to whoever shows it (the CLI's Rich bars, or nothing)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Protocol


class Reporter(Protocol):
    """Receives stage progress."""

    def start(self, label: str, total: int) -> int:
        """Open a bar; returns its handle."""
        ...

    def advance(self, handle: int, n: int = 1) -> None:
        """Move a bar forward."""
        ...

    def finish(self, handle: int) -> None:
        """Close a bar."""
        ...


class _Silent:
    def start(self, label: str, total: int) -> int:
        return 0

    def advance(self, handle: int, n: int = 1) -> None:
        pass

    def finish(self, handle: int) -> None:
        pass


_reporter: Reporter = _Silent()


def set_reporter(reporter: Reporter | None) -> None:
    """Install ``reporter`` (None: silence)."""
    global _reporter
    _reporter = reporter or _Silent()


class Bar:
    """A handle on one progress bar."""

    def __init__(self, handle: int) -> None:
        self.handle = handle

    def advance(self, n: int = 1) -> None:
        """Count ``n`` more units done."""
        _reporter.advance(self.handle, n)


@contextlib.contextmanager
def bar(label: str, total: int) -> Iterator[Bar]:
    """A progress bar for the duration of the block."""
    handle = _reporter.start(label, total)
    try:
        yield Bar(handle)
    finally:
        _reporter.finish(handle)


__all__ = ["Bar", "Reporter", "bar", "set_reporter"]
