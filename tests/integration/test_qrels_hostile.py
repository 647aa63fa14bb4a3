"""A qrels file that does not hold what it seems is refused at load, in the dry run already."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from support.cli import cli_command, cli_env, run_args

from ragaudit.dataset import load_qrels

GOOD = "dr181577 0 d1 2\ndr181589 0 d2 1\n"


def _dry_run(tmp_path: Path, qrels: str, *extra: str) -> subprocess.CompletedProcess[str]:
    path = tmp_path / "gold.qrels"
    path.write_text(qrels, encoding="utf-8")
    args = run_args(tmp_path, "--dry-run", "--set", f"gold.qrels={path}", *extra)
    env = {**cli_env(tmp_path), "COLUMNS": "400"}
    return subprocess.run([*cli_command(), *args], capture_output=True, text=True, env=env)


@pytest.mark.parametrize(
    ("qrels", "message"),
    [
        pytest.param(
            GOOD + "nosuch 0 d3 1\nother 0 d4 1\n",
            "2 question id(s) not in the question set (nosuch, other)",
            id="unknown-ids",
        ),
        pytest.param(
            GOOD + "dr181577 0 d1 0\n",
            "1 (question, document) pair(s) graded twice with different grades (dr181577/d1 2→0)",
            id="conflicting-duplicates",
        ),
        pytest.param(
            GOOD + "we000 0 d5 1e23\n", "line 3: grade '1e23' is not an integer", id="1e23"
        ),
        pytest.param(GOOD + "we000 0 d5 11\n", "line 3: grade 11 is outside 0–10", id="11"),
        pytest.param(
            GOOD + f"we000 0 d5 {2**63 - 1}\n",
            f"line 3: grade {2**63 - 1} is outside 0–10",
            id="int64-max",
        ),
        pytest.param(GOOD + "we000 0 d5 1_0\n", "line 3: grade '1_0' is not an integer", id="1_0"),
        pytest.param("", "no grade in it (empty, or a header only)", id="empty"),
        pytest.param(
            "query-id\tcorpus-id\tscore\n", "no grade in it (empty, or a header only)", id="header"
        ),
        pytest.param(
            GOOD + "dr181589 0 2\n",
            "line 3: 3 fields, but the file is TREC 'qid iteration docid grade' (4 fields",
            id="trec-line-missing-docid",
        ),
    ],
)
def test_bad_gold_is_refused_by_the_dry_run(tmp_path: Path, qrels: str, message: str) -> None:
    out = _dry_run(tmp_path, qrels)
    assert out.returncode != 0, out.stdout[-2000:]
    assert message in out.stderr, out.stderr
    assert "Traceback" not in out.stderr and "Dry run" not in out.stdout


def test_unknown_ids_and_duplicates_pass_when_allowed_and_are_said(tmp_path: Path) -> None:
    qrels = GOOD + "nosuch 0 d3 1\ndr181577 0 d1 0\n"
    out = _dry_run(tmp_path, qrels, "--set", "gold.allow_unknown_ids=true")
    assert out.returncode == 0, out.stderr
    said = out.stdout + out.stderr
    assert "1 question id(s) not in the question set (nosuch)" in said
    assert "graded twice with different grades (dr181577/d1 2→0)" in said
    assert _dry_run(tmp_path, GOOD).returncode == 0


def test_a_file_keeps_the_layout_of_its_first_line(tmp_path: Path) -> None:
    beir = tmp_path / "beir.tsv"
    beir.write_text("query-id\tcorpus-id\tscore\nq1\td1\t2\nq1\td2\t0\n", encoding="utf-8")
    assert load_qrels(beir) == {"q1": {"d1": 2, "d2": 0}}
    trec = tmp_path / "trec.txt"
    trec.write_text("q1 0 d1 10\nq1 0 d2 0\n", encoding="utf-8")
    assert load_qrels(trec) == {"q1": {"d1": 10, "d2": 0}}
