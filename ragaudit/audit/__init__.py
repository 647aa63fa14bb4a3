"""The production audit: a day of real traffic read, sampled, judged and estimated.

``read_day`` turns a day's request logs (JSONL or Parquet mapped with JMESPath), OpenTelemetry
trace files or OpenSearch UBI into one redacted ``requests.parquet``; ``resolve_texts`` fills
the texts of documents logged by id and flags those whose content changed since served.
"""

from ragaudit.audit._content import content_digest, resolve_texts
from ragaudit.audit._redact import RedactOptions, Redactor, RedactPattern
from ragaudit.audit._source import (
    NO_SEGMENT,
    FieldPaths,
    ReadReport,
    SourceOptions,
    UbiSource,
    day_paths,
    read_day,
)

__all__ = [
    "NO_SEGMENT",
    "FieldPaths",
    "ReadReport",
    "RedactOptions",
    "RedactPattern",
    "Redactor",
    "SourceOptions",
    "UbiSource",
    "content_digest",
    "day_paths",
    "read_day",
    "resolve_texts",
]
