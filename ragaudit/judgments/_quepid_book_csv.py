"""Quepid's book judgements CSV: ``query,docid`` and one column per rater, named by the rater.

A pair a rater did not rate (or rated "unrateable", which this CSV writes empty) has an empty
cell: it becomes no row. Each filled cell is that rater's label, kept as theirs.
"""

from __future__ import annotations

import polars as pl

from ragaudit.judgments._format import (
    JudgmentFormat,
    Read,
    Written,
    csv_safe,
    csv_unsafe,
    framed,
    register_format,
)
from ragaudit.judgments._quepid_csv import read_csv

ANONYMOUS = "Anonymous"
"""Quepid's column of ratings given by no signed-in user."""


@register_format("quepid-book-csv")
class QuepidBookCsv(JudgmentFormat):
    """Quepid's book judgements export (CSV): ``query,docid,<rater>,<rater>…``."""

    label = "Quepid book CSV (a column per rater)"
    holds = frozenset({"query", "annotator", "raters"})
    suffix = ".csv"

    def read(self, data: bytes, where: str) -> Read:
        """One row per filled rater cell."""
        df = read_csv(data, where, ("query", "docid")).with_columns(csv_unsafe("query"))
        raters = [c for c in df.columns if c not in ("query", "docid")]
        long = (
            df.unpivot(
                index=["query", "docid"],
                on=raters,
                variable_name="annotator",
                value_name="value",
            )
            .with_columns(pl.col("annotator").str.strip_chars())
            .filter(pl.col("value").is_not_null() & (pl.col("value").str.strip_chars() != ""))
        )
        frame = framed(long.rename({"docid": "doc_id"}))
        return Read(frame)

    def write(self, frame: pl.DataFrame) -> Written:
        """A row per pair, a column per rater (the unnamed as ``Anonymous``), pairs in order."""
        rows = frame.select(
            pl.col("query").fill_null(pl.col("query_id")),
            pl.col("doc_id").alias("docid"),
            pl.col("annotator").fill_null(ANONYMOUS),
            pl.col("value"),
        )
        wide = rows.pivot(
            on="annotator",
            index=["query", "docid"],
            values="value",
            aggregate_function="last",
            maintain_order=True,
        )
        wide = wide.rename(
            {
                c: c if c in ("query", "docid") else (" " + c if c[:1] in "=+-@" else c)
                for c in wide.columns
            }
        ).with_columns(csv_safe("query"))
        return Written(wide.write_csv().encode())


__all__ = ["QuepidBookCsv"]
