"""The service's own request logs, JSONL or Parquet, one request per record, any layout.

Each normalised field is a JMESPath expression over the record (``audit.source.fields``), so a
team maps its log as it is instead of reshaping it. Reading is streamed: JSONL line by line,
Parquet in pyarrow record batches, so memory stays bounded by a batch however long the day.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterable, Iterator, Mapping
from typing import IO, Any, cast

import pyarrow.parquet as pq

from ragaudit.audit._source import (
    Bad,
    FieldPaths,
    Request,
    Unmappable,
    as_docs,
    as_list,
    as_object,
    as_text,
    as_time,
    compile_path,
)
from ragaudit.errors import InputError, clip, os_error_message

_PARQUET_BATCH = 4096


class Mapper:
    """The fields' compiled expressions, applied to one record at a time."""

    def __init__(self, fields: FieldPaths) -> None:
        """Compile every expression once (a ConfigError names the field)."""
        self._paths = {
            name: compile_path(expr, f"audit.source.fields.{name}")
            for name, expr in fields.model_dump().items()
            if expr is not None
        }

    def _get(self, name: str, record: Mapping[str, Any]) -> Any:
        path = self._paths.get(name)
        return None if path is None else path.search(record)

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


def open_text(path: str) -> IO[bytes]:
    """A log file for reading as bytes, through gzip when it ends in ``.gz``."""
    try:
        if path.endswith(".gz"):
            return cast(IO[bytes], gzip.open(path, "rb"))
        return open(path, "rb")  # noqa: SIM115  (the caller closes it)
    except OSError as exc:
        raise InputError(os_error_message(exc, path)) from None


def json_lines(path: str) -> Iterator[tuple[int, Any | Bad]]:
    """Each non-blank line of ``path`` with its number: the parsed JSON, or a Bad naming it."""
    with open_text(path) as fh:
        try:
            for lineno, raw in enumerate(fh, 1):
                if not raw.strip():
                    continue
                try:
                    yield lineno, json.loads(raw)
                except ValueError as exc:
                    yield lineno, Bad(f"{path}:{lineno}", f"not JSON ({clip(str(exc), 60)})")
        except (OSError, EOFError) as exc:  # a truncated gzip member, a read error
            raise InputError(f"{path}: cannot be read to its end ({exc})") from None


def _jsonl(path: str, mapper: Mapper) -> Iterator[Request | Bad]:
    for lineno, value in json_lines(path):
        yield value if isinstance(value, Bad) else mapper.request(value, f"{path}:{lineno}")


def _parquet(path: str, mapper: Mapper) -> Iterator[Request | Bad]:
    try:
        pf = pq.ParquetFile(path)
    except Exception as exc:  # pyarrow raises several types for a file that is not Parquet
        raise InputError(f"{path}: not a readable Parquet file ({clip(str(exc), 120)})") from None
    row = 0
    for batch in pf.iter_batches(batch_size=_PARQUET_BATCH):
        for record in batch.to_pylist():
            row += 1
            yield mapper.request(record, f"{path}:{row}")


def read_logs(
    files: Iterable[str], fields: FieldPaths, *, parquet: bool
) -> Iterator[Request | Bad]:
    """Every record of ``files`` in order, as a request or a Bad.

    A record's origin is ``<file>:<line>``; a Parquet file's row number counts from 1.
    """
    mapper = Mapper(fields)
    for path in files:
        yield from (_parquet if parquet else _jsonl)(path, mapper)


__all__ = ["Mapper", "json_lines", "open_text", "read_logs"]
