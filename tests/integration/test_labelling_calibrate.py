"""``calibrate --grade-labels/--labels`` read a run's labels store as ``ragaudit label`` left it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl
from support.label_runs import write_label_run
from typer.testing import CliRunner

from ragaudit import labels
from ragaudit.cli import app
from ragaudit.runfolder import RunFolder


def _label_all(run_dir: Path, annotator: str, grade_of: dict[str, int]) -> None:
    """Every sampled item labelled: grades from ``grade_of`` (by item id), yes to answers."""
    rows = []
    for r in labels.read_sample(run_dir).to_pylist():  # type: ignore[union-attr]
        label = float(grade_of[r["item_id"]]) if r["kind"] == labels.GRADE else 1.0
        rows.append({k: r[k] for k in ("item_id", "kind", "question_id", "candidate_id")})
        rows[-1].update(annotator=annotator, label=label)
    rows[0]["label"] = None  # a skipped item is left out
    labels.append_labels(run_dir, rows)


def test_calibrate_reads_the_labels_store_of_a_run(fake, tmp_path: Path) -> None:
    root = tmp_path / "runs"
    run_dir = write_label_run(root, "r1", hostile=False)
    sample, _ = labels.ensure_sample(run_dir, 16)
    grade_items = [r for r in sample.to_pylist() if r["kind"] == labels.GRADE]
    # The person's grade: a function of the item, so the judge can be scripted to agree.
    grade_of = {r["item_id"]: i % 4 for i, r in enumerate(grade_items)}
    _label_all(run_dir, "ann", grade_of)
    texts = labels.item_texts(run_dir, grade_items)
    # Keyed by question and passage: one passage may be a candidate of two questions.
    human_of = {
        (t["question"], t["candidate"]): grade_of[r["item_id"]]
        for r, t in zip(grade_items, texts, strict=True)
    }

    def agreeing_judge(req: Any) -> dict[str, Any] | None:
        if req.title != "RelevanceGrade":
            return None
        pair = (req.payload["question"], req.payload["context"])
        return {"grade": human_of[pair], "reason": "scripted"}

    args = ["calibrate", "--judge", "fake/judge", "--embedder", "fake/embed"]
    args += ["--grade-labels", str(run_dir), "--labels", str(run_dir / labels.STORE)]
    args += ["--runs-root", str(tmp_path / "cal"), "--run-id", "cal"]
    args += ["--set", f"cache_dir={tmp_path / 'cache'}"]
    with fake.script(agreeing_judge):
        result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    run = RunFolder(tmp_path / "cal", "cal")
    grades = pl.from_arrow(run.read("calibration_grades"))
    skipped = sample["item_id"][0].as_py()
    expected = {i: g for i, g in grade_of.items() if i != skipped}
    assert grades.height == len(expected)
    assert sorted(grades["human_grade"].to_list()) == sorted(expected.values())
    assert (grades["human_grade"] == grades["judge_grade"]).all()
    scored = pl.from_arrow(run.read("calibration_scores"))
    answered = [r for r in sample.to_pylist() if r["kind"] in labels.ANSWER_KINDS]
    assert sorted(scored["metric"].unique().to_list()) == sorted({r["kind"] for r in answered})
