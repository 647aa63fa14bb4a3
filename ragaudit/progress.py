"""Progress reporting from stages to whoever shows it (the CLI's Rich bars, or nothing)."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from typing import Protocol


class Reporter(Protocol):
    """Receives stage progress."""

    def start(self, label: str, total: int) -> int:
        """Open a bar; returns its handle."""
        ...

    def advance(self, handle: int, n: int = 1) -> None:
        """Move a bar forward."""
        ...

    def finish(self, handle: int, stopped: bool = False) -> None:
        """Close a bar (``stopped``: its block ended by an error or a signal, not done)."""
        ...


class _Silent:
    def start(self, label: str, total: int) -> int:
        return 0

    def advance(self, handle: int, n: int = 1) -> None:
        pass

    def finish(self, handle: int, stopped: bool = False) -> None:
        pass


_reporter: Reporter = _Silent()


def set_reporter(reporter: Reporter | None) -> None:
    """Install ``reporter`` (None: silence)."""
    global _reporter
    _reporter = reporter or _Silent()


class LineReporter:
    """Plain progress lines, one per stage at most every ``every_s`` seconds (a CI log's view).

    A log that is not a terminal gets no live bars; a stage that works for minutes would show
    nothing, and a run that is alive would read as hung. Each bar prints when it starts, then
    its count when ``every_s`` has passed since its last line, and once when it ends. A bar
    whose count has not moved still gets its line: one judge call on a slow local model can
    take minutes, and the log must show the stage is waiting, not dead. :meth:`tick` prints
    those lines; :meth:`heartbeat` calls it from a thread for the duration of a block.
    """

    def __init__(
        self,
        write: Callable[[str], None],
        every_s: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
        rate: bool = False,
    ) -> None:
        self.write = write
        self.every_s = every_s
        self.clock = clock
        # Items a second and the time left, for long uniform work (``ragaudit index``).
        self.rate = rate
        self._lock = threading.Lock()
        self._bars: dict[int, list] = {}
        self._next = 0

    def start(self, label: str, total: int) -> int:
        """Print that the stage started; returns its handle."""
        with self._lock:
            handle = self._next
            self._next += 1
            now = self.clock()
            # label, total, done, started, last line printed
            self._bars[handle] = [label, total, 0, now, now]
        self.write(f"{label}: started, 0/{total}")
        return handle

    def _due(self, bar: list, now: float) -> str | None:
        """The bar's line if ``every_s`` passed since its last one (and mark it printed)."""
        if now - bar[4] < self.every_s:
            return None
        bar[4] = now
        line = f"{bar[0]}: {bar[2]}/{bar[1]}, {now - bar[3]:.0f} s"
        return line + self._pace(bar, now)

    def _pace(self, bar: list, now: float) -> str:
        """``, 12.5/s, about 40 s left`` when asked for and measurable, else nothing."""
        elapsed = now - bar[3]
        if not self.rate or bar[2] <= 0 or elapsed <= 0:
            return ""
        per_s = bar[2] / elapsed
        left = max(bar[1] - bar[2], 0) / per_s
        return f", {per_s:.1f}/s, about {left:.0f} s left"

    def advance(self, handle: int, n: int = 1) -> None:
        """Count ``n`` more done; print a line when ``every_s`` passed since the last one."""
        with self._lock:
            bar = self._bars.get(handle)
            if bar is None:
                return
            bar[2] += n
            line = self._due(bar, self.clock())
        if line:
            self.write(line)

    def tick(self) -> None:
        """Print the line of every open bar that has printed nothing for ``every_s``."""
        with self._lock:
            now = self.clock()
            lines = [line for bar in self._bars.values() if (line := self._due(bar, now))]
        for line in lines:
            self.write(line)

    @contextlib.contextmanager
    def heartbeat(self, period_s: float = 1.0) -> Iterator[None]:
        """Call :meth:`tick` every ``period_s`` from a daemon thread while the block runs."""
        stop = threading.Event()

        def beat() -> None:
            while not stop.wait(period_s):
                self.tick()

        thread = threading.Thread(target=beat, name="ragaudit-progress", daemon=True)
        thread.start()
        try:
            yield
        finally:
            stop.set()
            thread.join()

    def finish(self, handle: int, stopped: bool = False) -> None:
        """Print that the stage ended (done, or stopped before its end), with its time."""
        with self._lock:
            bar = self._bars.pop(handle, None)
            if bar is None:
                return
            ended = "stopped at" if stopped else "done,"
            line = f"{bar[0]}: {ended} {bar[2]}/{bar[1]} in {self.clock() - bar[3]:.0f} s"
        self.write(line)


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
    except BaseException:
        # A signal (cancellation) or an error ended the block: the stage wrote nothing, and a
        # bar that read "done" would say it had.
        _reporter.finish(handle, stopped=True)
        raise
    _reporter.finish(handle)


__all__ = ["Bar", "LineReporter", "Reporter", "bar", "set_reporter"]
