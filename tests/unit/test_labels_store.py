"""The labels store: rows survive, the latest label per person wins, threads lose nothing."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from ragaudit import labels


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
