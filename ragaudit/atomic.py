"""Atomic file writes with every known secret redacted: what the run folder and the call log share.

Every write goes to a temporary file in the target's folder and is renamed into place, so a
crash never leaves a half-written file behind; every string on its way to disk passes through
the registered secrets first.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ragaudit.secrets import known_secrets, redact


def _atomic_target(path: Path) -> tuple[int, str]:
    path.parent.mkdir(parents=True, exist_ok=True)
    return tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)


@contextmanager
def atomic_path(path: Path) -> Iterator[Path]:
    """A temporary path beside ``path`` for a writer that wants a file name (a workbook, Parquet).

    Renamed into place when the block ends, removed when it raises: the caller's writer
    redacts what it writes (text goes through :func:`redact` or :func:`redact_table` first).
    """
    fd, tmp = _atomic_target(path)
    os.close(fd)
    try:
        yield Path(tmp)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_bytes(data: bytes, path: Path) -> None:
    """Write ``data`` to ``path`` atomically."""
    fd, tmp = _atomic_target(path)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_json(obj: Any, path: Path) -> None:
    """Write ``obj`` as indented UTF-8 JSON, atomically, with every known secret redacted."""
    text = json.dumps(obj, indent=2, ensure_ascii=False, default=str)
    # Redacting the rendered text keeps it valid JSON: a secret never holds a quote or a
    # backslash that JSON would escape (were one to, its escaped form is not matched).
    write_bytes(redact(text).encode("utf-8"), path)


def _redact_array(array: pa.Array, secrets: list[str]) -> pa.Array:
    if pa.types.is_string(array.type) or pa.types.is_large_string(array.type):
        for secret in secrets:
            if pc.any(pc.match_substring(array, secret)).as_py():
                array = pc.replace_substring(array, pattern=secret, replacement="***")
        return array
    if pa.types.is_list(array.type) or pa.types.is_large_list(array.type):
        values = _redact_array(array.values, secrets)
        if values is array.values:
            return array
        return type(array).from_arrays(array.offsets, values, mask=array.is_null())
    return array


def redact_table(table: pa.Table) -> pa.Table:
    """``table`` with every known secret in its string (and list-of-string) columns as ``***``.

    Every table of a run folder passes here on its way to disk, so no producer of provider or
    server text (a score's reasons, a verdict's error, a retrieval failure, a call log) can
    forget to redact it.
    """
    secrets = sorted(known_secrets(), key=len, reverse=True)
    if not secrets:
        return table
    for i, column in enumerate(table.columns):
        chunks = [_redact_array(chunk, secrets) for chunk in column.chunks]
        if any(new is not old for new, old in zip(chunks, column.chunks, strict=True)):
            table = table.set_column(
                i, table.schema.field(i), pa.chunked_array(chunks, type=column.type)
            )
    return table


def write_table(table: pa.Table, path: Path) -> None:
    """Write a Parquet table atomically (zstd-compressed), with every known secret redacted."""
    table = redact_table(table)
    with atomic_path(path) as tmp:
        pq.write_table(table, tmp, compression="zstd")


__all__ = ["atomic_path", "redact_table", "write_bytes", "write_json", "write_table"]
