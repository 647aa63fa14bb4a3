"""Judge repeats and juries in a run: samples kept per row, memoised apart, agreement reported."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from ragaudit.config import RunConfig
from ragaudit.flows.evaluate import evaluate
from ragaudit.noise import aggregate
from ragaudit.reporting import build_report, compare_runs
from ragaudit.runfolder import RunFolder

pytestmark = pytest.mark.usefixtures("prefect_harness")

NOISY = "fake/judge?wrong=0.3&seed=11"
METRICS = ["context_precision", "faithfulness", "rouge_l"]


def _questions(tmp_path: Path, n: int = 12) -> Path:
    """Questions with their answers and contexts: context precision judges each context."""
    rows = []
    for i in range(n):
        rows.append(
            {
                "question_id": f"q{i:02d}",
                "question": f"When was widget {i} first made?",
                "reference": f"Widget {i} was first made in {1900 + i} in town {i}.",
                "response": f"Widget {i} was made in {1900 + i}.",
                "retrieved_contexts": [
                    f"Widget {i} was first made in {1900 + i}.",
                    f"Town {i} is where widget {i} comes from.",
                    f"Gadget {i + 50} is blue and sold in shops.",
                    f"The weather in town {i} is mild in spring.",
                ],
            }
        )
    path = tmp_path / "widgets.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    return path


def _config(config_factory: Any, tmp_path: Path, **kw: Any) -> RunConfig:
    return config_factory(
        questions=str(_questions(tmp_path)),
        collect__backend="question_set",
        score__metrics=METRICS,
        score__top_k=4,
        report__formats=["html", "xlsx"],
        **kw,
    )


def _run(config: RunConfig, run_id: str) -> dict[str, Any]:
    return asyncio.run(evaluate(config.model_dump_json(), run_id, None))


def _scores(config: RunConfig, run_id: str) -> dict[tuple[str, str], dict[str, Any]]:
    rows = RunFolder(config.runs_root, run_id).read("scores").to_pylist()
    return {(r["question_id"], r["metric"]): r for r in rows}


def _judged(row: dict[str, Any]) -> Any:
    reason = json.loads(row["reason"]) if row["reason"] else None
    return reason.get("metric") if isinstance(reason, dict) else reason


def test_repeats_keep_three_samples_memoised_apart_and_report_self_agreement(
    config_factory: Any, tmp_path: Path, fake: Any
) -> None:
    config = _config(config_factory, tmp_path, judge=NOISY, models__judge_repeats=3)
    _run(config, "r3")
    rows = _scores(config, "r3")
    judged = [r for r in rows.values() if r["metric"] == "context_precision"]
    assert judged and all(r["status"] == "ok" for r in judged)
    for r in judged:
        assert len(r["samples"]) == 3 and r["sample_judges"] == [NOISY] * 3
        assert r["value"] == pytest.approx(sum(r["samples"]) / 3)
    # The noisy judge answers its repeats differently on some rows: they are not one memo entry.
    assert any(len(set(r["samples"])) > 1 for r in judged)
    # A metric without a judge is scored once.
    assert all(r["samples"] is None for r in rows.values() if r["metric"] == "rouge_l")

    paid = fake.stats.calls
    again = _run(config, "r3-again")
    assert again["llm"]["provider_calls"] == 0 and fake.stats.calls == paid
    assert _scores(config, "r3-again").keys() == rows.keys()

    stored = RunFolder(config.runs_root, "r3").read("judge_noise").to_pylist()
    assert [(r["metric"], r["kind"], r["judge"]) for r in stored] == [
        ("context_precision", "self", NOISY),
        ("faithfulness", "self", NOISY),
    ]
    report = build_report(RunFolder(config.runs_root, "r3").path)
    (own,) = [n for n in report.judge_noise if n.metric == "context_precision"]
    assert own.kind == "self" and own.judge == NOISY and own.n_raters == 3
    assert own.alpha is not None and own.ci_low is not None and own.ci_high is not None
    assert own.ci_low <= own.alpha <= own.ci_high and own.n_items == len(judged)
    html = (report.run_dir / "report.html").read_text(encoding="utf-8")
    assert 'id="judge-noise"' in html and "context_precision" in html


def test_one_repeat_scores_exactly_as_a_run_without_repeats(
    config_factory: Any, tmp_path: Path, fake: Any
) -> None:
    plain = _config(config_factory, tmp_path, judge=NOISY)
    _run(plain, "plain")
    before = _scores(plain, "plain")
    # A fresh memo: the values must come from the same requests, not from the memo.
    once = _config(
        config_factory,
        tmp_path,
        judge=NOISY,
        models__judge_repeats=1,
        cache_dir=str(tmp_path / "other-cache"),
    )
    _run(once, "once")
    after = _scores(once, "once")
    assert after.keys() == before.keys()
    for key, row in before.items():
        other = after[key]
        # The trace's steps are kept in the order the calls finished: only its result compares.
        assert {k: v for k, v in row.items() if k not in {"run_id", "reason"}} == {
            k: v for k, v in other.items() if k not in {"run_id", "reason"}
        }
        assert _judged(row) == _judged(other)
        assert other["samples"] is None and other["sample_judges"] is None
    # Repeat 0 is the request as asked once: on the same memo, more repeats reuse every entry.
    more = _config(config_factory, tmp_path, judge=NOISY, models__judge_repeats=3)
    _run(more, "more")
    for key, row in _scores(more, "more").items():
        if row["samples"] is not None:
            assert row["samples"][0] == before[key]["value"]


def test_a_jury_keeps_each_judges_samples_and_aggregates_by_the_configured_rule(
    config_factory: Any, tmp_path: Path, fake: Any
) -> None:
    jury = ["fake/judge?wrong=0.3&seed=1", "fake/judge?wrong=0.3&seed=2"]
    config = _config(
        config_factory,
        tmp_path,
        judge=jury[0],
        models__jury=jury,
        models__judge_repeats=2,
        score__aggregate={"context_precision": "median", "faithfulness": "majority"},
    )
    _run(config, "jury")
    rows = _scores(config, "jury")
    for (_, metric), r in rows.items():
        if metric == "rouge_l" or r["status"] != "ok":
            continue
        assert r["sample_judges"] == [jury[0], jury[0], jury[1], jury[1]]
        assert r["judge"] == ", ".join(jury)
        how = "median" if metric == "context_precision" else "majority"
        ok = [v for v in r["samples"] if v is not None]
        assert r["value"] == pytest.approx(aggregate([[v] for v in ok], how)[0])
    precision = [r for (_, m), r in rows.items() if m == "context_precision"]
    assert any(len(set(r["samples"])) > 1 for r in precision)

    report = build_report(RunFolder(config.runs_root, "jury").path)
    kinds = {(n.kind, n.judge) for n in report.judge_noise if n.metric == "context_precision"}
    assert kinds == {("self", jury[0]), ("self", jury[1]), ("jury", None)}
    split = [d for d in report.judge_disagreements if d.metric == "context_precision"]
    assert split and all(set(d.scores) == set(jury) and d.spread > 0 for d in split)
    assert split == sorted(split, key=lambda d: -d.spread)
    import openpyxl

    wb = openpyxl.load_workbook(report.run_dir / "report.xlsx")
    noise_sheet = list(wb["judge_noise"].iter_rows(values_only=True))
    assert {"self", "jury", "disagreement"} <= {row[1] for row in noise_sheet[1:]}
    header = [c.value for c in wb["context_precision"][1]]
    assert header[-1] == "samples"

    # Another jury is another judge: a run judged by the first juror alone does not compare.
    _run(_config(config_factory, tmp_path, judge=jury[0]), "solo")
    root = Path(config.runs_root)
    cmp = compare_runs(root / "solo", root / "jury", resamples=199)
    assert "metric parameter models.jury" in [d.what for d in cmp.differences]
    assert not cmp.comparable


def test_compare_of_runs_with_samples_counts_the_judge(
    config_factory: Any, tmp_path: Path, fake: Any
) -> None:
    a = _config(config_factory, tmp_path, judge=NOISY, models__judge_repeats=3)
    _run(a, "a")
    # Same answers, another draw of the judge's noise: only judge noise separates the runs.
    b = _config(
        config_factory, tmp_path, judge="fake/judge?wrong=0.3&seed=12", models__judge_repeats=3
    )
    _run(b, "b")
    root = Path(a.runs_root)
    cmp = compare_runs(root / "a", root / "b", resamples=999)
    by = {m.metric: m for m in cmp.metrics}
    assert by["context_precision"].noise == "questions and judge samples"
    assert by["context_precision"].judge_share is not None
    assert by["rouge_l"].noise == "questions"
    assert "questions and judge samples" in json.dumps(cmp.to_dict())


def _score_calls(config: RunConfig, metric: str) -> dict[str, float]:
    from ragaudit.flows import estimate_run

    estimate = asyncio.run(estimate_run(config, use_history=False))
    out: dict[str, float] = {}
    for line in estimate.lines:
        if line.stage == f"score:{metric}" and line.kind == "completion":
            out[line.model] = out.get(line.model, 0.0) + line.calls
    return out


def test_the_dry_run_counts_every_repeat_of_every_juror(
    config_factory: Any, tmp_path: Path
) -> None:
    plain = _score_calls(_config(config_factory, tmp_path, judge=NOISY), "context_precision")
    assert list(plain) == [NOISY] and plain[NOISY] > 0
    jury = ["fake/judge?seed=1", "fake/judge?seed=2"]
    both = _score_calls(
        _config(config_factory, tmp_path, judge=NOISY, models__jury=jury, models__judge_repeats=3),
        "context_precision",
    )
    assert both == {jury[0]: 3 * plain[NOISY], jury[1]: 3 * plain[NOISY]}


def test_judge_repeats_flag_sets_the_config_field(monkeypatch: Any, tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from ragaudit.cli import _run as cli_run
    from ragaudit.cli import app

    seen: list[dict[str, Any]] = []
    monkeypatch.setattr(cli_run, "_dry_run", lambda config, overrides, *a: seen.append(overrides))
    result = CliRunner().invoke(app, ["run", "--dry-run", "--judge-repeats", "3"])
    assert result.exit_code == 0, result.output
    assert seen[-1]["models"]["judge_repeats"] == 3
    monkeypatch.setattr(cli_run, "_evaluate", lambda config, overrides, *a: seen.append(overrides))
    result = CliRunner().invoke(app, ["score", "--run-id", "x", "--judge-repeats", "2"])
    assert result.exit_code == 0, result.output
    assert seen[-1]["models"]["judge_repeats"] == 2
    refused = CliRunner().invoke(app, ["run", "--dry-run", "--judge-repeats", "0"])
    assert refused.exit_code != 0
