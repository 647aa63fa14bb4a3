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
        ([1, 2, 3], "line 2: a list, not a JSON object"),
        ({"question": 42, "context": "C.", "grade": 1}, "row 2: 'question' is a int, not text"),
        ({"question": "Q?", "context": ["C."], "grade": 1}, "row 2: 'context' is a list"),
    ],
)
def test_grade_labels_that_are_not_rows_of_text(tmp_path: Path, bad: object, says: str) -> None:
    path = write(tmp_path, GOOD_GRADE, bad)
    with pytest.raises(InputError, match=f"{path}, {says}".replace("(", r"\(")):
        load_grade_labels(path)


@pytest.mark.parametrize(
    ("bad", "says"),
    [
        ({**GOOD_LABEL, "labels": {"no_such_metric": 1}}, "unknown metric 'no_such_metric'"),
        ({**GOOD_LABEL, "labels": [1, 0]}, "'labels' is a list"),
        ({**GOOD_LABEL, "contexts": 7}, "'contexts' must be a list of texts"),
        ({**GOOD_LABEL, "contexts": [1, 2]}, "'contexts' must be a list of texts"),
        ("just text", "line 2: a str, not a JSON object"),
    ],
)
def test_labels_that_would_have_crashed(tmp_path: Path, bad: object, says: str) -> None:
    path = write(tmp_path, GOOD_LABEL, bad)
    with pytest.raises(InputError, match=says):
        load_labels(path)


def test_good_rows_still_load(tmp_path: Path) -> None:
    assert len(load_grade_labels(write(tmp_path, GOOD_GRADE))) == 1
    assert len(load_labels(write(tmp_path, GOOD_LABEL))) == 1
