"""People's labels in the judgment store: rows survive, the latest per person wins, threads lose
nothing, a folder's older labels are moved in once and kept."""

from __future__ import annotations

import datetime as dt
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from ragaudit import labels, ppi, schemas
from ragaudit.judgment_parts import LABELLING, row_parts
from ragaudit.partstore import ForeignPart, PartStore


def _row(candidate: str, label: float | None, annotator: str = "ann") -> dict[str, object]:
    return {
        "item_id": labels.item_id("grade", "q1", candidate),
        "kind": "grade",
        "question_id": "q1",
        "candidate_id": candidate,
        "annotator": annotator,
        "label": label,
    }


def _run(tmp_path: Path) -> Path:
    folder = tmp_path / "runs" / "run-1"
    folder.mkdir(parents=True)
    return folder


def _store(folder: Path) -> Path:
    return folder.parent / "judgments"


def test_an_empty_run_has_no_labels(tmp_path: Path) -> None:
    assert labels.read_labels(_run(tmp_path)).num_rows == 0


def test_the_latest_label_of_a_person_wins_and_others_stay(tmp_path: Path) -> None:
    run = _run(tmp_path)
    labels.append_labels(run, [_row("c1", 1.0)])
    labels.append_labels(run, [_row("c1", 3.0), _row("c1", 2.0, annotator="bob")])
    table = labels.read_labels(run)
    assert table.num_rows == 3
    assert set(table["given_in"].to_pylist()) == {"run-1"}
    latest = {
        (r["annotator"], r["item_id"]): r["label"] for r in labels.latest_labels(table).to_pylist()
    }
    assert latest == {("ann", "grade:q1:c1"): 3.0, ("bob", "grade:q1:c1"): 2.0}


def test_concurrent_appends_keep_every_row(tmp_path: Path) -> None:
    run = _run(tmp_path)
    with ThreadPoolExecutor(max_workers=8) as pool:
        list(pool.map(lambda i: labels.append_labels(run, [_row(f"c{i}", 1.0)]), range(40)))
    ids = sorted(labels.read_labels(run).column("candidate_id").to_pylist())
    assert ids == sorted(f"c{i}" for i in range(40))


def test_a_label_is_a_persons_row_of_the_runs_roots_store_and_never_rewrites_one(
    tmp_path: Path,
) -> None:
    run = _run(tmp_path)
    labels.append_labels(run, [_row("c1", 1.0)])
    (first,) = _store(run).glob("part-*.parquet")
    before = first.read_bytes()
    labels.append_labels(run, [_row("c2", 2.0), _row("c3", None)])
    parts = sorted(_store(run).glob("part-*.parquet"))
    assert len(parts) == 2 and parts[0] == first and first.read_bytes() == before
    # Nothing of the labels in the run's folder: one store, one mechanism.
    assert not (run / labels.FILE).exists() and not (run / labels.STORE).exists()
    rows = pl.from_arrow(row_parts(_store(run)).read_all())
    assert isinstance(rows, pl.DataFrame)
    assert set(rows["source_kind"]) == {"person"} and set(rows["source"]) == {LABELLING}
    assert set(rows["role"]) == {"people"} and rows["judge"].to_list() == ["", "", ""]
    assert rows["state"].to_list() == ["graded", "graded", "later"]  # a skip is put off
    assert rows["annotator"].to_list() == ["ann"] * 3 and rows["created_at"].null_count() == 0
    assert labels.has_labels(run) and ppi.has_labels(run)


def _old(run: Path) -> None:
    """Labels as runs kept them before the store: the single file, then the folder's parts."""
    legacy = pa.schema([schemas.LABELS.field(n) for n in schemas.LABELS.names[:7]])
    old = pa.Table.from_pylist(
        [{**_row("c1", 1.0), "time": dt.datetime(2026, 1, 1, tzinfo=dt.UTC)}], schema=legacy
    )
    pq.write_table(old, run / labels.FILE)
    parts = PartStore(run / labels.STORE, legacy, prefix="labels")
    later = {**_row("c2", 2.0, "bob"), "time": dt.datetime(2026, 1, 2, tzinfo=dt.UTC)}
    parts.append(pa.Table.from_pylist([later], schema=legacy))


def test_a_folders_older_labels_are_moved_into_the_store_once_and_kept(tmp_path: Path) -> None:
    run = _run(tmp_path)
    _old(run)
    files = {
        p: p.read_bytes() for p in [run / labels.FILE, *(run / labels.STORE).glob("*.parquet")]
    }
    assert labels.has_labels(run) and ppi.has_labels(run)
    table = labels.read_labels(run)
    assert table["label"].to_pylist() == [1.0, 2.0]
    assert [t.isoformat() for t in table["time"].to_pylist()] == [
        "2026-01-01T00:00:00+00:00",
        "2026-01-02T00:00:00+00:00",
    ]
    moved = row_parts(_store(run)).read_all().num_rows
    labels.read_labels(run)
    labels.append_labels(run, [_row("c1", 3.0)])
    # Moved once: a second read writes nothing more; the new label goes to the store.
    assert row_parts(_store(run)).read_all().num_rows == moved + 1
    table = labels.read_labels(run)
    assert table["label"].to_pylist() == [1.0, 2.0, 3.0]
    latest = labels.latest_labels(table).to_pylist()
    assert {(r["annotator"], r["label"]) for r in latest} == {("ann", 3.0), ("bob", 2.0)}
    # The folder's files are never rewritten or removed.
    assert {p: p.read_bytes() for p in files} == files
    # Calibrate's --labels takes the folder, its older store or the older file.
    for path in (run, run / labels.STORE, run / labels.FILE):
        assert labels.store_dir(path) == run


def test_a_foreign_part_of_the_store_is_refused_naming_it(tmp_path: Path) -> None:
    run = _run(tmp_path)
    labels.append_labels(run, [_row("c1", 1.0)])
    foreign = _store(run) / "part-0-x.parquet"
    pq.write_table(pa.table({"x": [1]}), foreign)
    with pytest.raises(ForeignPart, match="part-0-x.parquet"):
        labels.read_labels(run)


def test_a_label_changes_the_store_state_the_viewer_keeps_pages_by(tmp_path: Path) -> None:
    run = _run(tmp_path)
    labels.append_labels(run, [_row("c1", 1.0)])
    before = labels.store_state(run)
    labels.append_labels(run, [_row("c1", 2.0)])
    assert labels.store_state(run) != before
