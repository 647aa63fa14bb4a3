"""One row per model call (cache hits included), kept in memory and flushed to Parquet."""

from __future__ import annotations

import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import pyarrow as pa

CALL_LOG_SCHEMA_VERSION = 1

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
    ],
    metadata={"schema_version": str(CALL_LOG_SCHEMA_VERSION), "table": "llm_calls"},
)


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


class CallLog:
    """Thread-safe in-memory call log with counters; ``flush`` writes and empties it."""

    def __init__(self) -> None:
        self._rows: list[CallRecord] = []
        self._lock = threading.Lock()
        self.counts = CallCounts()

    def add(self, record: CallRecord) -> None:
        """Record one call."""
        with self._lock:
            self._rows.append(record)
            self.counts.calls += 1
            if record.cache_hit:
                self.counts.cache_hits += 1
            else:
                # A call that failed before any provider answered still reached the provider.
                self.counts.provider_calls += 1

    def rows(self) -> list[CallRecord]:
        """A copy of the rows not flushed yet."""
        with self._lock:
            return list(self._rows)

    def flush(self, path: Path, stage: str | None = None) -> int:
        """Write the pending rows (of ``stage``, or all) atomically to ``path``; count them."""
        from ragaudit.runfolder import write_table

        with self._lock:
            rows = [r for r in self._rows if stage is None or r.stage == stage]
            self._rows = [r for r in self._rows if not (stage is None or r.stage == stage)]
        if not rows:
            return 0
        table = pa.Table.from_pylist([asdict(r) for r in rows], schema=CALL_LOG_SCHEMA)
        write_table(table, path)
        return len(rows)


__all__ = ["CALL_LOG_SCHEMA", "CALL_LOG_SCHEMA_VERSION", "CallCounts", "CallLog", "CallRecord"]
