"""The folders under a runs root as the viewer lists them: every folder, whatever state it is in.

A folder is read through the library (``runfolder.run_state``, ``reporting.run_overview``) and
kept until any of its entries changes, so a list of 50 runs is read once and a run written
meanwhile shows up at the next request. One folder that cannot be read is listed with its
reason; it never hides the others.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import threading
from dataclasses import dataclass
from pathlib import Path

from cachetools import LRUCache
from fastapi import HTTPException

from ragaudit.errors import clip
from ragaudit.reporting import CALIBRATION_META, RunOverview, run_overview
from ragaudit.runfolder import COMPLETE_STATUSES, run_state
from ragaudit.secrets import redact
from ragaudit.viewer._paths import run_path


@dataclass(frozen=True)
class Listed:
    """One folder under the runs root."""

    run_id: str
    kind: str
    """``run``, ``calibration``, ``audit`` (an audit's days), ``foreign`` (not a run folder) or
    ``unreadable``."""
    status: str
    """The run's state (``run_state``), or what the folder is when it holds no run."""
    note: str | None = None
    """Why the run is incomplete or could not be read (None: nothing to say)."""
    overview: RunOverview | None = None

    @property
    def openable(self) -> bool:
        """Whether a report page can be built from it."""
        return self.kind in {"run", "calibration", "audit"} and self.status != "damaged"


Signature = tuple[int, tuple[tuple[str, int, int], ...]]


def signature(folder: Path) -> Signature:
    """What changes whenever anything in the folder is written.

    Every write of a run folder renames a finished file into place (``atomic.py``), which
    changes the folder's own mtime; the entries' mtimes and sizes catch a file copied in place.
    """
    with os.scandir(folder) as entries:
        found = []
        for e in entries:
            try:
                st = e.stat(follow_symlinks=False)
            except OSError:
                continue
            found.append((e.name, st.st_mtime_ns, st.st_size))
    return folder.stat().st_mtime_ns, tuple(sorted(found))


def _unreadable(run_id: str, why: str) -> Listed:
    # The text came from a folder or a library error: no secret, one bounded line.
    return Listed(run_id, "unreadable", "unreadable", clip(redact(why), 300))


def audit_days(folder: Path) -> list[str]:
    """The days of an audit's folder (``audit-<name>/<day>/`` with a day's manifest), newest first.

    Read by name rather than through ``ragaudit.audit``, which would load the judging gateway
    into the viewer: a day's folder is a date holding ``manifest.json`` of ``kind: audit``.
    """
    days = []
    for entry in folder.iterdir():
        try:
            dt.date.fromisoformat(entry.name)
            manifest = json.loads((entry / "manifest.json").read_text(encoding="utf-8"))
        except (ValueError, OSError):
            continue
        if isinstance(manifest, dict) and manifest.get("kind") == "audit":
            days.append(entry.name)
    return sorted(days, reverse=True)


def _read(folder: Path) -> Listed:
    run_id = folder.name
    if not (folder / "manifest.json").is_file():
        if (folder / CALIBRATION_META).is_file():
            return Listed(run_id, "calibration", "calibration")
        days = audit_days(folder) if run_id.startswith("audit-") else []
        if days:
            return Listed(run_id, "audit", "audit", f"{len(days)} days, the last {days[0]}")
        return Listed(run_id, "foreign", "not a run folder", "no manifest.json")
    try:
        overview = run_overview(folder)
        # The overview holds the state's status; its reason is read only where there is one.
        reason = None if overview.status in COMPLETE_STATUSES else run_state(folder).reason
        return Listed(run_id, "run", overview.status or "unknown", reason, overview)
    except Exception as exc:  # noqa: BLE001  (one folder never takes the list down with it)
        return _unreadable(run_id, f"{type(exc).__name__}: {exc}")


class Listing:
    """The folders of one runs root, each read again only when it changed."""

    def __init__(self, root: Path, size: int = 4096) -> None:
        self.root = root
        self._kept: LRUCache[str, tuple[Signature, Listed]] = LRUCache(size)
        self._lock = threading.Lock()

    def folder(self, folder: Path) -> Listed:
        """One folder's entry (read again when its signature changed)."""
        sig = signature(folder)
        with self._lock:
            kept = self._kept.get(folder.name)
        if kept is not None and kept[0] == sig:
            return kept[1]
        listed = _read(folder)
        with self._lock:
            self._kept[folder.name] = (sig, listed)
        return listed

    def all(self) -> list[Listed]:
        """Every folder under the root whose name is a run id, newest run first."""
        out = []
        for entry in sorted(os.scandir(self.root), key=lambda e: e.name):
            try:
                folder = run_path(self.root, entry.name)
            except HTTPException:
                # A hidden folder, a file, or a symlink out of the root: not the viewer's.
                continue
            try:
                out.append(self.folder(folder))
            except OSError as exc:
                out.append(_unreadable(entry.name, str(exc)))

        def started(listed: Listed) -> str:
            return (listed.overview.started_at or "") if listed.overview else ""

        return sorted(out, key=lambda r: (started(r), r.run_id), reverse=True)


__all__ = ["Listed", "Listing", "audit_days", "signature"]
