"""Calibration: an oracle judge loses nothing; a judge of known error is measured honestly."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from support.oracle import Oracle
from support.paths import REPO_ROOT

from ragaudit.cache import Gateway
from ragaudit.calibration import (
    FAMILIES,
    bundled_inputs,
    load_labels,
    make_scenarios,
    run_calibration,
)
from ragaudit.dataset import load_questions
from ragaudit.errors import InputError
from ragaudit.metrics import Deps
from ragaudit.search import read_corpus
from ragaudit.stats import share_ci

REPO = REPO_ROOT
DEMO = REPO / "data" / "demo"


def demo_scenarios() -> list:
    return make_scenarios(
        load_questions(DEMO / "questions.jsonl"), read_corpus(DEMO / "corpus.jsonl"), seed=0
    )


@pytest.fixture
def gateway(tmp_path: Path):
    gw = Gateway(tmp_path / "memo", concurrency=16, backoff_s=0.0, max_retries=1)
    yield gw
    gw.close()


def deps(gateway: Gateway, **options: Any) -> Deps:
    return Deps.of(gateway=gateway, judge="fake/judge", embedder="fake/embed", options=options)


def test_scenarios_cover_every_family_with_expected_orders() -> None:
    rows = demo_scenarios()
    families = {r.metadata["scenario"]["family"] for r in rows}
    assert families == set(FAMILIES)
    for r in rows:
        meta = r.metadata["scenario"]
        assert len(meta["relevant"]) == len(r.retrieved_contexts) > 0
        assert r.question_id.startswith(meta["base_question_id"])
    ordering = [r for r in rows if r.metadata["scenario"]["family"] == "ordering"]
    best = next(r for r in ordering if r.metadata["scenario"]["level"] == "best")
    assert best.metadata["scenario"]["relevant"][0] is True


def test_scenario_sets_read_any_corpus_the_search_stages_read(tmp_path: Path) -> None:
    """One corpus reader: a Parquet copy of the demo corpus gives the same scenario rows."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    from typer.testing import CliRunner

    from ragaudit.cli import app

    docs = read_corpus(DEMO / "corpus.jsonl")
    parquet = tmp_path / "corpus.parquet"
    rows = [{"id": d.id, "text": d.text, "collection": d.metadata["collection"]} for d in docs]
    pq.write_table(pa.Table.from_pylist(rows), parquet)
    out = tmp_path / "scenarios.jsonl"
    args = ["testset", str(out), "--scenarios-from", str(DEMO / "questions.jsonl")]
    result = CliRunner().invoke(app, [*args, "--corpus", str(parquet)])
    assert result.exit_code == 0, result.output
    expected = [r.model_dump(mode="json", exclude_none=True) for r in demo_scenarios()]
    assert [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()] == expected
    # The corpus matters: the demo questions name their gold by id only, and the distractors
    # of the same collection come from it too.
    assert make_scenarios(load_questions(DEMO / "questions.jsonl"), seed=0) == []
    assert any(r["metadata"]["scenario"]["level"] == "same_domain" for r in expected)
    # A corpus named but missing is an error naming it, not an empty corpus.
    missing = CliRunner().invoke(app, [*args, "--corpus", str(tmp_path / "nope.jsonl")])
    assert missing.exit_code != 0 and "nope.jsonl: not found" in missing.output


async def test_oracle_judge_agrees_fully_and_every_family_is_monotone(fake, gateway) -> None:
    inputs = bundled_inputs(limit=4, scenarios=demo_scenarios())
    with fake.script(Oracle.from_calibration(inputs)):
        result = await run_calibration(
            inputs, deps(gateway, answer_relevancy_strictness=1), window=100_000
        )
    figs = {
        (f["kind"], f["dataset"], f["metric"], f["family"], f["statistic"]): f
        for f in result.figures
    }
    for metric in ("faithfulness", "answer_relevancy", "context_relevance"):
        fig = figs[("agreement", "wikieval", metric, None, "pairwise_agreement")]
        assert fig["value"] == 1.0 and fig["n"] == 4, fig
        assert fig["ci_low"] < 1.0 <= fig["ci_high"]
    mono = [f for f in result.figures if f["kind"] == "monotonicity"]
    assert {f["family"] for f in mono} == set(FAMILIES)
    assert all(f["value"] == 1.0 and f["n"] > 0 for f in mono), mono
    halu = {f["statistic"]: f["value"] for f in result.figures if f["kind"] == "detection"}
    assert halu == {"balanced_accuracy": 1.0, "auc": 1.0}
    cons = {f["statistic"]: f["value"] for f in result.figures if f["kind"] == "consistency"}
    assert cons == {"order_disagreement": 0.0, "self_agreement": 1.0}
    assert all(f["judge"] == "fake/judge" and f["embedder"] == "fake/embed" for f in result.figures)
    assert all(r["status"] == "ok" for r in result.scores), [
        r for r in result.scores if r["status"] != "ok"
    ]


async def test_flipped_judge_lands_near_one_minus_p(fake, gateway) -> None:
    inputs = bundled_inputs(limit=10)
    with fake.script(Oracle.from_calibration(inputs, flip=0.5, seed=3)):
        result = await run_calibration(
            inputs,
            deps(gateway, answer_relevancy_strictness=1),
            window=100_000,
            with_consistency=False,
        )
    agreement = [f for f in result.figures if f["kind"] == "agreement"]
    assert len(agreement) == 3
    for f in agreement:
        assert f["value"] < 1.0 and f["ci_low"] <= f["value"] <= f["ci_high"]


def test_labels_file_alignment(tmp_path: Path) -> None:
    path = tmp_path / "labels.jsonl"
    path.write_text(
        json.dumps(
            {"question": "q?", "answer": "a", "contexts": ["c"], "labels": {"faithfulness": 1}}
        )
        + "\n"
        + json.dumps({"question": "q2?", "answer": "b", "contexts": ["d"], "label_faithfulness": 0})
        + "\n",
        encoding="utf-8",
    )
    items = load_labels(path)
    assert [(i.metric, i.label) for i in items] == [("faithfulness", 1.0), ("faithfulness", 0.0)]
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"question": "q", "labels": {"faithfulness": 3}}) + "\n")
    with pytest.raises(InputError, match=r"bad.jsonl, line 1: label of 'faithfulness' is 3.0"):
        load_labels(bad)


def test_share_ci_of_constant_data_is_wilson_not_a_point() -> None:
    mean, low, high = share_ci([1.0] * 10)
    assert mean == 1.0 and 0.6 < low < 0.8 and high == pytest.approx(1.0)


def test_calibrate_command_writes_its_tables_and_names_the_models(tmp_path: Path) -> None:
    import polars as pl
    from typer.testing import CliRunner

    from ragaudit.cli import app
    from ragaudit.runfolder import RunFolder

    args = ["calibrate", "--judge", "fake/judge", "--embedder", "fake/embed", "--limit", "2"]
    args += ["--runs-root", str(tmp_path / "runs"), "--run-id", "cal"]
    args += ["--set", f"cache_dir={tmp_path / 'cache'}"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "judge fake/judge, embedder fake/embed" in result.output
    run = RunFolder(tmp_path / "runs", "cal")
    figures = pl.from_arrow(run.read("calibration"))
    assert set(figures["kind"]) == {"monotonicity", "agreement", "detection", "consistency"}
    assert set(figures["judge"]) == {"fake/judge"} and set(figures["embedder"]) == {"fake/embed"}
    scores = pl.from_arrow(run.read("calibration_scores"))
    assert scores.height > 0 and set(scores["status"]) <= {"ok", "failed", "skipped"}
    assert list(run.calls_dir.glob("calibrate-*.parquet"))
    from ragaudit.reporting import build_calibration

    section = build_calibration(run.path)
    assert section is not None and section.judge == "fake/judge"
    assert len(section.figures) == figures.height


def test_calibrate_command_names_a_missing_labels_file(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from ragaudit.cli import app

    missing = tmp_path / "nope.jsonl"
    result = CliRunner().invoke(
        app, ["calibrate", "--judge", "fake/judge", "--labels", str(missing)]
    )
    assert result.exit_code == 2
    assert "nope.jsonl: labels file not found" in " ".join(result.output.split())
    assert "Traceback" not in result.output


def labels_from(items: list) -> list[dict[str, Any]]:
    """A labels file's rows made of labelled items (their text and human label)."""
    return [
        {
            "question_id": f"own-{i}",
            "question": item.sample.question,
            "answer": item.sample.response,
            "contexts": item.sample.contexts,
            "labels": {item.metric: item.label},
        }
        for i, item in enumerate(items)
        if item.metric in ("faithfulness", "context_relevance")
    ]


@pytest.fixture(scope="module")
def oracle_run(tmp_path_factory: pytest.TempPathFactory):
    """A calibration run folder made with the oracle judge: every kind of figure, its page."""
    import asyncio

    from support.runs import make_config

    from ragaudit.cache._fake import FAKE
    from ragaudit.calibration._write import calibrate

    tmp_path = tmp_path_factory.mktemp("oracle")
    labels = tmp_path / "labels.jsonl"
    labels.write_text(
        "".join(
            json.dumps(r, ensure_ascii=False) + "\n"
            for r in labels_from(bundled_inputs(limit=4).labelled)
        ),
        encoding="utf-8",
    )
    inputs = bundled_inputs(limit=4, scenarios=demo_scenarios())
    inputs.labelled.extend(load_labels(labels))
    cfg = make_config(tmp_path, run_id="cal")
    FAKE.reset()
    try:
        with FAKE.script(Oracle.from_calibration(inputs)):
            _, run, _ = asyncio.run(calibrate(cfg, inputs))
    finally:
        FAKE.reset()
    return run


def test_calibration_run_renders_its_page_and_workbook(oracle_run) -> None:
    import openpyxl
    from typer.testing import CliRunner

    from ragaudit.cli import app
    from ragaudit.reporting import build_calibration

    run = oracle_run
    section = build_calibration(run.path)
    assert {f.kind for f in section.figures} == {
        "monotonicity",
        "agreement",
        "detection",
        "alignment",
        "consistency",
    }
    aligned = {(f.metric, f.statistic): f.value for f in section.of_kind("alignment")}
    assert aligned[("faithfulness", "mae")] == 0.0 and aligned[("faithfulness", "auc")] == 1.0
    assert section.manifest["config"]["models"]["judge"] == "fake/judge"
    assert section.calls_total is not None and section.calls_total.calls > 0
    page = (run.path / "report.html").read_text(encoding="utf-8")
    for key in ("cal-monotonicity", "cal-agreement", "cal-alignment", "cal-consistency"):
        # Each chart names the judge and embedder inside its own SVG.
        svg = page.split(f'id="fig-{key}"', 1)[1].split("</svg>", 1)[0]
        assert "judge fake/judge · embedder fake/embed" in svg, key
    assert "<script" not in page and 'id="warnings"' not in page
    sheet = openpyxl.load_workbook(run.path / "calibration.xlsx")["calibration"]
    rows = list(sheet.iter_rows(values_only=True))
    value = rows[0].index("value")
    assert [r[value] for r in rows[1:]] == [f.value for f in section.figures]
    # ``report RUN`` renders the same page again from the run folder alone.
    (run.path / "report.html").unlink()
    result = CliRunner().invoke(app, ["report", str(run.path)])
    assert result.exit_code == 0, result.output
    assert (run.path / "report.html").read_text(encoding="utf-8") == page


def test_calibration_page_shows_the_smoke_judges_figures_under_the_warning(
    tmp_path: Path, oracle_run
) -> None:
    import shutil

    from ragaudit.manifest import SMOKE_WARNING
    from ragaudit.reporting import build_calibration, render_calibration_html

    folder = shutil.copytree(oracle_run.path, tmp_path / "smoke")
    meta = json.loads((folder / "calibration.json").read_text(encoding="utf-8"))
    # What the offline judge's calibration records (its figures are shown as they are).
    meta["warnings"] = [SMOKE_WARNING]
    (folder / "calibration.json").write_text(json.dumps(meta), encoding="utf-8")
    page = render_calibration_html(build_calibration(folder))
    head, rest = page.split('id="warnings"', 1)
    assert SMOKE_WARNING in rest.split("</section>", 1)[0]
    assert 'id="fig-cal-monotonicity"' in rest and 'id="fig-' not in head


def test_bootstrapped_statistics_equal_sklearns() -> None:
    import numpy as np
    from sklearn.metrics import balanced_accuracy_score, cohen_kappa_score, roc_auc_score

    from ragaudit.stats import auc_score, balanced_accuracy, kappa

    rng = np.random.default_rng(0)
    for _ in range(100):
        y, other = rng.integers(0, 2, 20), rng.integers(0, 2, 20)
        s = rng.integers(0, 4, 20) / 3  # graded scores: ties on purpose
        assert kappa(y, other) == pytest.approx(cohen_kappa_score(y, other), abs=1e-12)
        if 0 < y.sum() < len(y):
            assert auc_score(y, s) == pytest.approx(roc_auc_score(y, s), abs=1e-12)
            assert balanced_accuracy(y, s >= 0.5) == pytest.approx(
                balanced_accuracy_score(y, s >= 0.5), abs=1e-12
            )
    assert np.isnan(auc_score(np.ones(5), rng.random(5)))


CALIBRATION_CHARTS = ("cal-monotonicity", "cal-agreement", "cal-alignment", "cal-consistency")


@pytest.mark.skipif(
    not Path("/usr/bin/chromium").exists(), reason="no Chromium at /usr/bin/chromium"
)
def test_oracle_calibration_page_in_chromium(oracle_run) -> None:
    """The calibration page offline in a headless browser: drawn, quiet, one click to config."""
    from playwright.sync_api import sync_playwright
    from support.html_runs import CHROMIUM, CHROMIUM_ARGS

    page_path = oracle_run.path / "report.html"
    shot = oracle_run.path / "report.png"
    errors: list[str] = []
    requests: list[str] = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            page.on("pageerror", lambda e: errors.append(str(e)))

            def route(r):
                requests.append(r.request.url)
                r.continue_() if r.request.url == page_path.as_uri() else r.abort()

            page.route("**/*", route)
            page.goto(page_path.as_uri())
            charts = page.evaluate(
                """() => Object.fromEntries([...document.querySelectorAll('figure')].map(f => {
                    const svg = f.querySelector('svg');
                    const box = svg ? svg.getBoundingClientRect() : null;
                    return [f.id, {marks: f.querySelectorAll('svg path').length,
                                   width: box ? box.width : 0, height: box ? box.height : 0,
                                   text: svg ? svg.textContent : ''}];
                }))"""
            )
            judge = page.inner_text("#judge")
            page.click("#config > summary")  # the config is one click away
            config = page.inner_text("#config pre")
            page.click("#config > summary")
            page.screenshot(path=str(shot), full_page=True)
        finally:
            browser.close()
    assert errors == []
    assert requests == [page_path.as_uri()], requests
    assert judge == "fake/judge" and '"judge": "fake/judge"' in config
    assert sorted(charts) == sorted(f"fig-{k}" for k in CALIBRATION_CHARTS), charts
    for key, chart in charts.items():
        assert chart["width"] > 200 and chart["height"] > 60, (key, chart)
        assert chart["marks"] > 4, (key, chart)
        assert "judge fake/judge · embedder fake/embed" in chart["text"], key
    assert shot.stat().st_size > 10_000


def test_calibration_files_go_to_the_run_folder_or_a_given_path(tmp_path: Path) -> None:
    from ragaudit.reporting import write_calibration_html, write_calibration_xlsx
    from ragaudit.reporting._calibration import CalibrationSection

    section = CalibrationSection("cal", "fake/judge", "fake/embed", (), (), run_dir=tmp_path)
    assert write_calibration_html(section) == tmp_path / "report.html"
    assert write_calibration_xlsx(section) == tmp_path / "calibration.xlsx"
    loose = CalibrationSection("cal", "fake/judge", "fake/embed", (), ())
    for write in (write_calibration_html, write_calibration_xlsx):
        with pytest.raises(ValueError, match="no run folder: give a path"):
            write(loose)
        other = tmp_path / "elsewhere" / f"{write.__name__}.out"
        assert write(loose, other) == other and other.stat().st_size > 0
