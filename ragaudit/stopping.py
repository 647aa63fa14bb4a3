"""How a signal stops a run started from the command line: SIGTERM takes SIGINT's way out.

``asyncio.run`` answers the first SIGINT by cancelling its main task, lets the run unwind in
order (the flow's ``finally`` writes the manifest, the gateway closes its memo) and raises
``KeyboardInterrupt`` once it is done. :func:`sigterm_as_sigint` routes SIGTERM into that
same path, remembering which signal came, so the caller can exit with its status
(``128 + signum``) and mark the run ``interrupted``.

Prefect's flow engine installs a SIGTERM handler of its own for the length of a flow run. It
raises ``TerminationSignal`` wherever the main thread happens to be, so the run crashes
(state ``failed``, a long traceback, exit 1) instead of stopping in order. That handler serves
a Prefect worker, which cancels a flow run it supervises with SIGTERM; under the CLI there is
no worker, so :func:`reclaim_sigterm`, called at the start of the flow body, puts the CLI's
handler back. Outside :func:`sigterm_as_sigint` (a deployment's flow run under a worker) it
does nothing and Prefect's handler stays.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from types import FrameType

_received: list[int] = []
_active = False


def _on_sigterm(signum: int, _frame: FrameType | None) -> None:
    _received.append(signum)
    signal.raise_signal(signal.SIGINT)


def received() -> int:
    """The first signal that stopped the run (SIGINT when none was recorded)."""
    return _received[0] if _received else signal.SIGINT


@contextlib.contextmanager
def sigterm_as_sigint() -> Iterator[None]:
    """Stop on SIGTERM as on SIGINT for the block (main thread only; elsewhere a no-op)."""
    global _active
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    _received.clear()
    previous = signal.signal(signal.SIGTERM, _on_sigterm)
    _active = True
    try:
        yield
    finally:
        _active = False
        signal.signal(signal.SIGTERM, previous)


def reclaim_sigterm() -> None:
    """Inside :func:`sigterm_as_sigint`, undo a SIGTERM handler installed since (Prefect's)."""
    if not _active or threading.current_thread() is not threading.main_thread():
        return
    if signal.getsignal(signal.SIGTERM) is not _on_sigterm:
        signal.signal(signal.SIGTERM, _on_sigterm)


def exit_status(signum: int) -> int:
    """The status a shell reports for a process stopped by ``signum`` (130, 143)."""
    return 128 + int(signum)


__all__ = ["exit_status", "received", "reclaim_sigterm", "sigterm_as_sigint"]
