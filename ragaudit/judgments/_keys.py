"""The store's keys of many rows at once.

``judging.text_hash``, ``label_key`` and ``ref_key``, computed over columns.

An import keys every row (100,000 in a large judgment list); calling ``canonical_hash`` per row
spends most of its time in ``json.dumps``. The canonical JSON of a list of strings is built
here by polars instead (each string JSON-encoded as Python's ``json.dumps(…, ensure_ascii=False)``
encodes it, which a test holds equal on quotes, backslashes, control characters and non-ASCII
text), then each distinct text is hashed once: the keys are exactly those of the functions in
``ragaudit.judging``.
"""

from __future__ import annotations

import hashlib

import polars as pl

from ragaudit.hashing import KEY_VERSION, canonical_json


def _encoded(expr: pl.Expr) -> pl.Expr:
    """A string column JSON-encoded (quoted and escaped), as ``json.dumps`` writes a string."""
    return pl.struct(x=expr).struct.json_encode().str.slice(5).str.head(-1)


def canonical_list(tag: str, *columns: pl.Expr) -> pl.Expr:
    """``canonical_json([tag, *values])`` of each row, its values strings (never null)."""
    out = pl.lit("[" + canonical_json(tag))
    for col in columns:
        out = out + pl.lit(",") + _encoded(col)
    return out + pl.lit("]")


def digests(texts: pl.Series) -> pl.Series:
    """``KEY_VERSION:`` + SHA-256 of each canonical JSON text (each distinct text hashed once)."""
    unique = texts.unique().drop_nulls().to_list()
    table = {t: f"{KEY_VERSION}:{hashlib.sha256(t.encode('utf-8')).hexdigest()}" for t in unique}
    return texts.replace_strict(table, default=None, return_dtype=pl.String)


def text_hashes(frame: pl.DataFrame, column: str) -> pl.Series:
    """``judging.text_hash`` of each value of ``column`` (null stays null)."""
    json = frame.select(
        pl.when(pl.col(column).is_not_null()).then(canonical_list("text", pl.col(column)))
    ).to_series()
    return digests(json)


def label_keys(question_hash: pl.Expr, text_hash: pl.Expr) -> pl.Expr:
    """The canonical JSON of ``judging.label_key`` from the two hashes (:func:`digests`)."""
    return canonical_list("label/1", question_hash, text_hash)


def ref_keys(query: pl.Expr, query_id: pl.Expr, index: pl.Expr, doc_id: pl.Expr) -> pl.Expr:
    """The canonical JSON of ``judging.ref_key`` (missing values as empty strings)."""
    return canonical_list(
        "ref/1",
        query.fill_null(""),
        query_id.fill_null(""),
        index.fill_null(""),
        doc_id.fill_null(""),
    )


__all__ = ["canonical_list", "digests", "label_keys", "ref_keys", "text_hashes"]
