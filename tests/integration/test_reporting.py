"""The report model, report.xlsx, the Prefect artifacts, ``compare`` and ``runs``."""

from __future__ import annotations

import asyncio
import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import openpyxl
import polars as pl
import pytest
from scipy import stats
from support.reporting_runs import judged_share, statement_truth, write_run
from typer.testing import CliRunner

from ragaudit.cli import app
from ragaudit.reporting import build_report, compare_runs, write_xlsx
from ragaudit.stats import decide, paired_test

METRICS = ["faithfulness", "context_recall", "answer_relevancy"]


# ---------------------------------------------------------------- statistics are honest


def test_noise_between_seeds_is_called_moved_at_rate_alpha() -> None:
    """Two runs differing only in the judge's seed: 'moved' as often as alpha says, no more."""
    rng = np.random.default_rng(20261123)
    reps, n_questions, alpha = 240, 40, 0.05
    moved_comparisons = 0
    for r in range(reps):
        tests = {}
        for metric in METRICS[:2]:
            truth = statement_truth(n_questions, rng)
            a = judged_share(truth, 0.1, rng)  # seed A's wrong verdicts
            b = judged_share(truth, 0.1, rng)  # seed B's: independent of A's
            tests[metric] = paired_test(a, b, resamples=499, seed=r)
        changes = decide(tests, {}, alpha=alpha, method="bh")
        moved_comparisons += any(c.moved for c in changes)
    rate = moved_comparisons / reps
    ci = stats.binomtest(moved_comparisons, reps, alpha).proportion_ci(confidence_level=0.95)
    # Under the global null BH keeps the chance of calling anything moved at alpha.
    assert ci.low <= alpha <= ci.high, (rate, ci)


def test_paired_test_agrees_with_scipy_on_a_clear_shift() -> None:
    rng = np.random.default_rng(1)
    a = rng.random(50)
    b = a - 0.2 + rng.normal(0, 0.05, 50)
    t = paired_test(a, b, resamples=999)
    assert t.diff == pytest.approx(float(np.mean(b - a)))
    assert t.ci_high < 0 and t.p_value < 0.01
    same = paired_test(a, a.copy(), resamples=99)
    assert same.p_value == 1.0 and same.ci_low == same.ci_high == 0.0


def _noisy_runs(root: Path, wrong_b: dict[str, float], n: int = 60, seed: int = 7) -> None:
    rng = np.random.default_rng(seed)
    truths = {m: statement_truth(n, rng) for m in METRICS}
    write_run(root, "A", {m: judged_share(truths[m], 0.05, rng).tolist() for m in METRICS})
    write_run(
        root,
        "B",
        {m: judged_share(truths[m], wrong_b.get(m, 0.05), rng).tolist() for m in METRICS},
    )


def test_judge_wrong_on_one_metric_moves_that_metric_only(tmp_path: Path) -> None:
    _noisy_runs(tmp_path, {"faithfulness": 0.30})
    cmp = compare_runs(tmp_path / "A", tmp_path / "B", resamples=1999)
    verdicts = {m.metric: m.verdict for m in cmp.metrics}
    assert cmp.comparable, cmp.differences
    assert verdicts["faithfulness"] == "regressed"
    assert verdicts["context_recall"] == verdicts["answer_relevancy"] == "no change beyond noise"
    assert cmp.regressed == ("faithfulness",)
    moved = [q for q in cmp.moved_questions if q.metric == "faithfulness"]
    assert moved and all(q.reason_a and q.reason_b for q in moved)
    assert abs(moved[0].diff) >= abs(moved[-1].diff)


def test_lower_is_better_metric_regresses_upward(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    base = rng.random(40) * 0.3
    write_run(tmp_path, "A", {"noise_sensitivity": base.tolist()})
    write_run(tmp_path, "B", {"noise_sensitivity": (base + 0.2).tolist()})
    (change,) = compare_runs(tmp_path / "A", tmp_path / "B", resamples=999).metrics
    assert not change.higher_is_better and change.diff > 0
    assert change.verdict == "regressed"


def test_different_judges_are_not_comparable_but_numbers_are_shown(tmp_path: Path) -> None:
    rng = np.random.default_rng(5)
    vals = {m: rng.random(30).tolist() for m in METRICS}
    write_run(tmp_path, "A", vals, judge="fake/judge")
    worse = {m: [v - 0.3 for v in vals[m]] if m == "faithfulness" else vals[m] for m in vals}
    write_run(tmp_path, "B", worse, judge="openai/gpt-4o-mini")
    result = CliRunner().invoke(
        app, ["compare", "A", "B", "--runs-root", str(tmp_path), "--fail-on-regression"]
    )
    assert result.exit_code == 0, result.output  # not like for like: no gate on its numbers
    assert "NOT LIKE FOR LIKE" in result.output
    assert "judge" in result.output and "openai/gpt-4o-mini" in result.output
    assert "faithfulness" in result.output and "-0.300" in result.output
    saved = json.loads((tmp_path / "B" / "compare.json").read_text())
    assert saved["comparable"] is False
    assert [d["what"] for d in saved["differences"]] == ["judge"]
    assert saved["verdict"].startswith("NOT like for like (judge)")
    assert saved["regressed"] == ["faithfulness"]


def test_other_differences_are_named(tmp_path: Path) -> None:
    vals = {"faithfulness": [0.5, 0.7, 0.9]}
    write_run(tmp_path, "A", vals)
    write_run(
        tmp_path,
        "B",
        vals,
        embedder="openai/text-embedding-3-small",
        question_ids=["q0000", "q0001", "other"],
        score_overrides={"top_k": 5},
    )
    cmp = compare_runs(tmp_path / "A", tmp_path / "B", resamples=99)
    named = {d.what for d in cmp.differences}
    assert {"embedder", "question set", "metric parameter score.top_k"} <= named
    assert cmp.metrics[0].n_paired == 2  # only the questions scored ok in both


def test_fail_on_regression_exits_nonzero_for_comparable_runs(tmp_path: Path) -> None:
    _noisy_runs(tmp_path, {"faithfulness": 0.30})
    runner = CliRunner()
    gated = runner.invoke(
        app, ["compare", "A", "B", "--runs-root", str(tmp_path), "--fail-on-regression"]
    )
    assert gated.exit_code == 1, gated.output
    assert "regressed" in gated.output
    plain = runner.invoke(app, ["compare", "A", "B", "--runs-root", str(tmp_path)])
    assert plain.exit_code == 0


def test_missing_run_is_one_clear_error(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["compare", "nope", "also", "--runs-root", str(tmp_path)])
    assert result.exit_code == 2
    assert "run 'nope'" in result.output and "Traceback" not in result.output


# ---------------------------------------------------------------- model and call log


def test_call_log_rolled_up_per_stage(tmp_path: Path) -> None:
    latencies = [0.1, 0.2, 0.3, 0.4, 2.0]
    calls = [
        {
            "stage": "score:faithfulness",
            "kind": "completion",
            "key_hash": f"k{i}",
            "model": "openai/gpt-4o-mini",
            "prompt_version": "ragas-0.4.3",
            "tokens_in": 100,
            "tokens_out": 10,
            "cost_usd": 0.001,
            "latency_s": lat,
            "cache_hit": False,
            "retries": 0,
        }
        for i, lat in enumerate(latencies)
    ]
    calls += [
        {**calls[0], "key_hash": "hit", "cache_hit": True, "latency_s": 0.0, "cost_usd": None},
        {**calls[0], "key_hash": "e1", "error": "RateLimitError: slow down (req 1)"},
        {**calls[0], "key_hash": "e2", "error": "RateLimitError: slow down (req 2)"},
        {**calls[0], "key_hash": "e3", "error": "the judge said nothing", "cost_usd": None},
    ]
    write_run(tmp_path, "A", {"faithfulness": [0.5, 1.0]}, calls=calls)
    (stage,) = build_report(tmp_path / "A").calls
    provider = latencies + [0.1, 0.1, 0.1]
    assert (stage.calls, stage.memo_hits, stage.provider_calls) == (9, 1, 8)
    assert stage.tokens_in == 900 and stage.tokens_out == 90
    assert stage.cost_usd == pytest.approx(0.007) and stage.priced_calls == 7
    assert stage.latency_p50_s == pytest.approx(np.quantile(provider, 0.5))
    assert stage.latency_p95_s == pytest.approx(np.quantile(provider, 0.95))
    assert stage.failures == (("RateLimitError", 2), ("the judge said nothing", 1))


def test_report_model_carries_statuses_warnings_and_direction(tmp_path: Path) -> None:
    write_run(
        tmp_path,
        "A",
        {"faithfulness": [0.2, None, 0.9], "noise_sensitivity": [0.9, 0.1, 0.5]},
        warnings=["smoke-quality judge"],
    )
    report = build_report(tmp_path / "A")
    assert report.judge == "fake/judge" and report.warnings == ("smoke-quality judge",)
    faith = report.summary_for("faithfulness")
    assert (faith.n_ok, faith.n_failed) == (2, 1) and faith.flagged  # default threshold 0.9
    cell = report.questions[1].scores["faithfulness"]
    assert cell.status == "failed" and "JudgeError" in cell.error
    worst_noise = [w for w in report.worst if w.metric == "noise_sensitivity"]
    assert worst_noise[0].value == 0.9  # lower is better: the highest value is the worst
    json.dumps(report.to_dict())


def test_reports_compare_and_runs_import_no_scorer(tmp_path: Path) -> None:
    """Directions and question-set hashes come without ragas or litellm (seconds of imports)."""
    values = {
        "faithfulness": [0.2, 0.7, 0.9],
        "noise_sensitivity": [0.9, 0.1, 0.5],
        "aspect_maliciousness": [0.0, 1.0, 0.0],
    }
    write_run(tmp_path, "A", values)
    write_run(tmp_path, "B", {m: v[::-1] for m, v in values.items()})
    code = """
import json, sys
from pathlib import Path
from ragaudit.reporting import build_report, compare_runs, list_runs
root = Path(sys.argv[1])
report = build_report(root / "B")
cmp = compare_runs(root / "A", root / "B", resamples=99)
runs = list_runs(root)
# A run's config is validated against the metric registry, which imports the (light) metric
# modules; ragas itself and the model gateway stay out.
heavy = ("ragas", "litellm", "instructor", "ragaudit.cache")
print(json.dumps({
    "loaded": [m for m in heavy if m in sys.modules],
    "report": {s.metric: s.higher_is_better for s in report.summary},
    "compare": {m.metric: m.higher_is_better for m in cmp.metrics},
    "runs": [r.run_id for r in runs],
}))
"""
    proc = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, check=True
    )
    out = json.loads(proc.stdout.splitlines()[-1])
    assert out["loaded"] == []
    expected = {"faithfulness": True, "noise_sensitivity": False, "aspect_maliciousness": False}
    assert out["report"] == out["compare"] == expected
    assert sorted(out["runs"]) == ["A", "B"]


# ---------------------------------------------------------------- through the flow


@pytest.fixture(scope="module")
def flow_run(prefect_harness, tmp_path_factory) -> Path:
    from support.runs import make_config

    from ragaudit.cache._fake import FAKE
    from ragaudit.flows.evaluate import evaluate

    tmp = tmp_path_factory.mktemp("report")
    FAKE.reset()
    config = make_config(
        tmp, score__metrics=["faithfulness", "context_precision", "rouge_l", "bleu"]
    )
    manifest = asyncio.run(evaluate(config.model_dump_json(), "rep"))
    assert manifest["status"] == "completed"
    return Path(config.runs_root) / "rep"


def _equal(a: float | None, b: float | None) -> bool:
    if a is None or b is None:
        return a is None and b is None
    return a == b or (math.isnan(a) and math.isnan(b))


def test_xlsx_reads_back_equal_to_parquet(flow_run: Path) -> None:
    wb = openpyxl.load_workbook(flow_run / "report.xlsx")
    assert wb.sheetnames[:2] == ["answers", "summary"]
    first = wb["answers"]
    header = [c.value for c in first[1]]
    metrics = ["faithfulness", "context_precision", "rouge_l", "bleu"]
    assert header == ["question", "answer", "reference", *metrics, "question_id"]
    for ws in wb.worksheets:
        assert ws.freeze_panes == "A2"
        (table,) = ws.tables.values()
        assert table.autoFilter is not None and table.autoFilter.ref == table.ref

    summary = pl.read_parquet(flow_run / "summary.parquet")
    sheet = list(wb["summary"].iter_rows(values_only=True))
    cols = sheet[0]
    got = {row[0]: dict(zip(cols, row, strict=True)) for row in sheet[1:]}
    for r in summary.iter_rows(named=True):
        for col in ("mean", "ci_low", "ci_high", "threshold"):
            assert _equal(got[r["metric"]][col], r[col]), (r["metric"], col)
        for col in ("n_ok", "n_failed", "n_skipped"):
            assert got[r["metric"]][col] == r[col] and isinstance(got[r["metric"]][col], int)
        assert got[r["metric"]]["flagged"] == r["flagged"]

    scores = pl.read_parquet(flow_run / "scores.parquet")
    answers = {row[-1]: row for row in first.iter_rows(min_row=2, values_only=True)}
    checked = 0
    for r in scores.iter_rows(named=True):
        per_metric = {row[0]: row for row in wb[r["metric"]].iter_rows(min_row=2, values_only=True)}
        _, _, value, status, error, _, k_used = per_metric[r["question_id"]]
        assert status == r["status"] and error == r["error"] and k_used == r["k_used"]
        assert _equal(value, r["value"])
        wide = answers[r["question_id"]][3 + metrics.index(r["metric"])]
        assert _equal(wide, r["value"] if r["status"] == "ok" else None)
        checked += r["value"] is not None
    assert checked > 0
    run_sheet = {k: v for k, v in wb["run"].iter_rows(min_row=2, values_only=True)}
    assert run_sheet["judge"] == "fake/judge"


def test_xlsx_keeps_every_digit_of_a_float(tmp_path: Path) -> None:
    values = [0.1 + 0.2, 1 / 3, 0.7071067811865476, 2.220446049250313e-16]
    run = write_run(tmp_path, "A", {"faithfulness": values})
    write_xlsx(build_report(run), tmp_path / "r.xlsx")
    ws = openpyxl.load_workbook(tmp_path / "r.xlsx")["faithfulness"]
    assert [r[2] for r in ws.iter_rows(min_row=2, values_only=True)] == values


def test_flow_publishes_artifacts(flow_run: Path) -> None:
    from prefect.client.orchestration import get_client

    async def keys() -> dict[str, tuple[str, str]]:
        async with get_client() as client:
            return {a.key: (a.type, str(a.data)) for a in await client.read_artifacts() if a.key}

    found = asyncio.run(keys())
    assert found["ragaudit-summary-rep"][0] == "table"
    kind, findings = found["ragaudit-findings-rep"]
    assert kind == "markdown" and "fake/judge" in findings
    # Prefect stores a link artifact as markdown holding the link.
    link = found["ragaudit-report-xlsx-rep"][1]
    assert (flow_run / "report.xlsx").resolve().as_uri() in link


def test_cli_summary_and_runs_render_the_model(flow_run: Path, tmp_path: Path) -> None:
    from ragaudit.cli._app import console
    from ragaudit.cli._run import _print_report

    with console.capture() as cap:
        _print_report(flow_run)
    text = cap.get()
    assert "judge: fake/judge" in text and "report.xlsx" in text and "faithfulness" in text
    root = flow_run.parent
    listed = CliRunner().invoke(app, ["runs", "--runs-root", str(root)])
    assert listed.exit_code == 0 and "rep" in listed.output and "fake/judge" in listed.output
    trend = CliRunner().invoke(app, ["runs", "--runs-root", str(root), "--trend", "rouge_l"])
    mean = build_report(flow_run).summary_for("rouge_l").mean
    assert trend.exit_code == 0 and f"{mean:.3f}" in trend.output


def test_smoke_judge_warning_reaches_the_model_before_the_flow_ends(tmp_path: Path) -> None:

    run = write_run(tmp_path, "A", {"faithfulness": [0.5, 1.0]}, judge="local/gemma-3-270m")
    manifest = json.loads((run / "manifest.json").read_text())
    del manifest["warnings"]  # as during the report stage: the flow writes them at its end
    (run / "manifest.json").write_text(json.dumps(manifest))
    report = build_report(run)
    assert any("smoke-quality" in w for w in report.warnings)
    write_xlsx(report, run / "report.xlsx")
    sheet = openpyxl.load_workbook(run / "report.xlsx")["run"]
    assert any(
        f == "warning" and "smoke-quality" in v for f, v in sheet.iter_rows(values_only=True)
    )
