"""The labels store: what people said about a run's items, one Parquet file beside its tables.

``<run>/labels.parquet`` (schema ``schemas.LABELS``) holds one row per label, appended. Each
append rewrites the file atomically under a lock, so a killed server loses at most the label
being written and two writers (two annotators' tabs, two servers) never lose each other's rows.
Labels are small (hundreds to a few thousand rows), so a whole-file rewrite stays cheap.
"""

from __future__ import annotations

import datetime as dt
import fcntl
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow as pa

from ragaudit import atomic, schemas
from ragaudit.runfolder import read_parquet_file

FILE = "labels.parquet"
_LOCK = ".labels.lock"
# One writer per process as well as per file: flock is per open file description, and two
# threads of one server would otherwise each hold "the" lock.
_THREAD_LOCK = threading.Lock()


def item_id(kind: str, question_id: str, candidate_id: str | None = None) -> str:
    """The id of a labelled item: a candidate's grade or an answer's metric verdict."""
    return f"{kind}:{question_id}" + (f":{candidate_id}" if candidate_id is not None else "")


@contextmanager
def _locked(run_dir: Path) -> Iterator[None]:
    with _THREAD_LOCK, open(run_dir / _LOCK, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def read_labels(run_dir: Path) -> pa.Table:
    """Every label row of the run (an empty table of the schema when there are none)."""
    path = Path(run_dir) / FILE
    if not path.exists():
        return schemas.LABELS.empty_table()
    return read_parquet_file(path)


def append_labels(run_dir: Path, rows: list[dict[str, Any]]) -> None:
    """Append label rows (``time`` defaults to now, UTC) to the run's store, atomically."""
    run_dir = Path(run_dir)
    now = dt.datetime.now(dt.UTC)
    new = schemas.to_table([{"time": now, **row} for row in rows], schemas.LABELS)
    with _locked(run_dir):
        table = pa.concat_tables([read_labels(run_dir).cast(schemas.LABELS), new])
        atomic.write_table(table, run_dir / FILE)


def latest_labels(table: pa.Table) -> pa.Table:
    """One row per (item, annotator): the latest label each person gave each item."""
    frame = pl.from_arrow(table)
    assert isinstance(frame, pl.DataFrame)
    latest = frame.sort("time").unique(subset=["item_id", "annotator"], keep="last")
    return latest.sort(["item_id", "annotator"]).to_arrow().cast(schemas.LABELS)
