"""One row per model call (cache hits included), written to Parquet part by part as it goes."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import os
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import pyarrow as pa

from ragaudit.atomic import write_table

# 2: the ``concurrency`` column (the model's adaptive limit when the call was admitted).
CALL_LOG_SCHEMA_VERSION = 2

CALL_LOG_SCHEMA = pa.schema(
    [
        ("ts", pa.float64()),
        ("run_id", pa.string()),
        ("stage", pa.string()),
        ("kind", pa.string()),
        ("key_hash", pa.string()),
        ("model", pa.string()),
        ("prompt_version", pa.string()),
        ("tokens_in", pa.int64()),
        ("tokens_out", pa.int64()),
        ("cost_usd", pa.float64()),
        ("latency_s", pa.float64()),
        ("cache_hit", pa.bool_()),
        ("retries", pa.int64()),
        ("error", pa.string()),
        ("concurrency", pa.int64()),
    ],
    metadata={"schema_version": str(CALL_LOG_SCHEMA_VERSION), "table": "llm_calls"},
)

# A part file at least this often (records / seconds): a crash loses no more than that of the
# call log, while the files stay few (one Parquet write costs a few milliseconds).
DEFAULT_FLUSH_EVERY = 50
DEFAULT_FLUSH_INTERVAL_S = 2.0

_part_numbers = itertools.count()

# Journals of the call logs open in this process: any other journal in a folder is a crashed
# writer's, whose rows are recovered.
_open_journals: set[str] = set()
_journals_lock = threading.Lock()
_JOURNAL_SUFFIX = ".journal"


@dataclass
class CallRecord:
    """One model call as the gateway saw it."""

    kind: str
    key_hash: str
    model: str
    stage: str = ""
    run_id: str = ""
    prompt_version: str | None = None
    tokens_in: int | None = None
    tokens_out: int | None = None
    cost_usd: float | None = None
    latency_s: float = 0.0
    cache_hit: bool = False
    retries: int = 0
    error: str | None = None
    concurrency: int | None = None
    ts: float = field(default_factory=time.time)


@dataclass
class CallCounts:
    """How many calls, memo hits and calls that reached a provider."""

    calls: int = 0
    cache_hits: int = 0
    provider_calls: int = 0

    def as_dict(self) -> dict[str, int]:
        """The manifest's ``llm`` block."""
        return {
            "calls": self.calls,
            "cache_hits": self.cache_hits,
            "provider_calls": self.provider_calls,
        }


def _table(rows: list[CallRecord]) -> pa.Table:
    return pa.Table.from_pylist([asdict(r) for r in rows], schema=CALL_LOG_SCHEMA)


class CallLog:
    """Thread-safe call log with counters.

    Without ``directory`` it keeps its rows in memory until :meth:`flush`. With one, it writes
    them there as atomic part files ``<prefix>-<ns>-<n>.parquet`` every ``every`` records or
    ``interval_s`` seconds after the oldest unwritten one, whichever comes first, and the rest
    on :meth:`close`. Each row is also appended to a journal (``.<prefix>-<pid>-<n>.journal``,
    one JSON line a row, written when the row is added) until its part is written: a killed
    process leaves its unwritten rows there, and the next call log opened on the folder (the
    resumed run's stage) writes them as a part. So a paid call the gateway logged before
    memoising its answer is in the log after any crash.

    Args:
        directory: where part files go (a run's ``llm_calls/``); None keeps rows in memory.
        prefix: start of the part files' names (the stage).
        every: write a part once this many records are pending.
        interval_s: write a part at most this long after a record arrived.
    """

    def __init__(
        self,
        directory: Path | None = None,
        *,
        prefix: str = "calls",
        every: int = DEFAULT_FLUSH_EVERY,
        interval_s: float = DEFAULT_FLUSH_INTERVAL_S,
    ) -> None:
        self._rows: list[CallRecord] = []
        self._lock = threading.Lock()
        self.counts = CallCounts()
        self.directory = directory
        self.prefix = prefix
        self.every = max(1, every)
        self.interval_s = interval_s
        self.parts: list[Path] = []
        self._oldest = 0.0
        self._timer: asyncio.TimerHandle | None = None
        self._journal: int | None = None
        self._journal_path: Path | None = None
        if directory is not None:
            recover_journals(directory)

    def _journal_fd(self) -> int:
        if self._journal is None:
            assert self.directory is not None
            self.directory.mkdir(parents=True, exist_ok=True)
            name = f".{self.prefix}-{os.getpid()}-{next(_part_numbers)}{_JOURNAL_SUFFIX}"
            self._journal_path = self.directory / name
            with _journals_lock:
                _open_journals.add(str(self._journal_path))
            self._journal = os.open(
                self._journal_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600
            )
        return self._journal

    def _journal_rows(self, rows: list[CallRecord], *, restart: bool = False) -> None:
        """Append ``rows`` to the journal (``restart``: replace what it holds). Under the lock."""
        fd = self._journal_fd()
        if restart:
            os.ftruncate(fd, 0)
        if rows:
            os.write(fd, "".join(json.dumps(asdict(r)) + "\n" for r in rows).encode())

    def add(self, record: CallRecord) -> None:
        """Record one call (and write a part if one is due)."""
        with self._lock:
            self._rows.append(record)
            if self.directory is not None:
                # One write, before anything else happens to the call: it survives a kill -9.
                self._journal_rows([record])
            self.counts.calls += 1
            if record.cache_hit:
                self.counts.cache_hits += 1
            else:
                # A call that failed before any provider answered still reached the provider.
                self.counts.provider_calls += 1
            if len(self._rows) == 1:
                self._oldest = time.monotonic()
            due = self.directory is not None and (
                len(self._rows) >= self.every or time.monotonic() - self._oldest >= self.interval_s
            )
        if self.directory is None:
            return
        if due:
            self.write_part()
        elif self._timer is None:
            self._arm()

    def _arm(self) -> None:
        # Calls may stop for a while (a slow stage step): the timer writes what is pending
        # without waiting for the next record.
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # no loop in this thread: the next add or close writes the part
            return
        self._timer = loop.call_later(self.interval_s, self._on_timer)

    def _on_timer(self) -> None:
        self._timer = None
        self.write_part()

    def write_part(self) -> Path | None:
        """Write the pending rows as one new part file in ``directory``; its path, or None."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self.directory is None:
            return None
        with self._lock:
            rows, self._rows = self._rows, []
        if not rows:
            return None
        path = self.directory / f"{self.prefix}-{time.time_ns()}-{next(_part_numbers)}.parquet"
        try:
            write_table(_table(rows), path)
        except BaseException:
            with self._lock:  # keep them for the next attempt rather than lose paid calls
                self._rows[:0] = rows
            raise
        with self._lock:
            # The journal keeps only what no part holds yet.
            self._journal_rows(self._rows, restart=True)
        self.parts.append(path)
        return path

    def close(self) -> None:
        """Write what is pending (a part file, with a directory) and stop the timer."""
        self.write_part()
        with self._lock:
            if self._journal is not None and not self._rows:
                os.close(self._journal)
                self._journal = None
                assert self._journal_path is not None
                with contextlib.suppress(FileNotFoundError):
                    self._journal_path.unlink()
                with _journals_lock:
                    _open_journals.discard(str(self._journal_path))

    def rows(self) -> list[CallRecord]:
        """A copy of the rows not written yet."""
        with self._lock:
            return list(self._rows)

    def flush(self, path: Path, stage: str | None = None) -> int:
        """Write the pending rows (of ``stage``, or all) atomically to ``path``; count them."""
        with self._lock:
            rows = [r for r in self._rows if stage is None or r.stage == stage]
            self._rows = [r for r in self._rows if not (stage is None or r.stage == stage)]
        if not rows:
            return 0
        write_table(_table(rows), path)
        return len(rows)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process
        return True
    return True


def recover_journals(directory: Path) -> int:
    """Write the rows crashed writers left in ``directory``'s journals as part files.

    A journal is a crashed writer's when its process is gone, or is this one and no open call
    log owns it. Each is claimed by renaming it first, so two call logs opened at once on the
    folder never both write its rows. Returns the rows recovered.
    """
    if not directory.is_dir():
        return 0
    recovered = 0
    for path in sorted(directory.glob(f".*{_JOURNAL_SUFFIX}")):
        prefix, _, rest = path.name[1:].rpartition("-")[0].rpartition("-")
        pid = int(rest) if rest.isdigit() else -1
        with _journals_lock:
            if str(path) in _open_journals:
                continue
        if pid != os.getpid() and pid > 0 and _alive(pid):
            continue
        claimed = path.with_name(f"{path.name}.{os.getpid()}-{next(_part_numbers)}.claimed")
        try:
            path.rename(claimed)
        except FileNotFoundError:  # another call log claimed it first
            continue
        rows = []
        for line in claimed.read_text(encoding="utf-8", errors="replace").splitlines():
            with contextlib.suppress(ValueError, TypeError):
                rows.append(CallRecord(**json.loads(line)))  # a torn last line is skipped
        if rows:
            name = f"{prefix or 'calls'}-{time.time_ns()}-{next(_part_numbers)}.parquet"
            write_table(_table(rows), directory / name)
            recovered += len(rows)
        claimed.unlink()
    return recovered


__all__ = [
    "CALL_LOG_SCHEMA",
    "CALL_LOG_SCHEMA_VERSION",
    "DEFAULT_FLUSH_EVERY",
    "DEFAULT_FLUSH_INTERVAL_S",
    "CallCounts",
    "CallLog",
    "CallRecord",
    "recover_journals",
]
