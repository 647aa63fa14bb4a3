"""People's labels: kept in the runs root's judgment store, read as each folder's; the sample.

Every label a person gives on a labelling page (a run's: ``ragaudit label`` and the viewer; an
audit day's) is one row of the runs root's judgment store (``<runs_root>/judgments/``, the
columns and keys of :mod:`ragaudit.judgment_parts`): a person's row of source ``labelling``
with its annotator, time and state, keyed as the judge's grade of the same pair is keyed (the
question as the judge saw it, a turn's conversation included, and the document's text:
``label_key``; a yes/no on an answer by ``answer_key``), and the folder and item it was given
on. One store, so a label counts wherever its pair appears: a run or an audit day holding a pair
someone labelled elsewhere finds it labelled, and a person is never asked a pair twice. Every
answer is one part written atomically under the store's lock (:class:`PartStore`, the one
append-only design): a killed server loses at most the label being written.

A folder's labels (:func:`read_labels`, schema ``LABELS``) are derived from the store: the rows
given on its page, and every person's (or imported person's) row whose key is one of its items'
(a run's sample, an audit day's items), filed under that item. Each says where it was given.

Folders labelled before the store kept their labels in the folder: ``<folder>/labels/`` (a part
store), older runs ``<folder>/labels.parquet``. The first read of such a folder writes its rows
into the store (their annotators and times kept, keyed from the folder's texts) with a marker
row, under the store's lock; the folder's files are never rewritten or deleted. So no label is
lost, and one mechanism remains.

``<run>/labels.sample.parquet`` (schema ``schemas.LABEL_SAMPLE``) holds the items to label:
drawn once, in one order every annotator follows, each with its chance of being drawn. Grades
are drawn in two stages (ADR 0020): questions at random, then inside each drawn question its
engine's top ten and a sample of the rest of its pool by the judge's grade, so that every
figure the report corrects (the relevant share, NDCG@10, agreement) is reachable and weighted
back; answer verdicts are stratified by the judge's score. What a person is shown of an item
(:func:`item_texts`) is the run's texts, never the verdict.
"""

from __future__ import annotations

import csv
import datetime as dt
import hashlib
import io
import json
import math
import random
import threading
from collections.abc import Callable, Hashable, Mapping, Sequence
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
from cachetools import LRUCache

from ragaudit import atomic, schemas
from ragaudit.dataset import Turn, exchanges
from ragaudit.errors import InputError
from ragaudit.hashing import canonical_hash
from ragaudit.judgment_parts import (
    LABELLING,
    RowsReader,
    answer_key,
    checked,
    label_key,
    row_parts,
    text_hash,
    text_parts,
)
from ragaudit.partstore import PartStore
from ragaudit.runfolder import (
    DamagedRunFile,
    RunFolder,
    RunsRoot,
    folder_kinds,
    read_parquet_file,
    stored_setting,
)
from ragaudit.runlock import file_lock
from ragaudit.trec import qrels_text

FILE = "labels.parquet"
"""The single labels file of runs labelled before the part store: read once into the store."""
STORE = "labels"
"""The per-folder labels store of folders labelled before the judgment store held people's
labels (``<folder>/labels/``): read once into the store, never written."""
_LOCK = ".labels.lock"
_MOVED = "folder labels:"
"""The source of the marker row saying a folder's older labels are in the store."""
_LEGACY_COLUMNS = schemas.LABELS.names[:7]
_STORE_GRADES = (0.0, 1.0, 2.0, 3.0)
"""Labels the store's ``grade`` holds (a grade, or a yes/no as 1/0)."""


def item_id(kind: str, question_id: str, candidate_id: str | None = None) -> str:
    """The id of a labelled item: a candidate's grade or an answer's metric verdict."""
    return f"{kind}:{question_id}" + (f":{candidate_id}" if candidate_id is not None else "")


def item_key(kind: str, question: str, text: str, contexts: Sequence[str] | None = None) -> str:
    """The store's key of what an item asks: a document's grade, or a yes/no on an answer.

    ``question`` is the question as the judge saw it (a turn's conversation so far, then the
    turn); ``text`` the document's text, or the answer's; ``contexts`` the contexts a person is
    shown beside an answer (None: none shown).
    """
    if kind == GRADE:
        return label_key(question, text)
    return answer_key(kind, question, text, list(contexts) if contexts is not None else None)


def _local_key(folder: str, item: str) -> str:
    """The key of an item whose texts the folder no longer holds: its folder's own, never shared."""
    return canonical_hash(["label-item/1", folder, item])


ITEM_COLUMNS = {
    "item_id": pl.String,
    "kind": pl.String,
    "question_id": pl.String,
    "candidate_id": pl.String,
    "question": pl.String,
    "text": pl.String,
    "key": pl.String,
}
"""A folder's items as the store sees them: ids, what the key was made of (the question as
judged; the document's or the answer's text) and the key."""


def items_frame(rows: Sequence[Mapping[str, Any]]) -> pl.DataFrame:
    """Items (dicts of :data:`ITEM_COLUMNS`) as a frame."""
    return pl.DataFrame([{c: r.get(c) for c in ITEM_COLUMNS} for r in rows], schema=ITEM_COLUMNS)


def root_of(folder: Path) -> Path:
    """The runs root ``folder`` lies in: an audit day's two folders up, any other's one."""
    parent = Path(folder).resolve().parent
    if any(k.depth > 1 and k.reserves(parent.name) for k in folder_kinds()):
        return parent.parent
    return parent


def folder_name(folder: Path) -> str:
    """The folder as the store names it: its path under the runs root (``audit-bot/2026-11-26``)."""
    folder = Path(folder).resolve()
    return folder.relative_to(root_of(folder)).as_posix()


def store_folder(folder: Path) -> Path:
    """The judgment store a folder's labels go to: its runs root's."""
    return RunsRoot(root_of(folder)).judgments_dir


# --- People's rows of the store ------------------------------------------------------------

_PEOPLE = {
    "key": pl.String,
    "annotator": pl.String,
    "label": pl.Float64,
    "time": pl.Datetime("us", "UTC"),
    "folder": pl.String,
    "item_id": pl.String,
    "kind": pl.String,
    "question_id": pl.String,
    "candidate_id": pl.String,
    "given_in": pl.String,
    "mark": pl.String,
}
"""People's rows as a folder's view reads them; ``mark``: a marker row's source (else null)."""


def _people_rows(table: pa.Table) -> pl.DataFrame:
    """A part's people's labels (a person's, or an imported person's), and its marker rows."""
    frame = pl.from_arrow(table)
    assert isinstance(frame, pl.DataFrame)
    kind = pl.col("source_kind")
    mark = pl.col("key") == ""
    people = frame.filter(
        mark | (kind == "person") | ((kind == "imported") & (pl.col("role") == "people"))
    )
    # What the labelling pages wrote in ``extra``; an imported row's ``extra`` is its source's.
    extra = pl.when(kind == "person").then(pl.col("extra"))
    graded = pl.col("state").fill_null("graded") == "graded"
    # A person's label as given; an imported row's grade on the store's scale (its source's
    # value is in the source's: "3.000", a COEC ratio).
    given = pl.when(kind == "person").then(pl.col("source_value").cast(pl.Float64, strict=False))
    label = pl.coalesce(given, pl.col("grade").cast(pl.Float64))
    folder = extra.str.json_path_match("$.folder")
    out = people.select(
        "key",
        pl.coalesce("annotator", "source").alias("annotator"),
        pl.when(graded).then(label).alias("label"),
        pl.col("created_at")
        .str.to_datetime(strict=False, time_unit="us", time_zone="UTC")
        .alias("time"),
        folder.alias("folder"),
        extra.str.json_path_match("$.item_id").alias("item_id"),
        pl.coalesce(extra.str.json_path_match("$.kind"), "metric", pl.lit(GRADE)).alias("kind"),
        "question_id",
        pl.col("context_id").alias("candidate_id"),
        pl.when(kind == "person")
        .then(folder)
        .otherwise(pl.lit("imported: ") + pl.col("source"))
        .alias("given_in"),
        pl.when(mark).then(pl.col("source")).alias("mark"),
    )
    return out.cast(_PEOPLE)  # type: ignore[arg-type]


class _People:
    """One store's people's rows (:class:`RowsReader`) and the hashes of the texts it keeps."""

    def __init__(self, folder: Path) -> None:
        self.rows = RowsReader(folder, _people_rows)
        self.texts = text_parts(folder)
        self.hashes: set[str] = set()
        self.lock = threading.Lock()

    def read(self) -> tuple[pl.DataFrame, set[str]]:
        """People's rows, oldest first, and the sources of the marker rows."""
        frame = self.rows.read()
        marks = frame.filter(pl.col("mark").is_not_null())
        return frame.filter(pl.col("mark").is_null()), set(marks["mark"].to_list())

    def known_texts(self) -> set[str]:
        """The hashes whose texts the store keeps."""
        with self.lock:
            for _, table in self.texts.read_new():
                self.hashes.update(table["text_hash"].to_pylist())
            return set(self.hashes)


_stores: LRUCache[Path, _People] = LRUCache(16)
_stores_lock = threading.Lock()


def _people(folder: Path) -> _People:
    key = store_folder(folder).resolve()
    with _stores_lock:
        reader = _stores.get(key)
        if reader is None:
            reader = _stores[key] = _People(key)
    return reader


def _judge_rows(table: pa.Table) -> pl.DataFrame:
    """A part's grades standing as a judge's: what paid for each, or the source it came from."""
    frame = pl.from_arrow(table)
    assert isinstance(frame, pl.DataFrame)
    return frame.filter(
        (pl.col("key") != "") & pl.col("judge").fill_null("").ne("") & pl.col("grade").is_not_null()
    ).select("question_hash", "text_hash", "judge", "grade", "source", "source_kind")


_judged: LRUCache[Path, RowsReader] = LRUCache(4)


def grade_sources(run_dir: Path, question_id: str) -> dict[str, list[dict[str, Any]]]:
    """Where the store's grades of a run question's candidates came from (provenance).

    Candidate id → each judge's grade the store holds of the pair (the question as its judge
    saw it, the candidate's text): ``judge`` (the model), ``grade``, ``kind`` (``judge``: a
    judge was paid for it, ``source`` naming the run, tune or audit that paid; ``imported``:
    another tool's grade standing for that judge, ``source`` the import's name). A pair the
    store does not hold (graded by a jury, in parts, or before the store) has none.
    """
    run = RunFolder(Path(run_dir).parent, Path(run_dir).name)
    if not run.has("candidates") or not run.has("questions"):
        return {}
    asked = _turns(run, {question_id}).get(question_id)
    if asked is None:
        return {}
    texts = {
        text_hash(c["text"]): c["context_id"]
        for c in run.candidates(ids={question_id}).get(question_id, [])
        if c["text"] is not None
    }
    key = store_folder(Path(run_dir)).resolve()
    with _stores_lock:
        reader = _judged.get(key)
        if reader is None:
            reader = _judged[key] = RowsReader(key, _judge_rows)
    found = reader.read().filter(
        (pl.col("question_hash") == text_hash(asked[0])) & pl.col("text_hash").is_in(list(texts))
    )
    out: dict[str, list[dict[str, Any]]] = {}
    for r in found.unique(maintain_order=True).iter_rows(named=True):
        kind = "imported" if r["source_kind"] == "imported" else "judge"
        out.setdefault(texts[r["text_hash"]], []).append(
            {"judge": r["judge"], "grade": r["grade"], "kind": kind, "source": r["source"]}
        )
    return out


def store_state(folder: Path) -> tuple[int, int]:
    """What changes whenever a row is added to the folder's judgment store (its folder's mtime).

    A page built from people's labels is kept while this and the folder's own files are.
    """
    try:
        st = store_folder(folder).stat()
    except OSError:
        return (0, 0)
    return (st.st_mtime_ns, st.st_ino)


# --- A folder's items ------------------------------------------------------------------------

_kept: LRUCache[Hashable, pl.DataFrame] = LRUCache(64)
_kept_lock = threading.Lock()


def _stat(path: Path) -> tuple[int, int]:
    try:
        st = path.stat()
    except OSError:
        return (0, -1)
    return (st.st_mtime_ns, st.st_size)


def cached_items(
    folder: Path, files: Sequence[str], build: Callable[[], pl.DataFrame]
) -> pl.DataFrame:
    """A folder's items, built again only when one of ``files`` of it changed."""
    folder = Path(folder).resolve()
    sig = (folder, tuple(_stat(folder / f) for f in files))
    with _kept_lock:
        found = _kept.get(sig)
    if found is None:
        found = build()
        with _kept_lock:
            _kept[sig] = found
    return found


_RUN_FILES = (
    "labels.sample.parquet",
    "questions.parquet",
    "candidates.parquet",
    "answers.parquet",
    "scores.parquet",
)


def run_items(run_dir: Path, wanted: Sequence[Mapping[str, Any]] | None = None) -> pl.DataFrame:
    """A run's items (its sample's, or ``wanted``) with the store's key of each.

    ``wanted``: dicts with ``item_id``, ``kind``, ``question_id``, ``candidate_id``. An item
    whose texts the run does not hold has its folder's own key (matched by nothing elsewhere).
    """
    run_dir = Path(run_dir)
    if wanted is None:
        sample = read_sample(run_dir)
        if sample is None:
            return items_frame([])
        rows: Sequence[Mapping[str, Any]] = sample.select(
            ["item_id", "kind", "question_id", "candidate_id"]
        ).to_pylist()
        return cached_items(run_dir, _RUN_FILES, lambda: _keyed(run_dir, rows))
    return _keyed(run_dir, wanted)


def _keyed(run_dir: Path, rows: Sequence[Mapping[str, Any]]) -> pl.DataFrame:
    if not rows:
        return items_frame([])
    name = folder_name(run_dir)
    out = []
    for row, shown in zip(rows, item_texts(run_dir, rows), strict=True):
        text = shown.get("candidate") if row["kind"] == GRADE else shown.get("answer")
        question = shown.get("asked")
        key = (
            item_key(row["kind"], question, text, shown.get("contexts"))
            if question is not None and text is not None
            else _local_key(name, row["item_id"])
        )
        out.append({**row, "question": question, "text": text, "key": key})
    return items_frame(out)


# --- Reading and writing a folder's labels ---------------------------------------------------


def _legacy(folder: Path) -> pa.Table | None:
    """The folder's own labels of before the store (its ``labels/`` parts and ``labels.parquet``).

    None when it has neither.

    Raises:
        DamagedRunFile: the older single file cannot be read or holds other columns.
        ForeignPart: a part file holds other columns (a damaged part is skipped and logged).
    """
    legacy = schemas.LABELS.empty_table().select(_LEGACY_COLUMNS).schema
    tables = []
    path = folder / FILE
    if path.is_file():
        tables.append(_of_schema(read_parquet_file(path), legacy, path))
    parts = PartStore(folder / STORE, legacy, prefix="labels")
    if parts.parts():
        tables.append(parts.read_all())
    return pa.concat_tables(tables) if tables else None


def _has_legacy(folder: Path) -> bool:
    return (folder / FILE).is_file() or bool(PartStore(folder / STORE, schemas.LABELS).parts())


def _a_run(folder: Path) -> None:
    """Refuse to key a folder two deep (an audit day) as a run: its items are its own to key."""
    if root_of(folder) != Path(folder).resolve().parent:
        raise ValueError(f"{folder}: give its items (an audit day's: ragaudit.audit.day_items)")


def _folder_items(folder: Path, items: pl.DataFrame | None) -> pl.DataFrame:
    """``items``, or a run's (its sample's) when None."""
    if items is not None:
        return items
    _a_run(folder)
    return run_items(folder)


def _keys_of(
    folder: Path, rows: Sequence[Mapping[str, Any]], items: pl.DataFrame | None
) -> dict[str, dict[str, Any]]:
    """Each row's item (its key and texts): from ``items``, else (a run) from the run's tables."""
    if items is not None:
        wanted = list({r["item_id"] for r in rows})
        return {r["item_id"]: r for r in items.filter(pl.col("item_id").is_in(wanted)).to_dicts()}
    _a_run(folder)
    return {r["item_id"]: r for r in run_items(folder, rows).to_dicts()}


def _migrate(folder: Path, items: pl.DataFrame | None) -> None:
    """Write the folder's labels of before the store into the store, once (see the module)."""
    if not _has_legacy(folder):
        return
    name = folder_name(folder)
    mark = _MOVED + name
    if mark in _people(folder).read()[1]:
        return
    old = _legacy(folder)
    rows = [] if old is None else old.to_pylist()
    parts = row_parts(store_folder(folder))
    with parts.lock():
        if mark in _people(folder).read()[1]:
            return  # another process moved them while this one waited
        if rows:
            _write(folder, rows, items, parts, moved=True)
        now = dt.datetime.now(dt.UTC).isoformat()
        marker = schemas.to_table(
            [{"key": "", "source": mark, "created_at": now}], schemas.JUDGMENTS
        )
        parts.append(marker, locked=True)


def _write(
    folder: Path,
    rows: Sequence[Mapping[str, Any]],
    items: pl.DataFrame | None,
    parts: PartStore,
    *,
    moved: bool = False,
) -> None:
    """Append ``rows`` (label rows of the folder) as people's rows; the caller holds the lock."""
    name = folder_name(folder)
    keyed = _keys_of(folder, rows, items)
    now = dt.datetime.now(dt.UTC)
    records, texts = [], {}
    for row in rows:
        found = keyed.get(row["item_id"])
        key = found["key"] if found else _local_key(name, row["item_id"])
        question = found["question"] if found else None
        text = found["text"] if found else None
        label = row.get("label")
        grade = int(label) if label is not None and label in _STORE_GRADES else None
        extra = {"folder": name, "item_id": row["item_id"], "kind": row["kind"]}
        if moved:
            extra["moved"] = "from the folder (before the store)"
        when = row.get("time") or now
        records.append(
            {
                "key": key,
                "judge": "",
                "question_hash": text_hash(question) if question is not None else None,
                "text_hash": text_hash(text) if text is not None else None,
                "question_id": row["question_id"],
                "context_id": row.get("candidate_id"),
                "grade": grade,
                "source": LABELLING,
                "created_at": when.isoformat(),
                "source_kind": "person",
                "annotator": row["annotator"],
                "state": "graded" if label is not None else "later",
                # The label as given: a value the store's grade cannot hold (a file from before
                # the store: 5, 0.5) stays readable, for the figures to count and leave out.
                "source_value": f"{label:g}" if label is not None else None,
                "query": question,
                "role": "people",
                "extra": json.dumps(extra, ensure_ascii=False, sort_keys=True),
                "metric": None if row["kind"] == GRADE else row["kind"],
            }
        )
        for t in (question, text):
            if t is not None:
                texts[text_hash(t)] = t
    table = checked(schemas.to_table(records, schemas.JUDGMENTS))
    known = _people(folder).known_texts()
    new = {h: t for h, t in texts.items() if h not in known}
    if new:
        text_table = pa.table(
            {"text_hash": list(new), "text": list(new.values())}, schema=schemas.JUDGMENT_TEXTS
        )
        text_parts(parts.folder).append(text_table, locked=True)
    parts.append(table, locked=True)


def read_labels(folder: Path, items: pl.DataFrame | None = None) -> pa.Table:
    """Every label of the folder's items, oldest first (an empty table of the schema when none).

    The rows given on the folder's page, and every person's row of the store whose key is one
    of ``items``' (a run's: its sample's, when None), filed under that item; ``given_in`` says
    where each was given. A folder's labels of before the store are moved in first.

    Raises:
        DamagedRunFile: the older single file cannot be read or holds other columns.
        ForeignPart: a part file holds other columns (a damaged part is skipped and logged).
    """
    folder = Path(folder)
    _migrate(folder, items)
    people, _ = _people(folder).read()
    mine = _folder_items(folder, items)
    name = folder_name(folder)
    cols = ["annotator", "label", "time", "given_in"]
    by_key = mine.select("item_id", "kind", "question_id", "candidate_id", "key").join(
        people.select("key", *cols), on="key"
    )
    here = people.filter(
        (pl.col("folder") == name) & ~pl.col("item_id").is_in(mine["item_id"].to_list())
    ).select("item_id", "kind", "question_id", "candidate_id", *cols, "key")
    found = pl.concat([by_key.select(here.columns), here]).sort("time", maintain_order=True)
    return found.select(schemas.LABELS.names).to_arrow().cast(schemas.LABELS)


def has_labels(folder: Path | str, items: pl.DataFrame | None = None) -> bool:
    """Whether any label reaches the folder's items (the test before anything is computed)."""
    folder = Path(folder)
    if _has_legacy(folder):
        return True
    people, _ = _people(folder).read()
    if people.is_empty():
        return False
    if not people.filter(pl.col("folder") == folder_name(folder)).is_empty():
        return True
    if not (folder / SAMPLE_FILE).is_file():
        return False
    return read_labels(folder, items).num_rows > 0


def _of_schema(table: pa.Table, schema: pa.Schema, path: Path) -> pa.Table:
    """``table`` cast to ``schema``; a file of other columns is refused in one line.

    A file copied in from elsewhere would otherwise fail later inside a sort or a concat.
    """
    missing = [name for name in schema.names if name not in table.column_names]
    try:
        if missing:
            raise pa.ArrowInvalid(f"no column {', '.join(missing)}")
        return table.select(schema.names).cast(schema)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        raise DamagedRunFile(
            f"{path}: not a ragaudit {path.name} ({exc}); move it away to start it anew"
        ) from None


def append_labels(
    folder: Path, rows: list[dict[str, Any]], items: pl.DataFrame | None = None
) -> None:
    """Append label rows of the folder's items to the store as one part (``time``: now, UTC).

    Each row: ``item_id``, ``kind``, ``question_id``, ``candidate_id``, ``annotator``,
    ``label`` (null: skipped), optionally ``time``. Keyed from ``items`` (a run's: from its
    tables, when None).

    Raises:
        DamagedRunFile: the folder's older single file cannot be read: its labels could not
            be moved into the store first, so none is saved until it is moved away.
    """
    folder = Path(folder)
    _migrate(folder, items)
    parts = row_parts(store_folder(folder))
    with parts.lock():
        _write(folder, rows, items, parts)


def latest_labels(table: pa.Table) -> pa.Table:
    """One row per (item, annotator): the latest label each person gave each item."""
    frame = pl.from_arrow(table)
    assert isinstance(frame, pl.DataFrame)
    latest = frame.sort("time").unique(subset=["item_id", "annotator"], keep="last")
    return latest.sort(["item_id", "annotator"]).to_arrow().cast(schemas.LABELS)


# --- The sample people label -------------------------------------------------------------

SAMPLE_FILE = "labels.sample.parquet"
GRADE = "grade"
"""The kind of a (question, candidate) item: a relevance grade 0-3."""
ANSWER_KINDS = ("faithfulness", "answer_relevancy")
"""Judged answer metrics a person labels yes/no: their score is a share a person can call."""
# A metric's score split in thirds: a stratum per region of the judge's scale, so that the
# items the judge calls bad, unsure and good are all checked.
_SCORE_BINS = ((1 / 3, "low [0, 1/3)"), (2 / 3, "mid [1/3, 2/3)"), (math.inf, "high [2/3, 1]"))


# What a person is asked of each kind, and the keys that answer it (the grade scale is the
# one the relevance judge is given, ``prompts/relevance.py``).
INSTRUCTIONS = {
    GRADE: "How well does the passage answer the question?",
    "faithfulness": "Is every claim of the answer supported by the contexts shown?",
    "answer_relevancy": "Does the answer address the question that was asked?",
}
_GRADE_CHOICES = (
    ("0", 0.0, "nothing to do with the question"),
    ("1", 1.0, "on its topic, does not answer it"),
    ("2", 2.0, "answers it in part, or unclearly"),
    ("3", 3.0, "about this question and contains its answer"),
)
_YES_NO_CHOICES = (("y", 1.0, "yes"), ("n", 0.0, "no"))


def choices(kind: str) -> list[dict[str, Any]]:
    """The answers to an item of ``kind``: the key that gives each, its label and its text."""
    given = _GRADE_CHOICES if kind == GRADE else _YES_NO_CHOICES
    return [{"key": key, "label": label, "text": text} for key, label, text in given]


def allowed_values(kind: str) -> tuple[float, ...]:
    """The labels a person may give an item of ``kind`` (besides null, skipped)."""
    return tuple(c["label"] for c in choices(kind))


def _grade_stratum(row: dict[str, Any]) -> str | None:
    if row.get("status") != "ok":
        return None  # a failed verdict has no judge grade to check
    if row.get("grade") is not None:
        return str(row["grade"])
    if row.get("relevant") is not None:
        # A run from before graded verdicts: only the relevant cut is known.
        return "relevant" if row["relevant"] else "not relevant"
    return None


def _score_stratum(value: float) -> str:
    return next(name for edge, name in _SCORE_BINS if value < edge)


Population = dict[str, list[tuple[str, str | None]]]
"""Per stratum, its items as (question_id, candidate_id) in a stable order."""


def populations(run_dir: Path) -> dict[str, Population]:
    """Every item a person could label, per kind and per stratum of the judge's verdict.

    Grade items: each (question, candidate) pair the judge graded, by its grade. Answer items:
    each question whose faithfulness / answer relevancy the judge scored, by a third of the
    score scale. Failed verdicts and unscored rows are left out: there is nothing to check.
    """
    run = RunFolder(Path(run_dir).parent, Path(run_dir).name)
    out: dict[str, Population] = {}
    if run.has("verdicts"):
        strata: Population = {}
        verdicts = run.read("verdicts").select(
            ["question_id", "context_id", "grade", "relevant", "status"]
        )
        for row in verdicts.to_pylist():
            stratum = _grade_stratum(row)
            if stratum is not None:
                strata.setdefault(stratum, []).append((row["question_id"], row["context_id"]))
        if strata:
            out[GRADE] = strata
    if run.has("scores"):
        scores = run.read("scores").select(["question_id", "metric", "value", "status"])
        for kind in ANSWER_KINDS:
            strata = {}
            for row in scores.filter(pc.equal(scores["metric"], kind)).to_pylist():
                if row["status"] == "ok" and row["value"] is not None:
                    strata.setdefault(_score_stratum(row["value"]), []).append(
                        (row["question_id"], None)
                    )
            if strata:
                out[kind] = strata
    for strata in out.values():
        for items in strata.values():
            items.sort(key=lambda it: (it[0], it[1] or ""))
    return out


def allocate(sizes: dict[str, int], n: int) -> dict[str, int]:
    """``n`` draws spread evenly over the strata, none given more than it holds.

    Even rather than proportional: a rare grade (the judge's few 3s) still gets enough items
    for its row of the confusion table; the stratum sizes kept with the sample undo the
    over-weighting when a mean is estimated.
    """
    taken = dict.fromkeys(sizes, 0)
    left = min(n, sum(sizes.values()))
    while left:
        open_ = [s for s in sorted(sizes) if taken[s] < sizes[s]]
        share, extra = divmod(left, len(open_))
        for i, s in enumerate(open_):
            give = min(share + (i < extra), sizes[s] - taken[s])
            taken[s] += give
            left -= give
    return taken


TOP_K = 10
"""The engine's top that NDCG@10 scores: its own stratum inside each drawn question."""
PER_QUESTION = 20
"""Grade items drawn from each drawn question (fewer when its pool is smaller): the top ten
whole and ten of the rest of the pool."""
TWO_STAGE = "two-stage"
STRATIFIED = "stratified"


def grade_frame(run_dir: Path) -> dict[str, list[tuple[str, str, int | None]]]:
    """Per question, its judged candidates as (candidate id, judge-grade stratum, engine rank).

    The first stage's frame: every question with a candidate the judge graded, in id order.
    """
    run = RunFolder(Path(run_dir).parent, Path(run_dir).name)
    if not run.has("verdicts"):
        return {}
    rank: dict[tuple[str, str], int | None] = {}
    if run.has("candidates"):
        cands = run.read("candidates").select(["question_id", "context_id", "engine_rank"])
        for r in cands.to_pylist():
            rank[(r["question_id"], r["context_id"])] = r["engine_rank"]
    frame: dict[str, list[tuple[str, str, int | None]]] = {}
    verdicts = run.read("verdicts").select(
        ["question_id", "context_id", "grade", "relevant", "status"]
    )
    for row in verdicts.to_pylist():
        stratum = _grade_stratum(row)
        if stratum is not None:
            key = (row["question_id"], row["context_id"])
            frame.setdefault(row["question_id"], []).append(
                (row["context_id"], stratum, rank.get(key))
            )
    for items in frame.values():
        items.sort()
    return dict(sorted(frame.items()))


def question_strata(items: list[tuple[str, str, int | None]]) -> dict[str, list[str]]:
    """One question's judged candidates in the second stage's strata.

    ``top 10``: the engine's first ten (every gain NDCG@10's numerator reads); ``rest, judge
    g``: the rest of the pool by the judge's grade, where the ideal order's gains hide (the
    judge's grade sorts them: its 0s seldom hold a person's 3).
    """
    strata: dict[str, list[str]] = {}
    for cid, stratum, rank in items:
        name = f"top {TOP_K}" if rank is not None and rank <= TOP_K else f"rest, judge {stratum}"
        strata.setdefault(name, []).append(cid)
    return strata


def allocate_question(sizes: dict[str, int], n: int) -> dict[str, int]:
    """``n`` draws inside one question: half to its top ten, the rest over the pool's strata.

    With the default budget the top ten is taken whole, so NDCG@10's numerator is known
    exactly; the pool's strata get one draw each, the rest in proportion to their sizes (the
    ideal order's counts are estimated per stratum, and a big stratum's count is the most
    uncertain). What the top cannot take goes to the pool and back.
    """
    top = f"top {TOP_K}"
    rest = {s: k for s, k in sizes.items() if s != top}
    to_top = min(sizes.get(top, 0), -(-n // 2) if rest else n)
    taken = _proportional(rest, n - to_top)
    spare = n - to_top - sum(taken.values())
    if top in sizes:
        taken[top] = min(sizes[top], to_top + spare)
    return taken


def _proportional(sizes: dict[str, int], n: int) -> dict[str, int]:
    """``n`` draws: one per stratum first, then each to the stratum of most items per draw."""
    taken = {s: 0 for s in sizes}
    for s in sorted(sizes, key=lambda s: (-sizes[s], s)):
        if n - sum(taken.values()) > 0 and sizes[s] > 0:
            taken[s] = 1
    while n - sum(taken.values()) > 0:
        open_ = [s for s in sorted(sizes) if taken[s] < sizes[s]]
        if not open_:
            break
        best = max(open_, key=lambda s: sizes[s] / (taken[s] + 1))
        taken[best] += 1
    return taken


def _signature(pops: dict[str, Population], frame: dict[str, Any]) -> str:
    """A digest of the items a sample is drawn from: labels drawn for other items are refused."""
    body = json.dumps({"frame": frame, "answers": pops}, sort_keys=True, separators=(",", ":"))
    return "s1:" + hashlib.sha256(body.encode("utf-8")).hexdigest()[:20]


def run_signature(run_dir: Path) -> str:
    """The signature of the run's judged items, as its sample records it."""
    pops = populations(run_dir)
    return _signature({k: v for k, v in pops.items() if k != GRADE}, grade_frame(run_dir))


def draw_sample(run_dir: Path, n: int, *, seed: int = 0) -> pa.Table:
    """About ``n`` items of each kind to label, with each item's chance of being drawn.

    Grades (a two-stage design): ``m`` questions drawn at random from those with a judged
    candidate (m = n over the items a question gives, at most every question), then inside
    each drawn question up to :data:`PER_QUESTION` candidates: half from the engine's top ten,
    the rest from the pool by the judge's grade (:func:`allocate_question`). A drawn question
    thus yields every figure: its relevant share, its NDCG@10's gains (top ten) and ideal
    (the pool). The items come question after question, the questions in random order: a
    session stopped early has labelled fewer whole questions, a smaller sample of the same
    design. Answer metrics: each question's verdict, stratified by a third of the score scale.

    Raises:
        InputError: ``n`` below 1, or a run with no judged item to label.
    """
    if n < 1:
        raise InputError(f"--sample {n}: give at least 1 item per kind")
    rng = random.Random(seed)
    pops = populations(run_dir)
    frame = grade_frame(run_dir)
    if not pops:
        raise InputError(
            f"run {Path(run_dir).name}: nothing to label: no verdict graded and no "
            f"{' / '.join(ANSWER_KINDS)} score (run the sort or score stage first)"
        )
    common = {
        "seed": seed,
        "run_signature": _signature({k: v for k, v in pops.items() if k != GRADE}, frame),
        "sample_id": f"{Path(run_dir).name}:{seed}:{dt.datetime.now(dt.UTC).isoformat()}",
        "drawn_at": dt.datetime.now(dt.UTC),
    }
    rows: list[dict[str, Any]] = []
    if frame:
        per_question = min(PER_QUESTION, math.ceil(sum(map(len, frame.values())) / len(frame)))
        m = min(len(frame), math.ceil(n / per_question))
        for qid in rng.sample(sorted(frame), m):
            strata = question_strata(frame[qid])
            counts = allocate_question({s: len(c) for s, c in strata.items()}, per_question)
            drawn = []
            for stratum in sorted(strata):
                for cid in rng.sample(strata[stratum], counts.get(stratum, 0)):
                    size, taken = len(strata[stratum]), counts[stratum]
                    drawn.append(
                        {
                            "item_id": item_id(GRADE, qid, cid),
                            "kind": GRADE,
                            "question_id": qid,
                            "candidate_id": cid,
                            "stratum": stratum,
                            "stratum_size": size,
                            "stratum_sampled": taken,
                            "design": TWO_STAGE,
                            "psu_size": len(frame),
                            "psu_sampled": m,
                            "inclusion": (m / len(frame)) * (taken / size),
                            **common,
                        }
                    )
            rng.shuffle(drawn)
            rows += drawn
    for kind in ANSWER_KINDS:
        bins = pops.get(kind)
        if not bins:
            continue
        counts = allocate({s: len(items) for s, items in bins.items()}, n)
        drawn = []
        for stratum in sorted(bins):
            for qid, answer_cid in rng.sample(bins[stratum], counts[stratum]):
                drawn.append(
                    {
                        "item_id": item_id(kind, qid, answer_cid),
                        "kind": kind,
                        "question_id": qid,
                        "candidate_id": answer_cid,
                        "stratum": stratum,
                        "stratum_size": len(bins[stratum]),
                        "stratum_sampled": counts[stratum],
                        "design": STRATIFIED,
                        "inclusion": counts[stratum] / len(bins[stratum]),
                        **common,
                    }
                )
        rng.shuffle(drawn)
        rows += drawn
    for position, row in enumerate(rows):
        row["position"] = position
    return schemas.to_table(rows, schemas.LABEL_SAMPLE)


def read_sample(run_dir: Path) -> pa.Table | None:
    """The run's sample, in labelling order (None when none was drawn).

    A sample drawn before the design columns (schema version 1) is read with them null.
    """
    path = Path(run_dir) / SAMPLE_FILE
    if not path.is_file():
        return None
    table = read_parquet_file(path)
    for field in schemas.LABEL_SAMPLE:
        if field.name not in table.column_names and field.name in _SAMPLE_V2:
            table = table.append_column(field.name, pa.nulls(table.num_rows, field.type))
    return _of_schema(table, schemas.LABEL_SAMPLE, path).sort_by("position")


_SAMPLE_V2 = (
    "design",
    "psu_size",
    "psu_sampled",
    "inclusion",
    "run_signature",
    "sample_id",
    "drawn_at",
)


def ensure_sample(run_dir: Path, n: int, *, seed: int = 0) -> tuple[pa.Table, bool]:
    """The run's sample, drawn and written first when there is none; and whether it was drawn.

    A sample once written is kept whatever ``n`` says: every annotator must get the same items.
    """
    run_dir = Path(run_dir)
    with file_lock(run_dir / _LOCK):
        kept = read_sample(run_dir)
        if kept is not None:
            return kept, False
        table = draw_sample(run_dir, n, seed=seed)
        atomic.write_table(table, run_dir / SAMPLE_FILE)
        return table, True


# --- The texts of an item, and what a person said ----------------------------------------


def conversation_shown(
    utterance: str, history: Sequence[Turn | Mapping[str, Any]], cut: int | None, language: str
) -> tuple[str, list[dict[str, Any]]]:
    """A turn as its judge saw it, and its conversation as a labelling page shows it.

    ``history``: the earlier turns (``Turn`` or dicts with ``role`` and ``text``); ``cut``: how
    many of its earliest exchanges the judge's prompts left out (the ``history_cut`` recorded
    with the turn). Returns the question text the judge's prompts and keys were built from (the
    conversation so far, then the turn: ``conversation.render``; the utterance alone for a turn
    without history, or whose history was all left out) and each earlier turn (``role``,
    ``text``, ``cut``: whether the judge was shown it).
    """
    turns = [Turn.model_validate(t) if isinstance(t, Mapping) else t for t in history]
    if not turns:
        return utterance, []
    parts = exchanges(turns)
    left = min(max(cut or 0, 0), len(parts))
    shown = [
        {"role": t.role, "text": t.text, "cut": i < left}
        for i, exchange in enumerate(parts)
        for t in exchange
    ]
    kept = [t for exchange in parts[left:] for t in exchange]
    if not kept:
        return utterance, shown
    # Imported here: the conversation module counts tokens through the gateway, which a page
    # of lone questions never needs to load.
    from ragaudit.conversation import render

    return render(utterance, kept, left, language), shown


def _turns(run: RunFolder, ids: set[str]) -> dict[str, tuple[str, list[dict[str, Any]]]]:
    """Each question's text as its judge saw it and its conversation (lone questions: as is)."""
    cuts: dict[str, int | None] = {}
    for r in run.rows("questions", ids):
        stored = r.get("conversation")
        cut = json.loads(stored).get("history_cut") if stored else None
        cuts[r["question_id"]] = cut if isinstance(cut, int) and not isinstance(cut, bool) else None
    return {
        q.question_id: conversation_shown(
            q.question, q.history or [], cuts.get(q.question_id), q.language
        )
        for q in run.questions(ids)
    }


def item_texts(run_dir: Path, items: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """What a person sees of each item: never the judge's verdict, only the run's texts.

    Each item (a dict with ``kind``, ``question_id``, ``candidate_id``) gets ``question`` (the
    turn), ``history`` (a turn's earlier turns, each with ``role``, ``text`` and ``cut``: left
    out of the judge's prompts; [] for a lone question) and ``asked`` (the question as the
    judge saw it, what its label is keyed by); a grade item ``candidate`` (its text) and
    ``rank`` (the engine's); an answer item ``answer`` and, for a metric that reads them,
    ``contexts``: the first ``k_used`` candidates in engine order, the ones its judge read.
    """
    run = RunFolder(Path(run_dir).parent, Path(run_dir).name)
    ids = {it["question_id"] for it in items}
    questions = (
        {r["question_id"]: r["question"] for r in run.rows("questions", ids)}
        if run.has("questions")
        else {}
    )
    turns = _turns(run, ids) if questions else {}
    candidates = run.candidates(ids=ids) if run.has("candidates") else {}
    answers = run.answers(ids) if run.has("answers") else {}
    k_used: dict[tuple[str, str], int | None] = {}
    answered = any(it["kind"] != GRADE for it in items)
    if answered and run.has("scores"):
        for r in run.rows("scores", ids):
            k_used[(r["question_id"], r["metric"])] = r["k_used"]
    top_k = stored_setting(run, "score.top_k")
    out = []
    for it in items:
        qid, kind = it["question_id"], it["kind"]
        pool = candidates.get(qid, [])
        asked, history = turns.get(qid, (questions.get(qid), []))
        shown: dict[str, Any] = {
            "kind": kind,
            "question_id": qid,
            "candidate_id": it["candidate_id"],
            "question": questions.get(qid),
            "history": history,
            "asked": asked,
        }
        if kind == GRADE:
            cand = next((c for c in pool if c["context_id"] == it["candidate_id"]), None)
            shown["candidate"] = cand["text"] if cand else None
            shown["rank"] = cand["engine_rank"] if cand else None
        else:
            shown["answer"] = (answers.get(qid) or {}).get("response")
            if reads_contexts(kind):
                k = k_used.get((qid, kind)) or top_k or len(pool)
                shown["contexts"] = [c["text"] for c in pool[:k]]
        out.append(shown)
    return out


def reads_contexts(kind: str) -> bool:
    """Whether a person labelling an answer for metric ``kind`` is shown the contexts too."""
    # Imported here: the metric registry costs a second of start-up that the viewer's first
    # page must not wait for; only an answer item needs to know which metrics read contexts.
    from ragaudit.metrics import METRICS

    return "contexts" in METRICS[kind].inputs


def store_dir(path: Path) -> Path | None:
    """The folder whose labels ``path`` names (it, its ``labels/`` or its ``labels.parquet``).

    None when ``path`` is none of these (a labels file of another format).

    Raises:
        InputError: a folder without labels.
    """
    path = Path(path)
    if path.name == STORE and path.parent.is_dir() and has_labels(path.parent):
        # A folder's ``labels/``, whether or not it kept labels there before the store.
        return path.parent
    if path.is_dir():
        if not has_labels(path):
            raise InputError(f"{path}: no labels in this folder (label the run first)")
        return path
    if path.name == FILE and path.is_file():
        return path.parent
    return None


def labelled_items(run_dir: Path, kinds: tuple[str, ...]) -> list[dict[str, Any]]:
    """Each person's latest non-skipped label of the items of ``kinds``, with the items' texts.

    Rows: the label row's fields plus what :func:`item_texts` gives (question, candidate and
    rank, or answer and contexts), in item then annotator order.
    """
    latest = latest_labels(read_labels(run_dir))
    latest = latest.filter(
        pc.and_(
            pc.is_in(latest["kind"], pa.array(kinds, pa.string())), pc.is_valid(latest["label"])
        )
    )
    rows = latest.to_pylist()
    texts = item_texts(run_dir, rows) if rows else []
    return [{**row, **shown} for row, shown in zip(rows, texts, strict=True)]


def labelled_positions(
    sample: pa.Table, labels: pa.Table, annotator: str
) -> dict[int, float | None]:
    """The positions of the sample ``annotator`` has labelled, with their latest label."""
    mine = latest_labels(labels.filter(pc.equal(labels["annotator"], annotator)))
    given = dict(zip(mine["item_id"].to_pylist(), mine["label"].to_pylist(), strict=True))
    return {
        pos: given[iid]
        for pos, iid in zip(
            sample["position"].to_pylist(), sample["item_id"].to_pylist(), strict=True
        )
        if iid in given
    }


def next_position(done: Mapping[int, Any], after: int, total: int) -> int:
    """The first position after ``after`` the annotator has not labelled (``total``: none left).

    A position labelled anywhere, on this page or wherever its pair appeared, is not asked.
    """
    return next((p for p in range(after + 1, total) if p not in done), total)


def given_where(labels: pa.Table, annotator: str, folder: Path) -> dict[str, dict[str, Any]]:
    """Item id → where and when ``annotator``'s latest label of it was given (provenance).

    ``given_in``: the folder of the page it was given on (``here``: ``folder``'s own), or
    ``imported: <source>``.
    """
    mine = latest_labels(labels.filter(pc.equal(labels["annotator"], annotator)))
    name = folder_name(folder)
    return {
        r["item_id"]: {
            "given_in": r["given_in"],
            "here": r["given_in"] == name,
            "time": r["time"].isoformat() if r["time"] is not None else None,
        }
        for r in mine.select(["item_id", "given_in", "time"]).to_pylist()
    }


def grade_qrels(labels: pa.Table, annotator: str | None = None) -> str:
    """A person's grades as TREC qrels (``qid 0 docid grade``); skipped items left out.

    Raises:
        InputError: no annotator named while several people graded, or an unknown one.
    """
    latest = latest_labels(labels)
    latest = latest.filter(pc.equal(latest["kind"], GRADE))
    people = sorted(set(latest["annotator"].to_pylist()))
    if annotator is None:
        if len(people) > 1:
            raise InputError(
                f"{len(people)} people graded ({', '.join(people)}): name one annotator "
                "(qrels hold one grade per document)"
            )
    elif annotator not in people:
        raise InputError(
            f"annotator {annotator!r} graded nothing (graders: {', '.join(people) or 'none'})"
        )
    if annotator is not None:
        latest = latest.filter(pc.equal(latest["annotator"], annotator))
    by_question: dict[str, dict[str, int]] = {}
    for row in latest.sort_by(
        [("question_id", "ascending"), ("candidate_id", "ascending")]
    ).to_pylist():
        if row["label"] is not None:
            by_question.setdefault(row["question_id"], {})[row["candidate_id"]] = int(row["label"])
    return qrels_text(by_question)


# A spreadsheet opens a CSV cell starting with one of these as a formula: the cell gets a
# leading quote, so a question id like ``=HYPERLINK(...)`` stays text.
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def _cell(value: Any) -> Any:
    if isinstance(value, str) and value.startswith(_FORMULA_START):
        return "'" + value
    return value


def labels_csv(labels: pa.Table) -> str:
    """Each person's latest label of each item as CSV (``label`` empty: skipped)."""
    latest = latest_labels(labels)
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(latest.column_names)
    for row in latest.to_pylist():
        row["time"] = row["time"].isoformat() if row["time"] is not None else None
        writer.writerow([_cell(row[c]) for c in latest.column_names])
    return out.getvalue()
