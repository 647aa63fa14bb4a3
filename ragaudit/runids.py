"""Run ids: minted in this one place, from the UTC time, so that they sort as the runs started."""

from __future__ import annotations

import datetime as dt
import secrets

# Basic ISO 8601 in UTC: the same on every machine of a team, whatever its time zone, and
# free of the ``:`` a folder name on some file systems cannot hold.
_STAMP = "%Y%m%dT%H%M%SZ"


def new_run_id(prefix: str | None = None) -> str:
    """A fresh run id: ``[<prefix>-]20261125T203000Z-3f9a``.

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
