"""Quepid's ratings import body (its "hash" form), what ``POST /api/import/ratings`` takes.

``{"ratings": [{query_text, doc_id, rating}]}``.
"""

from __future__ import annotations

import json

import polars as pl

from ragaudit.errors import InputError
from ragaudit.judgments._format import (
    JudgmentFormat,
    Read,
    Written,
    framed,
    grade_text,
    parse_json,
    register_format,
    require,
)


@register_format("quepid-hash")
class QuepidHash(JudgmentFormat):
    """Quepid's ratings import request body."""

    label = "Quepid ratings import body (hash)"
    holds = frozenset({"query"})
    suffix = ".json"

    def read(self, data: bytes, where: str) -> Read:
        """One row per rating with a document."""
        body = parse_json(data, where)
        ratings = require(body, "ratings", where, list)
        rows = []
        for n, r in enumerate(ratings, start=1):
            at = f"{where}: ratings[{n - 1}]"
            if not isinstance(r, dict):
                raise InputError(f"{at}: not an object")
            if r.get("doc_id") in (None, ""):
                continue
            rows.append(
                {
                    "query": str(require(r, "query_text", at)),
                    "doc_id": str(r["doc_id"]),
                    "value": grade_text(r.get("rating"), at),
                }
            )
        return Read(
            framed(
                pl.DataFrame(rows, schema=dict.fromkeys(("query", "doc_id", "value"), pl.String))
            )
        )

    def write(self, frame: pl.DataFrame) -> Written:
        """The request body, ratings as numbers."""
        rows = frame.select(
            pl.col("query").fill_null(pl.col("query_id")).alias("query_text"),
            pl.col("doc_id"),
            pl.col("value").cast(pl.Float64),
        ).to_dicts()
        body = {
            "ratings": [
                {
                    "query_text": r["query_text"],
                    "doc_id": r["doc_id"],
                    "rating": _number(r["value"]),
                }
                for r in rows
            ]
        }
        return Written(json.dumps(body, ensure_ascii=False, indent=1).encode())


def _number(value: float | None) -> int | float | None:
    """A grade as JSON writes it best: an integer when it is one."""
    if value is None:
        return None
    return int(value) if value == int(value) else value


__all__ = ["QuepidHash"]
