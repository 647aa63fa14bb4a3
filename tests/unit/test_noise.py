"""The judge's noise as measured quantities: α against its truth, juries, calibration, power."""

from __future__ import annotations

import krippendorff
import numpy as np
import pytest

from ragaudit.noise import aggregate, circular
from ragaudit.stats import (
    agreement,
    calibrate_grades,
    calibrated_grades,
    paired_test,
    power,
    two_level_test,
)

SEEDS = range(50)


def flipped(truth: np.ndarray, p: float, rng: np.random.Generator, grades: int = 4) -> np.ndarray:
    """Each grade replaced, with probability ``p``, by one of the other grades at random."""
    other = (truth + rng.integers(1, grades, size=truth.shape)) % grades
    return np.where(rng.random(truth.shape) < p, other, truth)


def nominal_truth(prior: np.ndarray, p: float) -> float:
    """Population nominal α of samples that keep the true grade with probability 1 − p."""
    k = len(prior)
    agree = (1 - p) ** 2 + p**2 / (k - 1)
    marginal = (1 - p) * prior + p * (1 - prior) / (k - 1)
    return 1 - (1 - agree) / (1 - float(np.sum(marginal**2)))


def test_alpha_is_krippendorffs_with_missing_answers() -> None:
    rng = np.random.default_rng(7)
    scores = rng.normal(size=(3, 40)) + rng.normal(size=40)
    scores[0, 5] = scores[2, 9] = np.nan
    grades = rng.integers(0, 4, size=(4, 30)).astype(float)
    grades[1, 2] = np.nan
    for data, level in ((scores, "interval"), (grades, "nominal")):
        ours = agreement(data, level, resamples=0).alpha
        theirs = krippendorff.alpha(reliability_data=data, level_of_measurement=level)
        assert ours == pytest.approx(theirs, abs=1e-9)


def test_self_agreement_of_scores_with_known_noise_covers_the_truth() -> None:
    """Scores = value + N(0, σ²): α's truth is var(value) / (var(value) + σ²) = 0.8."""
    sigma = 0.5
    truth = 1 / (1 + sigma**2)
    covered = 0
    for seed in SEEDS:
        rng = np.random.default_rng(seed)
        value = rng.normal(0, 1, 120)
        samples = value + rng.normal(0, sigma, (3, 120))
        a = agreement(samples, "interval", seed=seed)
        covered += a.ci_low <= truth <= a.ci_high
    # A 95 % interval misses the truth in about 2.5 of 50 seeds; 43 is the binomial 1 % floor.
    assert covered >= 43, covered


def test_self_agreement_of_grades_flipped_with_known_probability_covers_the_truth() -> None:
    prior = np.array([0.4, 0.3, 0.2, 0.1])
    p = 0.15
    truth = nominal_truth(prior, p)
    covered = 0
    for seed in SEEDS:
        rng = np.random.default_rng(1000 + seed)
        grades = rng.choice(4, size=150, p=prior)
        samples = np.stack([flipped(grades, p, rng) for _ in range(3)]).astype(float)
        a = agreement(samples, "nominal", seed=seed)
        covered += a.ci_low <= truth <= a.ci_high
    assert covered >= 43, covered


def test_no_spread_has_no_alpha_rather_than_a_perfect_one() -> None:
    a = agreement(np.ones((3, 10)), "interval")
    assert a.alpha is None and a.ci_low is None
    assert "not measurable" in a.text


def test_a_jury_of_differently_biased_judges_beats_each_of_them() -> None:
    rng = np.random.default_rng(3)
    truth = rng.choice(4, size=2000, p=[0.4, 0.3, 0.2, 0.1])
    # One judge over-rates, one under-rates, one is noisy; each is wrong ~25-30 % of the time.
    up = np.minimum(truth + (rng.random(truth.size) < 0.3), 3)
    down = np.maximum(truth - (rng.random(truth.size) < 0.3), 0)
    noisy = flipped(truth, 0.25, rng)
    judges = np.stack([up, down, noisy]).astype(float)
    jury = aggregate(judges, "majority")
    alone = [(j == truth).mean() for j in judges]
    assert (jury == truth).mean() > max(alone)
    assert aggregate([[1, np.nan], [2, np.nan]], "mean")[0] == 1.5
    assert np.isnan(aggregate([[1, np.nan], [2, np.nan]], "mean")[1])
    # A split jury goes to the lower grade.
    assert aggregate([[1], [2]], "majority")[0] == 1


def test_per_grade_calibration_recovers_a_judge_that_over_rates_by_one_grade() -> None:
    rng = np.random.default_rng(11)
    human = rng.choice(4, size=3000, p=[0.4, 0.3, 0.2, 0.1])
    judge = np.minimum(human + (rng.random(human.size) < 0.3), 3)
    cal = calibrate_grades(judge.tolist(), human.tolist(), relevant_grade=2)
    for grade in (0, 1, 2):
        over = cal.over_rated[grade]
        assert over.ci_low <= 0.3 <= over.ci_high, (grade, over)
        assert cal.under_rated[grade].k == 0
    assert cal.over_rated[3].k == 0  # nothing above the top grade
    # Judge grade 2 holds human 2s and over-rated human 1s: P(relevant | 2) < 1.
    two = cal.relevant_given_grade[2]
    expected = 0.2 * 0.7 / (0.2 * 0.7 + 0.3 * 0.3)
    assert two.ci_low <= expected <= two.ci_high
    mapped = calibrated_grades([2, 0], cal)
    assert mapped[0] == pytest.approx(two.share) and mapped[1] < 0.05


def test_circularity_names_the_model_that_judges_itself() -> None:
    assert circular("openai/gpt-4o-mini", ["gpt-4o-mini"]) is not None
    msg = circular("fake/judge?seed=1", ["fake/judge"])
    assert msg and "fake/judge?seed=1" in msg and "also a judge" in msg
    assert circular("openai/gpt-4o", ["anthropic/claude-3-5-haiku"]) is None
    assert circular(None, ["fake/judge"]) is None


def test_five_questions_can_never_move_and_the_message_says_how_many_would() -> None:
    diffs = np.array([0.1, 0.12, 0.08, 0.11, 0.09])
    pw = power(diffs, alpha=0.05)
    assert pw.smallest_p == pytest.approx(0.0625)
    assert not pw.can_move
    text = pw.text(0.05)
    assert text and "can never move" in text and "0.0625" in text
    # The permutation test agrees: all five differences positive is its most extreme case.
    assert paired_test(np.zeros(5), diffs).p_value == pytest.approx(0.0625)
    big = power(np.random.default_rng(0).normal(0.02, 0.2, 40), alpha=0.05)
    assert big.can_move and big.needed is not None and big.needed > 40
    assert "too few" in big.text(0.05)


def test_the_two_level_test_calls_moved_at_its_alpha_when_only_the_judge_differs() -> None:
    """Two runs of the same answers, judged with noise, repeats = 3: 'moved' at rate ≈ α."""
    alpha, reps, questions = 0.05, 200, 30
    moved = 0
    for rep in range(reps):
        rng = np.random.default_rng(rep)
        value = rng.uniform(0.2, 0.9, questions)
        a = [value[i] + rng.normal(0, 0.15, 3) for i in range(questions)]
        b = [value[i] + rng.normal(0, 0.15, 3) for i in range(questions)]
        t = two_level_test(a, b, resamples=999, seed=rep)
        moved += t.p_value < alpha and (t.ci_low > 0 or t.ci_high < 0)
    # 200 trials at α = 0.05: the binomial 99 % interval is 4-19 calls.
    assert 4 <= moved <= 19, moved


def test_the_two_level_interval_keeps_its_width_and_names_the_judges_share() -> None:
    """Questions differ by N(0.05, 0.1²) and the judge adds N(0, 0.3²) to each of 3 samples.

    The judge's share of a question difference's variance is (2 · 0.09 / 3) / (0.01 + 0.06).
    """
    rng = np.random.default_rng(5)
    n = 300
    value = rng.uniform(0.2, 0.9, n)
    shift = rng.normal(0.05, 0.1, n)
    a = [value[i] + rng.normal(0, 0.3, 3) for i in range(n)]
    b = [value[i] + shift[i] + rng.normal(0, 0.3, 3) for i in range(n)]
    two = two_level_test(a, b, resamples=4000)
    flat = paired_test(np.array([x.mean() for x in a]), np.array([x.mean() for x in b]), 4000)
    assert two.p_value == flat.p_value
    assert two.noise == "questions and judge samples" and flat.noise == "questions"
    ratio = (two.ci_high - two.ci_low) / (flat.ci_high - flat.ci_low)
    assert 0.85 < ratio < 1.15, ratio
    assert two.judge_share == pytest.approx(0.06 / 0.07, abs=0.08)
