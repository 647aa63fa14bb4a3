"""A fake-provider gate that holds every judge call while a file exists, and counts the calls.

Loaded by the fake provider in each CLI process a test starts (``hold_env``): a process whose
first call is held stays in the middle of its work, its folder locked and its manifest
``running``, for as long as the test wants, whatever the machine's speed. The calls that reach
the provider are counted in a JSON file per process group, so a test can say that a refused
process paid nothing.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

# Loaded by file path in a CLI subprocess, where the tests' folder is not on sys.path.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ragaudit.cache._fake import GATE_ENV  # noqa: E402
from support.shared_count import SharedCount  # noqa: E402


class HoldGate:
    """Counts each call, then holds it while the hold file exists; refuses it while ``down`` does.

    ``down`` is an outage of the provider: every call refused (a rate limit the gateway retries
    and then gives up on), under the same model string, so a day audited through it is in the
    same series as the day re-audited once the provider is back.
    """

    def __init__(self, argument: str) -> None:
        count, _, rest = argument.partition("|")
        hold, _, down = rest.partition("|")
        self.count = SharedCount(count)
        self.hold = Path(hold)
        self.down = Path(down) if down else None

    def enter(self, capacity: int) -> bool:
        """Count the call, then wait while the hold file exists (blocking: the test kills us)."""
        ok = self.count.enter(0)
        while self.hold.exists():
            time.sleep(0.05)
        if self.down is not None and self.down.exists():
            self.count.leave()
            return False
        return ok

    def leave(self) -> None:
        """The call is done."""
        self.count.leave()


def gate(argument: str) -> HoldGate:
    """The gate the fake provider loads from ``FAKE_PROVIDER_GATE``."""
    return HoldGate(argument)


def hold_env(count: os.PathLike[str], hold: os.PathLike[str]) -> dict[str, str]:
    """The environment counting a process's fake calls in ``count``, held while ``hold`` exists."""
    return {GATE_ENV: f"{Path(__file__).resolve()}::{os.fspath(count)}|{os.fspath(hold)}"}


def calls(count: Path) -> int:
    """The calls counted in ``count`` (0 when none was ever made)."""
    return SharedCount(count).read()["calls"] if count.exists() else 0


__all__ = ["HoldGate", "calls", "gate", "hold_env"]
