"""The corrected relevant share and NDCG@10 beyond the run page: ``compare``, summary.parquet,
the runs list, the trend and the xlsx (issue #43 items 4 and 5)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import openpyxl
import polars as pl
import pyarrow as pa
import pytest
from support.labelled_runs import label_row, labelled_run

from ragaudit import labels, ppi
from ragaudit.reporting import (
    Report,
    build_report,
    compare_reports,
    list_runs,
    render_compare_html,
    run_overview,
    runs_table,
    summarise,
    trend,
    trend_chart,
    write_xlsx,
)
from ragaudit.runfolder import RunFolder, write_table
from ragaudit.schemas import SUMMARY, schema_version, to_table
from ragaudit.stats import ratio_values

FIGURES = (ppi.RELEVANT_SHARE, ppi.NDCG)


def _summary(run: Path) -> None:
    """summary.parquet as the report stage writes it, then corrected by the run's labels."""
    scores = pl.from_arrow(RunFolder(run.parent, run.name).read("scores"))
    assert isinstance(scores, pl.DataFrame)
    rows = [
        {"run_id": run.name, **{k: v for k, v in vars(s).items() if k != "higher_is_better"}}
        for s in summarise(scores, {}, 200)
    ]
    RunFolder(run.parent, run.name).write("summary", to_table(rows, SUMMARY))
    ppi.write_corrected_summary(run)


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A and B: every candidate of 8 questions graded by people (NDCG@10 is corrected); C:
    no labels; D: one candidate of each of 12 questions graded (the relevant share is
    corrected, NDCG@10 never). The judge over-rates grades in every run."""
    root = tmp_path_factory.mktemp("runs")
    a, _ = labelled_run(root, "A", questions=30, grade_labels=8, answer_labels=15, seed=1)
    b, _ = labelled_run(root, "B", questions=30, grade_labels=8, answer_labels=15, seed=2)
    c, _ = labelled_run(root, "C", questions=30, with_labels=False, seed=3)
    d, truth = labelled_run(root, "D", questions=30, with_labels=False, seed=4)
    labels.append_labels(
        d,
        [
            label_row("grade", q, "c0", "ann", float(truth["grades"][(q, "c0")]))
            for q in [f"q{i:04d}" for i in range(12)]
        ],
    )
    for run in (a, b, c, d):
        _summary(run)
    return {"A": a, "B": b, "C": c, "D": d}


@pytest.fixture(scope="module")
def reports(runs: dict[str, Path]) -> dict[str, Report]:
    """Each run's report, built once: reading people's labels is the slow part."""
    return {name: build_report(path) for name, path in runs.items()}


def test_compare_with_grade_labels_in_both_runs_corrects_the_relevant_share_and_ndcg(
    runs: dict[str, Path], reports: dict[str, Report]
) -> None:
    cmp = compare_reports(reports["A"], reports["B"], resamples=999)
    rows = {m.metric: m for m in cmp.metrics}
    assert set(FIGURES) <= set(rows)
    assert cmp.corrected == ("faithfulness", *FIGURES) and cmp.labels_unused == ()
    judged = {r: ppi.judged_by_question(runs[r]) for r in "AB"}
    for figure in FIGURES:
        m = rows[figure]
        assert m.noise == "questions and people's labels (PPI)"
        assert m.n_paired == 30 and m.ci_low is not None and m.p_adjusted is not None
        found = reports["A"].people.corrected_for(figure)  # type: ignore[union-attr]
        assert found is not None and found.ppi_mean is not None
        # The judge's figure over the paired questions plus the mean of label minus judge.
        by_q = judged["A"][figure]
        judge_a = ratio_values([t for t, _ in by_q.values()], [n for _, n in by_q.values()])
        assert m.mean_a == pytest.approx(judge_a.mean() + np.mean(found.residuals))
        # The judge over-rates: its figure lies above the corrected one.
        assert found.judge_mean > m.mean_a  # type: ignore[operator]
        assert m.ci_low <= m.diff <= m.ci_high  # type: ignore[operator]
    share = reports["A"].people.corrected_for(ppi.RELEVANT_SHARE)  # type: ignore[union-attr]
    assert judge_a.size == 30
    # Over every paired question, the linearised values' mean is the pooled relevant share.
    by_q = judged["A"][ppi.RELEVANT_SHARE]
    pooled = sum(t for t, _ in by_q.values()) / sum(n for _, n in by_q.values())
    assert pooled == pytest.approx(share.judge_mean)  # type: ignore[union-attr]
    notes = " ".join(cmp.notes)
    assert (
        "relevant share: corrected by people's labels in both runs "
        "(40 labels in 8 questions and 40 labels in 8 questions" in notes
    )
    assert (
        "NDCG@10: corrected by people's labels in both runs "
        "(40 labels in 8 questions and 40 labels in 8 questions" in notes
    )
    assert "paired by question over the 30 question(s) both runs judged" in notes
    found = cmp.to_dict()
    assert found["corrected"] == ["faithfulness", *FIGURES]
    assert {m["metric"] for m in found["metrics"]} >= set(FIGURES)
    page = render_compare_html(cmp)
    assert 'id="labels-corrected"' in page and "NDCG@10" in page and "relevant share" in page


def test_labels_in_one_run_only_are_said_unused_and_why(reports: dict[str, Report]) -> None:
    cmp = compare_reports(reports["A"], reports["C"], resamples=999)
    rows = {m.metric: m for m in cmp.metrics}
    assert cmp.corrected == () and cmp.labels_unused == ("faithfulness", *FIGURES)
    for figure in FIGURES:
        # Judged alone the figure is no row of the gate's family: labelling one run must not
        # change what --fail-on-regression decides.
        assert figure not in rows
        assert any(
            n.startswith(f"{figure}: people's labels unused: only one run has people's labels (A)")
            for n in cmp.notes
        ), cmp.notes
    assert 'id="labels-unused"' in render_compare_html(cmp)
    # Labels in both runs, none grading a question whole in D: both figures still corrected.
    partial = compare_reports(reports["A"], reports["D"], resamples=999)
    assert partial.corrected == FIGURES and partial.labels_unused == ("faithfulness",)


def test_compare_without_any_labels_is_as_before(
    reports: dict[str, Report], tmp_path: Path
) -> None:
    c2, _ = labelled_run(tmp_path, "C2", questions=30, with_labels=False, seed=5)
    cmp = compare_reports(reports["C"], build_report(c2), resamples=99)
    assert [m.metric for m in cmp.metrics] == ["faithfulness"]
    assert cmp.corrected == () and cmp.labels_unused == ()
    assert not any("labels" in n for n in cmp.notes)


def test_summary_keeps_the_corrected_figures_with_intervals_and_n(
    runs: dict[str, Path], reports: dict[str, Report]
) -> None:
    table = RunFolder(runs["A"].parent, "A").read("summary")
    assert schema_version(table.schema) == 4  # version 4: rows by turn beside them (none here)
    rows = {r["metric"]: r for r in table.to_pylist()}
    people = reports["A"].people
    assert people is not None
    assert rows["faithfulness"]["kind"] == "metric"
    for figure in FIGURES:
        row, found = rows[figure], people.corrected_for(figure)
        assert found is not None and row["kind"] == "figure"
        assert row["mean"] == pytest.approx(found.judge_mean)  # the judge's, as for a metric
        assert row["n_ok"] == found.n_judged
        assert row["ppi_mean"] == pytest.approx(found.ppi_mean)
        assert row["ppi_ci_low"] <= row["ppi_mean"] <= row["ppi_ci_high"]
        assert row["n_labels"] == found.n_labelled
    assert (rows[ppi.RELEVANT_SHARE]["n_ok"], rows[ppi.RELEVANT_SHARE]["n_labels"]) == (150, 40)
    assert (rows[ppi.NDCG]["n_ok"], rows[ppi.NDCG]["n_labels"]) == (30, 40)
    # D's labels grade no question whole: the two-stage design still reaches NDCG@10 (each
    # labelled question's human NDCG estimated from its sampled candidates).
    d = {r["metric"]: r for r in RunFolder(runs["D"].parent, "D").read("summary").to_pylist()}
    assert d[ppi.NDCG]["ppi_mean"] is not None and d[ppi.NDCG]["n_labels"] > 0
    # The report reads metric rows only, whatever the figure rows.
    assert [s.metric for s in reports["A"].summary] == ["faithfulness"]


def test_an_older_summary_still_reads(runs: dict[str, Path], tmp_path: Path) -> None:
    run, _ = labelled_run(tmp_path, "old", questions=12, with_labels=False)
    names = [n for n in SUMMARY.names if n not in ("kind", "ppi_note")]
    v2 = pa.schema(
        [SUMMARY.field(n) for n in names], metadata={"schema_version": "2", "table": "summary"}
    )
    row = {n: None for n in names} | {
        "run_id": "old",
        "metric": "faithfulness",
        "mean": 0.5,
        "n_ok": 12,
        "n_failed": 0,
        "n_skipped": 0,
        "flagged": False,
    }
    write_table(pa.Table.from_pylist([row], schema=v2), run / "summary.parquet")
    assert [s.metric for s in build_report(run).summary] == ["faithfulness"]
    found = run_overview(run)
    assert found.means == {"faithfulness": 0.5} and found.corrected == {}


def test_runs_list_and_trend_carry_the_corrected_figures(runs: dict[str, Path]) -> None:
    listed = {r.run_id: r for r in list_runs(runs["A"].parent)}
    a = listed["A"]
    row = {r["metric"]: r for r in RunFolder(runs["A"].parent, "A").read("summary").to_pylist()}
    for figure in FIGURES:
        assert a.means[figure] == pytest.approx(row[figure]["mean"])
        got = a.corrected[figure]
        assert (got.mean, got.ci_low, got.ci_high, got.n_labels) == (
            row[figure]["ppi_mean"],
            row[figure]["ppi_ci_low"],
            row[figure]["ppi_ci_high"],
            row[figure]["n_labels"],
        )
    assert "faithfulness" in a.corrected and listed["C"].corrected == {}
    _, series = trend(list(listed.values()), ppi.NDCG)
    assert [r.run_id for r in series] == ["A", "B", "D"]  # C has no grade labels: no figure
    chart = trend_chart(ppi.NDCG, series)
    assert chart is not None and "corrected by people's labels" in chart.caption
    plain = trend_chart("faithfulness", [listed["C"]])
    assert plain is not None and "people's labels" not in plain.caption
    from rich.console import Console

    console = Console(width=200, record=True)
    console.print(runs_table(list(listed.values()), "runs"))
    text = console.export_text()
    share = a.corrected[ppi.RELEVANT_SHARE]
    assert f"relevant share {a.means[ppi.RELEVANT_SHARE]:.3f} · PPI {share.mean:.3f}" in text


def test_xlsx_summary_sheet_carries_the_corrected_figures(
    runs: dict[str, Path], reports: dict[str, Report], tmp_path: Path
) -> None:
    book = tmp_path / "a.xlsx"
    write_xlsx(reports["A"], book)
    sheet = list(openpyxl.load_workbook(book)["summary"].iter_rows(values_only=True))
    header, rows = sheet[0], {r[0]: dict(zip(sheet[0], r, strict=True)) for r in sheet[1:]}
    assert {"kind", "ppi_mean", "ppi_ci_low", "ppi_ci_high", "n_labels"} <= set(header)
    stored = {r["metric"]: r for r in RunFolder(runs["A"].parent, "A").read("summary").to_pylist()}
    for name in ("faithfulness", *FIGURES):
        for col in ("mean", "ppi_mean", "ppi_ci_low", "ppi_ci_high", "n_labels"):
            assert rows[name][col] == pytest.approx(stored[name][col]), (name, col)
        assert rows[name]["kind"] == stored[name]["kind"]
        assert isinstance(rows[name]["ppi_mean"], float)
    assert rows[ppi.NDCG]["kind"] == "figure"
    # Every string cell is text: nothing in the sheet is a formula.
    cells = openpyxl.load_workbook(book)["summary"].iter_rows()
    assert not any(c.data_type == "f" for row in cells for c in row)


def test_ratio_values_give_the_pooled_share_and_the_cluster_bootstrap_spread() -> None:
    rng = np.random.default_rng(11)
    sizes = rng.integers(1, 11, 400)
    # Candidates of one question share its difficulty: clustered, not independent.
    totals = rng.binomial(sizes, rng.beta(2, 3, 400)).astype(float)
    z = ratio_values(totals, sizes)
    assert z.mean() == pytest.approx(totals.sum() / sizes.sum())
    pick = rng.integers(0, 400, (4000, 400))
    ratios = totals[pick].sum(axis=1) / sizes[pick].sum(axis=1)
    se_linearised = z.std(ddof=1) / np.sqrt(400)
    assert se_linearised / ratios.std() == pytest.approx(1.0, abs=0.08)
    # Candidates drawn as if independent would understate it.
    share = totals.sum() / sizes.sum()
    assert np.sqrt(share * (1 - share) / sizes.sum()) < 0.8 * ratios.std()
    ones = np.ones(5)
    assert ratio_values([0.2, 0.4, 0.9, 0.1, 0.5], ones) == pytest.approx([0.2, 0.4, 0.9, 0.1, 0.5])
