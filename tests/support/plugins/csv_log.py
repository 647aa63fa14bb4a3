"""An audit reader in one plugin module: a service's request log exported as CSV.

It is what a user's own reader looks like: a function registered under a format name with
``ragaudit.audit.reader``, its options a typed model (``audit.source.options`` in the config),
reading the day's files it is given and yielding a request, or a ``Bad`` naming the row that did
not map, for each row. The columns are found with JMESPath like the built-in logs' fields; the
served documents are one column of ids joined by ``docs_separator``.
"""

from __future__ import annotations

import csv
from collections.abc import Iterator

from pydantic import BaseModel, ConfigDict, Field

from ragaudit.audit import Bad, FieldPaths, Mapper, Partition, Request, reader


class CsvOptions(BaseModel):
    """Options of the CSV reader."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    delimiter: str = Field(default=",", min_length=1, max_length=1)
    """The character between columns."""
    docs_separator: str = Field(default="|", min_length=1)
    """The text between the served documents' ids in the ``docs`` column."""
    fields: FieldPaths = FieldPaths()
    """The column (a JMESPath expression over the row) of each normalised field."""


@reader("csv", options=CsvOptions)
def read_csv(options: CsvOptions, part: Partition) -> Iterator[Request | Bad]:
    """Every row of the day's CSV files, as a request or a Bad (``<file>:<line>``)."""
    mapper = Mapper(options.fields)
    docs = options.fields.docs
    for path in part.files:
        with open(path, encoding="utf-8", newline="") as fh:
            rows = csv.DictReader(fh, delimiter=options.delimiter)
            for row in rows:
                origin = f"{path}:{rows.line_num}"
                record: dict[str, object] = dict(row)
                if docs and isinstance(record.get(docs), str):
                    record[docs] = [d for d in str(record[docs]).split(options.docs_separator) if d]
                yield mapper.request(record, origin)
