"""A simulated RAG service for the audit's benchmarks: its traffic, its planted truth, its judge.

Six segments (collections) share 100,000 requests a day; within a segment, queries are drawn
from a vocabulary by a Zipf law, so a few queries are asked thousands of times a day and most
once or never. Each query has a fixed served top-10 (the engine does not change) and a planted
relevance grade 0-3 for each served document: head queries are served a little better than
tail ones, and segments differ. People type one query several ways (case, extra spaces,
full-width digits), which the audit's normalisation must fold back together.

The truth of a day is computed here with numpy over **every** request (not through the audit's
code), so that a bench compares the audit's estimate with an independent figure.

:meth:`Service.day` builds a day's ``requests`` table with the contract's columns directly;
:func:`write_jsonl` writes the same day as the service's own JSONL log (the layout of the
``audit:`` example config), for a reader to read back.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import polars as pl

SEGMENTS = ("news", "finance", "sports", "tech", "health", "legal")
SHARES = (0.30, 0.20, 0.15, 0.15, 0.10, 0.10)
RELEVANT = 2
_FULLWIDTH = {str(d): chr(0xFF10 + d) for d in range(10)}
_DOC = pl.Struct(
    {
        "rank": pl.Int32,
        "id": pl.String,
        "text": pl.String,
        "content_hash": pl.String,
        "score": pl.Float64,
    }
)


def truth_metrics(grades: np.ndarray, k: int, relevant: int = RELEVANT) -> dict[str, np.ndarray]:
    """Per query (row): nDCG@k within the served list (nan when every grade is 0), relevant share.

    Written with numpy apart from the audit's ``list_metrics`` so the bench checks one against
    the other's definition, not a shared bug.
    """
    top = grades[:, :k].astype(float)
    discount = 1.0 / np.log2(np.arange(2, top.shape[1] + 2))
    dcg = top @ discount
    ideal = -np.sort(-top, axis=1) @ discount
    with np.errstate(invalid="ignore", divide="ignore"):
        ndcg = np.where(ideal > 0, dcg / ideal, np.nan)
    return {f"ndcg@{k}": ndcg, "relevant share": (top >= relevant).mean(axis=1)}


@dataclass
class Service:
    """The simulated service; every figure follows from ``seed``."""

    requests_per_day: int = 100_000
    vocabulary: int = 20_000
    """Distinct queries per segment."""
    zipf: float = 1.0
    k: int = 10
    seed: int = 7
    segments: tuple[str, ...] = SEGMENTS
    shares: tuple[float, ...] = SHARES
    grades: dict[str, np.ndarray] = field(init=False, repr=False)
    """Segment → planted grade of each query's served documents (vocabulary × k)."""
    _docs: pl.DataFrame = field(init=False, repr=False)

    def __post_init__(self) -> None:
        rng = np.random.default_rng(self.seed)
        ranks = np.arange(1, self.vocabulary + 1)
        self._p = ranks ** (-self.zipf) / (ranks ** (-self.zipf)).sum()
        self.grades = {}
        for s, name in enumerate(self.segments):
            # A query's quality falls with its rarity; each segment has its own level.
            base = 0.62 - 0.04 * s - 0.22 * np.log(ranks) / np.log(self.vocabulary)
            quality = base + rng.normal(0, 0.18, self.vocabulary)
            score = (
                quality[:, None]
                - 0.03 * np.arange(self.k)
                + rng.normal(0, 0.3, (self.vocabulary, self.k))
            )
            self.grades[name] = np.digitize(score, [0.25, 0.5, 0.75]).astype(np.int8)
        self._docs = self._served()

    def text(self, segment: str, rank: int) -> str:
        """The canonical text of a query (its normalised form)."""
        return f"what changed in {segment} topic {rank} this week"

    def doc_id(self, segment: str, rank: int, position: int) -> str:
        """The id of the document served at ``position`` (0-based) for a query."""
        return f"{segment}-q{rank}-d{position}"

    def planted(self, segment: str, rank: int, position: int) -> int:
        """The planted grade of a served document."""
        return int(self.grades[segment][rank - 1, position])

    def _served(self) -> pl.DataFrame:
        """Every query's served top-k as the contract's ``docs`` list, one row per query."""
        frames = []
        for segment in self.segments:
            rank = np.repeat(np.arange(1, self.vocabulary + 1), self.k)
            pos = np.tile(np.arange(self.k), self.vocabulary)
            flat = pl.DataFrame({"segment": segment, "qrank": rank, "pos": pos}).with_columns(
                pl.struct(
                    (pl.col("pos") + 1).cast(pl.Int32).alias("rank"),
                    pl.format("{}-q{}-d{}", "segment", "qrank", "pos").alias("id"),
                    pl.format(
                        "Text of document {} of {} topic {}.", "pos", "segment", "qrank"
                    ).alias("text"),
                    pl.lit(None, dtype=pl.String).alias("content_hash"),
                    (20.0 - pl.col("pos").cast(pl.Float64)).alias("score"),
                ).alias("doc")
            )
            frames.append(
                flat.group_by("segment", "qrank", maintain_order=True).agg(
                    pl.col("doc").cast(_DOC).alias("docs")
                )
            )
        return pl.concat(frames)

    def counts(self, day: int) -> dict[str, np.ndarray]:
        """Segment → requests per query rank (index rank - 1) on day ``day``."""
        rng = np.random.default_rng([self.seed, day])
        per_segment = rng.multinomial(self.requests_per_day, self.shares)
        return {
            name: rng.multinomial(n, self._p)
            for name, n in zip(self.segments, per_segment, strict=True)
        }

    def truth(self, day: int) -> dict[tuple[str, str], float]:
        """(segment, metric) → the day's mean over every request (segment "(all)" too)."""
        counts = self.counts(day)
        sums: dict[str, dict[str, float]] = {}
        out: dict[tuple[str, str], float] = {}
        for segment, c in counts.items():
            for metric, per_query in truth_metrics(self.grades[segment], self.k).items():
                defined = ~np.isnan(per_query)
                num = float((c * np.where(defined, per_query, 0.0)).sum())
                den = float(c[defined].sum())
                out[(segment, metric)] = num / den
                total = sums.setdefault(metric, {"num": 0.0, "den": 0.0})
                total["num"] += num
                total["den"] += den
        for metric, total in sums.items():
            out[("(all)", metric)] = total["num"] / total["den"]
        return out

    def day(self, day: int, start: dt.date = dt.date(2026, 11, 1)) -> pl.DataFrame:
        """Day ``day``'s requests with the contract's ``requests.parquet`` columns."""
        rng = np.random.default_rng([self.seed, day, 1])
        counts = self.counts(day)
        segment = np.concatenate([np.full(int(c.sum()), name) for name, c in counts.items()])
        qrank = np.concatenate(
            [np.repeat(np.arange(1, self.vocabulary + 1), c) for c in counts.values()]
        )
        n = len(qrank)
        order = rng.permutation(n)
        segment, qrank = segment[order], qrank[order]
        date = start + dt.timedelta(days=day)
        midnight = dt.datetime(date.year, date.month, date.day, tzinfo=dt.UTC)
        seconds = np.sort(rng.integers(0, 86_400_000_000, n))
        variant = rng.integers(0, 4, n)
        base = pl.format("what changed in {} topic {} this week", "segment", "qrank")
        fullwidth = base.str.replace_many(list(_FULLWIDTH), list(_FULLWIDTH.values()))
        frame = pl.DataFrame(
            {
                "i": np.arange(n),
                "segment": segment,
                "qrank": qrank,
                "variant": variant,
                "micros": seconds,
                "session": rng.integers(0, n // 3 + 1, n),
            }
        ).with_columns(
            pl.format(
                "{}-{}", pl.lit(date.isoformat()), pl.col("i").cast(pl.String).str.zfill(6)
            ).alias("request_id"),
            (pl.lit(midnight) + pl.duration(microseconds=pl.col("micros")))
            .dt.cast_time_unit("us")
            .alias("time"),
            pl.format("s{}", "session").alias("session"),
            pl.when(pl.col("variant") == 1)
            .then(base.str.to_titlecase())
            .when(pl.col("variant") == 2)
            .then(pl.concat_str(pl.lit("  "), base.str.replace_all(" ", "  "), pl.lit(" ")))
            .when(pl.col("variant") == 3)
            .then(fullwidth)
            .otherwise(base)
            .alias("query"),
            pl.format('{{"collection": "{}"}}', "segment").alias("filters"),
        )
        return (
            frame.join(self._docs, on=["segment", "qrank"], how="left")
            .sort("i")
            .select(
                "request_id",
                "time",
                "session",
                "query",
                "filters",
                "segment",
                "docs",
                pl.format("An answer about {} topic {}.", "segment", "qrank").alias("answer"),
                pl.lit("[1]").alias("citations"),
                pl.lit(None, dtype=pl.String).alias("feedback"),
                pl.format("sim:{}", (pl.col("i") + 1).cast(pl.String)).alias("origin"),
            )
        )


def write_jsonl(requests: pl.DataFrame, path: Path) -> Path:
    """A day's requests written as the service's own JSONL log (the example config's layout)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    hit = pl.element().struct
    records = requests.select(
        pl.col("request_id").alias("id"),
        pl.col("time").dt.to_string("%Y-%m-%dT%H:%M:%S%.6f+00:00").alias("ts"),
        pl.col("session").alias("session_id"),
        pl.struct(
            pl.col("query").alias("q"),
            pl.struct(pl.col("segment").alias("collection")).alias("filters"),
        ).alias("request"),
        pl.struct(
            pl.col("docs")
            .list.eval(
                pl.struct(
                    hit.field("id").alias("_id"),
                    pl.struct(hit.field("text").alias("content")).alias("_source"),
                    hit.field("score").alias("_score"),
                )
            )
            .alias("hits")
        ).alias("retrieval"),
        pl.struct(
            pl.col("answer").alias("text"),
            pl.col("citations").str.json_decode(pl.List(pl.Int64)).alias("citations"),
        ).alias("response"),
        pl.struct(pl.col("feedback").alias("thumb")).alias("feedback"),
    )
    records.write_ndjson(path)
    return path


@dataclass
class ScriptedJudge:
    """Grades a served document: the planted grade, one off (up or down) 15 % of the time."""

    service: Service
    off_by_one: float = 0.15
    seed: int = 11
    calls: int = 0

    def __post_init__(self) -> None:
        self._rng = np.random.default_rng(self.seed)

    def grade(self, segment: str, doc_id: str) -> int:
        """One judge call on a served document (its id names its query and position)."""
        self.calls += 1
        _, query, pos = doc_id.rsplit("-", 2)
        truth = self.service.planted(segment, int(query[1:]), int(pos[1:]))
        if self._rng.random() >= self.off_by_one:
            return truth
        step = 1 if truth == 0 else -1 if truth == 3 else int(self._rng.choice((-1, 1)))
        return truth + step
