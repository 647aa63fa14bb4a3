"""The judgment store's summary: pairs, rows by source and annotator, agreement where they overlap.

A pair is what a judgment is about: its question and document text where both are known (so the
judge's grade of a pair and a person's label of it are one pair), else the source's reference.
People's labels given on labelling pages (source ``labelling``) are also counted by the page
(the run or audit day) they were given on, and their yes/no on answers apart.
Agreement is measured wherever two sources (or two annotators of one source) judged the same
pairs, with the project's one weighted κ and ordinal α (``ragaudit.stats.grade_agreement``) and
their bootstrap intervals; each source's grade of a pair is its annotators' lower median.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import combinations
from typing import Any

import polars as pl

from ragaudit.judging import JudgmentStore
from ragaudit.judgment_parts import LABELLING
from ragaudit.judgments._export import Selection, store_rows
from ragaudit.stats import Figure, grade_agreement

MIN_OVERLAP = 2
"""Pairs two sources must share before their agreement is measured (one pair measures nothing)."""


@dataclass(frozen=True)
class Overlap:
    """Two sources' (or annotators') grades of the pairs both judged, and their agreement."""

    a: str
    b: str
    pairs: int
    figures: list[Figure] = field(default_factory=list)


@dataclass
class StoreStats:
    """The store's summary."""

    rows: int
    pairs: int
    by_kind: dict[str, int]
    sources: list[dict[str, Any]]
    annotators: list[dict[str, Any]]
    overlaps: list[Overlap]
    """Between sources."""
    raters: list[Overlap]
    """Between annotators of one source (a book's raters)."""
    seeded: int
    """Rows standing for a judge's grade (not counted above: each repeats an imported row)."""
    pages: list[dict[str, Any]] = field(default_factory=list)
    """People's labels by the labelling page (folder) they were given on: rows, pairs, who."""
    answer_labels: int = 0
    """People's yes/no on answers (not pairs of a document: counted apart)."""

    def as_dict(self) -> dict[str, Any]:
        """The summary as ``--json`` prints it."""

        def overlap(o: Overlap) -> dict[str, Any]:
            return {
                "a": o.a,
                "b": o.b,
                "pairs": o.pairs,
                "figures": [
                    {
                        "statistic": f.statistic,
                        "value": f.value,
                        "ci": [f.ci_low, f.ci_high],
                        "n": f.n,
                        "note": f.note,
                    }
                    for f in o.figures
                ],
            }

        return {
            "rows": self.rows,
            "pairs": self.pairs,
            "by_kind": self.by_kind,
            "sources": self.sources,
            "annotators": self.annotators,
            "agreement_between_sources": [overlap(o) for o in self.overlaps],
            "agreement_between_raters": [overlap(o) for o in self.raters],
            "seeded": self.seeded,
            "pages": self.pages,
            "answer_labels": self.answer_labels,
        }


def _item() -> pl.Expr:
    """What a row judged: question and text hashes where both are known, else its key."""
    known = pl.col("question_hash").is_not_null() & pl.col("text_hash").is_not_null()
    return (
        pl.when(known)
        .then(pl.col("question_hash") + pl.lit("|") + pl.col("text_hash"))
        .otherwise(pl.col("key"))
        .alias("item")
    )


def _lower_median(grades: pl.Expr) -> pl.Expr:
    g = grades.drop_nulls().sort()
    return g.get((g.len() - 1) // 2, null_on_oob=True)


def _agreements(graded: pl.DataFrame, by: str, seed: int) -> list[Overlap]:
    """Agreement of every two values of ``by`` over the items both graded."""
    per = graded.group_by([by, "item"]).agg(_lower_median(pl.col("grade")).alias("g"))
    names = sorted(per[by].unique().to_list())
    tables = {n: per.filter(pl.col(by) == n).select("item", "g") for n in names}
    out = []
    for a, b in combinations(names, 2):
        both = tables[a].join(tables[b], on="item", suffix="_b")
        if both.height < MIN_OVERLAP:
            continue
        figures = grade_agreement(both["g"].to_list(), both["g_b"].to_list(), seed=seed)
        out.append(Overlap(a, b, both.height, figures))
    return out


def store_stats(store: JudgmentStore, *, seed: int = 0) -> StoreStats:
    """The summary of every row of the store (seeds apart)."""
    everything = store_rows(store, Selection(seeds=True))
    seeded = everything.filter(pl.col("role") == "seed").height
    rows = everything.filter(pl.col("role").is_null() | (pl.col("role") != "seed")).with_columns(
        _item()
    )
    graded = rows.filter(pl.col("grade").is_not_null())
    sources = (
        rows.group_by("source", maintain_order=True)
        .agg(
            pl.first("source_kind").alias("kind"),
            pl.len().alias("rows"),
            pl.col("item").n_unique().alias("pairs"),
            (pl.col("state") == "graded").sum().alias("graded"),
            (pl.col("state") == "unrateable").sum().alias("unrateable"),
            (pl.col("state") == "later").sum().alias("later"),
            pl.col("annotator").drop_nulls().n_unique().alias("annotators"),
            pl.first("format"),
            pl.first("role"),
        )
        .sort("rows", descending=True, maintain_order=True)
    )
    annotators = (
        rows.filter(pl.col("annotator").is_not_null())
        .group_by("annotator", maintain_order=True)
        .agg(
            pl.len().alias("rows"),
            pl.col("item").n_unique().alias("pairs"),
            pl.col("source").unique().sort().alias("sources"),
        )
        .sort("rows", descending=True, maintain_order=True)
    )
    raters: list[Overlap] = []
    for source in graded["source"].unique().sort().to_list():
        within = graded.filter((pl.col("source") == source) & pl.col("annotator").is_not_null())
        if within["annotator"].n_unique() > 1:
            raters.extend(
                Overlap(f"{source}: {o.a}", f"{source}: {o.b}", o.pairs, o.figures)
                for o in _agreements(within, "annotator", seed)
            )
    given = store_rows(store, Selection(sources=(LABELLING,), answers=True))
    answers = given.filter(pl.col("metric").is_not_null()).height
    pages = (
        given.with_columns(
            pl.col("extra").str.json_path_match("$.folder").fill_null("?").alias("page"),
            _item(),
        )
        .group_by("page", maintain_order=True)
        .agg(
            pl.len().alias("rows"),
            pl.col("item").n_unique().alias("pairs"),
            pl.col("annotator").drop_nulls().unique().sort().alias("annotators"),
        )
        .sort("page")
    )
    return StoreStats(
        rows=rows.height,
        pairs=rows["item"].n_unique(),
        by_kind=dict(rows.group_by("source_kind").len().sort("source_kind").iter_rows()),
        sources=sources.to_dicts(),
        annotators=annotators.to_dicts(),
        overlaps=_agreements(graded, "source", seed),
        raters=raters,
        seeded=seeded,
        pages=pages.to_dicts(),
        answer_labels=answers,
    )


__all__ = ["MIN_OVERLAP", "Overlap", "StoreStats", "store_stats"]
