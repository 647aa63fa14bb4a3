"""The labels store: rows survive, the latest label per person wins, threads lose nothing."""

from __future__ import annotations

import datetime as dt
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from ragaudit import labels, ppi, schemas
from ragaudit.partstore import ForeignPart
from ragaudit.viewer._listing import signature


def _row(candidate: str, label: float | None, annotator: str = "ann") -> dict[str, object]:
    return {
        "item_id": labels.item_id("grade", "q1", candidate),
        "kind": "grade",
        "question_id": "q1",
        "candidate_id": candidate,
        "annotator": annotator,
        "label": label,
    }


def test_an_empty_run_has_an_empty_store(tmp_path: Path) -> None:
    assert labels.read_labels(tmp_path).num_rows == 0


def test_the_latest_label_of_a_person_wins_and_others_stay(tmp_path: Path) -> None:
    labels.append_labels(tmp_path, [_row("c1", 1.0)])
    labels.append_labels(tmp_path, [_row("c1", 3.0), _row("c1", 2.0, annotator="bob")])
    table = labels.read_labels(tmp_path)
    assert table.num_rows == 3
    latest = {
        (r["annotator"], r["item_id"]): r["label"] for r in labels.latest_labels(table).to_pylist()
    }
    assert latest == {("ann", "grade:q1:c1"): 3.0, ("bob", "grade:q1:c1"): 2.0}


def test_concurrent_appends_keep_every_row(tmp_path: Path) -> None:
    with ThreadPoolExecutor(max_workers=8) as pool:
        list(pool.map(lambda i: labels.append_labels(tmp_path, [_row(f"c{i}", 1.0)]), range(40)))
    ids = sorted(labels.read_labels(tmp_path).column("candidate_id").to_pylist())
    assert ids == sorted(f"c{i}" for i in range(40))


def test_an_append_is_one_new_part_and_never_rewrites_the_others(tmp_path: Path) -> None:
    labels.append_labels(tmp_path, [_row("c1", 1.0)])
    (first,) = (tmp_path / labels.STORE).glob("labels-*.parquet")
    before = first.read_bytes()
    labels.append_labels(tmp_path, [_row("c2", 2.0)])
    parts = sorted((tmp_path / labels.STORE).glob("labels-*.parquet"))
    assert len(parts) == 2 and parts[0] == first and first.read_bytes() == before
    assert not (tmp_path / labels.FILE).exists()
    assert labels.has_labels(tmp_path) and ppi.has_labels(tmp_path)


def test_the_single_file_of_an_older_run_is_still_read_and_kept(tmp_path: Path) -> None:
    old = schemas.to_table(
        [{**_row("c1", 1.0), "time": dt.datetime(2026, 1, 1, tzinfo=dt.UTC)}], schemas.LABELS
    )
    pq.write_table(old, tmp_path / labels.FILE)
    before = (tmp_path / labels.FILE).read_bytes()
    assert labels.has_labels(tmp_path) and ppi.has_labels(tmp_path)
    assert labels.read_labels(tmp_path)["label"].to_pylist() == [1.0]
    labels.append_labels(tmp_path, [_row("c1", 3.0)])
    table = labels.read_labels(tmp_path)
    assert table["label"].to_pylist() == [1.0, 3.0]
    assert labels.latest_labels(table)["label"].to_pylist() == [3.0]
    assert (tmp_path / labels.FILE).read_bytes() == before
    # Calibrate's --labels takes the folder, its store or the older file.
    for path in (tmp_path, tmp_path / labels.STORE, tmp_path / labels.FILE):
        assert labels.store_dir(path) == tmp_path


def test_a_foreign_part_is_refused_naming_it(tmp_path: Path) -> None:
    labels.append_labels(tmp_path, [_row("c1", 1.0)])
    foreign = tmp_path / labels.STORE / "labels-0-x.parquet"
    pq.write_table(pa.table({"x": [1]}), foreign)
    with pytest.raises(ForeignPart, match="labels-0-x.parquet"):
        labels.read_labels(tmp_path)


def test_a_label_changes_the_folder_signature_the_viewer_keeps_pages_by(tmp_path: Path) -> None:
    labels.append_labels(tmp_path, [_row("c1", 1.0)])
    before = signature(tmp_path)
    labels.append_labels(tmp_path, [_row("c1", 2.0)])
    assert signature(tmp_path) != before
