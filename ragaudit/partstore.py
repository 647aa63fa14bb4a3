"""An append-only table kept as Parquet part files in one folder, written under one lock.

The design every cross-run or multi-writer store of ragaudit shares (the judgment store, and
the labels and audit stores as they grow): each append is one new part file, written
atomically (temp file + rename, :mod:`ragaudit.atomic`) under the folder's lock
(:func:`ragaudit.runlock.file_lock`), so

- a writer never rewrites what others wrote, and an append costs its own rows only;
- a reader that looks something up and then writes what it did not find can hold the lock
  across both (:meth:`PartStore.lock`), so two processes never pay for the same row twice;
- a reader is tolerant: a part that cannot be read (a disk fault, a copy cut short) is
  reported by name and skipped, its rows only lost; a part whose columns are not the store's
  (a hand edit, another tool's file) is refused in one line naming it, since reading it as the
  store's would give wrong rows.

Parts are read in name order, which is write order: a name starts with the nanosecond clock.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from collections.abc import AsyncIterator, Collection, Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from ragaudit.atomic import write_table
from ragaudit.errors import InputError
from ragaudit.runlock import afile_lock, file_lock

_log = logging.getLogger(__name__)

LOCK_NAME = ".lock"
"""The lock file inside a store's folder."""


class ForeignPart(InputError):
    """A part file whose columns are not the store's schema."""


class PartStore:
    """Part files ``<prefix>-*.parquet`` of one ``schema`` in ``folder``.

    Args:
        folder: The store's folder (created on the first append).
        schema: The columns every part holds.
        prefix: The part files' name prefix (several stores may share a folder).
        added: Columns added to the schema after its first version: a part written before
            lacks them, and they read as null there.
    """

    def __init__(
        self,
        folder: Path | str,
        schema: pa.Schema,
        prefix: str = "part",
        added: Collection[str] = (),
    ) -> None:
        self.folder = Path(folder)
        self.schema = schema
        self.prefix = prefix
        self.added = frozenset(added)
        self.problems: list[str] = []
        """Every part skipped as unreadable so far, one line each (also logged)."""
        self._read: set[str] = set()
        self._seq = 0

    @property
    def lock_path(self) -> Path:
        """The folder's lock file."""
        return self.folder / LOCK_NAME

    @contextlib.contextmanager
    def lock(self) -> Iterator[None]:
        """Hold the store's lock: appends of other writers wait until the block ends."""
        with file_lock(self.lock_path):
            yield

    @contextlib.asynccontextmanager
    async def alock(self) -> AsyncIterator[None]:
        """:meth:`lock` for a coroutine (the wait does not block the event loop)."""
        async with afile_lock(self.lock_path):
            yield

    def parts(self) -> list[Path]:
        """Every part file, oldest first."""
        if not self.folder.is_dir():
            return []
        return sorted(self.folder.glob(f"{self.prefix}-*.parquet"))

    def _checked(self, path: Path) -> pa.Table | None:
        try:
            with pq.ParquetFile(path) as file:
                table = file.read()
        except (pa.ArrowException, OSError) as exc:
            if isinstance(exc, FileNotFoundError):
                return None
            line = f"{path}: damaged part skipped, its rows are lost ({type(exc).__name__})"
            self.problems.append(line)
            _log.warning(line)
            return None
        for name in self.added - set(table.column_names):
            table = table.append_column(
                name, pa.nulls(table.num_rows, self.schema.field(name).type)
            )
        have = table.schema
        wrong = [
            f"{f.name} is {have.field(f.name).type if f.name in have.names else 'missing'}, "
            f"not {f.type}"
            for f in self.schema
            if f.name not in have.names
            or not (
                have.field(f.name).type.equals(f.type) or pa.types.is_null(have.field(f.name).type)
            )
        ]
        if wrong:
            raise ForeignPart(
                f"{path}: not a part of this store ({'; '.join(wrong)}); move it out of "
                f"{self.folder} and re-run"
            )
        return table.select(self.schema.names).cast(self.schema)

    def read_new(self) -> list[tuple[Path, pa.Table]]:
        """The parts written since this object last read (all of them the first time).

        Raises:
            ForeignPart: A part holds other columns or types than the store's.
        """
        out = []
        for path in self.parts():
            if path.name in self._read:
                continue
            table = self._checked(path)  # a foreign part raises, and again on the next read
            self._read.add(path.name)
            if table is not None:
                out.append((path, table))
        return out

    def read_all(self) -> pa.Table:
        """Every readable part's rows, oldest first (one table of the schema)."""
        self._read.clear()
        tables = [t for _, t in self.read_new()]
        return pa.concat_tables(tables) if tables else self.schema.empty_table()

    def append(self, table: pa.Table, *, locked: bool = False) -> Path:
        """Write ``table`` as one new part; ``locked``: the caller holds :meth:`lock` already.

        The part counts as read by this object (its rows are the caller's own).
        """
        table = table.select(self.schema.names).cast(self.schema)
        self._seq += 1
        name = f"{self.prefix}-{time.time_ns()}-{os.getpid()}-{self._seq}.parquet"
        path = self.folder / name
        if locked:
            write_table(table, path)
        else:
            with self.lock():
                write_table(table, path)
        self._read.add(name)
        return path


__all__ = ["LOCK_NAME", "ForeignPart", "PartStore"]
