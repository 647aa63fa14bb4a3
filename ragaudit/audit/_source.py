"""Where a day's traffic is read from, and ``read_day``: one redacted ``requests.parquet``.

Every reader (request logs in ``_jsonlog``, OTLP traces in ``_otlp``, UBI in ``_ubi``) yields
one :class:`Request` per served request, or a :class:`Bad` naming the record that did not map
and why; ``read_day`` redacts each request, writes it in bounded batches to a temporary file
beside ``requests.parquet``, and renames it into place only when the day's share of bad
records is within ``max_bad_share``. Nothing but the redacted rows is ever written.
"""

from __future__ import annotations

import datetime as dt
import glob
import hashlib
import json
import math
import os
import tempfile
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import jmespath
import jmespath.exceptions
import pyarrow as pa
import pyarrow.parquet as pq
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from ragaudit.atomic import redact_table
from ragaudit.audit._redact import RedactOptions, Redactor
from ragaudit.audit._segments import NO_SEGMENT, segment_name
from ragaudit.errors import ConfigError, InputError, NoTraffic, clip
from ragaudit.schemas import AUDIT_REQUESTS

_BATCH = 8192  # rows held before a Parquet row group is written: bounds the read's memory
_SAMPLES = 20  # bad records named in the report and the error
_REASON = 200  # characters of a bad record's reason shown


def compile_path(expr: str, where: str) -> Any:
    """A JMESPath expression compiled once; a ConfigError naming ``where`` when it is invalid."""
    try:
        return jmespath.compile(expr)
    except jmespath.exceptions.JMESPathError as exc:
        raise ConfigError(f"{where}: '{clip(expr)}' is not a JMESPath expression ({exc})") from None


Getter = Callable[[Any], Any]


def _plain(node: Mapping[str, Any]) -> Getter | None:
    """A Python function equal to the JMESPath AST ``node``, or None: jmespath evaluates it.

    Only the node types a log mapping mostly uses are translated (fields, dotted paths, ``[*]``
    projections, ``{k: path}`` objects); any other leaves the whole expression to jmespath.

    jmespath interprets its tree node by node, which cost most of a day's read (a million
    records, nine expressions each); these closures give the same values (tested against
    jmespath) at a fraction of the cost.
    """
    kind, children = node["type"], node.get("children") or []
    if kind == "field":
        key = node["value"]
        return lambda v: v.get(key) if isinstance(v, dict) else None
    if kind in ("identity", "current"):
        return lambda v: v
    if kind == "multi_select_dict":
        keys = [c["value"] for c in children]
        values = [_plain(c["children"][0]) for c in children]
        if any(f is None for f in values):
            return None
        pairs = list(zip(keys, values, strict=True))
        return lambda v: None if v is None else {k: f(v) for k, f in pairs}  # type: ignore[misc]
    parts = [_plain(c) for c in children]
    if any(p is None for p in parts):
        return None
    steps = [p for p in parts if p is not None]
    if kind == "subexpression":

        def chain(v: Any) -> Any:
            for step in steps:
                v = step(v)
            return v

        return chain
    if kind == "projection":
        left, right = steps

        def project(v: Any) -> Any:
            base = left(v)
            if not isinstance(base, list):
                return None
            return [r for r in map(right, base) if r is not None]

        return project
    return None


def getter(expr: str, where: str) -> Getter:
    """``expr`` compiled once, as a function of a record (see :func:`_plain`)."""
    compiled = compile_path(expr, where)
    return _plain(compiled.parsed) or compiled.search


class FieldPaths(BaseModel):
    """``audit.source.fields``: a JMESPath expression per normalised field, over one record."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    request_id: str = "request_id"
    """The request's id (required: a record without one does not map)."""
    time: str | None = "time"
    """When it was served: ISO 8601 text, or epoch seconds, milliseconds, µs or ns."""
    session: str | None = "session"
    """The user's session or conversation id."""
    query: str = "query"
    """The question as the user asked it (required)."""
    filters: str | None = "filters"
    """The request's filters (an object: collection, tenant…); stored as JSON."""
    docs: str | None = "docs"
    """The served documents in order: a list of ids, or of objects with ``id`` and optionally
    ``text``, ``content_hash`` and ``score``
    (``"retrieval.hits[*].{id: _id, text: _source.content, score: _score}"``)."""
    answer: str | None = "answer"
    """The answer the service gave."""
    citations: str | None = "citations"
    """What the answer cites (a list; stored as JSON)."""
    feedback: str | None = "feedback"
    """The user's feedback (thumbs, a rating), as text."""

    @model_validator(mode="after")
    def _compile(self) -> FieldPaths:
        for name, expr in self.model_dump().items():
            if expr is not None:
                try:
                    jmespath.compile(expr)
                except jmespath.exceptions.JMESPathError as exc:
                    raise ValueError(f"{name}: '{clip(expr)}' is not JMESPath ({exc})") from None
        return self


class UbiSource(BaseModel):
    """``audit.source.ubi``: OpenSearch User Behavior Insights, read from the indexes."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    hosts: tuple[str, ...] = ("http://127.0.0.1:9200",)
    """Engine URLs holding the UBI indexes (read when ``source.path`` is not set)."""
    queries_index: str = "ubi_queries"
    """The index of UBI queries (``query_id``, ``user_query``, ``query_response_hit_ids``…)."""
    events_index: str = "ubi_events"
    """The index of UBI events (``action_name``, ``query_id``, ``event_attributes``…)."""
    events_path: str | None = None
    """With ``source.path`` (an export of the queries): an export of the events, one JSON
    object a line; ``{day}`` as in ``source.path``."""
    timeout_s: float = Field(default=30.0, gt=0)
    """Per-request timeout against the engine."""


class SourceOptions(BaseModel):
    """``audit.source``: where a day's requests are read from and how their fields map."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    format: Literal["jsonl", "parquet", "otlp", "ubi"] = "jsonl"
    """``jsonl`` / ``parquet``: the service's own request logs, one request per record;
    ``otlp``: OpenTelemetry trace files (the OTLP JSON file exporter's lines); ``ubi``:
    OpenSearch User Behavior Insights (the indexes, or an export file in ``path``)."""
    path: str | None = None
    """Files of one day: ``{day}`` becomes the day (``YYYY-MM-DD``; ``{day:%Y/%m/%d}`` for
    another layout), then a glob (``logs/{day}/*.jsonl``); ``.gz`` files are read as gzip."""
    fields: FieldPaths = FieldPaths()
    """``jsonl`` and ``parquet``: where each normalised field is in a record."""
    ubi: UbiSource = UbiSource()
    """``ubi``: the engine and its indexes."""
    hash_algorithm: str = "sha256"
    """How the service hashed a served text when it logs ``content_hash`` (a hashlib name;
    the hex digest, optionally prefixed ``<algorithm>:``)."""

    @field_validator("hash_algorithm")
    @classmethod
    def _known_hash(cls, name: str) -> str:
        if name not in hashlib.algorithms_available:
            raise ValueError(f"'{clip(name)}' is not a hashlib algorithm")
        return name

    @model_validator(mode="after")
    def _needs_path(self) -> SourceOptions:
        if self.path is None and self.format != "ubi":
            raise ValueError(f"format '{self.format}' reads files: set source.path")
        return self


@dataclass
class Request:
    """One served request as a reader found it (not yet redacted)."""

    request_id: str
    query: str
    origin: str
    time: dt.datetime | None = None
    session: str | None = None
    filters: dict[str, Any] = field(default_factory=dict)
    docs: list[dict[str, Any]] = field(default_factory=list)
    answer: str | None = None
    citations: list[Any] | None = None
    feedback: str | None = None


@dataclass(frozen=True)
class Bad:
    """A record that did not map to a request: where it is and why."""

    origin: str
    reason: str


@dataclass
class ReadReport:
    """What ``read_day`` read."""

    records: int
    """Requests written."""
    bad: int
    """Records that did not map (not written)."""
    bad_samples: list[tuple[str, str]]
    """Some of them: (origin, reason), the first met."""
    redactions: dict[str, int]
    """Replacements made, per kind (``email``, ``phone``, ``card``, a pattern's name)."""
    files: list[str] = field(default_factory=list)
    """The files read (empty when read from an index)."""

    @property
    def bad_share(self) -> float:
        """Bad records over all records met (0 on an empty day)."""
        total = self.records + self.bad
        return self.bad / total if total else 0.0


# ------------------------------------------------------------------------------ coercion


class Unmappable(ValueError):
    """A value of a record cannot be what its field needs; the message says why."""


def as_text(value: Any, name: str, *, required: bool = False) -> str | None:
    """A scalar field as text (numbers and booleans as JSON would write them)."""
    if value is None or value == "":
        if required:
            raise Unmappable(f"no {name}")
        return None
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    raise Unmappable(f"{name} is {type(value).__name__}, not text")


def as_time(value: Any) -> dt.datetime | None:
    """ISO 8601 text, a datetime, or an epoch number (s, ms, µs or ns by magnitude) in UTC."""
    if value is None or value == "":
        return None
    if isinstance(value, dt.datetime):
        t = value
    elif isinstance(value, int | float) and not isinstance(value, bool):
        if not math.isfinite(value):
            raise Unmappable(f"time {value!r} is not a time")
        x = float(value)
        for scale in (1.0, 1e3, 1e6, 1e9):
            if abs(x) < 1e11 * scale:
                t = dt.datetime.fromtimestamp(x / scale, dt.UTC)
                break
        else:
            raise Unmappable(f"time {value!r} is out of range")
    elif isinstance(value, str):
        try:
            t = dt.datetime.fromisoformat(value)
        except ValueError:
            # The value is quoted whole: read_day redacts a reason before it cuts it.
            raise Unmappable(f"time is not ISO 8601: '{value}'") from None
    else:
        raise Unmappable(f"time is {type(value).__name__}")
    return t.replace(tzinfo=dt.UTC) if t.tzinfo is None else t.astimezone(dt.UTC)


def as_docs(value: Any) -> list[dict[str, Any]]:
    """Served documents in order: ids, or objects with ``id`` (and text, content_hash, score)."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise Unmappable(f"docs is {type(value).__name__}, not a list")
    out = []
    for rank, item in enumerate(value, 1):
        if isinstance(item, Mapping):
            doc_id = as_text(item.get("id"), f"id in docs[{rank - 1}]", required=True)
            score = item.get("score")
            if score is not None and (
                isinstance(score, bool) or not isinstance(score, int | float)
            ):
                raise Unmappable(f"score of docs[{rank - 1}] is not a number")
            out.append(
                {
                    "rank": rank,
                    "id": doc_id,
                    "text": as_text(item.get("text"), f"text of docs[{rank - 1}]"),
                    "content_hash": as_text(item.get("content_hash"), "content_hash"),
                    "score": None if score is None else float(score),
                }
            )
        else:
            doc_id = as_text(item, f"docs[{rank - 1}]", required=True)
            out.append(
                {"rank": rank, "id": doc_id, "text": None, "content_hash": None, "score": None}
            )
    return out


def as_object(value: Any, name: str) -> dict[str, Any]:
    """An object field (filters); JSON text holding an object is read."""
    if value is None or value == "":
        return {}
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            raise Unmappable(f"{name} is text, not a JSON object") from None
    if not isinstance(value, Mapping):
        raise Unmappable(f"{name} is {type(value).__name__}, not an object")
    return dict(value)


def as_list(value: Any, name: str) -> list[Any] | None:
    """A list field (citations); JSON text holding a list is read, a scalar is one item."""
    if value is None:
        return None
    if isinstance(value, str):
        try:
            parsed = json.loads(value)
        except ValueError:
            return [value]
        return parsed if isinstance(parsed, list) else [value]
    if isinstance(value, list):
        return value
    if isinstance(value, Mapping):
        raise Unmappable(f"{name} is an object, not a list")
    return [value]


# ------------------------------------------------------------------------------ reading


def day_paths(pattern: str, day: dt.date) -> list[str]:
    """The files of ``day``: ``{day}`` substituted in ``pattern``, then globbed, sorted.

    Raises:
        ConfigError: the pattern has a placeholder other than ``{day}``.
    """
    try:
        resolved = pattern.format(day=day)
    except (KeyError, IndexError, ValueError) as exc:
        raise ConfigError(
            f"audit.source.path '{clip(pattern)}': only {{day}} may be substituted ({exc})"
        ) from None
    return sorted(glob.glob(os.path.expanduser(resolved), recursive=True))


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


def _row(req: Request, segment: str, red: Redactor) -> dict[str, Any]:
    # Every text that reaches the file passes the redactor, ids included: a session id or a
    # document id can be an e-mail address as well as a query can.
    return {
        "request_id": _id(red, req.request_id),
        "time": req.time,
        "session": _id(red, req.session),
        "query": red(req.query),
        "filters": red(_dumps(req.filters)),
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
        "citations": None if req.citations is None else red(_dumps(req.citations)),
        "feedback": red(req.feedback),
        "origin": red(req.origin),
    }


def _records(source: SourceOptions, day: dt.date, files: list[str]) -> Iterator[Request | Bad]:
    # The readers are imported here, not at the top: each pulls in its own format's library
    # (protobuf, opensearch-py), and a day read from JSONL needs none of them.
    if source.format in ("jsonl", "parquet"):
        from ragaudit.audit._jsonlog import read_logs

        return read_logs(files, source.fields, parquet=source.format == "parquet")
    if source.format == "otlp":
        from ragaudit.audit._otlp import read_traces

        return read_traces(files)
    from ragaudit.audit._ubi import read_ubi

    return read_ubi(source.ubi, day, files=files if source.path else None)


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

    Args:
        source: Where the traffic is and how it maps.
        redact: What personal data is replaced before anything is written.
        day: The day whose partition is read (``{day}`` in ``source.path``; UBI by timestamp).
        segment: JMESPath over a request (``filters.collection``); ``(none)`` when it finds nothing.
        out: The Parquet file written (atomically: all of it or nothing).
        max_bad_share: Most share of records that may fail to map before the day fails.

    Returns:
        Counts, some bad records by origin, and the redactions per kind.

    Raises:
        InputError: No file matches the day, or too many records do not map (the message
            names the files and the first bad records).
        ConfigError: ``segment`` or a field expression is invalid.
    """
    seg = getter(segment, "audit.segment")
    files: list[str] = []
    if source.path is not None:
        files = day_paths(source.path, day)
        if not files:
            raise NoTraffic(
                f"audit.source.path: no file matches '{clip(source.path.format(day=day), 200)}' "
                f"for {day.isoformat()}"
            )
    red = Redactor(redact)
    records = bad = 0
    samples: list[tuple[str, str]] = []
    out.parent.mkdir(parents=True, exist_ok=True)
    # A temporary file beside the target, renamed into place at the end: the write is atomic as
    # ragaudit.atomic's are, but streamed row group by row group, so a day of a million
    # requests never sits in memory whole.
    fd, tmp = tempfile.mkstemp(prefix=f".{out.name}.", suffix=".tmp", dir=out.parent)
    os.close(fd)
    try:
        with pq.ParquetWriter(tmp, AUDIT_REQUESTS, compression="zstd") as writer:
            rows: list[dict[str, Any]] = []
            for item in _records(source, day, files):
                if isinstance(item, Bad):
                    bad += 1
                    if len(samples) < _SAMPLES:
                        samples.append((red(item.origin) or "", _reason(red, item.reason)))
                    continue
                rows.append(_row(item, _segment_of(seg, item), red))
                records += 1
                if len(rows) >= _BATCH:
                    _write(writer, rows)
                    rows = []
            if rows:
                _write(writer, rows)
        report = ReadReport(records, bad, samples, dict(sorted(red.counts.items())), files)
        if report.bad_share > max_bad_share:
            raise InputError(_too_many_bad(report, max_bad_share))
        os.replace(tmp, out)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return report


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


__all__ = [
    "Bad",
    "FieldPaths",
    "ReadReport",
    "Request",
    "SourceOptions",
    "UbiSource",
    "Unmappable",
    "as_docs",
    "as_list",
    "as_object",
    "as_text",
    "as_time",
    "compile_path",
    "day_paths",
    "getter",
    "read_day",
]
