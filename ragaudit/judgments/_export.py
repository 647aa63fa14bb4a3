"""Exporting judgments: the store's rows (or a run's verdicts) in a format, with a loss report.

Before a format writes, the rows are checked against what it holds (:attr:`JudgmentFormat.holds`
and :attr:`JudgmentFormat.keeps`): every field it cannot hold (raters, rationales and the
judge's reasons, indices, times, the source's query ids or texts, its other fields) is counted
in the loss report with examples, rows in a state it has no word for (unrateable, later) are
left out and counted, several raters' rows of one pair are made one (their lower median, the
pairs where they disagreed counted), and values are written in the target's scale: the value as
the source wrote it when its scale is the target's, else the grade's mark (counted). The report
accounts for every row selected: written, left out, or merged into another; nothing is dropped
without a line saying so.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import polars as pl

from ragaudit.judging import JudgmentStore
from ragaudit.judgments._format import FRAME, JudgmentFormat
from ragaudit.judgments._scale import RAGAUDIT, GradeScale, stored_scale

FIELDS: dict[str, str] = {
    "annotator": "who rated (annotators, raters' e-mails, the judge's model)",
    "reason": "rationales: raters' explanations and the judge's reasons",
    "doc_index": "the documents' index (_index)",
    "created_at": "when each judgment was made",
    "query_id": "the source's query ids (qid, request id, scenario id)",
    "query": "query texts (the format names a query by id)",
    "doc_text": "document texts",
}
"""The fields a format may not hold, and what losing them means."""

EXAMPLES = 3
OURS = ("corpus_id",)
"""Keys of ``extra`` an import adds itself (the corpus id a document found by text has)."""


@dataclass(frozen=True)
class Selection:
    """Which rows of the store an export takes (empty: all of that kind)."""

    sources: tuple[str, ...] = ()
    kinds: tuple[str, ...] = ()
    """``judge``, ``person``, ``imported``."""
    roles: tuple[str, ...] = ()
    """``people``, ``gold``, ``seed``: only rows standing so (the judge's own stand as none)."""
    seeds: bool = False
    """Also rows standing for a judge's grade (``seed``) when no role is named."""
    answers: bool = False
    """Also people's yes/no on answers (rows naming a ``metric``): no document's grade, so no
    format's row; the store's summary counts them."""


@dataclass
class Exported:
    """An export's bytes and its loss report."""

    data: bytes
    loss: dict[str, Any] = field(default_factory=dict)


def store_rows(store: JudgmentStore, selection: Selection = Selection()) -> pl.DataFrame:
    """The store's rows a selection takes, each (source, key, annotator)'s latest only.

    The judge's own rows (parts from before people's rows existed name no kind) are ``judge``.
    """
    df = pl.from_arrow(store.rows())
    assert isinstance(df, pl.DataFrame)
    df = df.filter(pl.col("key") != "").with_columns(
        pl.col("source_kind").fill_null("judge"), pl.col("state").fill_null("graded")
    )
    if not selection.answers:
        df = df.filter(pl.col("metric").is_null())
    if selection.sources:
        df = df.filter(pl.col("source").is_in(list(selection.sources)))
    if selection.kinds:
        df = df.filter(pl.col("source_kind").is_in(list(selection.kinds)))
    roles = list(selection.roles)
    if roles:
        df = df.filter(pl.col("role").is_in(roles))
    elif not selection.seeds:
        # A seed repeats an imported row as a judge's grade: exported once, as imported.
        df = df.filter(pl.col("role").is_null() | (pl.col("role") != "seed"))
    # A later row of one source, key and annotator is that annotator's corrected judgment.
    return df.unique(subset=["source", "key", "annotator"], keep="last", maintain_order=True)


def as_frame(rows: pl.DataFrame, target: GradeScale) -> pl.DataFrame:
    """Store rows as format rows, each value written in ``target``'s scale.

    Also keeps ``grade``, ``source_kind`` and ``converted`` (the value is the grade's mark in
    the target rather than the source's own value).
    """
    same = pl.col("scale").fill_null(RAGAUDIT.key) == target.key
    written = target.written(pl.col("grade"))
    return rows.select(
        pl.col("query"),
        pl.col("question_id").alias("query_id"),
        pl.col("context_id").alias("doc_id"),
        pl.col("doc_index"),
        pl.when(same).then(pl.col("source_value")).otherwise(written).alias("value"),
        pl.when(pl.col("source_kind") == "judge")
        .then(pl.col("annotator").fill_null(pl.col("judge")))
        .otherwise(pl.col("annotator"))
        .alias("annotator"),
        pl.col("state"),
        pl.when(pl.col("reason") == "").then(None).otherwise(pl.col("reason")).alias("reason"),
        pl.col("created_at"),
        pl.lit(None, dtype=pl.String).alias("doc_text"),
        pl.col("extra"),
        pl.col("grade"),
        pl.col("source_kind"),
        pl.col("text_hash"),
        (~same & pl.col("grade").is_not_null()).alias("converted"),
        pl.col("scale"),
    )


def _examples(series: pl.Series) -> list[Any]:
    return series.drop_nulls().unique(maintain_order=True).head(EXAMPLES).to_list()


def _lost_fields(frame: pl.DataFrame, fmt: JudgmentFormat) -> list[dict[str, Any]]:
    lost = []
    for name, what in FIELDS.items():
        if name in fmt.holds:
            continue
        if name == "query":
            # A format naming queries by id keeps the text only where it makes the id up.
            has = frame.filter(pl.col("query").is_not_null() & pl.col("query_id").is_not_null())
        else:
            has = frame.filter(pl.col(name).is_not_null())
        if has.height == 0:
            continue
        entry: dict[str, Any] = {
            "field": name,
            "what": what,
            "rows": has.height,
            "examples": _examples(has[name]),
        }
        if name == "reason":
            entry["rows_by_kind"] = dict(Counter(has["source_kind"].to_list()))
        lost.append(entry)
    keys: Counter[str] = Counter()
    examples: dict[str, list[Any]] = {}
    for extra in frame["extra"].drop_nulls().to_list():
        for key, value in json.loads(extra).items():
            if value is None or key in fmt.keeps or key in OURS:
                continue
            keys[key] += 1
            seen = examples.setdefault(key, [])
            if len(seen) < EXAMPLES and value not in seen:
                seen.append(value)
    for key, n in sorted(keys.items()):
        lost.append(
            {
                "field": f"extra.{key}",
                "what": "a field of the source the format has no place for",
                "rows": n,
                "examples": examples[key],
            }
        )
    return lost


def _merged(frame: pl.DataFrame, target: GradeScale) -> tuple[pl.DataFrame, dict[str, Any] | None]:
    """One row per (query, document): several raters' rows merged, their lower median kept."""
    pair = ["_query", "doc_id", "doc_index"]
    counted = (
        frame.with_row_index("_n")
        .with_columns(pl.coalesce("query", "query_id").alias("_query"))
        .with_columns(
            pl.col("_n").min().over(pair).alias("_first"),
            pl.len().over(pair).alias("_raters"),
            pl.col("value").n_unique().over(pair).alias("_values"),
        )
    )
    many = counted.filter(pl.col("_raters") > 1)
    if many.height == 0:
        return frame, None
    # The lower median of the grades; written as that grade's own value where a rater of the
    # pair gave it in the target's scale, else as its mark.
    lower = (
        many.group_by(pair, maintain_order=True)
        .agg(pl.col("grade").drop_nulls().sort().alias("g"))
        .with_columns(
            pl.col("g").list.get((pl.col("g").list.len() - 1) // 2, null_on_oob=True).alias("_m")
        )
        .drop("g")
    )
    merged = (
        many.join(lower, on=pair, how="left", nulls_equal=True)
        .with_columns(
            (pl.col("grade") == pl.col("_m")).alias("_is_median"),
        )
        .sort("_is_median", "_n", descending=[True, False])
        .unique(subset=pair, keep="first", maintain_order=True)
        .with_columns(
            pl.when(pl.col("_is_median"))
            .then(pl.col("value"))
            .otherwise(target.written(pl.col("_m")))
            .alias("value"),
            pl.col("_m").alias("grade"),
            pl.lit(None, dtype=pl.String).alias("annotator"),
        )
    )
    single = counted.filter(pl.col("_raters") == 1)
    keep_cols = ["_first", *frame.columns]
    # In the order of each pair's first row, as the rows came.
    out = pl.concat([single.select(keep_cols), merged.select(keep_cols)])
    out = out.sort("_first").drop("_first")
    disagree = many.filter(pl.col("_values") > 1)
    report = {
        "what": "several raters' rows of one pair made one (the format holds one rating a pair): "
        "the lower median of their grades",
        "pairs": merged.height,
        "rows": many.height,
        "rows_merged_away": many.height - merged.height,
        "pairs_disagreeing": disagree.select(pair).unique().height,
    }
    return out, report


def export_frame(
    frame: pl.DataFrame, fmt: JudgmentFormat, *, sources: Sequence[str] = ()
) -> Exported:
    """``frame`` (:func:`as_frame`'s rows) written by ``fmt``, with the loss report."""
    target = fmt.grades
    selected = frame.height
    not_written: list[dict[str, Any]] = []
    for state in ("unrateable", "later"):
        rows = frame.filter(pl.col("state") == state)
        if rows.height and state not in fmt.holds:
            not_written.append(
                {
                    "what": f"{state} (the format has no such state: only grades travel)",
                    "rows": rows.height,
                    "examples": [
                        f"{q} / {d}"
                        for q, d in rows.select(pl.coalesce("query", "query_id"), "doc_id")
                        .head(EXAMPLES)
                        .iter_rows()
                    ],
                }
            )
            frame = frame.filter(pl.col("state") != state)
    lost = _lost_fields(frame, fmt)
    converted = frame.filter(pl.col("converted"))
    scale: dict[str, Any] = {"target": target.name, "converted_rows": converted.height}
    if converted.height:
        scale["from"] = dict(Counter(stored_scale(k).name for k in converted["scale"].to_list()))
        scale["what"] = (
            "values written as their grade's mark in the target scale (the source's own value "
            "is in another scale)"
        )
    merged = None
    if "raters" not in fmt.holds:
        frame, merged = _merged(frame, target)
    by_id_only = frame.filter(pl.col("query").is_null()).height
    notes: list[dict[str, Any]] = []
    if by_id_only and "query" in fmt.holds and "query_id" not in fmt.holds:
        notes.append(
            {
                "what": "queries known by id only: the id written where the format wants a text",
                "rows": by_id_only,
            }
        )
    written = fmt.write(frame.select(list(FRAME)))
    notes.extend(written.notes)
    left_out = sum(e["rows"] for e in not_written)
    merged_away = merged["rows_merged_away"] if merged else 0
    loss = {
        "format": fmt.name,
        "label": fmt.label,
        "sources": list(sources),
        "rows_selected": selected,
        "rows_written": frame.height,
        "rows_not_written": left_out,
        "rows_merged_away": merged_away,
        "accounted": selected == frame.height + left_out + merged_away,
        "scale": scale,
        "lost": lost,
        "not_written": not_written,
        "merged": merged,
        "notes": notes,
    }
    return Exported(written.data, loss)


def with_texts(frame: pl.DataFrame, store: JudgmentStore) -> pl.DataFrame:
    """``frame`` with each resolved document's text from the store (for formats holding it)."""
    hashes = [h for h in frame["text_hash"].unique().to_list() if h]
    texts = store.texts_of(hashes)
    if not texts:
        return frame
    return frame.with_columns(
        pl.col("text_hash")
        .replace_strict(texts, default=None, return_dtype=pl.String)
        .alias("doc_text")
    )


def grade_labels(store: JudgmentStore, sources: Sequence[str] = ()) -> list[dict[str, Any]]:
    """People's (and imported people's) graded labels of resolved pairs, with their texts.

    What ``ragaudit calibrate --grade-labels`` reads from the store: one row per annotator's
    latest grade of a pair whose question and document text are known (``question``,
    ``context``, ``grade``, ``question_id``, ``context_id``, ``annotator``, ``source``). Gold and
    the judge's own rows are not people's labels; rows standing for a judge are not either.
    """
    rows = store_rows(store, Selection(tuple(sources), ("person", "imported"), ("people",)))
    rows = rows.filter(
        (pl.col("state") == "graded")
        & pl.col("grade").is_not_null()
        & pl.col("text_hash").is_not_null()
        & pl.col("question_hash").is_not_null()
    )
    texts = store.texts_of(set(rows["text_hash"].to_list()) | set(rows["question_hash"].to_list()))
    out = []
    for r in rows.iter_rows(named=True):
        context = texts.get(r["text_hash"])
        question = texts.get(r["question_hash"]) or r["query"]
        if context is None or question is None:
            continue
        out.append(
            {
                "question": question,
                "context": context,
                "grade": int(r["grade"]),
                "question_id": r["question_id"],
                "context_id": r["context_id"],
                "annotator": r["annotator"],
                "source": r["source"],
            }
        )
    return out


__all__ = [
    "Exported",
    "Selection",
    "as_frame",
    "export_frame",
    "grade_labels",
    "store_rows",
    "with_texts",
]
