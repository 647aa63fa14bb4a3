"""The ``nightly`` section of the config: how a scheduled re-evaluation reacts.

Beside ``reevaluation.py`` (the nightly's library module), in the base layer: it imports
pydantic and base modules only, so that ``config.py`` composes it (``config.py`` says why).
"""

from __future__ import annotations

from typing import Literal

from ragaudit._section import Section
from ragaudit.runlock import COMPLETE_STATUSES


class NightlyConfig(Section):
    """Scheduled re-evaluation: each run is compared with the previous run like it."""

    on_regression: Literal["fail", "name", "ignore"] = "fail"
    """What a metric that regressed beyond noise does to the flow run besides the
    ``ragaudit.regression`` event: ``fail``, a Failed state naming the metrics; ``name``, a
    ``-regressed`` suffix on the run's name (state Completed); ``ignore``, nothing."""
    baseline_statuses: tuple[str, ...] = COMPLETE_STATUSES
    """Manifest statuses a previous run may have to be the baseline (failed and interrupted
    runs never are)."""


__all__ = ["NightlyConfig"]
