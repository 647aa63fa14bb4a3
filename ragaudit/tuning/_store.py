"""The judgment store: every relevance grade paid for, reusable by any later tune.

A grade depends on the judge, the prompt (name and version), the question's text and the
document's text, and on nothing else when one candidate is graded per call: those four are the
key, so a grade is never paid twice and a changed document (another text under the same id)
is graded anew.

Why Parquet part files under ``<runs_root>/judgments/`` rather than a second diskcache: a tune
folder is read by any Parquet tool, and so is its store (``pool.qrels.txt`` is one query
away); each batch of grades is one new part written atomically (temp file + rename), so
writers never share a file, need no lock, and a process killed mid-tune loses at most the batch
in flight, whose answers the gateway's memo still holds. The LLM memo stays what it is, the
per-request cache; the store is the per-grade record that outlives a memo cleared or moved.
"""

from __future__ import annotations

import datetime as dt
import os
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from ragaudit.atomic import write_table
from ragaudit.hashing import canonical_hash
from ragaudit.schemas import JUDGMENTS, to_table

STORE_DIR = "judgments"
"""The store's folder under the runs root."""


def text_hash(text: str) -> str:
    """The hash of a question's or a document's text, as the store keys it."""
    return canonical_hash(["text", text])


def grade_key(judge: str, prompt: str, question: str, text: str) -> str:
    """The store's key of one grade."""
    return canonical_hash(["grade", judge, prompt, text_hash(question), text_hash(text)])


@dataclass(frozen=True)
class StoredGrade:
    """One grade from the store."""

    grade: int
    reason: str


class JudgmentStore:
    """Grades by key, read from the part files of one folder and appended as new parts."""

    def __init__(self, folder: Path | str) -> None:
        """Open the store in ``folder`` (created on the first write)."""
        self.folder = Path(folder)
        self._grades: dict[str, StoredGrade] | None = None
        self._sources: set[str] = set()
        self._seq = 0

    def _load(self) -> dict[str, StoredGrade]:
        if self._grades is None:
            grades: dict[str, StoredGrade] = {}
            parts = sorted(self.folder.glob("part-*.parquet")) if self.folder.is_dir() else []
            for part in parts:
                try:
                    table = pq.read_table(part, columns=["key", "grade", "reason", "source"])
                except (OSError, pa.ArrowInvalid):
                    # A damaged part only costs its grades again; the rest stay usable.
                    continue
                self._sources.update(table["source"].unique().to_pylist())
                for key, grade, reason in zip(
                    table["key"].to_pylist(),
                    table["grade"].to_pylist(),
                    table["reason"].to_pylist(),
                    strict=True,
                ):
                    if grade is not None:
                        grades[key] = StoredGrade(int(grade), reason or "")
            self._grades = grades
        return self._grades

    def sources(self) -> set[str]:
        """What paid for the stored grades (``tune:<name>``, ``run:<id>``)."""
        self._load()
        return set(self._sources)

    def __len__(self) -> int:
        return len(self._load())

    def get(self, key: str) -> StoredGrade | None:
        """The stored grade of ``key``, if any."""
        return self._load().get(key)

    def lookup(self, keys: Iterable[str]) -> dict[str, StoredGrade]:
        """The stored grades of those ``keys`` the store holds."""
        grades = self._load()
        return {k: grades[k] for k in keys if k in grades}

    def add(self, rows: Sequence[Mapping[str, Any]], source: str) -> int:
        """Append graded rows as one new part; rows without a grade are not stored.

        A row holds ``key``, ``judge``, ``prompt``, ``question``, ``text``, ``question_id``,
        ``context_id``, ``grade`` and ``reason``.

        Returns:
            The grades written.
        """
        now = dt.datetime.now(dt.UTC).isoformat()
        out = [
            {
                "key": r["key"],
                "judge": r["judge"],
                "prompt": r["prompt"],
                "question_hash": text_hash(r["question"]),
                "text_hash": text_hash(r["text"]),
                "question_id": r["question_id"],
                "context_id": r["context_id"],
                "grade": int(r["grade"]),
                "reason": r.get("reason") or "",
                "source": source,
                "created_at": now,
            }
            for r in rows
            if r.get("grade") is not None
        ]
        if not out:
            return 0
        self._write(out)
        grades = self._load()
        for r in out:
            grades[r["key"]] = StoredGrade(r["grade"], r["reason"])
        self._sources.add(source)
        return len(out)

    def mark(self, source: str) -> int:
        """Record that ``source`` was read and gave no grade (so it is not read again)."""
        self._write(
            [{"key": "", "source": source, "created_at": dt.datetime.now(dt.UTC).isoformat()}]
        )
        self._load()
        self._sources.add(source)
        return 0

    def _write(self, rows: list[dict[str, Any]]) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        self._seq += 1
        name = f"part-{time.time_ns()}-{os.getpid()}-{self._seq}.parquet"
        write_table(to_table(rows, JUDGMENTS), self.folder / name)


__all__ = ["STORE_DIR", "JudgmentStore", "StoredGrade", "grade_key", "text_hash"]
