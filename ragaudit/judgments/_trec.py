"""TREC qrels: ``qid iteration docid grade`` per line, as trec_eval reads them.

Lines starting with ``#`` are comments (trec_eval's own tests carry them); a ``#`` inside a
document id is part of it. The iteration column (almost always ``0``) is kept when it is not.
"""

from __future__ import annotations

import polars as pl

from ragaudit.judgments._format import (
    JudgmentFormat,
    Read,
    Written,
    first_unmatched,
    framed,
    lines,
    query_ids,
    register_format,
)

_LINE = r"^\s*(\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s*$"


def field(column: str) -> pl.Expr:
    """An id as a TREC field, vectorised as ``ragaudit.trec.trec_id`` makes one.

    Whitespace would split it, so each run of it becomes ``_`` (an empty id is ``_``).
    """
    out = pl.col(column).str.replace_all(r"\s+", "_")
    return pl.when(out == "").then(pl.lit("_")).otherwise(out)


@register_format("trec")
class TrecQrels(JudgmentFormat):
    """TREC qrels (``qid 0 docid grade``)."""

    label = "TREC qrels"
    holds = frozenset({"query_id"})
    suffix = ".qrels.txt"

    def read(self, data: bytes, where: str) -> Read:
        """One row per qrels line."""
        df = lines(data, where).filter(~pl.col("line").str.starts_with("#"))
        parts = df.with_columns(pl.col("line").str.extract_groups(_LINE).alias("p")).unnest("p")
        first_unmatched(parts, "1", where, "'qid iteration docid grade'")
        frame = framed(
            parts.select(
                pl.col("1").alias("query_id"),
                pl.col("3").alias("doc_id"),
                pl.col("4").alias("value"),
                pl.when(pl.col("2") != "0")
                .then(pl.lit('{"iteration": "') + pl.col("2") + pl.lit('"}'))
                .alias("extra"),
            )
        )
        return Read(frame)

    def write(self, frame: pl.DataFrame) -> Written:
        """``qid 0 docid grade`` lines (whitespace inside an id becomes ``_``)."""
        frame, notes = query_ids(frame)
        out = frame.select(
            field("query_id") + pl.lit(" 0 ") + field("doc_id") + pl.lit(" ") + pl.col("value")
        )
        text = "".join(line + "\n" for line in out.to_series().to_list())
        return Written(text.encode(), notes)


__all__ = ["TrecQrels", "field"]
