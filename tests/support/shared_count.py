"""Calls of the fake provider in flight across processes: the gate a test or bench installs.

A run's worker processes (the CLI a test starts, a Dask cluster's workers) each load this file
through the fake provider's gate variable, so every fake call of every process is counted in
one JSON file: calls, refusals, and the peak in flight, as a provider would see them.
"""

from __future__ import annotations

import fcntl
import json
import os
from collections.abc import Callable
from pathlib import Path

from ragaudit.cache._fake import GATE_ENV


class SharedCount:
    """Calls in flight across processes, kept in one JSON file under an exclusive ``flock``."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = os.fspath(path)

    def _update(self, change: Callable[[dict[str, int]], bool]) -> bool:
        with open(self.path, "a+", encoding="utf-8") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX)
            fh.seek(0)
            text = fh.read()
            state = json.loads(text) if text else {}
            for k in ("in_flight", "peak", "calls", "refused"):
                state.setdefault(k, 0)
            ok = change(state)
            fh.seek(0)
            fh.truncate()
            fh.write(json.dumps(state))
            fh.flush()
            return ok

    def enter(self, capacity: int) -> bool:
        """Count one call in flight, or count a refusal when ``capacity`` are (0: no cap)."""

        def change(state: dict[str, int]) -> bool:
            if capacity and state["in_flight"] >= capacity:
                state["refused"] += 1
                return False
            state["in_flight"] += 1
            state["calls"] += 1
            state["peak"] = max(state["peak"], state["in_flight"])
            return True

        return self._update(change)

    def leave(self) -> None:
        """One call is no longer in flight."""

        def change(state: dict[str, int]) -> bool:
            state["in_flight"] -= 1
            return True

        self._update(change)

    def read(self) -> dict[str, int]:
        """The counts: ``in_flight``, ``peak``, ``calls``, ``refused``."""
        out: dict[str, int] = {}
        self._update(lambda state: bool(out.update(state)) or True)
        return out


def gate(argument: str) -> SharedCount:
    """The gate the fake provider loads from ``FAKE_PROVIDER_GATE`` (the counter's path)."""
    return SharedCount(argument)


def shared_env(path: str | os.PathLike[str]) -> dict[str, str]:
    """The environment that makes every process's fake calls count in the file ``path``."""
    return {GATE_ENV: f"{Path(__file__).resolve()}::{os.fspath(path)}"}


__all__ = ["SharedCount", "gate", "shared_env"]
