"""An operator's setup mistakes fail at once, with the fix in the message."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from support.runs import REPO
from typer.testing import CliRunner

from ragaudit.cli import app
from ragaudit.deployment import require_api_server, set_project_directory
from ragaudit.errors import RagauditError

FIX = "RAGAUDIT_PROJECT_DIR=/path/to/ragaudit prefect worker start --pool ragaudit"


def pull_step_inputs(monkeypatch: pytest.MonkeyPatch, project_dir: str | None) -> dict:
    """The inputs of prefect.yaml's pull step as a worker with this environment templates them."""
    from prefect.utilities.templating import apply_values

    if project_dir is None:
        monkeypatch.delenv("RAGAUDIT_PROJECT_DIR", raising=False)
    else:
        monkeypatch.setenv("RAGAUDIT_PROJECT_DIR", project_dir)
    (step,) = yaml.safe_load((REPO / "prefect.yaml").read_text(encoding="utf-8"))["pull"]
    ((name, inputs),) = step.items()
    assert name == "ragaudit.deployment.set_project_directory"
    return apply_values(inputs, {})


def test_a_worker_without_the_project_dir_fails_in_its_pull_step_saying_how(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with pytest.raises(RagauditError, match="has no RAGAUDIT_PROJECT_DIR") as info:
        set_project_directory(**pull_step_inputs(monkeypatch, None))
    assert FIX in str(info.value)
    for empty in (None, "", "  ", "{{ $RAGAUDIT_PROJECT_DIR }}"):
        with pytest.raises(RagauditError, match="has no RAGAUDIT_PROJECT_DIR"):
            set_project_directory(empty)


def test_a_project_dir_that_is_not_a_checkout_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(RagauditError, match="is not a ragaudit checkout") as info:
        set_project_directory(**pull_step_inputs(monkeypatch, str(tmp_path)))
    assert str(tmp_path) in str(info.value) and FIX in str(info.value)


def test_the_pull_step_moves_the_run_into_the_checkout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    out = set_project_directory(**pull_step_inputs(monkeypatch, str(REPO)))
    assert out == {"directory": str(REPO.resolve())}
    assert Path.cwd() == REPO.resolve()


def test_serve_without_a_prefect_server_fails_instead_of_polling() -> None:
    from prefect.settings import PREFECT_API_URL, temporary_settings

    with temporary_settings(restore_defaults={PREFECT_API_URL}):
        with pytest.raises(RagauditError, match="PREFECT_API_URL") as info:
            require_api_server("ragaudit serve")
        assert "prefect server start" in str(info.value)
        result = CliRunner().invoke(
            app, ["serve", "--config", str(REPO / "data" / "demo" / "config.yaml")]
        )
    assert result.exit_code != 0
    assert "PREFECT_API_URL" in result.output and "Traceback" not in result.output
    with temporary_settings(updates={PREFECT_API_URL: "http://127.0.0.1:4200/api"}):
        assert require_api_server("ragaudit serve") == "http://127.0.0.1:4200/api"


# ------------------------------------------------------------------ nightly without a baseline


def _runs(root: Path) -> tuple[Path, Path]:
    import time

    import numpy as np
    from support.reporting_runs import write_run

    values = {"faithfulness": np.linspace(0.6, 0.9, 30).tolist()}
    before = write_run(root, "a-gemma", values, judge="fake/judge")
    time.sleep(0.002)  # distinct start times, in creation order
    now = write_run(root, "b-other-judge", values, judge="fake/other")
    return before, now


def test_a_night_whose_judge_changed_names_the_earlier_run_and_what_differs(
    tmp_path: Path,
) -> None:
    from ragaudit.reevaluation import (
        no_baseline_markdown,
        no_baseline_verdict,
        previous_run,
        unlike_runs,
    )

    _, now = _runs(tmp_path)
    assert previous_run(now) is None
    (unlike,) = unlike_runs(now)
    assert unlike.run_id == "a-gemma"
    assert unlike.differences == ('models.judge: "fake/judge" → "fake/other"',)
    verdict = no_baseline_verdict([unlike])
    assert "a-gemma" in verdict and "models.judge" in verdict and "changed" in verdict
    md = no_baseline_markdown("b-other-judge", now, [unlike])
    assert "`a-gemma`" in md and "fake/other" in md
    # The first night of a question set says only that.
    assert no_baseline_verdict([]) == "no baseline"


def test_the_regression_event_carries_absolute_run_folders(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import numpy as np
    from support.reporting_runs import write_run

    from ragaudit.reevaluation import regression_event
    from ragaudit.reporting import compare_runs

    monkeypatch.chdir(tmp_path)
    good = np.linspace(0.6, 0.9, 30)
    write_run(Path("runs"), "a", {"faithfulness": good.tolist()})
    write_run(Path("runs"), "b", {"faithfulness": np.clip(good - 0.3, 0, 1).tolist()})
    cmp = compare_runs(Path("runs/a"), Path("runs/b"), resamples=999)
    event = regression_event(cmp, "k1:abc", "questions.jsonl")
    assert event is not None
    assert event.payload["run_dir"] == str((tmp_path / "runs" / "b").resolve())
    assert event.payload["baseline_run_dir"] == str((tmp_path / "runs" / "a").resolve())


# ------------------------------------------------------------------ scale-out without a batch size


def test_dask_or_ray_without_a_batch_size_get_one_batch_per_worker() -> None:
    from ragaudit.config import ONE_BATCH, ScaleConfig
    from ragaudit.tasks._common import batch_names

    for runner in ("dask", "ray"):
        scale = ScaleConfig(task_runner=runner, workers=4)
        sized = scale.sized_for(10)
        assert sized.batch_size == 3
        assert batch_names(10, sized.batch_size) == ["b0000", "b0001", "b0002", "b0003"]
    # A batch size that was set is kept; the default runner keeps one batch in its process.
    assert ScaleConfig(task_runner="dask", batch_size=5).sized_for(10).batch_size == 5
    assert ScaleConfig().sized_for(10).batch_size == ONE_BATCH
    assert ScaleConfig(task_runner="ray", workers=8).sized_for(3).batch_size == 1


# ------------------------------------------------------------------ `ragaudit runs` at any width


@pytest.mark.parametrize("width", [60, 80, 100, 140, 200])
def test_runs_is_readable_at_any_width(width: int) -> None:
    import io

    from rich.console import Console

    from ragaudit.reporting import RunOverview, runs_table

    metrics = ("context_precision", "context_recall", "faithfulness", "answer_relevancy")
    means: dict[str, float | None] = {m: 0.7 for m in metrics}
    means["rouge_l"] = -1e-9  # the fifth metric: once left out, and shown as "-0.000"
    run = RunOverview(
        run_id="2026-11-25T03-00-00-nightly",
        run_dir=Path("runs/2026-11-25T03-00-00-nightly"),
        started_at="2026-11-25T03:00:00.123456+00:00",
        status="completed_with_failures",
        questions_file="data/demo/questions.jsonl",
        question_set_hash="k1:0123456789abcdef",
        n_questions=5,
        judge="openai/gpt-4o-mini",
        means=means,
        ci={},
    )
    buffer = io.StringIO()
    console = Console(file=buffer, width=width, force_terminal=False, color_system=None)
    console.print(runs_table([run, run], "Runs", console.width))
    out = buffer.getvalue()
    assert max(len(line) for line in out.splitlines()) <= width
    assert "…" not in out
    for text in (*metrics, "completed_with_failures", "openai/gpt-4o-mini", "questions.jsonl"):
        assert text in out, (text, out)
    assert "-0.000" not in out and "rouge_l 0.000" in out


def test_cache_stats_prints_the_memo_path_as_it_is(tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    memo = tmp_path / "ragaudit:memo:[v1]"
    config.write_text(
        yaml.safe_dump(
            {
                "questions": str(REPO / "data" / "demo" / "questions.jsonl"),
                "cache_dir": str(memo),
                "runs_root": str(tmp_path / "runs"),
            }
        ),
        encoding="utf-8",
    )
    result = CliRunner().invoke(app, ["cache", "stats", "--config", str(config)])
    assert result.exit_code == 0, result.output
    assert "ragaudit:memo:[v1]" in result.output and "📝" not in result.output


# ------------------------------------------------------------------ the report's header


def test_the_report_header_gets_the_runs_end_and_reads_to_the_second(tmp_path: Path) -> None:
    import json as _json

    from support.reporting_runs import write_run

    from ragaudit.reporting import build_report, stamp_completion, write_html

    run_dir = write_run(tmp_path, "r", {"faithfulness": [0.5, 1.0]})
    manifest = _json.loads((run_dir / "manifest.json").read_text(encoding="utf-8"))
    # As the report stage sees it: the run is still going.
    manifest |= {"status": "running", "started_at": "2026-11-25T03:00:07.123456+00:00"}
    manifest.pop("finished_at", None)
    (run_dir / "manifest.json").write_text(_json.dumps(manifest), encoding="utf-8")
    path = write_html(build_report(run_dir))
    header = path.read_text(encoding="utf-8").split("</header>", 1)[0]
    assert "running" in header and "2026-11-25 03:00:07 UTC" in header
    assert ".123456" not in header

    assert stamp_completion(run_dir, "completed", "2026-11-25T03:04:59.999999+00:00")
    header = path.read_text(encoding="utf-8").split("</header>", 1)[0]
    assert '<span id="run-status">completed</span>' in header
    assert '<span id="run-finished">2026-11-25 03:04:59 UTC</span>' in header
    assert "running" not in header
    assert not stamp_completion(tmp_path / "no-report", "completed", None)


@pytest.mark.parametrize("dry_run", [True, False])
@pytest.mark.parametrize(
    ("setting", "field"),
    [
        ('models.jury=["fake/judge", "nosuchprovider/model-x"]', "models.jury[1]"),
        ("models.judge=nosuchprovider/model-x", "models.judge"),
    ],
)
def test_a_judge_no_provider_can_route_is_refused_before_any_call(
    tmp_path: Path, setting: str, field: str, dry_run: bool
) -> None:
    from support.cli import run_args

    args = run_args(tmp_path, "--set", setting)
    if setting.startswith("models.judge="):
        i = args.index("--judge")
        del args[i : i + 2]
    result = CliRunner().invoke(app, args + (["--dry-run"] if dry_run else []))
    assert result.exit_code != 0
    text = result.output + str(result.exception or "")
    assert field in text and "nosuchprovider/model-x" in text, text
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())


def test_judge_repeats_out_of_range_is_an_error_of_the_flag(tmp_path: Path) -> None:
    from support.cli import run_args

    config = REPO / "data" / "demo" / "config.yaml"
    result = CliRunner().invoke(
        app, [*run_args(tmp_path, "--config", str(config)), "--judge-repeats", "1000", "--dry-run"]
    )
    assert result.exit_code != 0
    assert "--judge-repeats" in result.output
    assert "config (" not in result.output


@pytest.mark.parametrize(
    ("command", "setting", "field"),
    [
        (["calibrate"], 'models.jury=["fake/judge", "opnai/gpt-4o-mini"]', "models.jury[1]"),
        (["testset", "out.jsonl"], "models.generator=opnai/gpt-4o-mini", "models.generator"),
    ],
)
def test_every_paying_command_refuses_an_unroutable_model_and_hints_the_provider(
    tmp_path: Path, command: list[str], setting: str, field: str
) -> None:
    # Before any input is read or any model called: the same check as run and its dry run,
    # with the known providers and the nearest one to the misspelt prefix.
    args = [*command, "--judge", "fake/judge", "--embedder", "fake/embed", "--set", setting]
    args += ["--set", f"cache_dir={tmp_path / 'cache'}", "--set", f"runs_root={tmp_path}"]
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(tmp_path)
        result = CliRunner().invoke(app, args)
    assert result.exit_code != 0
    text = " ".join((result.output + str(result.exception or "")).split())
    assert f"{field}: 'opnai/gpt-4o-mini' names no known provider" in text, text
    assert "did you mean openai/" in text and "fake/, local/" in text, text
    assert "Traceback" not in text
    assert not any(tmp_path.iterdir())  # no run, no cache, no question set


def test_the_registrys_own_and_litellms_providers_pass_the_check() -> None:
    from ragaudit.cache.providers import check_judges
    from ragaudit.config import ModelsConfig

    # fake/ and local/ are routed by ragaudit's own registry, the rest by litellm, offline.
    check_judges(
        ModelsConfig(
            judge="local/gemma-3-270m",
            generator="ollama/qwen2.5:7b",
            jury=("fake/judge", "openai/gpt-4o-mini", "gpt-4o-mini"),
        )
    )


@pytest.mark.parametrize(("flag", "value"), [("--judge-repeats", "0"), ("--limit", "0")])
def test_a_flag_out_of_its_config_fields_range_is_an_error_of_the_flag(
    tmp_path: Path, flag: str, value: str
) -> None:
    from support.cli import run_args

    result = CliRunner().invoke(app, [*run_args(tmp_path), flag, value, "--dry-run"])
    assert result.exit_code != 0
    said = " ".join(result.output.split())
    assert f"Invalid value for '{flag}'" in said and "config" not in said, said
