"""Where a day's traffic is read from, and ``read_day``: one redacted ``requests.parquet``.

``audit.source.format`` names a registered reader (``ragaudit.registry.READERS``: request logs
in ``_jsonlog``, OTLP traces in ``_otlp``, UBI in ``_ubi``, or a plugin's), found by name, never
imported here. It yields one :class:`Request` per served request, or a :class:`Bad` naming the
record that did not map and why; ``read_day`` bounds each request's size, keeps the day's own
requests (in its window, each id once), redacts them and writes them in bounded batches to a
temporary file beside ``requests.parquet``, renamed into place only when the day's share of bad
records is within ``max_bad_share``. Nothing but the redacted rows is ever written.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import zoneinfo
from dataclasses import dataclass, field
from operator import itemgetter
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from ragaudit._audit_config import RedactOptions, SourceOptions
from ragaudit.atomic import atomic_path, redact_table
from ragaudit.audit._records import Bad, Getter, Partition, Request, day_paths, getter
from ragaudit.audit._redact import Redactor
from ragaudit.audit._segments import NO_SEGMENT, segment_name
from ragaudit.errors import InputError, NoTraffic, clip
from ragaudit.schemas import AUDIT_REQUESTS

_BATCH = 8192  # rows held before a Parquet row group is written: bounds the read's memory
_SAMPLES = 20  # bad records named in the report and the error
_REASON = 200  # characters of a bad record's reason shown


def partition_of(source: SourceOptions, day: dt.date, files: list[str]) -> Partition:
    """``day`` as its reader reads it: the files, the window in ``source.timezone``."""
    zone = zoneinfo.ZoneInfo(source.timezone)
    start, end = (
        # In UTC, as a reader's times are: compared without converting each one.
        dt.datetime.combine(d, dt.time(), zone).astimezone(dt.UTC)
        for d in (day, day + dt.timedelta(days=1))
    )
    return Partition(day, files, start, end, source.max_record_bytes, source.timezone)


@dataclass
class ReadReport:
    """What ``read_day`` read."""

    records: int
    """Requests written."""
    bad: int
    """Records that did not map, or too large (not written)."""
    bad_samples: list[tuple[str, str]]
    """Some of them: (origin, reason), the first met."""
    redactions: dict[str, int]
    """Replacements made, per kind (``email``, ``phone``, ``card``, a pattern's name)."""
    files: list[str] = field(default_factory=list)
    """The files read (empty when read from an index)."""
    duplicates: int = 0
    """Requests whose id was read before that day (not written: the first one is kept). The
    same log file twice in the day's folder doubles every id."""
    off_day: int = 0
    """Requests timestamped outside the day (not written: they are another day's)."""
    dropped_samples: list[tuple[str, str]] = field(default_factory=list)
    """Some duplicates and off-day requests: (origin, why), the first met."""

    @property
    def bad_share(self) -> float:
        """Bad records over all records met (0 on an empty day)."""
        total = self.records + self.bad
        return self.bad / total if total else 0.0

    @property
    def notes(self) -> list[str]:
        """What was read but left out as not the day's own, in words (empty when nothing)."""
        out = []
        if self.duplicates:
            out.append(
                f"{self.duplicates:,} of the requests read had an id read before that day: left "
                "out (the first kept); is a log file read twice?"
            )
        if self.off_day:
            out.append(
                f"{self.off_day:,} of the requests read were timestamped outside the day: left "
                "out (audit.source.timezone sets the day's zone)"
            )
        return out

    def summary(self) -> dict[str, Any]:
        """The report as the manifest and the CLI keep it."""
        return {
            "records": self.records,
            "bad": self.bad,
            "bad_samples": [list(b) for b in self.bad_samples][:_SAMPLES],
            "redactions": dict(self.redactions),
            "duplicates": self.duplicates,
            "off_day": self.off_day,
            "dropped_samples": [list(b) for b in self.dropped_samples][:_SAMPLES],
            "notes": self.notes,
        }


# ------------------------------------------------------------------------------ reading


def _segment_of(expr: Any, req: Request) -> str:
    view = {
        "request_id": req.request_id,
        "session": req.session,
        "query": req.query,
        "filters": req.filters,
        "answer": req.answer,
        "feedback": req.feedback,
    }
    value = expr(view)
    if value is None or value == "" or value == []:
        return NO_SEGMENT
    return segment_name(value if isinstance(value, str) else json.dumps(value, ensure_ascii=False))


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)


def _id(red: Redactor, value: str | None) -> str | None:
    """An id through the redactor: one it would change becomes a hash of itself instead.

    An id that looks like personal data (an e-mail as a session id) must not land as it is, but
    a placeholder would make many ids one (``2026-11-01-000001`` reads as a phone number):
    requests would collide in the sample and documents in the store. A hash keeps them apart
    and joinable, and says nothing of what was hashed beyond equality.
    """
    if value is None:
        return None
    if red(value) == value:
        return value
    return "id:" + hashlib.blake2b(value.encode("utf-8"), digest_size=12).hexdigest()


def _size_over(req: Request, filters: str, citations: str | None, limit: int) -> int | None:
    """The request's texts in UTF-8 bytes when they pass ``limit``; None when they do not."""
    texts = [req.request_id, req.query, req.session, req.answer, req.feedback, filters, citations]
    texts += map(itemgetter("id"), req.docs)
    texts += map(itemgetter("text"), req.docs)
    present = list(filter(None, texts))
    if 4 * sum(map(len, present)) <= limit:  # a character is at most 4 UTF-8 bytes: no encoding
        return None
    size = sum(len(t.encode("utf-8")) for t in present)
    return size if size > limit else None


def _row(
    req: Request, segment: str, red: Redactor, filters: str, citations: str | None
) -> dict[str, Any]:
    # Every text that reaches the file passes the redactor, ids included: a session id or a
    # document id can be an e-mail address as well as a query can.
    return {
        "request_id": _id(red, req.request_id),
        "time": req.time,
        "session": _id(red, req.session),
        "query": red(req.query),
        "filters": red(filters),
        "segment": red(segment),
        "docs": [
            {
                **d,
                "id": _id(red, d["id"]),
                "text": red(d["text"]),
                "content_hash": d["content_hash"],
            }
            for d in req.docs
        ],
        "answer": red(req.answer),
        "citations": red(citations),
        "feedback": red(req.feedback),
        "origin": red(req.origin),
    }


def read_day(
    source: SourceOptions,
    redact: RedactOptions,
    day: dt.date,
    *,
    segment: str,
    out: Path,
    max_bad_share: float,
) -> ReadReport:
    """Read ``day``'s requests from ``source`` into ``out`` (``requests.parquet``), redacted.

    A request larger than ``source.max_record_bytes`` is a bad record. A request timestamped
    outside the day (in ``source.timezone``), or whose id was read before that day, is left out
    and counted (``off_day``, ``duplicates``): the day holds its own requests, each once.

    Args:
        source: Where the traffic is, which reader reads it and with what options.
        redact: What personal data is replaced before anything is written.
        day: The day whose partition is read (``{day}`` in ``source.path``; UBI by timestamp).
        segment: JMESPath over a request (``filters.collection``); ``(none)`` when it finds nothing.
        out: The Parquet file written (atomically: all of it or nothing).
        max_bad_share: Most share of records that may fail to map before the day fails.

    Returns:
        Counts, some bad and left-out records by origin, and the redactions per kind.

    Raises:
        NoTraffic: No file matches the day, or every request read is another day's or read
            before (the day's logs may still arrive).
        InputError: Too many records do not map (the message names the files and the first
            bad records).
        ConfigError: ``segment`` or a field expression is invalid.
    """
    seg = getter(segment, "audit.segment")
    read = source.reader().read
    files: list[str] = []
    if source.path is not None:
        files = day_paths(source.path, day)
        if not files:
            raise NoTraffic(
                f"audit.source.path: no file matches '{clip(source.path.format(day=day), 200)}' "
                f"for {day.isoformat()}"
            )
    part = partition_of(source, day, files)
    red = Redactor(redact)
    report = ReadReport(0, 0, [], {}, files)
    seen: set[str] = set()
    # Streamed row group by row group into a temporary file renamed into place at the end, so
    # a day of a million requests never sits in memory whole.
    with atomic_path(out) as tmp, pq.ParquetWriter(tmp, AUDIT_REQUESTS, compression="zstd") as w:
        rows: list[dict[str, Any]] = []
        for item in read(source.options, part):
            if isinstance(item, Request):
                why = _left_out(item, part, seen, report)
                if why is not None:
                    if len(report.dropped_samples) < _SAMPLES:
                        report.dropped_samples.append((red(item.origin) or "", _reason(red, why)))
                    continue
                row = _stored(item, seg, red, source.max_record_bytes)
                if not isinstance(row, Bad):
                    seen.add(item.request_id)
                    rows.append(row)
                    report.records += 1
                    if len(rows) >= _BATCH:
                        _write(w, rows)
                        rows = []
                    continue
                item = row
            report.bad += 1
            if len(report.bad_samples) < _SAMPLES:
                report.bad_samples.append((red(item.origin) or "", _reason(red, item.reason)))
        if rows:
            _write(w, rows)
        report.redactions = dict(sorted(red.counts.items()))
        if report.bad_share > max_bad_share:
            raise InputError(_too_many_bad(report, max_bad_share))
        if not report.records and (report.off_day or report.duplicates):
            raise NoTraffic(_none_of_the_day(report, part))
    return report


def _left_out(req: Request, part: Partition, seen: set[str], report: ReadReport) -> str | None:
    """Why ``req`` is not one of the day's own requests (counted in ``report``), or None."""
    if req.time is not None and not part.start <= req.time < part.end:
        report.off_day += 1
        return f"timestamped {req.time.isoformat()}, outside {part.day.isoformat()} ({part.zone})"
    if req.request_id in seen:
        report.duplicates += 1
        return "its request id was read before that day (the first kept)"
    return None


def _stored(req: Request, seg: Getter, red: Redactor, limit: int) -> dict[str, Any] | Bad:
    """The request's row as written, or why it cannot be: too large, or nested too deeply."""
    try:
        filters = _dumps(req.filters)
        citations = None if req.citations is None else _dumps(req.citations)
        segment = _segment_of(seg, req)
    except RecursionError:  # a value nested deeper than JSON text can be made of here
        return Bad(req.origin, "filters, citations or segment nested too deeply to store")
    size = _size_over(req, filters, citations, limit)
    if size is not None:
        return Bad(
            req.origin,
            f"{size:,} bytes of text, more than audit.source.max_record_bytes {limit:,}",
        )
    return _row(req, segment, red, filters, citations)


def _reason(red: Redactor, reason: str) -> str:
    """A bad record's reason redacted, then cut: a card cut first no longer passes its check.

    Only a prefix is redacted (a megabyte of value stays cheap), long enough past the cut that
    whatever is shown was redacted whole.
    """
    return clip(red(reason[: _REASON + 1000]) or "", _REASON)


def _write(writer: pq.ParquetWriter, rows: list[dict[str, Any]]) -> None:
    table = pa.Table.from_pylist(rows, schema=AUDIT_REQUESTS)
    writer.write_table(redact_table(table))


def _too_many_bad(report: ReadReport, limit: float) -> str:
    where = sorted({origin.rsplit(":", 1)[0] for origin, _ in report.bad_samples})
    shown = "; ".join(f"{o}: {r}" for o, r in report.bad_samples[:5])
    return (
        f"{report.bad:,} of {report.records + report.bad:,} records "
        f"({report.bad_share:.1%}) do not map, more than audit.max_bad_share {limit:.1%}; "
        f"in {', '.join(where[:5])}{' …' if len(where) > 5 else ''}; first: {shown}"
    )


def _none_of_the_day(report: ReadReport, part: Partition) -> str:
    origin, why = report.dropped_samples[0]
    return (
        f"no request of {part.day.isoformat()} was read: {report.off_day:,} timestamped outside "
        f"the day, {report.duplicates:,} read before; first: {origin}: {why}"
    )


__all__ = [
    "ReadReport",
    "SourceOptions",
    "read_day",
]
