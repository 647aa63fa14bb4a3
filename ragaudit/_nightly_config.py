"""The ``nightly`` section of the config: how a scheduled re-evaluation reacts.

It sits beside ``reevaluation.py`` (the nightly's library module). Base-safe: it imports
pydantic and ragaudit's base modules only (see ``ragaudit.config.section``).
"""

from __future__ import annotations

from typing import Literal

from ragaudit.config import Section


class NightlyConfig(Section):
    """Scheduled re-evaluation: each run is compared with the previous run like it."""

    on_regression: Literal["fail", "name", "ignore"] = "fail"
    """What a metric that regressed beyond noise does to the flow run besides the
    ``ragaudit.regression`` event: ``fail``, a Failed state naming the metrics; ``name``, a
    ``-regressed`` suffix on the run's name (state Completed); ``ignore``, nothing."""
    baseline_statuses: tuple[str, ...] = ("completed", "completed_with_failures")
    """Manifest statuses a previous run may have to be the baseline (failed and interrupted
    runs never are)."""


__all__ = ["NightlyConfig"]
