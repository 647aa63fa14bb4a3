"""The labelling pages and their JSON API, mounted by the viewer's app.

One item at a time from the run's sample (``labels.sample.parquet``), blind: an item carries
the run's texts (a turn's conversation above it), never the judge's verdict or the stratum it
was drawn from. Every answer is one POST appended to the runs root's judgment store at once, so
a closed tab or a killed server loses at most the item on screen. An item whose pair the
person labelled anywhere (on another run's page, an audit day's) counts as labelled: the page
resumes at, and goes on to, the next item they have not labelled, and says where each of their
labels was given. The page is static HTML and a vendored script that writes every run text with
``textContent``; no run text is ever put into HTML on the server.
"""

from __future__ import annotations

import unicodedata
from pathlib import Path
from typing import Annotated, Any

import polars as pl
import pyarrow as pa
from fastapi import APIRouter, HTTPException, Query, Request
from fastapi.responses import FileResponse, HTMLResponse, PlainTextResponse, RedirectResponse
from pydantic import BaseModel, ConfigDict, Field

from ragaudit import labels
from ragaudit.errors import InputError
from ragaudit.viewer._pages import _message, _render
from ragaudit.viewer._paths import attachment, run_path, run_url

router = APIRouter()

STATIC = Path(__file__).parent / "static"
_STATIC_FILES = {"labelling.js": "text/javascript", "labelling.css": "text/css"}
MAX_ANNOTATOR = 80


def _run_dir(request: Request, run_id: str) -> Path:
    return run_path(Path(request.app.state.runs_root), run_id)


def _sample(run_dir: Path) -> pa.Table:
    sample = labels.read_sample(run_dir)
    if sample is None:
        raise HTTPException(
            status_code=404,
            detail=f"no sample to label: run `ragaudit label {run_dir.name} --sample 100` first",
        )
    return sample


def _annotator(name: str) -> str:
    """The annotator's name as stored: one person, one name.

    Taken as given (the server decoded the address or the body once; a ``%`` in it is a
    character of the name), in Unicode's composed form with its spaces collapsed, so that
    ``Ana Lee`` typed twice, or pasted with a doubled space, is one annotator. 422 for an
    empty, overlong or control-character name.
    """
    name = " ".join(unicodedata.normalize("NFC", name).split())
    if not name or len(name) > MAX_ANNOTATOR:
        raise HTTPException(status_code=422, detail=f"annotator: 1 to {MAX_ANNOTATOR} characters")
    if any(unicodedata.category(ch).startswith("C") for ch in name):
        raise HTTPException(status_code=422, detail="annotator: no control characters")
    return name


AnnotatorQuery = Annotated[str, Query(max_length=4 * MAX_ANNOTATOR)]


@router.get("/labelling/static/{name}", include_in_schema=False)
def static_file(name: str) -> FileResponse:
    """The page's own script and style, vendored in the package (no CDN)."""
    if name not in _STATIC_FILES:
        raise HTTPException(status_code=404, detail="no such file")
    return FileResponse(STATIC / name, media_type=_STATIC_FILES[name])


@router.get("/runs/{run_id}/label", response_class=HTMLResponse)
def label_page(request: Request, run_id: str) -> HTMLResponse:
    """The labelling page of a run (404 for a run outside the root)."""
    _run_dir(request, run_id)
    return HTMLResponse(
        _render("labelling.html.j2"),
        headers={
            # The page loads its own files only: an injected script or a remote fetch would be
            # refused by the browser even if some text escaped escaping.
            "Content-Security-Policy": "default-src 'self'; object-src 'none'; base-uri 'none'",
            "X-Content-Type-Options": "nosniff",
        },
    )


@router.post("/runs/{run_id}/label/api/sample")
def make_sample(
    request: Request, run_id: str, n: Annotated[int, Query(ge=1, le=100_000)] = 100
) -> dict[str, Any]:
    """Draw the run's sample when it has none (a kept sample is never drawn again)."""
    run_dir = _run_dir(request, run_id)
    try:
        sample, drawn = labels.ensure_sample(run_dir, n)
    except InputError as exc:
        raise HTTPException(status_code=409, detail=str(exc)) from None
    return {"total": sample.num_rows, "drawn": drawn}


@router.post("/runs/{run_id}/label/draw", response_model=None)
def draw_and_label(
    request: Request, run_id: str, n: Annotated[int, Query(ge=1, le=100_000)] = 100
) -> RedirectResponse | HTMLResponse:
    """The viewer's "Label a sample" button: draw the sample (if none), then the labelling page."""
    run_dir = _run_dir(request, run_id)
    try:
        labels.ensure_sample(run_dir, n)
    except InputError as exc:
        # A form's answer is a page a person reads (the API's JSON would show raw in the tab).
        return _message("Nothing to label", str(exc), 409)
    # 303: the browser follows with a GET, so a reload of the page never draws again.
    return RedirectResponse(run_url(run_dir.name, "label"), status_code=303)


@router.get("/runs/{run_id}/label/api/start")
def start(request: Request, run_id: str, annotator: AnnotatorQuery) -> dict[str, Any]:
    """How far ``annotator`` got: the total, how many they labelled, where to resume."""
    run_dir = _run_dir(request, run_id)
    name = _annotator(annotator)
    sample = _sample(run_dir)
    done = labels.labelled_positions(sample, labels.read_labels(run_dir), name)
    return {
        "run_id": run_dir.name,
        "total": sample.num_rows,
        "labelled": len(done),
        "resume": labels.next_position(done, -1, sample.num_rows),
    }


def _row(sample: pa.Table, position: int) -> dict[str, Any]:
    if not 0 <= position < sample.num_rows:
        raise HTTPException(status_code=404, detail=f"no item {position}")
    return sample.slice(position, 1).to_pylist()[0]


@router.get("/runs/{run_id}/label/api/items/{position}")
def item(request: Request, run_id: str, position: int, annotator: AnnotatorQuery) -> dict[str, Any]:
    """Item ``position`` of the sample as a person sees it, with their label of it if any."""
    run_dir = _run_dir(request, run_id)
    name = _annotator(annotator)
    sample = _sample(run_dir)
    row = _row(sample, position)
    shown = labels.item_texts(run_dir, [row])[0]
    # The engine's rank is no verdict of the judge, but a person told "rank 1" grades higher;
    # the question as the judge saw it is the conversation above, said once.
    shown.pop("rank", None)
    shown.pop("asked", None)
    return shown_item(run_dir, shown, sample, row, labels.read_labels(run_dir), name)


def shown_item(
    folder: Path,
    shown: dict[str, Any],
    items: pa.Table,
    row: dict[str, Any],
    given: pa.Table,
    annotator: str,
) -> dict[str, Any]:
    """An item as the page shows it: its texts, how to answer, and the person's label of it.

    ``given``: the folder's labels; the person's label of the item, if any, says where it was
    given (this page, another folder's where its pair appeared, an imported source).
    """
    position = row["position"]
    done = labels.labelled_positions(items, given, annotator)
    return {
        **shown,
        "position": position,
        "total": items.num_rows,
        "item_id": row["item_id"],
        "instruction": labels.INSTRUCTIONS[row["kind"]],
        "choices": labels.choices(row["kind"]),
        "labelled": position in done,
        "label": done.get(position),
        "given": labels.given_where(given, annotator, folder).get(row["item_id"]),
    }


class LabelIn(BaseModel):
    """One answer of a person to one item (``label`` null: skipped)."""

    model_config = ConfigDict(extra="forbid")

    position: int = Field(ge=0)
    item_id: str = Field(max_length=2000)
    annotator: str = Field(max_length=4 * MAX_ANNOTATOR)
    label: float | None


@router.post("/runs/{run_id}/label/api/labels")
def add_label(request: Request, run_id: str, given: LabelIn) -> dict[str, Any]:
    """Append one label to the store at once; 409 when the item is not the sample's there."""
    run_dir = _run_dir(request, run_id)
    name = _annotator(given.annotator)
    return append_checked(run_dir, _sample(run_dir), given, name)


def append_checked(
    folder: Path,
    items: pa.Table,
    given: LabelIn,
    annotator: str,
    *,
    question: str = "question_id",
    candidate: str = "candidate_id",
    keyed: pl.DataFrame | None = None,
) -> dict[str, Any]:
    """Append ``given`` to the judgment store, checked against the folder's items people label.

    ``question`` and ``candidate`` name the item's columns filed as the label's question and
    candidate ids (an audit day's items name them ``request_id`` and ``doc_id``); ``keyed``:
    the folder's items with their keys (a run's: from its tables, when None). The answer's
    ``next`` is the first later position the person has not labelled.

    Raises:
        HTTPException: 409 when the item at the position is not the one the page showed, 422
            for a label its kind does not take.
    """
    row = _row(items, given.position)
    if row["item_id"] != given.item_id:
        # The items on disk are not the ones the page loaded (drawn again): refuse rather than
        # file a label under the wrong item.
        raise HTTPException(status_code=409, detail="the item at this position changed: reload")
    if given.label is not None and given.label not in labels.allowed_values(row["kind"]):
        allowed = ", ".join(f"{v:g}" for v in labels.allowed_values(row["kind"]))
        raise HTTPException(
            status_code=422, detail=f"label {given.label:g} for {row['kind']}: one of {allowed}"
        )
    labels.append_labels(
        folder,
        [
            {
                "item_id": row["item_id"],
                "kind": row["kind"],
                "question_id": row[question],
                "candidate_id": row[candidate],
                "annotator": annotator,
                "label": given.label,
            }
        ],
        keyed,
    )
    done = labels.labelled_positions(items, labels.read_labels(folder, keyed), annotator)
    return {
        "position": given.position,
        "next": labels.next_position(done, given.position, items.num_rows),
        "total": items.num_rows,
        "labelled": len(done),
    }


@router.get("/runs/{run_id}/labels.csv")
def export_csv(request: Request, run_id: str) -> PlainTextResponse:
    """Every person's latest label of every item, as CSV."""
    run_dir = _run_dir(request, run_id)
    return PlainTextResponse(
        labels.labels_csv(labels.read_labels(run_dir)),
        media_type="text/csv; charset=utf-8",
        headers={"Content-Disposition": attachment(f"{run_dir.name}.labels.csv")},
    )


@router.get("/runs/{run_id}/labels.qrels")
def export_qrels(
    request: Request, run_id: str, annotator: AnnotatorQuery | None = None
) -> PlainTextResponse:
    """One person's grades as TREC qrels (the only grader's when ``annotator`` is not named)."""
    run_dir = _run_dir(request, run_id)
    name = None if annotator is None else _annotator(annotator)
    table = labels.read_labels(run_dir)
    try:
        text = labels.grade_qrels(table, name)
    except InputError as exc:
        raise HTTPException(status_code=409, detail=str(exc)) from None
    return PlainTextResponse(
        text,
        headers={"Content-Disposition": attachment(f"{run_dir.name}.qrels.txt")},
    )
