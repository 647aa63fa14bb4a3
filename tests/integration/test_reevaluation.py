"""Scheduled re-evaluation: the baseline it picks, what it publishes, what a regression does."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest
import yaml
from support.paths import REPO_ROOT
from support.reporting_runs import write_run

import ragaudit.flows.nightly as nightly
from ragaudit.battles import ORDERS, battle_stats
from ragaudit.reevaluation import (
    REGRESSION_EVENT,
    RegressionEvent,
    comparison_markdown,
    comparison_table,
    config_key,
    previous_run,
    question_set_resource,
    regression_event,
    regressions,
)
from ragaudit.reporting import build_report, compare_runs, question_set_hash
from ragaudit.runfolder import RunFolder

N = 30
GOOD = np.linspace(0.6, 0.9, N)


def _values(shift: float = 0.0) -> dict[str, list[float | None]]:
    """Two metrics over N questions; ``shift`` moves faithfulness only."""
    return {
        "faithfulness": np.clip(GOOD + shift, 0, 1).tolist(),
        "rouge_l": (GOOD / 2).tolist(),
    }


def _set_status(run_dir: Path, status: str) -> None:
    run = RunFolder(run_dir.parent, run_dir.name)
    manifest = run.read_manifest()
    manifest["status"] = status
    run.write_manifest(manifest)


def _run(root: Path, run_id: str, **kw: Any) -> Path:
    shift = kw.pop("shift", 0.0)
    path = write_run(root, run_id, _values(shift), **kw)
    time.sleep(0.002)  # distinct start times, in creation order
    return path


# ------------------------------------------------------------------ which run is the baseline


def test_previous_run_is_the_newest_earlier_finished_run_like_this_one(tmp_path: Path) -> None:
    _run(tmp_path, "a-old")
    _run(tmp_path, "b-baseline")
    _run(tmp_path, "c-other-judge", judge="fake/other")
    _set_status(_run(tmp_path, "d-failed"), "failed")
    _set_status(_run(tmp_path, "e-running"), "running")
    _run(tmp_path, "f-other-questions", question_ids=[f"x{i}" for i in range(N)])
    current = _run(tmp_path, "g-now")
    _run(tmp_path, "h-later")  # started after the current run: never its baseline

    found = previous_run(current)
    assert found is not None and found.run_id == "b-baseline"
    # A run that finished with failed rows is a baseline unless the statuses say otherwise.
    _set_status(tmp_path / "b-baseline", "completed_with_failures")
    assert previous_run(current).run_id == "b-baseline"
    assert previous_run(current, ("completed",)).run_id == "a-old"


def test_no_previous_run_on_a_first_night(tmp_path: Path) -> None:
    assert previous_run(_run(tmp_path, "first")) is None


def test_config_key_ignores_operational_settings_only(tmp_path: Path) -> None:
    from ragaudit.config import load_config

    base = load_config(None, {"models": {"judge": "fake/judge"}}, environ={})
    operational = load_config(
        None,
        {
            "models": {"judge": "fake/judge", "concurrency": 2, "timeout_s": 5},
            "runs_root": str(tmp_path),
            "run_id": "x",
            "nightly": {"on_regression": "ignore"},
        },
        environ={},
    )
    other = load_config(
        None, {"models": {"judge": "fake/judge"}, "score": {"top_k": 4}}, environ={}
    )
    assert config_key(base) == config_key(operational)
    assert config_key(base) != config_key(other)


# --------------------------------------------------------------- what a comparison publishes


def test_regression_event_names_the_question_set_and_the_deltas(tmp_path: Path) -> None:
    a = _run(tmp_path, "a")
    b = _run(tmp_path, "b", shift=-0.3)
    cmp = compare_runs(a, b, resamples=999)
    assert cmp.regressed == ("faithfulness",)
    qhash = build_report(b).question_set_hash
    event = regression_event(cmp, qhash, "questions.jsonl")
    assert isinstance(event, RegressionEvent)
    assert event.event == REGRESSION_EVENT
    assert event.resource["prefect.resource.id"] == question_set_resource(qhash)
    assert event.resource["prefect.resource.id"].startswith("ragaudit.question-set.")
    assert ":" not in event.resource["prefect.resource.id"]
    assert event.payload["regressed"] == ["faithfulness"]
    (moved,) = event.payload["metrics"]
    assert moved["metric"] == "faithfulness"
    assert moved["delta"] == pytest.approx(cmp.metrics[0].diff, abs=1e-4)
    json.dumps(event.payload)  # an event payload must be JSON

    rows = {r["metric"]: r for r in comparison_table(cmp)}
    assert rows["faithfulness"]["verdict"] == "regressed"
    assert rows["rouge_l"]["verdict"] == "no change beyond noise"
    md = comparison_markdown(cmp)
    assert "`b` against `a`" in md and "Regression beyond noise:** faithfulness" in md


def test_lost_battles_are_a_regression_even_when_no_metric_moved(tmp_path: Path) -> None:
    a = _run(tmp_path, "a")
    b = _run(tmp_path, "b")
    cmp = compare_runs(a, b, resamples=999)
    assert cmp.regressed == ()
    verdicts = pl.DataFrame(
        [{"question_id": f"q{k}", "order": o, "verdict": "A"} for k in range(N) for o in ORDERS]
    )
    lost = battle_stats(verdicts, alpha=cmp.alpha, resamples=999)
    assert lost.verdict == "B worse"
    assert regressions(cmp, lost) == ["battles"]
    event = regression_event(cmp, "k1:x", "questions.jsonl", lost)
    assert event is not None and event.payload["regressed"] == ["battles"]
    assert event.payload["metrics"] == []
    assert event.payload["battles"]["verdict"] == "B worse"
    assert event.payload["battles"]["questions"] == N
    json.dumps(event.payload)
    # Battles B won, or none played: nothing to report.
    won = battle_stats(verdicts.with_columns(pl.lit("B").alias("verdict")), resamples=999)
    assert regression_event(cmp, "k1:x", None, won) is None
    assert regression_event(cmp, "k1:x", None) is None


def test_no_event_without_a_regression_or_between_unlike_runs(tmp_path: Path) -> None:
    a = _run(tmp_path, "a")
    better = _run(tmp_path, "better", shift=0.1)
    assert regression_event(compare_runs(a, better, resamples=999), "k1:x", None) is None
    other_judge = _run(tmp_path, "judge2", judge="fake/other", shift=-0.3)
    unlike = compare_runs(a, other_judge, resamples=999)
    assert not unlike.comparable
    assert regression_event(unlike, "k1:x", None) is None


# ------------------------------------------------------------------- the flow, end to end


@pytest.fixture
def nightly_setup(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """A baseline run and a config like it; ``evaluate`` writes a synthetic run (no LLM)."""
    root = tmp_path / "runs"
    _run(root, "baseline")

    def make(on_regression: str, shift: float) -> Path:
        async def fake_evaluate(config_json: str, run_id: str) -> dict[str, Any]:
            write_run(root, run_id, _values(shift))
            return {"run_id": run_id, "status": "completed"}

        monkeypatch.setattr(nightly, "evaluate", fake_evaluate)
        config = {
            "runs_root": str(root),
            "models": {"judge": "fake/judge", "embedder": "fake/embed"},
            "score": {"metrics": list(_values())},
            "report": {"compare_resamples": 999},
            "nightly": {"on_regression": on_regression},
        }
        path = tmp_path / f"config-{on_regression}.yaml"
        path.write_text(yaml.safe_dump(config), encoding="utf-8")
        return path

    emitted: list[RegressionEvent] = []
    monkeypatch.setattr(RegressionEvent, "emit", lambda self: emitted.append(self))
    return root, make, emitted


async def _flow_run(flow_run_id: Any) -> Any:
    from prefect.client.orchestration import get_client

    async with get_client() as client:
        return await client.read_flow_run(flow_run_id)


async def _artifacts(flow_run_id: Any) -> dict[str, Any]:
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterFlowRunId

    async with get_client() as client:
        found = await client.read_artifacts(
            artifact_filter=ArtifactFilter(flow_run_id=ArtifactFilterFlowRunId(any_=[flow_run_id]))
        )
    return {a.key: a for a in found}


@pytest.mark.usefixtures("prefect_harness")
async def test_a_regression_fails_the_nightly_run_and_emits_the_event(nightly_setup) -> None:
    root, make, emitted = nightly_setup
    state = await nightly.reevaluate(str(make("fail", -0.3)), run_id="night1", return_state=True)
    assert state.is_failed()
    assert "faithfulness" in state.message and "baseline" in state.message
    (event,) = emitted
    qhash = question_set_hash(pl.from_arrow(RunFolder(root, "night1").read("questions")))
    assert event.resource["prefect.resource.id"] == question_set_resource(qhash)
    assert event.payload["baseline_run_id"] == "baseline"
    artifacts = await _artifacts(state.state_details.flow_run_id)
    assert "# ragaudit re-evaluation `night1` against `baseline`" in (
        artifacts["ragaudit-compare-night1"].data
    )
    assert artifacts["ragaudit-compare-table-night1"].type == "table"


@pytest.mark.usefixtures("prefect_harness")
async def test_on_regression_name_suffixes_the_run_and_completes(nightly_setup) -> None:
    _, make, emitted = nightly_setup
    state = await nightly.reevaluate(str(make("name", -0.3)), run_id="night2", return_state=True)
    assert state.is_completed()
    run = await _flow_run(state.state_details.flow_run_id)
    assert run.name.endswith("-regressed")
    assert len(emitted) == 1


@pytest.mark.usefixtures("prefect_harness")
async def test_no_regression_completes_quietly(nightly_setup) -> None:
    _, make, emitted = nightly_setup
    state = await nightly.reevaluate(str(make("fail", 0.0)), run_id="night3", return_state=True)
    assert state.is_completed()
    outcome = await state.result()
    assert outcome["baseline"] == "baseline"
    assert outcome["regressed"] == []
    assert emitted == []
    run = await _flow_run(state.state_details.flow_run_id)
    assert not run.name.endswith("-regressed")


@pytest.mark.usefixtures("prefect_harness")
async def test_the_first_night_publishes_that_it_is_the_baseline(tmp_path: Path, nightly_setup):
    root, make, emitted = nightly_setup
    (root / "baseline" / "manifest.json").unlink()  # no earlier run
    state = await nightly.reevaluate(str(make("fail", -0.3)), run_id="first", return_state=True)
    assert state.is_completed()
    artifacts = await _artifacts(state.state_details.flow_run_id)
    assert "this run is the baseline of the next" in artifacts["ragaudit-compare-first"].data
    assert emitted == []


def test_the_shipped_automation_matches_the_event_the_flow_emits() -> None:
    from prefect.events.schemas.automations import AutomationCore, EventTrigger

    repo = REPO_ROOT
    data = yaml.safe_load((repo / "automations" / "regression.yaml").read_text("utf-8"))
    automation = AutomationCore.model_validate(data)
    trigger = automation.trigger
    assert isinstance(trigger, EventTrigger)
    assert trigger.expect == {REGRESSION_EVENT}
    assert trigger.match.root["prefect.resource.id"] == "ragaudit.question-set.*"
