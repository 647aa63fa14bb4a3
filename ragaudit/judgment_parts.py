"""The judgment store's part files: their columns, their keys and their checks, without the judge.

The store (``<runs_root>/judgments/``, :class:`ragaudit.judging.JudgmentStore`) is read and
written by the judge's side (``ragaudit.judging``, which loads the gateway) and by people's side:
the labelling pages, the viewer and the reports read and write people's labels there, and must
start without litellm. What both sides share lives here, once: the key of each kind of row, the
columns added since the first version, what a row may say (its source kind, state, role, grade),
and the two part stores of one folder (rows, and the texts of their questions and documents).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

import polars as pl
import pyarrow as pa

from ragaudit.hashing import canonical_hash
from ragaudit.partstore import PartStore
from ragaudit.schemas import JUDGMENT_TEXTS, JUDGMENTS

GRADES = range(0, 4)
"""The grades the relevance prompt gives; any other value in a part is refused."""

ADDED = (
    "temperature",
    "window",
    "max_tokens",
    "language",
    "source_kind",
    "annotator",
    "state",
    "source_value",
    "scale",
    "query",
    "doc_index",
    "role",
    "format",
    "extra",
    "metric",
)
"""Columns of versions 2 to 4 of the store's schema, absent from earlier parts (read as null)."""

SOURCE_KINDS = ("judge", "person", "imported")
"""Who gave a row's grade: the LLM judge, a person on a labelling page, or another tool."""
STATES = ("graded", "unrateable", "later")
"""A row's state: a grade, a pair its annotator could not rate, or one put off for later."""
ROLES = ("people", "gold", "seed")
"""What a person's or imported row stands as: people's labels (agreement, calibration, PPI),
gold, or the judge's grade (an imported grade a tune or run then pays nothing for)."""

LABELLING = "labelling"
"""The source of every label a person gives on a labelling page (a run's, an audit day's): one
source, so a person's later label of a pair supersedes theirs from any page."""

TEXT_PREFIX = "text"
"""The name prefix of the parts holding texts by hash, beside the rows' ``part-*`` files."""


def text_hash(text: str) -> str:
    """The hash of a question's or a document's text, as the store keys it."""
    return canonical_hash(["text", text])


def label_key(question: str, text: str) -> str:
    """The key of a person's or an imported judgment: its question and document text, no judge.

    The same key whoever judged the pair, so every annotator's row of one pair shares it and a
    later labelling page or import finds the pair judged. A turn's question is its text as the
    judge saw it (the conversation so far, then the turn), so a label is never reused under
    another history.
    """
    return canonical_hash(["label/1", text_hash(question), text_hash(text)])


def answer_key(metric: str, question: str, answer: str, contexts: list[str] | None) -> str:
    """The key of a person's yes/no on an answer for ``metric``: the question, answer and contexts.

    Apart from every relevance key (its own tag), so an answer's label is never read as a
    document's grade; the contexts shown are part of it (faithfulness is judged against them).
    """
    shown = [text_hash(c) for c in contexts] if contexts is not None else None
    return canonical_hash(["answer/1", metric, text_hash(question), text_hash(answer), shown])


def ref_key(query: str, query_id: str, index: str, doc_id: str) -> str:
    """The key of an imported judgment whose document text was not resolved: its reference."""
    return canonical_hash(["ref/1", query, query_id, index, doc_id])


def row_parts(folder: Path | str) -> PartStore:
    """The store's rows in ``folder`` (a fresh reader: each object remembers what it read)."""
    return PartStore(folder, JUDGMENTS, added=ADDED)


def text_parts(folder: Path | str) -> PartStore:
    """The texts the store keeps by hash in ``folder`` (a fresh reader)."""
    return PartStore(folder, JUDGMENT_TEXTS, prefix=TEXT_PREFIX)


class RowsReader:
    """One store's rows as read so far, each part through ``take``; later reads open new parts.

    For readers that ask the store again and again (a labelling page at every item, the viewer
    at every page): opening every part each time would cost seconds once the store holds
    thousands. A part that went away (the store moved aside, cleaned by hand) starts it anew.
    """

    def __init__(self, folder: Path, take: Callable[[pa.Table], pl.DataFrame]) -> None:
        self.folder = Path(folder)
        self.take = take
        self.lock = threading.Lock()
        self._reset()

    def _reset(self) -> None:
        self.parts = row_parts(self.folder)
        self.names: set[str] = set()
        self.frames: list[pl.DataFrame] = []

    def read(self) -> pl.DataFrame:
        """What ``take`` kept of every readable part, oldest first.

        Raises:
            ForeignPart: A part holds other columns or types than the store's.
        """
        with self.lock:
            if not self.names <= {p.name for p in self.parts.parts()}:
                self._reset()
            for path, table in self.parts.read_new():
                self.names.add(path.name)
                self.frames.append(self.take(table))
            if len(self.frames) > 1:
                self.frames = [pl.concat(self.frames, how="vertical_relaxed")]
            return self.frames[0] if self.frames else self.take(JUDGMENTS.empty_table())


def checked(table: pa.Table) -> pa.Table:
    """Prepared rows as the store's schema, checked before a person's or imported part is written.

    Columns added since (``ADDED``) that ``table`` lacks are null.

    Raises:
        ValueError: A row without a key, a grade outside 0–3, or an unknown source kind, state
            or role.
    """
    for name in ADDED:
        if name not in table.column_names:
            table = table.append_column(name, pa.nulls(table.num_rows, JUDGMENTS.field(name).type))
    table = table.select(JUDGMENTS.names).cast(JUDGMENTS)
    checks = (
        ("source_kind", SOURCE_KINDS),
        ("state", STATES),
        ("role", ROLES),
    )
    for column, allowed in checks:
        bad = {v for v in table[column].unique().to_pylist() if v} - set(allowed)
        if bad:
            raise ValueError(f"{column} {sorted(bad)[0]!r}: not one of {', '.join(allowed)}")
    grades = {g for g in table["grade"].unique().to_pylist() if g is not None}
    if grades - set(GRADES):
        raise ValueError(f"grade {sorted(grades - set(GRADES))[0]}: not 0–3")
    if not all(table["key"].to_pylist()):
        raise ValueError("a row without a key")
    return table


__all__ = [
    "ADDED",
    "GRADES",
    "LABELLING",
    "ROLES",
    "SOURCE_KINDS",
    "RowsReader",
    "STATES",
    "TEXT_PREFIX",
    "answer_key",
    "checked",
    "label_key",
    "ref_key",
    "row_parts",
    "text_hash",
    "text_parts",
]
