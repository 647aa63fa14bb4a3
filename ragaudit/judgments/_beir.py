r"""BEIR qrels: a TSV ``query-id\tcorpus-id\tscore`` with that header (``qrels/test.tsv``)."""

from __future__ import annotations

import io

import polars as pl

from ragaudit.errors import InputError
from ragaudit.judgments._format import (
    JudgmentFormat,
    Read,
    Written,
    framed,
    query_ids,
    register_format,
    text_of,
)

HEADER = ("query-id", "corpus-id", "score")


@register_format("beir")
class BeirQrels(JudgmentFormat):
    """BEIR qrels TSV."""

    label = "BEIR qrels TSV"
    holds = frozenset({"query_id"})
    suffix = ".tsv"

    def read(self, data: bytes, where: str) -> Read:
        """One row per line after the header."""
        text = text_of(data, where)
        try:
            df = pl.read_csv(io.StringIO(text), separator="\t", infer_schema=False, quote_char=None)
        except pl.exceptions.PolarsError as exc:
            raise InputError(f"{where}: not a TSV ({str(exc).splitlines()[0]})") from None
        if tuple(c.strip().lower() for c in df.columns[:3]) != HEADER:
            raise InputError(
                f"{where}: the header is {', '.join(df.columns[:3])}; expected {', '.join(HEADER)}"
            )
        a, b, c = df.columns[:3]
        return Read(
            framed(
                df.select(
                    pl.col(a).alias("query_id"), pl.col(b).alias("doc_id"), pl.col(c).alias("value")
                )
            )
        )

    def write(self, frame: pl.DataFrame) -> Written:
        """The header and one line per row."""
        frame, notes = query_ids(frame)
        out = frame.select(
            pl.col("query_id").alias("query-id"),
            pl.col("doc_id").alias("corpus-id"),
            pl.col("value").alias("score"),
        )
        return Written(out.write_csv(separator="\t", quote_style="never").encode(), notes)


__all__ = ["BeirQrels"]
