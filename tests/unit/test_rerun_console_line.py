"""The run's console line names this invocation's calls and the run id's total apart."""

from __future__ import annotations

from pathlib import Path

from support.reporting_runs import write_run

from ragaudit.cli._app import console
from ragaudit.cli._run import _print_report


def _calls(n: int, hits: int) -> list[dict]:
    return [
        {"stage": "score:faithfulness", "model": "fake/judge", "cache_hit": i < hits}
        for i in range(n)
    ]


def _printed(run_dir: Path, manifest: dict | None) -> str:
    with console.capture() as out:
        _print_report(run_dir, manifest)
    return out.get()


def test_a_rerun_that_called_nothing_says_so_beside_the_run_total(tmp_path: Path) -> None:
    run_dir = write_run(tmp_path, "r1", {"faithfulness": [0.5, 0.7]}, calls=_calls(7, 2))
    llm = {"calls": 0, "cache_hits": 0, "provider_calls": 0}
    text = _printed(run_dir, {"run_id": "r1", "llm": llm, "timings": {"total_s": 2.0}})
    assert "LLM calls this invocation: 0 (memo hits 0, provider calls 0); time 2.0 s" in text
    assert "LLM calls of run r1 in total: 7 (memo hits 2, provider calls 5)" in text


def test_the_first_invocation_counts_its_own_calls(tmp_path: Path) -> None:
    run_dir = write_run(tmp_path, "r2", {"faithfulness": [0.5, 0.7]}, calls=_calls(4, 1))
    llm = {"calls": 4, "cache_hits": 1, "provider_calls": 3}
    text = _printed(run_dir, {"run_id": "r2", "llm": llm})
    assert "LLM calls this invocation: 4 (memo hits 1, provider calls 3)" in text
    assert "in total: 4 (memo hits 1, provider calls 3)" in text


def test_a_report_without_an_invocation_prints_the_run_total_only(tmp_path: Path) -> None:
    run_dir = write_run(tmp_path, "r3", {"faithfulness": [0.5, 0.7]}, calls=_calls(3, 0))
    text = _printed(run_dir, None)
    assert "LLM calls: 3 (memo hits 0, provider calls 3)" in text
    assert "this invocation" not in text
