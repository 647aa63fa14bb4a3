"""Quepid's LTR judgment list: ``<rating> qid:<id> # <doc_id> <query_text>``, one line a rating.

The Elasticsearch/OpenSearch LTR demo writes the same lines with the query's keywords in header
comments (``# qid:1: rambo``) and the document's title after its id: when such headers are
there, they give the query text and the rest of the line is kept as the title.
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

_LINE = r"^\s*(\S+)\s+qid:(\S+)\s*#\s*(\S+)(?:\s+(.*?))?\s*$"
_HEADER = r"^#\s*qid:(\S+?):\s*(.*?)\s*$"


@register_format("quepid-ltr")
class QuepidLtr(JudgmentFormat):
    """Quepid's LTR judgment list (``3 qid:1 # 1370 star trek``)."""

    label = "Quepid LTR text"
    holds = frozenset({"query", "query_id"})
    suffix = ".txt"

    def read(self, data: bytes, where: str) -> Read:
        """One row per rating line; header comments name the queries where present."""
        df = lines(data, where)
        headers = (
            df.filter(pl.col("line").str.starts_with("#"))
            .select(pl.col("line").str.extract_groups(_HEADER).alias("h"))
            .unnest("h")
            .drop_nulls()
        )
        named = dict(zip(headers["1"].to_list(), headers["2"].to_list(), strict=True))
        parts = (
            df.filter(~pl.col("line").str.starts_with("#"))
            .with_columns(pl.col("line").str.extract_groups(_LINE).alias("p"))
            .unnest("p")
        )
        first_unmatched(parts, "1", where, "'<rating> qid:<id> # <doc_id> <query text>'")
        if named:
            frame = parts.select(
                pl.col("1").alias("value"),
                pl.col("2").alias("query_id"),
                pl.col("2").replace_strict(named, default=None).alias("query"),
                pl.col("3").alias("doc_id"),
                pl.when(pl.col("4").is_not_null() & (pl.col("4") != ""))
                .then(pl.struct(title=pl.col("4")).struct.json_encode())
                .alias("extra"),
            )
        else:
            frame = parts.select(
                pl.col("1").alias("value"),
                pl.col("2").alias("query_id"),
                pl.col("4").alias("query"),
                pl.col("3").alias("doc_id"),
            )
        return Read(framed(frame))

    def write(self, frame: pl.DataFrame) -> Written:
        """One line per row, queries numbered where they have no id."""
        frame, notes = query_ids(frame)
        out = frame.select(
            pl.col("value")
            + pl.lit(" qid:")
            + pl.col("query_id")
            + pl.lit(" # ")
            + pl.col("doc_id")
            + pl.lit(" ")
            + pl.col("query").fill_null("")
        )
        text = "".join(line.rstrip() + "\n" for line in out.to_series().to_list())
        return Written(text.encode(), notes)


__all__ = ["QuepidLtr"]
