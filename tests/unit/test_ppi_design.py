"""The labelling sample's two-stage design and the estimates that read it (issue 43, 42.13).

Questions drawn first, then candidates inside each drawn question (its top ten, the rest of
its pool by the judge's grade), each item with its chance of being drawn; every corrected
figure weighted back by the design, its interval over questions.
"""

from __future__ import annotations

import shutil
from collections import Counter
from itertools import groupby
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from sklearn.metrics import cohen_kappa_score
from support.labelled_runs import label_row, label_sample_with_truth, planted_pool_run

from ragaudit import labels, ppi
from ragaudit.ranking import ndcg_at_k
from ragaudit.stats import (
    design_corrected_mean,
    design_grade_agreement,
    krippendorff_alpha,
    pair_alpha,
    skew_corrected_interval,
)

GRADES = [0, 1, 2, 3]


def _true_figures(run: Path, truth: dict[tuple[str, str], int]) -> tuple[float, float]:
    """The run's relevant share and engine NDCG@10 under the true grades."""
    share = float(np.mean([g >= 2 for g in truth.values()]))
    cands = pl.read_parquet(run / "candidates.parquet").sort("engine_rank")
    values = []
    for (qid,), part in cands.group_by("question_id", maintain_order=True):
        order = part["context_id"].to_list()
        values.append(ndcg_at_k(order, {c: float(truth[(qid, c)]) for c in order}, 10))
    return share, float(np.mean(values))


def test_the_sample_draws_questions_then_candidates_with_known_chances(tmp_path: Path) -> None:
    run, _, _ = planted_pool_run(tmp_path, "r", questions=12, pool=30, seed=2)
    sample = [r for r in labels.draw_sample(run, 60, seed=4).to_pylist() if r["kind"] == "grade"]
    frame = labels.grade_frame(run)
    questions = list(dict.fromkeys(r["question_id"] for r in sample))
    m = len(questions)
    assert m == 3  # 60 labels, 20 per question
    assert all(r["design"] == "two-stage" and r["psu_size"] == 12 for r in sample)
    assert all(r["psu_sampled"] == m for r in sample)
    # Question after question: each drawn question's items come in one block.
    blocks = [k for k, _ in groupby(r["question_id"] for r in sample)]
    assert blocks == questions
    for qid in questions:
        mine = [r for r in sample if r["question_id"] == qid]
        assert len(mine) == labels.PER_QUESTION
        strata = labels.question_strata(frame[qid])
        drawn = Counter(r["stratum"] for r in mine)
        assert drawn["top 10"] == 10  # the top ten whole: NDCG@10's gains are all known
        for r in mine:
            assert r["stratum_size"] == len(strata[r["stratum"]])
            assert r["stratum_sampled"] == drawn[r["stratum"]]
            assert r["inclusion"] == pytest.approx(
                (m / 12) * r["stratum_sampled"] / r["stratum_size"]
            )
        # Inside a drawn question, the inverse chances add up to its pool (Horvitz–Thompson).
        assert sum(m / 12 / r["inclusion"] for r in mine) == pytest.approx(len(frame[qid]))
    # Across the run, Σ 1/π is the frame's size scaled by the questions drawn: an unbiased
    # count of the run's judged candidates.
    total = sum(1 / r["inclusion"] for r in sample)
    assert total == pytest.approx(12 / m * sum(len(frame[q]) for q in questions))
    assert len({r["run_signature"] for r in sample}) == 1


def test_ndcg_gets_an_interval_from_200_labels(tmp_path: Path) -> None:
    run, truth, _ = planted_pool_run(tmp_path, "r", questions=40, pool=60, seed=3)
    table, drawn = labels.ensure_sample(run, 200, seed=3)
    assert drawn and sum(1 for k in table["kind"].to_pylist() if k == "grade") == 200
    assert label_sample_with_truth(run, truth) == 200
    people = ppi.judge_vs_people(run)
    assert people is not None
    ndcg = people.corrected_for(ppi.NDCG)
    assert ndcg is not None and ndcg.ppi_ci_low is not None and ndcg.ppi_ci_high is not None
    # NDCG@10's unit is a question: its value stands for the question's twenty labels, and
    # the labels count as such beside the questions they fill (and the labels to halve are
    # labels, not questions).
    assert ndcg.n_labelled == 200 and ndcg.questions == 10
    assert len(set(ndcg.clusters)) == 10 and len(ndcg.residuals) == 10
    assert ndcg.labels_to_halve == 600
    assert people.ndcg_note.startswith("10 of 40 question(s)")
    share = people.corrected_for(ppi.RELEVANT_SHARE)
    assert share is not None and share.n_labelled == 200 and share.questions == 10
    true_share, true_ndcg = _true_figures(run, truth)
    assert share.ppi_ci_low <= true_share <= share.ppi_ci_high  # type: ignore[operator]
    assert ndcg.ppi_ci_low <= true_ndcg <= ndcg.ppi_ci_high
    # The sample over-draws the top ten: its unweighted figures are kept and named as such.
    betweens = {a.between for a in people.agreement if a.kind == "grade"}
    assert betweens == {"judge vs people", ppi.SAMPLE_UNWEIGHTED}
    assert people.confusion and people.confusion_sample
    assert {a.kind for a in people.ndcg} == {"human", "judge", "calibrated"}


def test_coverage_on_planted_runs_with_fixed_seeds(tmp_path: Path) -> None:
    # Clustered labels (question by question), an over-rating judge: the design's intervals
    # hold the run's truth most of the time, the judge's alone seldom. A bound that a
    # working design clears by a margin (the bench measures the rates over 200 seeds).
    held: Counter[str] = Counter()
    seeds = 16
    for seed in range(seeds):
        run, truth, _ = planted_pool_run(tmp_path, f"s{seed}", questions=40, pool=60, seed=seed)
        labels.ensure_sample(run, 200, seed=seed)
        label_sample_with_truth(run, truth)
        people = ppi.judge_vs_people(run, seed=seed)
        assert people is not None
        targets = _true_figures(run, truth)
        for figure, target in zip((ppi.RELEVANT_SHARE, ppi.NDCG), targets, strict=True):
            c = people.corrected_for(figure)
            assert c is not None and c.ppi_ci_low is not None
            assert 0.0 <= c.ppi_ci_low <= c.ppi_ci_high <= 1.0  # type: ignore[operator]
            held[figure] += c.ppi_ci_low <= target <= c.ppi_ci_high  # type: ignore[operator]
            held[f"{figure} judge"] += c.judge_ci_low <= target <= c.judge_ci_high  # type: ignore[operator]
        shutil.rmtree(run)
    assert held[ppi.RELEVANT_SHARE] >= 12 and held[ppi.NDCG] >= 12, held
    assert held[f"{ppi.RELEVANT_SHARE} judge"] <= 4, held


def test_a_label_outside_the_sample_keeps_the_design(tmp_path: Path) -> None:
    # 42.13: one label of an item the sample never drew used to drop every stratum weight.
    run, truth, _ = planted_pool_run(tmp_path, "r", questions=20, pool=30, seed=5)
    labels.ensure_sample(run, 80, seed=5)
    label_sample_with_truth(run, truth)
    before = ppi.judge_vs_people(run).corrected_for(ppi.RELEVANT_SHARE)  # type: ignore[union-attr]
    drawn = set(labels.read_sample(run)["item_id"].to_pylist())  # type: ignore[index]
    qid, cid = next(k for k in sorted(truth) if labels.item_id("grade", *k) not in drawn)
    labels.append_labels(
        run,
        [label_row("grade", qid, cid, "ann", 3.0)],
    )
    people = ppi.judge_vs_people(run)
    assert people is not None and people.outside_sample == 1
    after = people.corrected_for(ppi.RELEVANT_SHARE)
    assert after is not None and before is not None
    assert (after.ppi_mean, after.ppi_ci_low, after.ppi_ci_high) == (
        before.ppi_mean,
        before.ppi_ci_low,
        before.ppi_ci_high,
    )
    assert any("outside the drawn sample" in n for n in people.notes)


def test_a_sample_copied_from_another_run_is_refused(tmp_path: Path) -> None:
    a, truth_a, _ = planted_pool_run(tmp_path, "a", questions=20, pool=30, seed=6)
    b, _, _ = planted_pool_run(tmp_path, "b", questions=20, pool=30, seed=7)
    labels.ensure_sample(a, 80, seed=1)
    label_sample_with_truth(a, truth_a)
    # The sample a's labels were drawn by, copied into another run's folder: its items were
    # drawn from a's judged items, so no figure of b is weighted by it.
    shutil.copy(a / labels.SAMPLE_FILE, b / labels.SAMPLE_FILE)
    people = ppi.judge_vs_people(b)
    assert people is not None
    assert people.corrected == () and people.agreement == ()
    assert any("other judged items than this run's" in n for n in people.notes)


def test_labels_given_on_another_run_count_for_the_same_pairs(tmp_path: Path) -> None:
    # Two runs of one question set whose pools hold the same texts: a label is of its pair
    # (question and passage text), so b's sample finds a's labels of its pairs, given before
    # b's sample was drawn and elsewhere, and says where they were given.
    a, truth_a, _ = planted_pool_run(tmp_path, "a", questions=20, pool=30, seed=6)
    b, _, _ = planted_pool_run(tmp_path, "b", questions=20, pool=30, seed=7)
    labels.ensure_sample(a, 80, seed=1)
    given = label_sample_with_truth(a, truth_a)
    labels.ensure_sample(b, 80, seed=1)
    drawn_a, drawn_b = (
        {(r["question_id"], r["candidate_id"]) for r in sample.to_pylist() if r["kind"] == "grade"}
        for sample in (labels.read_sample(a), labels.read_sample(b))
        if sample is not None
    )
    shared = drawn_a & drawn_b
    assert 0 < len(shared) <= given
    seen = labels.read_labels(b).to_pylist()
    assert {(r["question_id"], r["candidate_id"]) for r in seen} == shared
    assert {r["given_in"] for r in seen} == {"a"}
    people = ppi.judge_vs_people(b)
    assert people is not None and people.outside_sample == 0
    assert people.n_labels == len(shared)


def test_a_share_interval_stays_inside_0_1() -> None:
    # Nearly every candidate relevant, few labels, spread over two questions: an interval
    # of mean ± t·se would pass 1 (42.13 saw up to 1.359).
    judge_all = [1.0] * 200
    human = [1.0, 1.0, 1.0, 0.0, 1.0, 1.0]
    found = design_corrected_mean(
        "relevant share", human, [1.0] * 6, judge_all,
        weights=[1.0] * 6, clusters=["q1", "q1", "q1", "q2", "q2", "q2"], bounds=(0.0, 1.0),
    )  # fmt: skip
    assert found.ppi_ci_low is not None and found.ppi_ci_high is not None
    assert 0.0 <= found.ppi_ci_low <= found.ppi_mean <= found.ppi_ci_high <= 1.0  # type: ignore[operator]
    assert 0.0 <= found.labels_ci_low <= found.labels_ci_high <= 1.0  # type: ignore[operator]


def test_weighted_agreement_is_the_populations() -> None:
    rng = np.random.default_rng(1)
    h = rng.integers(0, 4, 120)
    j = np.where((h < 2) & (rng.random(120) < 0.3), 2, h)
    # Weights of one, each item its own cluster: scikit-learn's κ and the plain α.
    plain = design_grade_agreement(
        h.tolist(), j.tolist(), [1.0] * 120, [str(i) for i in range(120)]
    )
    kappa_fig, alpha_fig = plain.figures
    assert kappa_fig.value == pytest.approx(
        cohen_kappa_score(h, j, weights="quadratic", labels=GRADES)
    )
    assert alpha_fig.value == pytest.approx(krippendorff_alpha(np.vstack([h, j]), "ordinal"))
    assert kappa_fig.ci_low <= kappa_fig.value <= kappa_fig.ci_high  # type: ignore[operator]
    # Whole weights are repeated items: the weighted κ is the κ of the repeated pairs.
    w = rng.integers(1, 5, 120)
    weighted = design_grade_agreement(h.tolist(), j.tolist(), w.tolist(), ["q"] * 60 + ["r"] * 60)
    assert weighted.figures[0].value == pytest.approx(
        cohen_kappa_score(np.repeat(h, w), np.repeat(j, w), weights="quadratic", labels=GRADES)
    )
    assert weighted.figures[1].value == pytest.approx(
        krippendorff_alpha(np.vstack([np.repeat(h, w), np.repeat(j, w)]), "ordinal")
    )
    # The weighted confusion: of the human 0s, the share the judge graded higher.
    zeros = h == 0
    expected = np.sum(w[zeros] * (j[zeros] > 0)) / np.sum(w[zeros])
    assert weighted.confusion.over_rated[0].share == pytest.approx(expected)


def test_pair_alpha_is_krippendorffs_for_every_resample() -> None:
    rng = np.random.default_rng(2)
    a = rng.integers(0, 4, (6, 40))
    b = np.clip(a + rng.integers(-1, 2, (6, 40)), 0, 3)
    for level in ("ordinal", "nominal", "interval"):
        expected = [krippendorff_alpha(np.vstack([a[i], b[i]]), level) for i in range(6)]
        assert pair_alpha(a, b, level) == pytest.approx(expected)  # type: ignore[arg-type]


def test_calibrated_ndcg_gains_are_on_the_grade_scale(tmp_path: Path) -> None:
    # #43.7: a judge that is always right has its calibrated NDCG equal to the human one.
    from ragaudit.stats import calibrate_grades, engine_ndcg

    graded = [("q", f"c{i}", i + 1, float(g), g) for i, g in enumerate([3, 0, 2, 1, 3])]
    calibration = calibrate_grades([g for *_, g in graded], [int(h) for *_, h, _ in graded])
    assert calibration.expected_grade == {0: 0.0, 1: 1.0, 2: 2.0, 3: 3.0}
    found, n = engine_ndcg(graded, calibration, 10)
    assert n == 1 and found is not None
    assert found["calibrated"][0] == pytest.approx(found["human"][0])


def test_compare_s_ppi_test_resamples_labels_by_question() -> None:
    """Residuals drawn question by question move together: the test must resample questions.

    Ten questions whose twenty residuals share one offset each: resampled one by one the
    correction looks twenty times as certain as it is; by question the interval is wider and
    the point estimate the same.
    """
    from ragaudit.stats import ppi_paired_test

    rng = np.random.default_rng(3)
    judge_a, judge_b = rng.normal(0.5, 0.1, 60), rng.normal(0.5, 0.1, 60)

    def clustered(seed: int) -> tuple[np.ndarray, list[str]]:
        offsets = np.random.default_rng(seed).normal(0, 0.3, 10)
        residuals = np.repeat(offsets, 20) + np.random.default_rng(seed + 1).normal(0, 0.01, 200)
        return residuals, [f"q{i}" for i in range(10) for _ in range(20)]

    (ra, ca), (rb, cb) = clustered(10), clustered(20)
    one_by_one = ppi_paired_test(judge_a, judge_b, ra, rb, 1999, 0)
    by_question = ppi_paired_test(judge_a, judge_b, ra, rb, 1999, 0, ca, cb)
    assert by_question.diff == pytest.approx(one_by_one.diff)
    width = by_question.ci_high - by_question.ci_low
    assert width > 3 * (one_by_one.ci_high - one_by_one.ci_low)


def test_skew_corrected_interval_is_t_without_skew_and_longer_on_the_tail() -> None:
    from scipy import stats

    low, high = skew_corrected_interval(0.5, 0.1, 0.0, 10)
    t = stats.t.ppf(0.975, 9)
    assert (low, high) == pytest.approx((0.5 - t * 0.1, 0.5 + t * 0.1))
    # A left tail (most units near the mean, a few far below): the interval reaches further
    # down than up, and mirrors a right tail.
    left = skew_corrected_interval(0.5, 0.1, -2.0, 10)
    right = skew_corrected_interval(0.5, 0.1, 2.0, 10)
    assert 0.5 - left[0] > left[1] - 0.5
    assert left == pytest.approx((1.0 - right[1], 1.0 - right[0]))


def test_skew_corrected_interval_holds_a_skewed_mean_where_t_falls_short() -> None:
    # Ten units from an exponential (skewness 2): the plain t interval holds the mean in about
    # 90 % of samples; Hall's transformation brings it back to the nominal 95 %.
    from scipy import stats

    rng = np.random.default_rng(7)
    samples = rng.exponential(1.0, size=(3000, 10))
    held_t = held_skew = 0
    for x in samples:
        se = x.std(ddof=1) / np.sqrt(x.size)
        q = stats.t.ppf(0.975, x.size - 1)
        held_t += x.mean() - q * se <= 1.0 <= x.mean() + q * se
        low, high = skew_corrected_interval(x.mean(), se, stats.skew(x, bias=False), x.size)
        held_skew += low <= 1.0 <= high
    assert held_t / 3000 < 0.91
    assert held_skew / 3000 >= 0.93


def test_design_interval_moves_toward_the_clusters_tail() -> None:
    # Ten questions' residuals, nine near zero and one far below: the interval's lower end
    # reaches further from the estimate than its upper end (a plain t would be symmetric).
    residuals = [0.0, -0.01, 0.01, 0.0, -0.02, 0.01, 0.0, -0.01, 0.0, -0.3]
    found = design_corrected_mean(
        "NDCG@10", [0.5 + r for r in residuals], [0.5] * 10, [0.5] * 40,
        weights=[4.0] * 10, clusters=[f"q{i}" for i in range(10)],
    )  # fmt: skip
    assert found.ppi_mean == pytest.approx(0.5 + np.mean(residuals))
    assert found.ppi_mean - found.ppi_ci_low > found.ppi_ci_high - found.ppi_mean  # type: ignore[operator]
