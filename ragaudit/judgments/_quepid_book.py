"""Quepid's book export (JSON).

``query_doc_pairs[{query_text, doc_id, position, document_fields, judgements[{rating,
unrateable, judge_later, user_email, explanation}]}]``.

The richest of the formats: every rater's label of a pair, their explanations, "unrateable"
(a rater who could not tell) and "judge later" (put off), the pair's position and document
fields. A pair without judgements is unjudged: it becomes no row (and is counted). The book's
``scale`` (``[0, 1, 2, 3]``) is the scale its ratings are read in unless the import declares
one. An export writes the book Quepid's book import takes, so judgments made here (the judge's,
with its reasons as explanations) can be checked by people in Quepid.
"""

from __future__ import annotations

import json
from typing import Any

import polars as pl
from pydantic import BaseModel, ConfigDict

from ragaudit.errors import InputError
from ragaudit.judgments._format import (
    JudgmentFormat,
    Read,
    Written,
    framed,
    grade_text,
    json_extra,
    parse_json,
    register_format,
    require,
)
from ragaudit.judgments._scale import from_points

PAIR_FIELDS = ("position", "document_fields", "information_need", "notes", "options")
"""A pair's fields besides query, document and judgements: kept in each row's ``extra``."""


class BookOptions(BaseModel):
    """Options of a Quepid book export."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = "ragaudit judgments"
    """The book's name."""


def _state(j: dict[str, Any], rating: str | None) -> str:
    if j.get("unrateable"):
        return "unrateable"
    if j.get("judge_later") or rating is None:
        # A rating not given yet is a pair put off: never a grade, never "could not rate".
        return "later"
    return "graded"


@register_format("quepid-book")
class QuepidBook(JudgmentFormat):
    """Quepid's book export and import (JSON)."""

    label = "Quepid book JSON"
    holds = frozenset({"query", "annotator", "raters", "reason", "doc_text", "unrateable", "later"})
    keeps = frozenset(PAIR_FIELDS)
    suffix = ".json"
    options = BookOptions

    def read(self, data: bytes, where: str) -> Read:
        """One row per judgement; the book's scale and name with them."""
        book = parse_json(data, where)
        pairs = require(book, "query_doc_pairs", where, list)
        rows: list[dict[str, Any]] = []
        unjudged = 0
        for n, pair in enumerate(pairs):
            at = f"{where}: query_doc_pairs[{n}]"
            query = str(require(pair, "query_text", at, (str, int, float)))
            doc = str(require(pair, "doc_id", at, (str, int)))
            extra = json_extra(**{k: pair.get(k) for k in PAIR_FIELDS})
            judgements = pair.get("judgements") or []
            if not isinstance(judgements, list):
                raise InputError(f"{at}: 'judgements' is not a list")
            if not judgements:
                unjudged += 1
            for m, j in enumerate(judgements):
                jat = f"{at}.judgements[{m}]"
                if not isinstance(j, dict):
                    raise InputError(f"{jat}: not an object")
                rating = grade_text(j.get("rating"), jat)
                state = _state(j, rating)
                rows.append(
                    {
                        "query": query,
                        "doc_id": doc,
                        "value": rating if state == "graded" else None,
                        "annotator": j.get("user_email"),
                        "state": state,
                        "reason": j.get("explanation") or None,
                        "extra": extra,
                    }
                )
        scale = book.get("scale") or (book.get("scorer") or {}).get("scale")
        notes = [f"{unjudged} pair(s) without a judgement"] if unjudged else []
        frame = framed(
            pl.DataFrame(
                rows,
                schema=dict.fromkeys(
                    ("query", "doc_id", "value", "annotator", "state", "reason", "extra"), pl.String
                ),
            )
        )
        return Read(
            frame,
            scale=from_points(scale) if isinstance(scale, list) and scale else None,
            source=book.get("name") if isinstance(book.get("name"), str) else None,
            notes=notes,
        )

    def write(self, frame: pl.DataFrame) -> Written:
        """A book: one pair per (query, document) with every rater's judgement."""
        opts: BookOptions = self.opts  # type: ignore[assignment]
        extra = pl.col("extra").fill_null("{}")

        def field(name: str) -> pl.Expr:
            return extra.str.json_path_match(f"$.{name}")

        fields = pl.coalesce(
            field("document_fields"),
            pl.when(pl.col("doc_text").is_not_null()).then(
                pl.struct(text=pl.col("doc_text")).struct.json_encode()
            ),
        )
        judgement = pl.struct(
            pl.col("value").cast(pl.Float64).alias("rating"),
            (pl.col("state") == "unrateable").alias("unrateable"),
            (pl.col("state") == "later").alias("judge_later"),
            pl.col("annotator").alias("user_email"),
            pl.col("reason").alias("explanation"),
        )
        pairs = (
            frame.with_columns(pl.col("query").fill_null(pl.col("query_id")))
            .group_by("query", "doc_id", maintain_order=True)
            .agg(
                pl.first("extra").alias("_extra"),
                pl.first("doc_text").alias("_text"),
                judgement.alias("judgements"),
            )
            .rename({"_extra": "extra", "_text": "doc_text"})
            .select(
                pl.col("query").alias("query_text"),
                pl.col("doc_id"),
                field("position").cast(pl.Int64, strict=False).alias("position"),
                fields.alias("document_fields"),
                field("information_need").alias("information_need"),
                field("notes").alias("notes"),
                field("options").alias("options"),
                pl.col("judgements"),
            )
        )
        head = {
            "name": opts.name,
            "show_rank": False,
            "support_implicit_judgements": None,
            "scale": [int(m) if m == int(m) else m for m in sorted(set(self.grades.marks))],
        }
        # The pairs are written by polars (a large book is most of the bytes), the head by json.
        text = json.dumps(head, ensure_ascii=False)[:-1] + ', "query_doc_pairs": '
        return Written((text + pairs.write_json() + "}").encode())


__all__ = ["BookOptions", "QuepidBook"]
