"""A run that never asked its judge prints no warning about that judge."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
from support.reporting_runs import write_run

from ragaudit.config import OFFLINE_JUDGE, RunConfig
from ragaudit.manifest import SMOKE_WARNING, judge_warnings
from ragaudit.runfolder import RunFolder


def _run(tmp_path: Path, run_id: str, calls: list[dict] | None) -> tuple[RunConfig, RunFolder]:
    write_run(tmp_path, run_id, {"rouge_l": [0.4, 0.6]}, judge=OFFLINE_JUDGE, calls=calls)
    run = RunFolder(tmp_path, run_id)
    # rouge_l asks no judge: its score rows name none, as the score stage writes them.
    scores = run.read("scores")
    judge = scores.schema.get_field_index("judge")
    run.write("scores", scores.set_column(judge, "judge", pa.nulls(scores.num_rows, pa.string())))
    return RunConfig.model_validate(run.read_manifest()["config"]), run


def test_a_judge_free_run_gets_no_judge_warning(tmp_path: Path) -> None:
    config, run = _run(tmp_path, "gold-only", None)
    assert SMOKE_WARNING not in judge_warnings(config, run)
    # Without a run folder (a command that has not run yet) the warning stays: it may judge.
    assert SMOKE_WARNING in judge_warnings(config)


def test_a_run_that_asked_its_judge_keeps_the_warning(tmp_path: Path) -> None:
    calls = [{"stage": "score:faithfulness", "model": OFFLINE_JUDGE, "cache_hit": True}]
    config, run = _run(tmp_path, "judged", calls)
    assert SMOKE_WARNING in judge_warnings(config, run)


def test_a_judged_score_makes_a_run_judged_without_a_call_log(tmp_path: Path) -> None:
    write_run(tmp_path, "old", {"faithfulness": [0.5, 1.0]}, judge=OFFLINE_JUDGE)
    run = RunFolder(tmp_path, "old")
    config = RunConfig.model_validate(run.read_manifest()["config"])
    assert SMOKE_WARNING in judge_warnings(config, run)


def test_calls_of_another_model_do_not_make_a_run_judged(tmp_path: Path) -> None:
    calls = [{"stage": "collect", "model": "fake/answers", "cache_hit": False}]
    config, run = _run(tmp_path, "answers-only", calls)
    assert SMOKE_WARNING not in judge_warnings(config, run)
