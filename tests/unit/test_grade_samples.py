"""The grade samples' plan, their aggregation and their agreement (no gateway)."""

from __future__ import annotations

import numpy as np
import pytest
from support.runs import make_config

from ragaudit.judging import combined_grade, grade_noise, grade_plan
from ragaudit.manifest import judge_warnings
from ragaudit.stats import agreement


def test_the_plan_asks_each_grader_its_repeats_sample_zero_at_the_judges_temperature() -> None:
    plan = grade_plan(("a", "b"), 3, 0.0, 0.3)
    assert [(s.model, s.index, s.temperature) for s in plan] == [
        ("a", 0, 0.0),
        ("a", 1, 0.3),
        ("a", 2, 0.3),
        ("b", 0, 0.0),
        ("b", 1, 0.3),
        ("b", 2, 0.3),
    ]
    assert [(s.model, s.index) for s in grade_plan(("j",), 1, 0.0, 0.3)] == [("j", 0)]


@pytest.mark.parametrize(
    ("grades", "majority", "median"),
    [
        ([2], 2, 2),
        ([3, 3, 1], 3, 3),
        ([3, 1, 2], 1, 2),  # no majority: the lowest tied grade; the median
        ([3, 2], 2, 2),  # a split pair goes to the lower grade either way
        ([None, 3, None], 3, 3),  # failed samples are left out
        ([0, 3, 3, 0], 0, 0),
        ([None, None], None, None),
    ],
)
def test_a_split_vote_goes_to_the_lower_grade(grades, majority, median) -> None:
    assert combined_grade(grades, "majority") == majority
    assert combined_grade(grades, "median") == median


def test_grade_noise_is_nominal_alpha_per_judge_and_for_the_jury() -> None:
    rng = np.random.default_rng(3)
    truth = rng.integers(0, 4, size=60)
    rows = []
    for t in truth:
        a = [int(t), int(t), int(t) if rng.random() > 0.2 else int(rng.integers(0, 4))]
        b = [int(t) if rng.random() > 0.4 else int(rng.integers(0, 4)) for _ in range(3)]
        rows.append({"grade_samples": a + b, "grade_judges": ["a"] * 3 + ["b"] * 3})
    out = {(r["kind"], r["judge"], r["scale"]): r for r in grade_noise(rows)}
    a_self = out[("self", "a", "grade")]
    expected = agreement(np.array([r["grade_samples"][:3] for r in rows], dtype=float).T, "nominal")
    assert a_self["alpha"] == pytest.approx(expected.alpha)
    assert a_self["n_items"] == 60 and a_self["n_raters"] == 3
    assert out[("self", "b", "grade")]["alpha"] < a_self["alpha"]  # b is the noisier judge
    jury = out[("jury", "a, b", "grade")]
    assert jury["n_raters"] == 2 and jury["ci_low"] <= jury["alpha"] <= jury["ci_high"]
    cut = out[("self", "a", "relevant")]
    assert cut["disagreed"] <= a_self["disagreed"]  # a split across the cut is a split


def test_grade_noise_says_nothing_with_one_sample() -> None:
    rows = [{"grade_samples": None, "grade_judges": None} for _ in range(5)]
    assert grade_noise(rows) == []


def test_a_jury_member_that_is_the_system_under_test_is_warned_of(tmp_path) -> None:
    config = make_config(
        tmp_path,
        models__jury=["fake/a", "openai/gpt-4o-mini"],
        collect__answers__model="gpt-4o-mini",
    )
    (warning,) = [w for w in judge_warnings(config) if "also a judge" in w]
    assert "openai/gpt-4o-mini" in warning
    alone = make_config(tmp_path, collect__answers__model="gpt-4o-mini")
    assert not [w for w in judge_warnings(alone) if "also a judge" in w]
