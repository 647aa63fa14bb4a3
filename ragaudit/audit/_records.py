"""What a log reader yields and the helpers it maps a record with: a reader's whole vocabulary.

A reader is a function registered under a format name with :func:`reader` (in
``ragaudit.registry.READERS``), its options a frozen pydantic model (``audit.source.options``).
Given its options and the day's :class:`Partition`, it yields one :class:`Request` per served
request, or a :class:`Bad` naming a record that did not map and why. The built-in readers
(``_jsonlog``, ``_otlp``, ``_ubi``) register exactly as a plugin's reader does, and import only
this module: ``read_day`` (``_source``) finds them through the registry.
"""

from __future__ import annotations

import datetime as dt
import glob
import json
import math
import os
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

import jmespath
import jmespath.exceptions
from pydantic import BaseModel, ConfigDict, model_validator

from ragaudit.dataset import BadLine, iter_jsonl
from ragaudit.errors import ConfigError, clip
from ragaudit.registry import READERS

F = TypeVar("F", bound=Callable[..., Iterable[Any]])


# ------------------------------------------------------------------- what a reader yields


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


@dataclass(frozen=True)
class Partition:
    """The day a reader reads: its date, its files and its window."""

    day: dt.date
    files: list[str]
    """The files ``audit.source.path`` names for the day, sorted (empty when it is not set)."""
    start: dt.datetime
    """The day's first instant in ``zone``, in UTC."""
    end: dt.datetime
    """The next day's first instant, in UTC: the day is [start, end)."""
    max_record_bytes: int
    """``audit.source.max_record_bytes``: a reader whose lines are records passes it to
    :func:`json_records`, so an over-long line is refused unread."""
    zone: str = "UTC"
    """``audit.source.timezone``: the zone whose calendar day the day is."""


ReadFunction = Callable[[Any, Partition], Iterable["Request | Bad"]]


@dataclass(frozen=True)
class Reader:
    """A registered log format: the function that reads a day of it, and what it needs."""

    read: ReadFunction
    """``read(options, partition)``: the day's requests, or the records that did not map."""
    needs_path: bool = True
    """Whether it reads the files ``audit.source.path`` names (False: it can read a day from
    elsewhere, as UBI from its indexes, and reads files only when a path is given)."""


def reader(
    name: str, *, options: type[BaseModel] | None = None, needs_path: bool = True
) -> Callable[[F], F]:
    """Decorator: register the decorated ``read(options, partition)`` as log format ``name``.

    ``options`` is its frozen pydantic options model (``audit.source.options``, checked when
    the config loads); without one the format takes no options. A plugin's module registers its
    readers this way, as the built-in ones do.
    """

    def deco(read: F) -> F:
        READERS.add(name, Reader(read, needs_path), options, module=read.__module__)
        return read

    return deco


class Unmappable(ValueError):
    """A value of a record cannot be what its field needs; the message says why."""


# ------------------------------------------------------------------------------ JMESPath


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
    """Where each normalised field is in a record: a JMESPath expression per field."""

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


# ------------------------------------------------------------------------------ coercion


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
    """ISO 8601 text, a datetime, or an epoch number (s, ms, µs or ns by magnitude) in UTC.

    A time Python cannot hold in UTC (``0001-01-01T00:00:00+01:00``, an epoch before year 1)
    does not map, like any other value that is not a time.
    """
    if value is None or value == "":
        return None
    try:
        t = _datetime(value)
        return t.replace(tzinfo=dt.UTC) if t.tzinfo is None else t.astimezone(dt.UTC)
    except Unmappable:
        raise
    except (OverflowError, ValueError, OSError) as exc:
        # Quoted whole, as above.
        shown = f"'{value}'" if isinstance(value, str) else repr(value)
        raise Unmappable(f"time {shown} is out of range ({exc})") from None


def _datetime(value: Any) -> dt.datetime:
    if isinstance(value, dt.datetime):
        return value
    if isinstance(value, int | float) and not isinstance(value, bool):
        if not math.isfinite(value):
            raise Unmappable(f"time {value!r} is not a time")
        x = float(value)
        for scale in (1.0, 1e3, 1e6, 1e9):
            if abs(x) < 1e11 * scale:
                return dt.datetime.fromtimestamp(x / scale, dt.UTC)
        raise Unmappable(f"time {value!r} is out of range")
    if isinstance(value, str):
        try:
            return dt.datetime.fromisoformat(value)
        except ValueError:
            # The value is quoted whole: read_day redacts a reason before it cuts it.
            raise Unmappable(f"time is not ISO 8601: '{value}'") from None
    raise Unmappable(f"time is {type(value).__name__}")


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


_DEEP = "is JSON nested too deeply to read"


def as_object(value: Any, name: str) -> dict[str, Any]:
    """An object field (filters); JSON text holding an object is read."""
    if value is None or value == "":
        return {}
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except RecursionError:
            raise Unmappable(f"{name} {_DEEP}") from None
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
        except RecursionError:
            raise Unmappable(f"{name} {_DEEP}") from None
        except ValueError:
            return [value]
        return parsed if isinstance(parsed, list) else [value]
    if isinstance(value, list):
        return value
    if isinstance(value, Mapping):
        raise Unmappable(f"{name} is an object, not a list")
    return [value]


class Mapper:
    """A record's fields found by their compiled expressions (:class:`FieldPaths`)."""

    def __init__(self, fields: FieldPaths, where: str = "audit.source.options.fields") -> None:
        """Compile every expression once (a ConfigError names the field)."""
        self._paths = {
            name: getter(expr, f"{where}.{name}")
            for name, expr in fields.model_dump().items()
            if expr is not None
        }

    def _get(self, name: str, record: Mapping[str, Any]) -> Any:
        path = self._paths.get(name)
        return None if path is None else path(record)

    def request(self, record: Any, origin: str) -> Request | Bad:
        """``record`` as a request, or why it does not map."""
        if not isinstance(record, Mapping):
            return Bad(origin, f"a {type(record).__name__}, not an object")
        try:
            return Request(
                request_id=as_text(self._get("request_id", record), "request_id", required=True)
                or "",
                query=as_text(self._get("query", record), "query", required=True) or "",
                origin=origin,
                time=as_time(self._get("time", record)),
                session=as_text(self._get("session", record), "session"),
                filters=as_object(self._get("filters", record), "filters"),
                docs=as_docs(self._get("docs", record)),
                answer=as_text(self._get("answer", record), "answer"),
                citations=as_list(self._get("citations", record), "citations"),
                feedback=as_text(self._get("feedback", record), "feedback"),
            )
        except Unmappable as exc:
            return Bad(origin, str(exc))


# ------------------------------------------------------------------------------ files


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


def json_records(
    files: Iterable[str], *, max_line_bytes: int | None = None
) -> Iterator[tuple[str, Any]]:
    """Each JSON line of ``files`` with its origin ``<file>:<line>``; a Bad where it holds none.

    Read by :func:`ragaudit.dataset.iter_jsonl` (gzip by the ``.gz`` name): a line that is not
    JSON, nested too deeply or longer than ``max_line_bytes``, and the unreadable rest of a
    truncated file, are each one Bad; the reading goes on.
    """
    for path in files:
        for lineno, value in iter_jsonl(path, bad="yield", max_line_bytes=max_line_bytes):
            origin = f"{path}:{lineno}"
            yield origin, Bad(origin, value.reason) if isinstance(value, BadLine) else value


__all__ = [
    "Bad",
    "FieldPaths",
    "Getter",
    "Mapper",
    "Partition",
    "ReadFunction",
    "Reader",
    "Request",
    "Unmappable",
    "as_docs",
    "as_list",
    "as_object",
    "as_text",
    "as_time",
    "compile_path",
    "day_paths",
    "getter",
    "json_records",
    "reader",
]
