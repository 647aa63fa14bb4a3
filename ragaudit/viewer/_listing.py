"""The folders under a runs root as the viewer lists them: every folder, whatever state it is in.

Listing a page of a large root reads only what that page shows. Every folder has a *head*
(its kind, from ``runfolder.RunsRoot.kind_of``, and its start time, from its manifest) kept
until the folder or its manifest changes (two ``stat`` calls a folder per request); the heads
order the list, newest first, and cut it into pages. A folder's full entry (its state and
overview, read through the library: ``runfolder.run_state``, ``reporting.run_overview``) is
read only for the rows shown and kept until any of its entries changes, so a run written
meanwhile shows up at the next request. One folder that cannot be read is listed with its
reason; it never hides the others. The judgment store is not listed: it holds no run.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import threading
from dataclasses import dataclass
from pathlib import Path

from cachetools import LRUCache

from ragaudit.atomic import write_json
from ragaudit.errors import ConfigError, clip
from ragaudit.reporting import RunOverview, run_overview
from ragaudit.runfolder import (
    AUDIT_DAY,
    COMPLETE_STATUSES,
    RunEntry,
    RunsRoot,
    folder_kind,
    folder_kinds,
    run_state,
)
from ragaudit.runlock import check_run_id
from ragaudit.secrets import redact

PAGE_SIZE = 50
"""Rows of the runs list a page shows."""

HIDDEN_KINDS = frozenset(k.name for k in folder_kinds() if not k.run)
"""Kinds of folder the list leaves out: the judgment store is the runs' shared memo, no run."""

FOREIGN = "foreign"
"""A folder of no kind (no manifest, no marker): listed as "not a run folder"."""


@dataclass(frozen=True)
class Listed:
    """One folder under the runs root."""

    run_id: str
    kind: str
    """``run``, ``calibration``, ``tune``, ``battles``, ``audit`` (an audit's days),
    ``judgments`` (the store), ``foreign`` (not a run folder) or ``unreadable``."""
    status: str
    """The run's state (``run_state``), or what the folder is when it holds no run."""
    note: str | None = None
    """Why the run is incomplete or could not be read, or what the folder holds (None:
    nothing to say)."""
    overview: RunOverview | None = None
    has_report: bool = False
    """The folder holds the page its kind writes (a tune's, an ablation's ``report.html``)."""

    @property
    def openable(self) -> bool:
        """Whether the viewer has a page for it."""
        if self.kind in {"run", "calibration", "audit"}:
            return self.status != "damaged"
        return self.has_report


@dataclass(frozen=True)
class Head:
    """What orders a folder in the list, read once per change of the folder or its manifest."""

    name: str
    kind: str
    """A :data:`ragaudit.runfolder.FolderKind`, ``calibration`` or ``foreign``."""
    started_at: str
    """The run's start (its manifest's ``started_at``), else the folder's last change (UTC)."""


@dataclass(frozen=True)
class Page:
    """One page of the runs list."""

    rows: list[Listed]
    number: int
    """1 for the newest rows."""
    pages: int
    total: int
    """Folders listed on every page together (after the filter)."""
    query: str


Signature = tuple[int, tuple[tuple[str, int, int], ...]]
_HeadKey = tuple[int, int, int]

INDEX_FILE = ".ragaudit-view-index.json"
"""The heads of a root's folders by their keys, kept in the root for the next server.

Hidden (a name no run id can take) and only a cache: a head whose key no longer matches its
folder is read again, and a missing, damaged or unwritable index only costs that read."""
_INDEX_VERSION = 1
_KINDS = frozenset({*(k.name for k in folder_kinds()), FOREIGN})


def _load_index(root: Path) -> dict[str, tuple[_HeadKey, Head]]:
    """The heads kept in ``root``'s index; {} when there is none or it cannot be trusted."""
    try:
        kept = json.loads((root / INDEX_FILE).read_text(encoding="utf-8"))
        if kept.get("version") != _INDEX_VERSION:
            return {}
        out = {}
        for name, (mtime, m_mtime, m_size, kind, started) in kept["heads"].items():
            check_run_id(name)
            key = (int(mtime), int(m_mtime), int(m_size))
            if kind in _KINDS and isinstance(started, str):
                out[name] = (key, Head(name, kind, started))
        return out
    except (OSError, ValueError, TypeError, KeyError, AttributeError, ConfigError):
        return {}


def _save_index(root: Path, heads: dict[str, tuple[_HeadKey, Head]]) -> None:
    rows = {name: [*key, h.kind, h.started_at] for name, (key, h) in heads.items()}
    with contextlib.suppress(OSError):  # a read-only root: the next server reads the folders
        write_json({"version": _INDEX_VERSION, "heads": rows}, root / INDEX_FILE)


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


def _head_key(folder: str) -> _HeadKey:
    """The folder's mtime and its manifest's (mtime, size).

    A marker or a manifest renamed into place changes the first, a manifest rewritten in
    place the second. Plain ``os.stat`` on strings: this runs for every folder of the root.
    """
    mtime = os.stat(folder).st_mtime_ns
    try:
        st = os.stat(os.path.join(folder, "manifest.json"))
    except OSError:
        return mtime, 0, -1
    return mtime, st.st_mtime_ns, st.st_size


def _unreadable(run_id: str, why: str) -> Listed:
    # The text came from a folder or a library error: no secret, one bounded line.
    return Listed(run_id, "unreadable", "unreadable", clip(redact(why), 300))


def audit_days(folder: Path) -> list[RunEntry]:
    """The days of an audit's folder (``audit-<name>/<day>/``), newest first, with their states.

    From the runs root's one scanner: a day killed mid-way is listed as ``interrupted``, one
    still being audited as ``running``.
    """
    days = RunsRoot(folder.parent).entries(AUDIT_DAY.name, group=folder.name)
    return sorted(days, key=lambda e: e.name, reverse=True)


def _kind(root: RunsRoot, folder: Path) -> str:
    """The folder's kind as the runs root names it, else ``foreign``."""
    return root.kind_of(folder.name) or FOREIGN


def _started(folder: Path, kind: str) -> str:
    """The run's start from its manifest; else (or unreadable) the folder's last change."""
    try:
        manifest = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
        started = manifest.get("started_at") if isinstance(manifest, dict) else None
        if isinstance(started, str) and started:
            return started
    except (OSError, ValueError):
        pass
    return dt.datetime.fromtimestamp(folder.stat().st_mtime, dt.UTC).isoformat()


def _read(root: RunsRoot, folder: Path) -> Listed:
    run_id = folder.name
    kind = _kind(root, folder)
    if kind == FOREIGN:
        return Listed(run_id, FOREIGN, "not a run folder", "no manifest.json")
    if kind == AUDIT_DAY.name:
        days = audit_days(folder)
        if not days:
            return Listed(run_id, kind, kind, "no day yet")
        stopped = [d.name for d in days if not d.state.complete]
        said = f"{len(days)} days, the last {days[0].name}"
        if stopped:
            said += f"; not finished: {', '.join(stopped[:5])}"
        return Listed(run_id, kind, kind, said)
    spec = folder_kind(kind)
    if not spec.run:
        return Listed(run_id, kind, kind)
    if kind == "run":
        try:
            overview = run_overview(folder)
            # The overview holds the state's status; its reason is read only where there is one.
            reason = None if overview.status in COMPLETE_STATUSES else run_state(folder).reason
            return Listed(run_id, "run", overview.status or "unknown", reason, overview)
        except Exception as exc:  # noqa: BLE001  (one folder never takes the list down with it)
            return _unreadable(run_id, f"{type(exc).__name__}: {exc}")
    # Every other kind: its state by the one rule, and the page it writes.
    state = run_state(folder, spec)
    has_page = spec.page is not None and (folder / spec.page).is_file()
    note: str | None
    if not state.complete:
        note = state.reason
    elif spec.page is None:
        note = None
    else:
        note = f"{spec.page} (ragaudit {kind})" if has_page else f"no {spec.page} yet"
    return Listed(run_id, kind, state.status, note, has_report=has_page)


class Listing:
    """The folders of one runs root, each read again only when it changed."""

    def __init__(self, root: Path, size: int = 4096) -> None:
        self.root = root
        self._runs_root = RunsRoot(root)
        self._kept: LRUCache[str, tuple[Signature, Listed]] = LRUCache(size)
        # One small head per folder: the whole root's, however many (no LRU would keep a page).
        self._heads: dict[str, tuple[_HeadKey, Head]] = _load_index(root)
        self._changed = False
        self._lock = threading.Lock()

    def folder(self, folder: Path) -> Listed:
        """One folder's entry (read again when its signature changed)."""
        sig = signature(folder)
        with self._lock:
            kept = self._kept.get(folder.name)
        if kept is not None and kept[0] == sig:
            return kept[1]
        listed = _read(self._runs_root, folder)
        with self._lock:
            self._kept[folder.name] = (sig, listed)
        return listed

    def _head(self, name: str, path: str) -> Head:
        key = _head_key(path)
        with self._lock:
            kept = self._heads.get(name)
        if kept is not None and kept[0] == key:
            return kept[1]
        folder = Path(path)
        kind = _kind(self._runs_root, folder)
        head = Head(name, kind, _started(folder, kind))
        with self._lock:
            self._heads[name] = (key, head)
            self._changed = True
        return head

    def heads(self) -> list[Head]:
        """Every listed folder's head, newest first (the store left out).

        A folder is listed when its name is a run id (``check_run_id``: no hidden folder) and
        it is a folder of its own: a symlink is not (one to a folder of the root would list
        that folder twice, one out of the root is never the viewer's).
        """
        out: list[Head] = []
        seen = set()
        with os.scandir(self.root) as entries:
            for entry in entries:
                try:
                    check_run_id(entry.name)
                    if not entry.is_dir(follow_symlinks=False):
                        continue
                except (ConfigError, OSError):
                    continue
                try:
                    head = self._head(entry.name, entry.path)
                except OSError:
                    # Listed as unreadable, with its reason, when its page is read.
                    head = Head(entry.name, "unreadable", "")
                seen.add(entry.name)
                if head.kind not in HIDDEN_KINDS:
                    out.append(head)
        with self._lock:
            for gone in self._heads.keys() - seen:
                del self._heads[gone]
                self._changed = True
            changed, self._changed = self._changed, False
            kept = dict(self._heads) if changed else None
        if kept is not None:
            _save_index(self.root, kept)
        return sorted(out, key=lambda h: (h.started_at, h.name), reverse=True)

    def _entry(self, head: Head) -> Listed:
        try:
            return self.folder(self.root / head.name)
        except OSError as exc:
            return _unreadable(head.name, str(exc))

    def page(self, number: int = 1, query: str = "", size: int = PAGE_SIZE) -> Page:
        """Page ``number`` (1: the newest) of the folders whose name holds ``query``.

        Only the page's folders are read beyond their heads.
        """
        heads = self.heads()
        if query:
            wanted = query.casefold()
            heads = [h for h in heads if wanted in h.name.casefold()]
        pages = max(1, -(-len(heads) // size))
        number = min(max(number, 1), pages)
        shown = heads[(number - 1) * size : number * size]
        return Page([self._entry(h) for h in shown], number, pages, len(heads), query)

    def all(self) -> list[Listed]:
        """Every listed folder's full entry, newest first (reads every folder: the trend's)."""
        return [self._entry(h) for h in self.heads()]


__all__ = [
    "INDEX_FILE",
    "PAGE_SIZE",
    "Head",
    "Listed",
    "Listing",
    "Page",
    "audit_days",
    "signature",
]
