"""RankLib's (and SVMrank's, LETOR's) training data: ``<grade> qid:<q> <fid>:<value> … # <docid>``.

The features are kept with the row (``extra``), so the file is written back as it was; a row
imported from elsewhere has none and is written without features. What follows the document id
in the comment (the LTR demo writes ``keywords@title``) is kept too. RankLib names a query by its
qid alone.
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
from ragaudit.judgments._scale import SCALES

_LINE = r"^\s*(\S+)\s+qid:(\S+)((?:\s+\d+:\S+)*)\s*(?:#\s*(\S+)(?:\s+(.*?))?)?\s*$"


@register_format("ranklib")
class RankLib(JudgmentFormat):
    """RankLib / SVMrank training lines."""

    label = "RankLib / SVMrank"
    scale = SCALES["0-4"]
    holds = frozenset({"query_id"})
    keeps = frozenset({"features", "comment"})
    suffix = ".txt"

    def read(self, data: bytes, where: str) -> Read:
        """One row per line; a line without a ``# <docid>`` comment names no document (refused)."""
        df = lines(data, where).filter(~pl.col("line").str.starts_with("#"))
        parts = df.with_columns(pl.col("line").str.extract_groups(_LINE).alias("p")).unnest("p")
        first_unmatched(parts, "1", where, "'<grade> qid:<q> <fid>:<value> … # <docid>'")
        first_unmatched(parts, "4", where, "a '# <docid>' comment naming the document")
        features = pl.col("3").str.strip_chars().str.replace_all(r"\s+", " ")
        frame = parts.select(
            pl.col("1").alias("value"),
            pl.col("2").alias("query_id"),
            pl.col("4").alias("doc_id"),
            pl.struct(
                features=pl.when(features != "").then(features),
                comment=pl.when(pl.col("5") != "").then(pl.col("5")),
            )
            .struct.json_encode()
            .alias("extra"),
        )
        return Read(framed(frame))

    def write(self, frame: pl.DataFrame) -> Written:
        """One line per row, its features where it has them."""
        frame, notes = query_ids(frame)
        extra = pl.col("extra").fill_null("{}")
        feats = extra.str.json_path_match("$.features")
        comment = extra.str.json_path_match("$.comment")
        out = frame.select(
            pl.col("value")
            + pl.lit(" qid:")
            + pl.col("query_id")
            + pl.when(feats.is_not_null()).then(pl.lit(" ") + feats).otherwise(pl.lit(""))
            + pl.lit(" # ")
            + pl.col("doc_id")
            + pl.when(comment.is_not_null()).then(pl.lit(" ") + comment).otherwise(pl.lit(""))
        )
        none = frame.filter(feats.is_null()).height
        if none:
            notes.append(
                {
                    "what": "rows without features (judged elsewhere): written with none",
                    "rows": none,
                }
            )
        text = "".join(line + "\n" for line in out.to_series().to_list())
        return Written(text.encode(), notes)


__all__ = ["RankLib"]
