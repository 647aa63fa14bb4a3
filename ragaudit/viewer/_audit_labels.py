"""Labelling an audit day's sampled items in the viewer: the labelling page over the day.

The same page, script and API shape as a run's labelling (:mod:`ragaudit.viewer.labelling`),
under ``/runs/audit-<name>/days/<day>/label``: the script finds its API and the way back to the
day's report from its own address. The items are the day's ``labels.sample.parquet``, written
with the day (:func:`ragaudit.audit.label_items`), blind: texts only (a turn's conversation
above it), never the judge's grade or score. Every answer is one part appended to the runs
root's judgment store at once; a pair the person labelled before (an earlier day's recurring
unit, a run's page) is labelled already, so the page starts at the first item they have not
labelled and never asks a pair twice. A later ``ragaudit audit --day`` of the day reads the
labels into its PPI figures; the audit's page shows them as they are now.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
from fastapi import APIRouter, HTTPException, Request
from fastapi.responses import HTMLResponse, PlainTextResponse

from ragaudit import labels
from ragaudit.errors import InputError
from ragaudit.viewer import labelling
from ragaudit.viewer._listing import audit_days
from ragaudit.viewer._pages import viewer
from ragaudit.viewer.labelling import AnnotatorQuery, LabelIn, _annotator, _row, shown_item

router = APIRouter()

_DAY = "/runs/{run_id}/days/{day}"


def _day_dir(request: Request, run_id: str, day: str) -> Path:
    """The folder of an audit's day (404 for anything else)."""
    folder, listed, _ = viewer(request).run(run_id)
    if listed.kind != "audit" or day not in {d.name for d in audit_days(folder)}:
        raise HTTPException(404, "no such audit day")
    return folder / day


def _items(folder: Path) -> pa.Table:
    from ragaudit.audit import read_label_items

    items = read_label_items(folder)
    if items is None:
        raise HTTPException(
            status_code=404,
            detail=f"no items to label: day {folder.name} was audited before labelling; audit "
            "it again with ragaudit audit --day (nothing is paid)",
        )
    return items


@router.get(_DAY + "/label", response_class=HTMLResponse)
def label_page(request: Request, run_id: str, day: str) -> HTMLResponse:
    """The labelling page of an audit day."""
    _day_dir(request, run_id, day)
    # The run's page itself: it holds no text of any folder, and its script takes its API from
    # its own address.
    return labelling.label_page(request, run_id)


@router.get(_DAY + "/label/api/start")
def start(request: Request, run_id: str, day: str, annotator: AnnotatorQuery) -> dict[str, Any]:
    """How far ``annotator`` got: the total, how many they labelled, where to resume."""
    from ragaudit.audit import read_day_labels

    folder = _day_dir(request, run_id, day)
    name = _annotator(annotator)
    items = _items(folder)
    done = labels.labelled_positions(items, read_day_labels(folder), name)
    return {
        "run_id": f"{folder.parent.name} {day}",
        "total": items.num_rows,
        "labelled": len(done),
        "resume": labels.next_position(done, -1, items.num_rows),
    }


@router.get(_DAY + "/label/api/items/{position}")
def item(
    request: Request, run_id: str, day: str, position: int, annotator: AnnotatorQuery
) -> dict[str, Any]:
    """Item ``position`` as a person sees it (texts only), with their label of it if any."""
    from ragaudit.audit import read_day_labels

    folder = _day_dir(request, run_id, day)
    name = _annotator(annotator)
    items = _items(folder)
    row = _row(items, position)
    kind = row["kind"]
    shown: dict[str, Any] = {"kind": kind, "question": row["query"], "history": _history(row)}
    if kind == labels.GRADE:
        shown["candidate"] = row["text"]
    else:
        shown["answer"] = row["answer"]
        if labels.reads_contexts(kind):
            shown["contexts"] = row["contexts"]
    return shown_item(folder, shown, items, row, read_day_labels(folder), name)


def _history(row: dict[str, Any]) -> list[dict[str, Any]]:
    """A turn's earlier turns as the page shows them ([] for a request alone)."""
    if not row.get("conversation"):
        return []
    stored = json.loads(row["conversation"])
    _, shown = labels.conversation_shown(
        row["query"],
        stored.get("history") or [],
        stored.get("history_cut"),
        stored.get("language") or "en",
    )
    return shown


@router.post(_DAY + "/label/api/labels")
def add_label(request: Request, run_id: str, day: str, given: LabelIn) -> dict[str, Any]:
    """Append one label to the day's store; 409 when the item is not the day's there."""
    from ragaudit.audit import day_items

    folder = _day_dir(request, run_id, day)
    name = _annotator(given.annotator)
    return labelling.append_checked(
        folder,
        _items(folder),
        given,
        name,
        question="request_id",
        candidate="doc_id",
        keyed=day_items(folder),
    )


@router.get(_DAY + "/labels.csv")
def export_csv(request: Request, run_id: str, day: str) -> PlainTextResponse:
    """Every person's latest label of the day's items, as CSV (request and document ids)."""
    from ragaudit.audit import read_day_labels

    folder = _day_dir(request, run_id, day)
    return PlainTextResponse(
        labels.labels_csv(read_day_labels(folder)),
        media_type="text/csv; charset=utf-8",
        headers={
            "Content-Disposition": f'attachment; filename="{folder.parent.name}-{day}.labels.csv"'
        },
    )


@router.get(_DAY + "/labels.qrels")
def export_qrels(
    request: Request, run_id: str, day: str, annotator: AnnotatorQuery | None = None
) -> PlainTextResponse:
    """One person's grades of the served documents as TREC qrels (request id, document id)."""
    from ragaudit.audit import read_day_labels

    folder = _day_dir(request, run_id, day)
    name = None if annotator is None else _annotator(annotator)
    try:
        text = labels.grade_qrels(read_day_labels(folder), name)
    except InputError as exc:
        raise HTTPException(status_code=409, detail=str(exc)) from None
    return PlainTextResponse(
        text,
        headers={
            "Content-Disposition": f'attachment; filename="{folder.parent.name}-{day}.qrels.txt"'
        },
    )


def people_figures(folder: Path, days: list[str]) -> dict[str, list[dict[str, Any]]]:
    """Per day with labels: its PPI figures over every segment, with the labels as they are now.

    Computed from the day's tables (no call), so a label given a minute ago shows at once; the
    day's own ``estimates.parquet`` and report take them at its next ``ragaudit audit --day``.
    """
    out: dict[str, list[dict[str, Any]]] = {}
    for day in days:
        if not (folder / day / labels.SAMPLE_FILE).is_file():
            continue
        from ragaudit.audit import ALL, people_estimates

        figures = people_estimates(folder / day)
        if figures is not None:
            out[day] = figures.filter(figures["segment"] == ALL).sort("metric").to_dicts()
    return out


__all__ = ["people_figures", "router"]
