"""The judge against people's labels: agreement figures, PPI-corrected means, report and compare."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import openpyxl
import pyarrow as pa
import pytest
from sklearn.metrics import cohen_kappa_score
from support.labelled_runs import label_row, labelled_run

from ragaudit import labels, ppi
from ragaudit.reporting import build_report, compare_runs, render_html, summarise, write_xlsx
from ragaudit.runfolder import RunFolder, write_table
from ragaudit.schemas import LABEL_SAMPLE, SUMMARY, schema_version, to_table
from ragaudit.stats import corrected_mean, grade_agreement, kappa, labels_to_halve, score_agreement

GRADES = [0, 1, 2, 3]

# The columns summary.parquet gained in schema version 3: kept out of an older table.
_V3 = ("kind", "ppi_note")


def _page(run: Path) -> str:
    # Two renders of one report differ only in how long the charts took and in the chart
    # renderer's gradient ids (a counter per process): both are taken out.
    page = render_html(build_report(run))
    page = re.sub(r"charts rendered offline in [0-9.]+ s", "", page)
    return re.sub(r"gradient_[0-9]+", "gradient", page)


def test_batched_weighted_kappa_is_scikit_learns() -> None:
    rng = np.random.default_rng(3)
    for _ in range(20):
        h = rng.integers(0, 4, 40)
        j = np.clip(h + rng.integers(-1, 3, 40), 0, 3)
        expected = cohen_kappa_score(h, j, weights="quadratic", labels=GRADES)
        found = kappa(h, j, categories=GRADES, weights="quadratic")
        assert found == pytest.approx(expected, abs=1e-12)
    stacked = np.stack([h, h])
    both = kappa(stacked, np.stack([j, h]), categories=GRADES, weights="quadratic")
    assert both == pytest.approx([expected, 1.0])


def test_grade_agreement_has_intervals_and_says_when_undefined() -> None:
    rng = np.random.default_rng(0)
    h = rng.integers(0, 4, 60)
    j = np.clip(h + (rng.random(60) < 0.3), 0, 3)
    weighted, alpha = grade_agreement(h.tolist(), j.tolist())
    assert (weighted.statistic, alpha.statistic) == ("weighted_kappa", "krippendorff_alpha")
    for f in (weighted, alpha):
        assert f.n == 60
        assert f.ci_low is not None and f.ci_high is not None
        assert f.ci_low <= f.value <= f.ci_high  # type: ignore[operator]
    flat = grade_agreement([2] * 10, [2] * 10)
    assert all(f.value is None for f in flat)  # no spread: undefined, never 1


def test_labels_to_halve_follows_the_effective_sample_size() -> None:
    # An uninformative judge: PPI is the labels alone, halving takes four times the labels.
    assert labels_to_halve(100, 1_000_000, 0.0) == 300
    # A perfect judge needs no more labels than the run can give.
    assert labels_to_halve(100, 2_000, 0.999) is None
    assert labels_to_halve(100, 100, 0.5) is None


def test_labels_to_halve_halves_ppi_py_s_interval() -> None:
    rng = np.random.default_rng(7)
    total, n = 20_000, 200
    truth = (rng.random(total) < 0.4).astype(float)
    judge = np.clip(truth * 0.6 + 0.3 + rng.normal(0, 0.2, total), 0, 1)
    first = corrected_mean("m", truth[:n], judge[:n], judge, resamples=0)
    assert first.labels_to_halve is not None
    more = n + first.labels_to_halve
    second = corrected_mean("m", truth[:more], judge[:more], judge, resamples=0)
    width = lambda c: c.ppi_ci_high - c.ppi_ci_low  # noqa: E731
    assert width(second) / width(first) == pytest.approx(0.5, abs=0.08)


def test_ppi_holds_the_truth_where_an_over_rating_judge_misses_it() -> None:
    rng = np.random.default_rng(11)
    total, n = 2000, 150
    truth = (rng.random(total) < 0.3).astype(float)
    judge = np.where(truth == 1, 1.0, (rng.random(total) < 0.3).astype(float))
    c = corrected_mean("relevant share", truth[:n], judge[:n], judge)
    assert c.judge_ci_low > truth.mean()  # type: ignore[operator]
    assert c.ppi_ci_low <= truth.mean() <= c.ppi_ci_high  # type: ignore[operator]
    assert c.n_labelled == n and c.n_judged == total
    assert c.width_ratio is not None and c.width_ratio < 1  # an informative judge tightens it
    assert len(c.residuals) == n


def test_a_sample_drawn_per_stratum_is_weighted_back(tmp_path: Path) -> None:
    # The labelling sample draws as many items from each judge grade: the judge's rare
    # "relevant" verdicts, where it errs, are over-represented and an unweighted mean of the
    # labels is off; weighted by stratum size over items drawn it is not.
    rng = np.random.default_rng(5)
    total = 4000
    truth = (rng.random(total) < 0.2).astype(float)
    judge = np.where(truth == 1, 1.0, (rng.random(total) < 0.15).astype(float))
    picked, weights = [], []
    for verdict in (0.0, 1.0):
        stratum = np.flatnonzero(judge == verdict)
        drawn = rng.choice(stratum, 100, replace=False)
        picked += drawn.tolist()
        weights += [len(stratum) / 100] * 100
    y, f = truth[picked], judge[picked]
    plain = corrected_mean("share", y, f, judge, resamples=0)
    weighted = corrected_mean("share", y, f, judge, weights=weights, resamples=0)
    assert weighted.ppi_ci_low <= truth.mean() <= weighted.ppi_ci_high  # type: ignore[operator]
    assert abs(weighted.labels_mean - truth.mean()) < abs(plain.labels_mean - truth.mean())  # type: ignore[operator]
    assert "strata weighted back" in weighted.note
    # compare corrects by the plain mean of the residuals: the weighted correction.
    assert np.mean(weighted.residuals) == pytest.approx(np.average(y - f, weights=weights))
    # In a run, the sample file gives the weights.
    run, _ = labelled_run(tmp_path, "s", questions=12, grade_labels=3, answer_labels=6)
    items = [labels.item_id("grade", f"q{i:04d}", f"c{c}") for i in range(3) for c in range(5)]
    sizes = [10 + i for i in range(len(items))]
    sample = [
        {
            "position": i,
            "item_id": item,
            "kind": "grade",
            "question_id": item.split(":")[1],
            "candidate_id": item.split(":")[2],
            "stratum": "0",
            "stratum_size": size,
            "stratum_sampled": 1,
            "seed": 0,
        }
        for i, (item, size) in enumerate(zip(items, sizes, strict=True))
    ]
    write_table(to_table(sample, LABEL_SAMPLE), run / labels.SAMPLE_FILE)
    people = ppi.judge_vs_people(run)
    share = people.corrected_for(ppi.RELEVANT_SHARE)  # type: ignore[union-attr]
    assert share is not None and "strata weighted back" in share.note
    # The answers' labels were not drawn by the sample: taken as a uniform draw.
    assert "weighted" not in people.corrected_for("faithfulness").note  # type: ignore[union-attr]


def test_judge_vs_people_on_a_labelled_run(tmp_path: Path) -> None:
    run, truth = labelled_run(
        tmp_path, "r1", questions=30, grade_labels=10, annotators=("ann", "bob")
    )
    people = ppi.judge_vs_people(run)
    assert people is not None
    assert people.annotators == ("ann", "bob")
    lines = {(a.kind, a.between, a.statistic): a for a in people.agreement}
    judge_kappa = lines[("grade", "judge vs people", "weighted_kappa")]
    assert judge_kappa.n == 100  # 50 candidates, each person's grade against the judge's
    assert judge_kappa.ci_low is not None
    # Both people give the truth: their ceiling is full agreement, above the judge's.
    assert lines[("grade", "people vs people", "weighted_kappa")].value == pytest.approx(1.0)
    assert ("faithfulness", "judge vs people", "krippendorff_alpha") in lines
    # The judge never under-rates in this run: the confusion's lower triangle is empty.
    assert [r.human for r in people.confusion] == [0, 1, 2, 3]
    assert all(r.under_rated == 0 for r in people.confusion)
    assert people.confusion[0].over_rated > 0  # type: ignore[operator]
    assert people.ndcg_note.startswith("10 of 30")
    assert {a.kind for a in people.ndcg} == {"human", "judge", "calibrated"}
    assert all(a.n == 10 for a in people.ndcg)
    share = people.corrected_for(ppi.RELEVANT_SHARE)
    assert share is not None and share.n_judged == 150 and share.n_labelled == 50
    true_share = np.mean([g >= 2 for g in truth["grades"].values()])
    assert share.judge_mean > true_share  # type: ignore[operator]
    assert share.ppi_ci_low <= true_share <= share.ppi_ci_high  # type: ignore[operator]
    assert people.corrected_for(ppi.NDCG) is not None
    faith = people.corrected_for("faithfulness")
    assert faith is not None and faith.n_labelled == 12


def _v1_summary(run: Path, rows: list[dict[str, object]]) -> None:
    """``summary.parquet`` as ragaudit wrote it before the PPI columns (schema version 1)."""
    v1 = pa.schema(
        [SUMMARY.field(n) for n in SUMMARY.names if n not in (*ppi.SUMMARY_COLUMNS, *_V3)],
        metadata={"schema_version": "1", "table": "summary"},
    )
    write_table(pa.Table.from_pylist(rows, schema=v1), run / "summary.parquet")


def _summary_rows(run: Path) -> list[dict[str, object]]:
    import polars as pl

    scores = pl.from_arrow(RunFolder(run.parent, run.name).read("scores"))
    assert isinstance(scores, pl.DataFrame)
    return [
        {"run_id": run.name, **{k: v for k, v in vars(s).items() if k != "higher_is_better"}}
        for s in summarise(scores, {}, 200)
    ]


def test_without_labels_nothing_changes(tmp_path: Path) -> None:
    run, _ = labelled_run(tmp_path, "plain", questions=12, with_labels=False)
    rows = _summary_rows(run)
    _v1_summary(run, [{k: v for k, v in r.items() if k not in ppi.SUMMARY_COLUMNS} for r in rows])
    before = _page(run)
    RunFolder(tmp_path, "plain").write("summary", to_table(rows, SUMMARY))
    assert schema_version(pa.parquet.read_schema(run / "summary.parquet")) == 4
    report = build_report(run)
    assert report.people is None and report.summary[0].ppi_mean is None
    assert _page(run) == before  # a version-2 summary without labels renders byte for byte
    assert "Judge against people" not in before
    write_xlsx(report, tmp_path / "plain.xlsx")
    assert "judge_vs_people" not in openpyxl.load_workbook(tmp_path / "plain.xlsx").sheetnames
    # Skips only (nobody gave a label): still nothing.
    labels.append_labels(
        run,
        [label_row("grade", "q0000", "c0", "ann", None)],
    )
    assert ppi.judge_vs_people(run) is None
    assert _page(run) == before
    assert ppi.write_corrected_summary(run) is False


def test_labels_reach_the_page_escaped_and_the_summary(tmp_path: Path) -> None:
    run, _ = labelled_run(tmp_path, "r2", questions=20, grade_labels=4, annotators=("<b>ann</b>",))
    _v1_summary(
        run,
        [{k: v for k, v in r.items() if k not in ppi.SUMMARY_COLUMNS} for r in _summary_rows(run)],
    )
    # A labels file comes from outside: values off the scale are left out and counted.
    labels.append_labels(
        run,
        [
            label_row(kind, "q0000", cid, "eve", value)
            for kind, cid, value in (("grade", "c0", 7.0), ("faithfulness", None, 2.0))
        ],
    )
    page = _page(run)
    assert "Judge against people" in page
    assert "2 label(s) outside the scale left out" in page
    assert "&lt;b&gt;ann&lt;/b&gt;" in page and "<b>ann</b>" not in page
    assert 'id="people-ppi"' in page and 'id="people-confusion"' in page
    book = tmp_path / "report.xlsx"
    write_xlsx(build_report(run), book)
    sheet = openpyxl.load_workbook(book)["judge_vs_people"]
    parts = {row[0] for row in sheet.iter_rows(min_row=2, values_only=True)}
    assert parts == {"agreement", "confusion", "engine NDCG@10", "corrected"}
    assert ppi.write_corrected_summary(run) is True
    table = RunFolder(tmp_path, "r2").read("summary")
    assert schema_version(table.schema) == 4
    row = table.to_pylist()[0]
    found = ppi.judge_vs_people(run).corrected_for("faithfulness")  # type: ignore[union-attr]
    assert row["ppi_mean"] == pytest.approx(found.ppi_mean)  # type: ignore[union-attr]
    assert row["n_labels"] == found.n_labelled  # type: ignore[union-attr]


def test_compare_corrects_by_labels_only_when_both_runs_have_them(tmp_path: Path) -> None:
    a, _ = labelled_run(tmp_path, "a", questions=40, grade_labels=2, answer_labels=20, seed=1)
    b, _ = labelled_run(tmp_path, "b", questions=40, grade_labels=2, answer_labels=20, seed=2)
    c, _ = labelled_run(tmp_path, "c", questions=40, with_labels=False, seed=3)
    both = compare_runs(a, b, resamples=999)
    (m,) = [x for x in both.metrics if x.metric == "faithfulness"]
    assert m.noise == "questions and people's labels (PPI)"
    pa_, pb_ = (ppi.judge_vs_people(r).corrected_for("faithfulness") for r in (a, b))  # type: ignore[union-attr]
    judge_a = float(np.mean([q.scores["faithfulness"].value for q in build_report(a).questions]))
    assert m.mean_a == pytest.approx(judge_a + np.mean(pa_.residuals))  # type: ignore[union-attr]
    assert m.ci_low is not None and m.ci_low <= m.diff <= m.ci_high  # type: ignore[operator]
    assert any("corrected by them (PPI" in n for n in both.notes)
    one = compare_runs(a, c, resamples=999)
    assert {x.noise for x in one.metrics} == {"questions"}
    assert any("only one run has people's labels" in n for n in one.notes)


def test_one_labelled_item_is_not_enough_for_any_agreement_figure() -> None:
    # With one item κ comes out 0 and α 0: numbers that measure nothing, never shown as such.
    figures = grade_agreement([1], [2]) + score_agreement([1.0], [0.4])
    assert figures
    for figure in figures:
        assert figure.value is None, figure
        assert figure.n == 1 and "not enough labels" in figure.note
