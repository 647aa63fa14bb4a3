"""Quepid's case ratings CSV: ``query,docid,rating``, one rated document a row.

Quepid writes a query without ratings as a row with empty ``docid`` and ``rating`` (such a query
is unjudged: it becomes no row), and a cell starting ``=``, ``+``, ``-`` or ``@`` after a space,
against spreadsheet formulas; both are read back as meant.
"""

from __future__ import annotations

import io

import polars as pl

from ragaudit.errors import InputError
from ragaudit.judgments._format import (
    JudgmentFormat,
    Read,
    Written,
    csv_safe,
    csv_unsafe,
    framed,
    register_format,
    text_of,
)

HEADER = ("query", "docid", "rating")


def read_csv(data: bytes, where: str, columns: tuple[str, ...]) -> pl.DataFrame:
    """A CSV of text cells whose header starts with ``columns`` (every value kept as written)."""
    text = text_of(data, where)
    try:
        df = pl.read_csv(io.StringIO(text), infer_schema=False, truncate_ragged_lines=True)
    except pl.exceptions.PolarsError as exc:
        raise InputError(f"{where}: not CSV ({str(exc).splitlines()[0]})") from None
    head = tuple(c.strip() for c in df.columns[: len(columns)])
    if tuple(c.lower() for c in head) != tuple(c.lower() for c in columns):
        raise InputError(
            f"{where}: the header is {', '.join(df.columns[:4])}; expected "
            f"{', '.join(columns)} first"
        )
    return df.rename(dict(zip(df.columns[: len(columns)], columns, strict=True)))


@register_format("quepid-csv")
class QuepidRatingsCsv(JudgmentFormat):
    """Quepid's ratings CSV (case export "basic"): ``query,docid,rating``."""

    label = "Quepid ratings CSV"
    holds = frozenset({"query"})
    suffix = ".csv"

    def read(self, data: bytes, where: str) -> Read:
        """Rows with a document; a query row without one is an unjudged query (counted)."""
        df = read_csv(data, where, HEADER).with_columns(csv_unsafe("query"))
        rated = df.filter(pl.col("docid").is_not_null() & (pl.col("docid") != ""))
        notes = []
        if rated.height < df.height:
            notes.append(f"{df.height - rated.height} query row(s) without a rated document")
        frame = framed(
            rated.select(
                pl.col("query"), pl.col("docid").alias("doc_id"), pl.col("rating").alias("value")
            )
        )
        return Read(frame, notes=notes)

    def write(self, frame: pl.DataFrame) -> Written:
        """``query,docid,rating`` rows, formula-like cells after a space."""
        out = frame.select(
            pl.col("query").fill_null(pl.col("query_id")),
            pl.col("doc_id").alias("docid"),
            pl.col("value").alias("rating"),
        ).with_columns(csv_safe("query"))
        return Written(out.write_csv().encode())


__all__ = ["QuepidRatingsCsv", "read_csv"]
