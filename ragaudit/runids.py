"""Run ids: minted in this one place, from the UTC time, so that they sort as the runs started."""

from __future__ import annotations

import datetime as dt
import secrets

# UTC: the same on every machine of a team, whatever its time zone. Digits and dashes only: a
# run id is also a folder name (no ``:``) and part of Prefect artifact keys, which are lower
# case (an ISO ``T``/``Z`` would differ between the id and its key).
_STAMP = "%Y%m%d-%H%M%S"


def new_run_id(prefix: str | None = None) -> str:
    """A fresh run id: ``[<prefix>-]20261125-203000-3f9a`` (UTC).

    The UTC second sorts the ids of one prefix by start time; the four hex digits keep two
    runs started in the same second (a scheduled run and a manual one, two workers) apart.

    Args:
        prefix: What kind of run (``calibrate``); none for an evaluation.

    Returns:
        The run id, usable as a folder name.
    """
    stamp = dt.datetime.now(dt.UTC).strftime(_STAMP)
    run_id = f"{stamp}-{secrets.token_hex(2)}"
    return f"{prefix}-{run_id}" if prefix else run_id
