"""People's labels of an audit day: the items they label, and the values the estimates take.

The day's folder holds its items to label (``labels.sample.parquet``, schema
``AUDIT_LABEL_ITEMS``), written with the day: every sampled request's served documents (a
grade 0-3 each) and its answer (yes/no per answer metric a person can call), with the texts as
they were graded, never the judge's grade or score; a turn of a session with its conversation
and the question as its judge saw it (what its labels are keyed by).

The items come in an order drawn once by permanent random numbers: of the request's unit first
(salted apart from the sample's own), then of the request. A unit's number is the same every
day, so the order of the units is too: whatever prefix of it people got through on earlier days
is labelled (the labels are kept once, in the runs root's judgment store, :mod:`ragaudit.labels`,
and count wherever their (question, document) pair appears), a later day's labelling starts
with its recurring units labelled already and goes on with new ones in the same order, and the
labelled units stay the units of smallest number: a random subsample of the day's draw, what
the prediction-powered figure of :func:`ragaudit.audit.estimate` assumes. Nobody is asked a
pair they labelled before.

A person's value of a unit's metric: the list metrics from their grades of every document served
in its top k (a unit with a document they skipped, or one the judge could not grade, has none);
an answer metric's value is their yes (1) or no (0). Several people on one unit count as the
mean of their values.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow as pa

from ragaudit import labels
from ragaudit.atomic import write_table
from ragaudit.audit._estimate import estimate
from ragaudit.audit._grade import skip_reason
from ragaudit.audit._listmetrics import list_metrics
from ragaudit.audit._sample import permanent_random
from ragaudit.audit._served import MANIFEST, SAMPLE, SCORES, VERDICTS, Served
from ragaudit.dataset import Question
from ragaudit.runfolder import read_parquet_file
from ragaudit.schemas import AUDIT_LABEL_ITEMS, to_table

ITEMS = labels.SAMPLE_FILE
"""The day's items to label, in labelling order."""

Turns = Mapping[str, tuple[Question, int]]
"""Request id → the request as a turn (a question with its session's earlier turns) and the
exchanges its judge's prompts left out: what a turn's items show and are keyed by."""


def label_kinds(metrics: Sequence[str]) -> tuple[str, ...]:
    """What people label of a day: documents' grades, and the yes/no metrics of ``metrics``."""
    return (labels.GRADE, *(m for m in labels.ANSWER_KINDS if m in metrics))


def labelling_order(served: Sequence[Served], salt: str) -> list[Served]:
    """The requests in labelling order: by their unit's permanent random number, then their own.

    The unit's number (salted apart from the draw's) is the same every day, so each day's
    order of units is one permanent order, and what people labelled of it before is its head.
    """
    return sorted(
        served,
        key=lambda s: (
            permanent_random(f"{salt}:labels", s.unit),
            permanent_random(f"{salt}:labels", s.request_id),
            s.request_id,
        ),
    )


def label_items(
    served: Sequence[Served], metrics: Sequence[str], salt: str, turns: Turns | None = None
) -> pa.Table:
    """The day's items to label (schema ``AUDIT_LABEL_ITEMS``), in :func:`labelling_order`.

    A request's documents are items only when every document of its top k could be graded
    (a person's list metrics are then comparable with the judge's); a document served twice
    in one list is one item. Its answer is an item per answer metric when it has an answer.
    ``turns``: the requests that are turns of a session (their conversation shown above each
    item, their question as the judge saw it the labels' key); the rest stand alone.
    """
    kinds = label_kinds(metrics)
    rows: list[dict[str, Any]] = []
    for s in labelling_order(served, salt):
        usable = [d for d in s.docs if skip_reason(d) is None]
        base: dict[str, Any] = {
            "unit": s.unit,
            "request_id": s.request_id,
            "query": s.query,
            "asked": s.query,
        }
        turn = (turns or {}).get(s.request_id)
        if turn is not None and turn[0].history:
            q, cut = turn
            base["asked"], _ = labels.conversation_shown(s.query, q.history or [], cut, s.language)
            base["conversation"] = json.dumps(
                {
                    "history": [t.model_dump() for t in q.history or []],
                    "history_cut": cut,
                    "language": s.language,
                },
                ensure_ascii=False,
            )
        if usable and len(usable) == len(s.docs):
            for doc_id in dict.fromkeys(d["id"] for d in usable):
                text = next(d["text"] for d in usable if d["id"] == doc_id)
                rows.append(
                    {
                        **base,
                        "item_id": labels.item_id(labels.GRADE, s.request_id, doc_id),
                        "kind": labels.GRADE,
                        "doc_id": doc_id,
                        "text": text,
                    }
                )
        if (s.answer or "").strip():
            for kind in kinds[1:]:
                rows.append(
                    {
                        **base,
                        "item_id": labels.item_id(kind, s.request_id),
                        "kind": kind,
                        "answer": s.answer,
                        "contexts": [d["text"] for d in usable],
                    }
                )
    for position, row in enumerate(rows):
        row["position"] = position
    return to_table(rows, AUDIT_LABEL_ITEMS)


def write_label_items(
    folder: Path,
    served: Sequence[Served],
    metrics: Sequence[str],
    salt: str,
    turns: Turns | None = None,
) -> bool:
    """Write the day's items to label unless it has them; whether they were written.

    Kept once written, as a run's labelling sample is: a position must name the same item for
    every annotator, across re-runs of the day.
    """
    path = Path(folder) / ITEMS
    if path.is_file():
        return False
    write_table(label_items(served, metrics, salt, turns), path)
    return True


def read_label_items(folder: Path) -> pa.Table | None:
    """The day's items to label in labelling order (None: the day was audited without them).

    Items written before turns (schema version 1) are read with ``asked`` and ``conversation``
    null: each a request alone, its query its question.
    """
    path = Path(folder) / ITEMS
    if not path.is_file():
        return None
    table = read_parquet_file(path)
    for name in ("asked", "conversation"):
        if name not in table.column_names:
            table = table.append_column(name, pa.nulls(table.num_rows, pa.string()))
    return table.select(AUDIT_LABEL_ITEMS.names).cast(AUDIT_LABEL_ITEMS)


def day_items(folder: Path) -> pl.DataFrame:
    """The day's items with the store's key of each (what a label of it is of).

    A document's grade: the question as the judge saw it and the document's text; an answer's
    yes/no: the question, the answer and the contexts a person is shown with it.
    """

    def build() -> pl.DataFrame:
        items = read_label_items(folder)
        if items is None:
            return labels.items_frame([])
        out = []
        for r in items.to_pylist():
            asked = r["asked"] or r["query"]
            grade = r["kind"] == labels.GRADE
            text = r["text"] if grade else r["answer"]
            shown = None if grade or not labels.reads_contexts(r["kind"]) else r["contexts"]
            out.append(
                {
                    "item_id": r["item_id"],
                    "kind": r["kind"],
                    "question_id": r["request_id"],
                    "candidate_id": r["doc_id"],
                    "question": asked,
                    "text": text,
                    "key": labels.item_key(r["kind"], asked, text or "", shown),
                }
            )
        return labels.items_frame(out)

    return labels.cached_items(Path(folder), (ITEMS,), build)


def read_day_labels(folder: Path) -> pa.Table:
    """Every label of the day's items (given on its page, or wherever their pairs appeared)."""
    return labels.read_labels(folder, day_items(folder))


def has_day_labels(folder: Path) -> bool:
    """Whether any label reaches the day's items."""
    return labels.has_labels(folder, day_items(folder))


def _valid(frame: pl.DataFrame) -> pl.DataFrame:
    """Labels a person could have given: a grade 0-3, a yes/no 1/0 (skips left out)."""
    grade = pl.col("kind") == labels.GRADE
    return frame.filter(
        pl.col("label").is_not_null()
        & pl.when(grade)
        .then(pl.col("label").is_in([0.0, 1.0, 2.0, 3.0]))
        .otherwise(pl.col("label").is_in([0.0, 1.0]))
    )


def people_values(folder: Path, k: int, relevant_grade: int) -> pl.DataFrame:
    """People's values of the day's graded requests, one row per person.

    Columns ``request_id``, ``unit``, ``metric``, ``value``: what
    :func:`ragaudit.audit.estimate` takes as ``labels`` (empty when nobody labelled).
    """
    out = pl.DataFrame(
        schema={
            "request_id": pl.String,
            "unit": pl.String,
            "metric": pl.String,
            "value": pl.Float64,
        }
    )
    items = read_label_items(folder)
    if items is None or not has_day_labels(folder):
        return out
    latest = pl.from_arrow(labels.latest_labels(read_day_labels(folder)))
    assert isinstance(latest, pl.DataFrame)
    queue = pl.from_arrow(items.select(["item_id", "unit", "request_id"]))
    assert isinstance(queue, pl.DataFrame)
    given = _valid(latest).join(queue, on="item_id")
    rows: list[dict[str, Any]] = [
        {
            "request_id": r["request_id"],
            "unit": r["unit"],
            "metric": r["kind"],
            "value": r["label"],
        }
        for r in given.filter(pl.col("kind") != labels.GRADE).iter_rows(named=True)
    ]
    grades = given.filter(pl.col("kind") == labels.GRADE)
    if not grades.is_empty():
        served = pl.read_parquet(Path(folder) / VERDICTS, columns=["request_id", "rank", "doc_id"])
        lists = (
            served.sort("request_id", "rank")
            .group_by("request_id", maintain_order=True)
            .agg("doc_id")
        )
        docs = dict(lists.iter_rows())
        by_person: dict[tuple[str, str], dict[str, float]] = {}
        unit_of: dict[str, str] = {}
        for r in grades.iter_rows(named=True):
            by_person.setdefault((r["annotator"], r["request_id"]), {})[r["candidate_id"]] = r[
                "label"
            ]
            unit_of[r["request_id"]] = r["unit"]
        for (_, request_id), mine in sorted(by_person.items()):
            ranked = [mine.get(d) for d in docs.get(request_id, [])]
            if not ranked or any(g is None for g in ranked):
                continue  # a document of the list not graded by this person: no list value
            person = [int(g) for g in ranked if g is not None]
            for metric, value in list_metrics(person, k, relevant_grade).items():
                if value is not None:
                    rows.append(
                        {
                            "request_id": request_id,
                            "unit": unit_of[request_id],
                            "metric": metric,
                            "value": value,
                        }
                    )
    return pl.DataFrame(rows, schema=out.schema) if rows else out


def day_design(folder: Path) -> tuple[int, int]:
    """The day's depth ``k`` and relevant grade, as its manifest's config recorded them."""
    config = json.loads((Path(folder) / MANIFEST).read_text(encoding="utf-8"))["config"]
    return int(config["audit"]["k"]), int(config["sort"]["relevant_grade"])


def people_estimates(folder: Path) -> pl.DataFrame | None:
    """The day's estimates with people's labels as they are now (no call; None: no labels).

    The judge's values from ``scores.parquet``; the rows where people labelled a unit only.
    """
    folder = Path(folder)
    if not has_day_labels(folder) or not (folder / SCORES).is_file():
        return None
    k, relevant = day_design(folder)
    values = pl.read_parquet(
        folder / SCORES, columns=["request_id", "unit", "metric", "value", "status"]
    )
    figures = estimate(
        values, pl.read_parquet(folder / SAMPLE), labels=people_values(folder, k, relevant)
    )
    return figures.filter(pl.col("ppi_n") > 0)


__all__ = [
    "ITEMS",
    "Turns",
    "day_design",
    "day_items",
    "has_day_labels",
    "label_items",
    "label_kinds",
    "labelling_order",
    "people_estimates",
    "people_values",
    "read_day_labels",
    "read_label_items",
    "write_label_items",
]
