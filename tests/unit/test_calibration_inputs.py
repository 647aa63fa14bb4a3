"""Hostile labels files: one message naming the file, the line and what is wrong, no traceback."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import ragaudit.metrics  # noqa: F401  (the registered metrics the labels are checked against)
from ragaudit.calibration import load_grade_labels, load_labels
from ragaudit.errors import InputError

GOOD_GRADE = {"question": "Q?", "context": "C.", "grade": 2}
GOOD_LABEL = {"question": "Q?", "answer": "A.", "contexts": ["C."], "labels": {"faithfulness": 1}}


def write(tmp_path: Path, *records: object) -> Path:
    path = tmp_path / "labels.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in records) + "\n", encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("bad", "says"),
    [
        # The one JSONL reader (dataset.read_jsonl) names the file and line as "path: line n".
        ([1, 2, 3], ": line 2: expected a JSON object, got list"),
        ({"question": 42, "context": "C.", "grade": 1}, ", line 2: 'question' is an int, not text"),
        ({"question": "Q?", "context": ["C."], "grade": 1}, ", line 2: 'context' is a list"),
    ],
)
def test_grade_labels_that_are_not_rows_of_text(tmp_path: Path, bad: object, says: str) -> None:
    path = write(tmp_path, GOOD_GRADE, bad)
    with pytest.raises(InputError, match=f"{path}{says}".replace("(", r"\(")):
        load_grade_labels(path)


@pytest.mark.parametrize(
    ("bad", "says"),
    [
        ({**GOOD_LABEL, "labels": {"no_such_metric": 1}}, "unknown metric 'no_such_metric'"),
        ({**GOOD_LABEL, "labels": [1, 0]}, "'labels' is a list"),
        ({**GOOD_LABEL, "contexts": 7}, "'contexts' must be a list of texts"),
        ({**GOOD_LABEL, "contexts": [1, 2]}, "'contexts' must be a list of texts"),
        ("just text", "expected a JSON object, got str"),
    ],
)
def test_labels_that_would_have_crashed(tmp_path: Path, bad: object, says: str) -> None:
    path = write(tmp_path, GOOD_LABEL, bad)
    with pytest.raises(InputError) as info:
        load_labels(path)
    assert str(info.value).startswith((f"{path}, line 2: ", f"{path}: line 2: "))
    assert says in str(info.value)


def test_the_line_named_is_the_files_line_and_a_csv_row_its_data_row(tmp_path: Path) -> None:
    # Blank lines are skipped but still counted: the message names the line an editor shows.
    path = tmp_path / "grades.jsonl"
    path.write_text(f"{json.dumps(GOOD_GRADE)}\n\n\n[1, 2, 3]\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"grades.jsonl: line 4: expected a JSON object, got list"):
        load_grade_labels(path)
    # A CSV row longer than its header used to reach the label columns as a None key.
    csv = tmp_path / "labels.csv"
    csv.write_text("question,answer,label_faithfulness\nQ?,A.,1\nQ?,A.,1,surplus\n")
    with pytest.raises(InputError, match=r"labels.csv, row 2: more fields than the header"):
        load_labels(csv)
    undecodable = tmp_path / "latin1.jsonl"
    undecodable.write_bytes(b'{"question": "caf\xe9"}\n')
    with pytest.raises(InputError, match=r"latin1.jsonl: not UTF-8 text"):
        load_grade_labels(undecodable)


def test_good_rows_still_load(tmp_path: Path) -> None:
    assert len(load_grade_labels(write(tmp_path, GOOD_GRADE))) == 1
    assert len(load_labels(write(tmp_path, GOOD_LABEL))) == 1
