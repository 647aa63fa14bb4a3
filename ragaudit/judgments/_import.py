"""Importing judgments into the judgment store: read, grade on the declared scale, resolve, append.

One import is one source (``--name``): its rows are appended as one part, each with the source's
name and kind, its annotator, time, state, rationale, the grade mapped to 0–3 and the value as
written with the scale that maps it, so an export can write the value back. Per-rater labels
stay per rater. With a judge (``seed``), every resolved, graded pair also gets one row standing
for that judge's grade (the raters' lower median), under the key the judge's own look-ups use:
a tune or a run then pays nothing for it.
"""

from __future__ import annotations

import datetime as dt
import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import polars as pl

from ragaudit.dataset import Question
from ragaudit.errors import InputError
from ragaudit.judging import Grader, JudgmentStore, grade_key
from ragaudit.judgments._format import JudgmentFormat, Read
from ragaudit.judgments._keys import digests, label_keys, ref_keys, text_hashes
from ragaudit.judgments._resolve import DocumentTexts, Resolve, resolve
from ragaudit.judgments._scale import GradeScale
from ragaudit.noise import combined_grade
from ragaudit.prompts import RELEVANCE

Role = Literal["people", "gold"]


@dataclass
class ImportReport:
    """What one import read, graded, resolved and stored."""

    source: str
    format: str
    scale: str
    rows: int = 0
    states: dict[str, int] = field(default_factory=dict)
    """Rows per state (graded, unrateable, later)."""
    grades: dict[int, int] = field(default_factory=dict)
    """Graded rows per grade 0–3 (after the scale's mapping)."""
    annotators: dict[str, int] = field(default_factory=dict)
    """Rows per annotator (``(none)`` for rows naming nobody)."""
    queries: int = 0
    pairs: int = 0
    resolved: int = 0
    """Rows whose question and document text are both known."""
    unresolved: dict[str, int] = field(default_factory=dict)
    """Why rows stayed unresolved → how many."""
    seeded: int = 0
    """Pairs stored as the judge's grade (``seed``)."""
    texts_added: int = 0
    notes: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        """The report as JSON holds it."""
        return {
            "source": self.source,
            "format": self.format,
            "scale": self.scale,
            "rows": self.rows,
            "states": self.states,
            "grades": {str(k): v for k, v in sorted(self.grades.items())},
            "annotators": self.annotators,
            "queries": self.queries,
            "pairs": self.pairs,
            "resolved": self.resolved,
            "unresolved": self.unresolved,
            "seeded": self.seeded,
            "texts_added": self.texts_added,
            "notes": self.notes,
        }


def graded(frame: pl.DataFrame, scale: GradeScale, where: str) -> pl.DataFrame:
    """``frame`` with its ``grade`` (0–3) and state, every value checked against the scale.

    Raises:
        InputError: A graded row without a value, a value that is not a number, or one outside
            the scale's bounds: naming the first such row (its position in the file's rows).
    """
    unrateable = list(scale.unrateable)
    df = frame.with_row_index("_row", offset=1).with_columns(
        pl.when(pl.col("value").str.strip_chars().is_in(unrateable))
        .then(pl.lit("unrateable"))
        .otherwise(pl.col("state"))
        .alias("state")
    )
    number = pl.col("value").str.strip_chars().cast(pl.Float64, strict=False)
    graded_rows = pl.col("state") == "graded"
    df = df.with_columns(number.alias("_number"))
    empty = df.filter(graded_rows & pl.col("value").is_null())
    if empty.height:
        r = empty.row(0, named=True)
        raise InputError(f"{where}: row {r['_row']} (document {r['doc_id']!r}) has no grade")
    bad = df.filter(graded_rows & pl.col("_number").is_null())
    if bad.height:
        r = bad.row(0, named=True)
        raise InputError(
            f"{where}: row {r['_row']} (document {r['doc_id']!r}): grade {r['value']!r} is not a "
            "number"
        )
    bounds = pl.lit(False)
    if scale.low is not None:
        bounds = bounds | (pl.col("_number") < scale.low)
    if scale.high is not None:
        bounds = bounds | (pl.col("_number") > scale.high)
    outside = df.filter(graded_rows & bounds)
    if outside.height:
        r = outside.row(0, named=True)
        low = "−∞" if scale.low is None else f"{scale.low:g}"
        high = "∞" if scale.high is None else f"{scale.high:g}"
        raise InputError(
            f"{where}: row {r['_row']} (document {r['doc_id']!r}): grade {r['value']!r} is outside "
            f"the scale '{scale.name}' ({low}–{high}); declare the source's scale with --scale"
        )
    return df.with_columns(
        pl.when(graded_rows).then(scale.grades(pl.col("value"))).otherwise(None).alias("grade")
    ).drop("_row", "_number")


async def import_read(
    store: JudgmentStore,
    read: Read,
    fmt: JudgmentFormat,
    *,
    source: str,
    scale: GradeScale,
    where: str,
    role: Role = "people",
    questions: Sequence[Question] | None = None,
    documents: DocumentTexts | None = None,
    how: Resolve = "id",
    seed: Grader | None = None,
) -> ImportReport:
    """Store what ``fmt`` read from ``where``: one part of rows, the resolved texts, the seeds.

    Args:
        store: The runs root's judgment store.
        read: What the format read.
        fmt: The format (its name is stored with each row).
        source: The source's name (unique in the store).
        scale: The scale the values are read in (stored with each row).
        where: The file or index read, for errors.
        role: What the rows stand as: people's labels or gold.
        questions: The question set queries are matched to (by text, then id).
        documents: Where documents' texts are found.
        how: How documents are found (id, index and id, text).
        seed: The judge whose grades the resolved pairs stand for (a tune then pays nothing).

    Raises:
        InputError: A name the store already holds, a row without a document id, a value the
            scale cannot read.
    """
    if source in store.sources():
        raise InputError(
            f"--name {source}: the judgment store already holds a source of that name; give "
            "another name (each import is kept as its own source)"
        )
    frame = read.frame
    missing = frame.filter(pl.col("doc_id").is_null() | (pl.col("doc_id") == ""))
    if missing.height:
        raise InputError(f"{where}: {missing.height} row(s) name no document")
    df = graded(frame, scale, where)
    found = await resolve(df, questions=questions, documents=documents, how=how)
    now = dt.datetime.now(dt.UTC).isoformat()
    df = df.with_columns(
        pl.Series("_question", found.question, dtype=pl.String),
        pl.Series("_text", found.text, dtype=pl.String),
    )
    df = df.with_columns(
        text_hashes(df, "_question").alias("_question_hash"),
        text_hashes(df, "_text").alias("_text_hash"),
    )
    question_hash, doc_hash = pl.col("_question_hash"), pl.col("_text_hash")
    key_json = (
        pl.when(question_hash.is_not_null() & doc_hash.is_not_null())
        .then(label_keys(question_hash, doc_hash))
        .otherwise(
            ref_keys(pl.col("query"), pl.col("query_id"), pl.col("doc_index"), pl.col("doc_id"))
        )
    )
    keys = digests(df.select(key_json).to_series())
    extra = df["extra"].to_list()
    if any(c is not None for c in found.corpus_id):
        extra = [
            e if c is None else json.dumps({**(json.loads(e) if e else {}), "corpus_id": c})
            for e, c in zip(extra, found.corpus_id, strict=True)
        ]
    rows = df.select(
        keys.alias("key"),
        pl.lit("", dtype=pl.String).alias("judge"),
        pl.lit(None, dtype=pl.String).alias("prompt"),
        question_hash.alias("question_hash"),
        doc_hash.alias("text_hash"),
        pl.col("query_id").alias("question_id"),
        pl.col("doc_id").alias("context_id"),
        pl.col("grade").cast(pl.Int64),
        pl.col("reason"),
        pl.lit(source).alias("source"),
        pl.col("created_at").fill_null(now),
        pl.lit(None, dtype=pl.Float64).alias("temperature"),
        pl.lit(None, dtype=pl.Int64).alias("window"),
        pl.lit(None, dtype=pl.Int64).alias("max_tokens"),
        pl.Series("language", found.language, dtype=pl.String),
        pl.lit("imported").alias("source_kind"),
        pl.col("annotator"),
        pl.col("state"),
        pl.col("value").alias("source_value"),
        pl.lit(scale.key).alias("scale"),
        pl.col("query"),
        pl.col("doc_index"),
        pl.lit(role).alias("role"),
        pl.lit(fmt.name).alias("format"),
        pl.Series("extra", extra, dtype=pl.String),
    )
    seeds = (
        _seed_rows(rows, found.question, found.text, seed, source, now)
        if seed is not None
        else None
    )
    texts: dict[str, str] = {}
    for hashes, values in (("_text_hash", "_text"), ("_question_hash", "_question")):
        held = df.select(hashes, values).drop_nulls().unique(subset=[hashes])
        texts.update(zip(held[hashes].to_list(), held[values].to_list(), strict=True))
    with store.parts.lock():
        report_texts = store.add_texts(texts, locked=True)
        store.add_table(rows.to_arrow(), locked=True)
        if seeds is not None and seeds.height:
            store.add_table(seeds.to_arrow(), locked=True)
    states = Counter(df["state"].to_list())
    resolved = sum(
        t is not None and q is not None for t, q in zip(found.text, found.question, strict=True)
    )
    return ImportReport(
        source=source,
        format=fmt.name,
        scale=scale.name,
        rows=df.height,
        states=dict(states),
        grades=dict(Counter(g for g in df["grade"].to_list() if g is not None)),
        annotators=dict(Counter(a or "(none)" for a in df["annotator"].to_list())),
        queries=df.select(pl.coalesce("query", "query_id")).n_unique(),
        pairs=keys.n_unique(),
        resolved=resolved,
        unresolved=dict(Counter(w for w in found.why if w is not None)),
        seeded=0 if seeds is None else seeds.height,
        texts_added=report_texts,
        notes=list(read.notes),
    )


def _seed_rows(
    rows: pl.DataFrame,
    questions: Sequence[str | None],
    texts: Sequence[str | None],
    grader: Grader,
    source: str,
    now: str,
) -> pl.DataFrame:
    """One row per resolved, graded pair standing for ``grader``'s grade (raters' lower median)."""
    df = rows.with_columns(
        pl.Series("_question", questions, dtype=pl.String),
        pl.Series("_text", texts, dtype=pl.String),
    ).filter(
        pl.col("grade").is_not_null()
        & pl.col("_question").is_not_null()
        & pl.col("_text").is_not_null()
    )
    if df.height == 0:
        return df.drop("_question", "_text")
    groups = df.group_by("key", maintain_order=True).agg(
        pl.col("grade"),
        pl.col("annotator").drop_nulls().unique(maintain_order=True),
        pl.first(
            "_question",
            "_text",
            "language",
            "question_hash",
            "text_hash",
            "question_id",
            "context_id",
            "query",
            "doc_index",
            "format",
        ),
    )
    keys, grades, reasons = [], [], []
    for key_row in groups.iter_rows(named=True):
        grade = combined_grade(key_row["grade"], "median")
        grades.append(grade)
        keys.append(
            grade_key(
                grader, RELEVANCE.key, key_row["language"], key_row["_question"], key_row["_text"]
            )
        )
        raters = len(key_row["grade"])
        reasons.append(f"imported from {source}: {raters} rating(s), lower median")
    return groups.select(
        pl.Series("key", keys, dtype=pl.String),
        pl.lit(grader.model).alias("judge"),
        pl.lit(RELEVANCE.key).alias("prompt"),
        pl.col("question_hash"),
        pl.col("text_hash"),
        pl.col("question_id"),
        pl.col("context_id"),
        pl.Series("grade", grades, dtype=pl.Int64),
        pl.Series("reason", reasons, dtype=pl.String),
        pl.lit(source).alias("source"),
        pl.lit(now).alias("created_at"),
        pl.lit(grader.temperature, dtype=pl.Float64).alias("temperature"),
        pl.lit(grader.window, dtype=pl.Int64).alias("window"),
        pl.lit(grader.max_tokens, dtype=pl.Int64).alias("max_tokens"),
        pl.col("language"),
        pl.lit("imported").alias("source_kind"),
        pl.col("annotator").list.join(", ").alias("annotator"),
        pl.lit("graded").alias("state"),
        pl.Series("grade", grades, dtype=pl.Int64).cast(pl.String).alias("source_value"),
        pl.lit(None, dtype=pl.String).alias("scale"),
        pl.col("query"),
        pl.col("doc_index"),
        pl.lit("seed").alias("role"),
        pl.col("format"),
        pl.lit(None, dtype=pl.String).alias("extra"),
    )


__all__ = ["ImportReport", "Role", "graded", "import_read"]
