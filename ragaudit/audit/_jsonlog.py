"""The service's own request logs, JSONL or Parquet, one request per record, any layout.

Each normalised field is a JMESPath expression over the record (``audit.source.options.fields``),
so a team maps its log as it is instead of reshaping it. Reading is streamed: JSONL line by line
(``ragaudit.dataset.iter_jsonl``, gzip by the ``.gz`` name), Parquet in pyarrow record batches,
so memory stays bounded by a batch however long the day.
"""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow.parquet as pq
from pydantic import BaseModel, ConfigDict

from ragaudit.audit._records import (
    Bad,
    FieldPaths,
    Mapper,
    Partition,
    Request,
    json_records,
    reader,
)
from ragaudit.errors import InputError, clip

_PARQUET_BATCH = 4096


class LogOptions(BaseModel):
    """Options of the ``jsonl`` and ``parquet`` readers: where each field is in a record."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    fields: FieldPaths = FieldPaths()
    """A JMESPath expression per normalised field, over one record."""


@reader("jsonl", options=LogOptions)
def read_jsonl(options: LogOptions, part: Partition) -> Iterator[Request | Bad]:
    """Every line of the day's JSONL files in order, as a request or a Bad (``<file>:<line>``).

    A line longer than ``audit.source.max_record_bytes`` is a Bad, refused unread.
    """
    mapper = Mapper(options.fields)
    for origin, value in json_records(part.files, max_line_bytes=part.max_record_bytes):
        yield value if isinstance(value, Bad) else mapper.request(value, origin)


@reader("parquet", options=LogOptions)
def read_parquet(options: LogOptions, part: Partition) -> Iterator[Request | Bad]:
    """Every row of the day's Parquet files in order, as a request or a Bad.

    A row's origin is ``<file>:<row>``, the row counted from 1.
    """
    mapper = Mapper(options.fields)
    for path in part.files:
        try:
            pf = pq.ParquetFile(path)
        except Exception as exc:  # pyarrow raises several types for a file that is not Parquet
            raise InputError(
                f"{path}: not a readable Parquet file ({clip(str(exc), 120)})"
            ) from None
        row = 0
        for batch in pf.iter_batches(batch_size=_PARQUET_BATCH):
            for record in batch.to_pylist():
                row += 1
                yield mapper.request(record, f"{path}:{row}")


__all__ = ["LogOptions", "read_jsonl", "read_parquet"]
