"""A run that never asked its judge prints no warning about that judge."""

from __future__ import annotations

from pathlib import Path

from support.reporting_runs import write_run

from ragaudit.config import OFFLINE_JUDGE, RunConfig
from ragaudit.manifest import SMOKE_WARNING, judge_warnings
from ragaudit.runfolder import RunFolder


def _run(tmp_path: Path, run_id: str, calls: list[dict] | None) -> tuple[RunConfig, RunFolder]:
    write_run(tmp_path, run_id, {"rouge_l": [0.4, 0.6]}, judge=OFFLINE_JUDGE, calls=calls)
    run = RunFolder(tmp_path, run_id)
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


def test_calls_of_another_model_do_not_make_a_run_judged(tmp_path: Path) -> None:
    calls = [{"stage": "collect", "model": "fake/answers", "cache_hit": False}]
    config, run = _run(tmp_path, "answers-only", calls)
    assert SMOKE_WARNING not in judge_warnings(config, run)
