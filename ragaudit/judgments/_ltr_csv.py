"""The judgment list of the OpenSearch (and Elasticsearch) Learning to Rank documentation.

``grade,keywords,docId``, one graded document a row.
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
from ragaudit.judgments._scale import SCALES


@register_format("ltr-csv")
class LtrJudgmentCsv(JudgmentFormat):
    """The LTR plugin documentation's judgment list: ``grade,keywords,docId`` (grades 0–4)."""

    label = "OpenSearch LTR judgment CSV"
    scale = SCALES["0-4"]
    holds = frozenset({"query"})
    suffix = ".csv"

    def read(self, data: bytes, where: str) -> Read:
        """One row per graded document."""
        df = read_csv(data, where, ("grade", "keywords", "docId")).with_columns(
            csv_unsafe("keywords")
        )
        return Read(
            framed(
                df.select(
                    pl.col("keywords").alias("query"),
                    pl.col("docId").alias("doc_id"),
                    pl.col("grade").alias("value"),
                )
            )
        )

    def write(self, frame: pl.DataFrame) -> Written:
        """``grade,keywords,docId`` rows."""
        out = frame.select(
            pl.col("value").alias("grade"),
            pl.col("query").fill_null(pl.col("query_id")).alias("keywords"),
            pl.col("doc_id").alias("docId"),
        ).with_columns(csv_safe("keywords"))
        return Written(out.write_csv().encode())


__all__ = ["LtrJudgmentCsv"]
