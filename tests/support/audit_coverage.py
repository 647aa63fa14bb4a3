"""Do an audit day's intervals hold the truth? Independent draws of one day, cell by cell.

A day's requests are graded once, every one of them, by a scripted judge (a served document's
true grade is 3 when it is of the query's own collection, else 0-2 fixed per document; the
judge is one grade up for 15 % of (query, document) pairs: it over-rates, as LLM judges lean);
people give the true grades. The truth of a cell (segment × list metric, and ``(all)``) is then the
judge's mean over **every** request of the day, and for the people-corrected figure people's
mean over every request: what the audit's estimate and its PPI figure claim to hold.

Each replicate draws the day again under another salt with the audit's own code
(:func:`ragaudit.audit.draw_sample`), hands the judge's values of the graded requests and
people's values of a labelled prefix (the labelling queue's order) to
:func:`ragaudit.audit.estimate`, and records per cell whether the 95 % interval held the truth
and whether it had any width.

Two days: the bundled example (``data/audit``, read by the JSONL reader with its own config;
requests of one query were served different lists there) and :func:`varied_day`, a larger day
whose requests of a query are served one of a few lists.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import polars as pl
import yaml

from ragaudit._audit_config import AuditSection
from ragaudit.audit import ALL, SampleOptions, draw_sample, estimate, list_metrics, read_day
from ragaudit.audit._sample import normalise_query, permanent_random

REPO = Path(__file__).resolve().parents[2]
BUNDLED = dt.date(2026, 11, 26)
RELEVANT = 2
OVER_RATED = 0.15


def _chance(*parts: str) -> float:
    digest = hashlib.sha256("\x1f".join(parts).encode()).hexdigest()
    return int(digest[:13], 16) / 16**13


def true_grade(segment: str, doc_id: str) -> int:
    """3 for a document of the query's own collection (``billing-0`` in billing); another is
    0, 1 or 2 (60 %, 25 %, 15 % of documents, fixed per document)."""
    if doc_id.split("-", 1)[0] == segment:
        return 3
    u = _chance("grade", doc_id)
    return 0 if u < 0.60 else 1 if u < 0.85 else 2


def judge_grade(query: str, segment: str, doc_id: str) -> int:
    """The true grade, one up for 15 % of (query, document) pairs (a fixed, over-rating judge)."""
    truth = true_grade(segment, doc_id)
    return min(3, truth + 1) if _chance(query, doc_id) < OVER_RATED else truth


def bundled_day(tmp: Path) -> pl.DataFrame:
    """The bundled example day, read by the audit's JSONL reader with the bundled config."""
    raw = yaml.safe_load((REPO / "data" / "audit" / "audit.yaml").read_text("utf-8"))["audit"]
    raw["source"]["path"] = str(REPO / raw["source"]["path"])
    section = AuditSection.model_validate(raw)
    out = tmp / "requests.parquet"
    read_day(
        section.source,
        section.redact,
        BUNDLED,
        segment=section.segment or "`null`",
        out=out,
        max_bad_share=section.max_bad_share,
    )
    return pl.read_parquet(out).select("request_id", "segment", "query", "docs")


def bundled_options() -> SampleOptions:
    """The bundled config's sampling options."""
    raw = yaml.safe_load((REPO / "data" / "audit" / "audit.yaml").read_text("utf-8"))["audit"]
    return AuditSection.model_validate({**raw, "source": {**raw["source"], "path": "x"}}).sampling()


def varied_day(
    *, queries: int = 60, requests: int = 2_000, lists: int = 3, k: int = 3, seed: int = 0
) -> pl.DataFrame:
    """A day of three segments whose requests of one query are served one of ``lists`` lists.

    Queries are Zipf-distributed; each query has ``lists`` served top-k lists drawn from its
    collection's documents and off-topic ones (an engine change mid-day, personalisation), and
    each request gets one of them at random.
    """
    rng = np.random.default_rng(seed)
    segments = ("billing", "account", "shipping")
    p = 1.0 / np.arange(1, queries + 1)
    rows = []
    for n in range(requests):
        segment = segments[n % 3]
        q = int(rng.choice(queries, p=p / p.sum()))
        variant = int(rng.integers(lists))
        pick = np.random.default_rng([seed, n % 3, q, variant])
        docs = [
            {
                "rank": r + 1,
                "id": f"{segment}-{q}-{d}" if pick.random() < 0.45 else f"x-{q}-{d}",
                "text": "",
            }
            for r, d in enumerate(pick.permutation(8)[:k])
        ]
        rows.append(
            {
                "request_id": f"r{n:05d}",
                "segment": segment,
                "query": f"Question {q} about {segment}",
                "docs": docs,
            }
        )
    return pl.DataFrame(rows)


def _values(requests: pl.DataFrame, k: int) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Every request's list metrics under the judge's grades and under the true ones."""
    judged, true = [], []
    for rid, segment, query, docs in requests.select(
        "request_id", "segment", "query", "docs"
    ).iter_rows():
        norm = normalise_query(query)
        ids = [d["id"] for d in sorted(docs or [], key=lambda d: d["rank"])][:k]
        for rows, grades in (
            (judged, [judge_grade(norm, segment, i) for i in ids]),
            (true, [true_grade(segment, i) for i in ids]),
        ):
            for metric, value in list_metrics(grades, k, RELEVANT).items():
                rows.append(
                    {
                        "request_id": rid,
                        "segment": segment,
                        "metric": metric,
                        "value": value,
                        "status": "ok" if value is not None else "skipped",
                    }
                )
    schema = {
        "request_id": pl.String,
        "segment": pl.String,
        "metric": pl.String,
        "value": pl.Float64,
        "status": pl.String,
    }
    return pl.DataFrame(judged, schema=schema), pl.DataFrame(true, schema=schema)


def _truth(values: pl.DataFrame) -> dict[tuple[str, str], float]:
    ok = values.filter(pl.col("status") == "ok")
    out = {
        (s, m): v
        for s, m, v in ok.group_by("segment", "metric").agg(pl.col("value").mean()).iter_rows()
    }
    for m, v in ok.group_by("metric").agg(pl.col("value").mean()).iter_rows():
        out[(ALL, m)] = v
    return out


@dataclass
class Coverage:
    """Per kind of figure: whether each cell's interval held the truth, and its width."""

    held: dict[str, list[bool]] = field(default_factory=dict)
    widths: dict[str, list[float]] = field(default_factory=dict)
    missing: dict[str, int] = field(default_factory=dict)
    """Cells with no interval (fewer than two values, or labels that show no spread)."""
    graded: list[int] = field(default_factory=list)

    def share(self, kind: str) -> float:
        """The share of cells whose interval held the truth; a cell with no interval did not."""
        cells = len(self.held.get(kind, [])) + self.missing.get(kind, 0)
        return sum(self.held.get(kind, [])) / cells if cells else float("nan")

    def zero_width(self, kind: str) -> int:
        """Cells whose interval is a point."""
        return sum(w <= 0 for w in self.widths.get(kind, []))

    def record(self, kind: str, low: float | None, high: float | None, truth: float) -> None:
        """One cell's interval against its truth."""
        if low is None or high is None:
            self.missing[kind] = self.missing.get(kind, 0) + 1
            return
        self.held.setdefault(kind, []).append(low - 1e-12 <= truth <= high + 1e-12)
        self.widths.setdefault(kind, []).append(high - low)


def coverage(
    requests: pl.DataFrame,
    opts: SampleOptions,
    *,
    replicates: int,
    labels: int,
    metrics: tuple[str, ...] = ("precision@3", "ndcg@3"),
) -> Coverage:
    """Independent draws of the day (salts ``r0``, ``r1``, ...): each cell against its truth.

    ``labels``: the graded requests people label a draw (the first in the labelling order).
    """
    judged, true = _values(requests, opts.k)
    truth_judge, truth_people = _truth(judged), _truth(true)
    out = Coverage()
    lazy = requests.select("request_id", "segment", "query").lazy()
    for r in range(replicates):
        salt = f"r{r}"
        sample = draw_sample(lazy, opts, salt=salt)
        out.graded.append(sample.height)
        ids = sample["request_id"].to_list()
        mine = judged.filter(pl.col("request_id").is_in(ids)).drop("segment")
        queue = sorted(ids, key=lambda i: (permanent_random(f"{salt}:labels", i), i))[:labels]
        people = true.filter(pl.col("request_id").is_in(queue), pl.col("status") == "ok")
        figures = estimate(mine, sample, labels=people.select("request_id", "metric", "value"))
        for row in figures.filter(pl.col("metric").is_in(metrics)).iter_rows(named=True):
            cell = (row["segment"], row["metric"])
            out.record("judge", row["ci_low"], row["ci_high"], truth_judge[cell])
            if labels:
                out.record("PPI", row["ppi_ci_low"], row["ppi_ci_high"], truth_people[cell])
    return out


def bundled_coverage(*, replicates: int, labels: int) -> Coverage:
    """:func:`coverage` of the bundled day under its own sampling options."""
    with tempfile.TemporaryDirectory(prefix="audit-coverage-") as tmp:
        requests = bundled_day(Path(tmp))
    return coverage(requests, bundled_options(), replicates=replicates, labels=labels)
