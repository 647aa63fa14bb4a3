"""The statistics package: one α, one κ, one beyond-noise rule, one bootstrap call, one home."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import krippendorff
import numpy as np
import pytest
from sklearn.metrics import cohen_kappa_score

from ragaudit.stats import PairedTest, agreement, beyond_noise, decide, kappa, krippendorff_alpha

PACKAGE = Path(__file__).resolve().parents[2] / "ragaudit"


def test_ordinal_alpha_is_krippendorffs_with_missing_answers() -> None:
    rng = np.random.default_rng(11)
    truth = rng.integers(0, 4, 40)
    grades = np.clip(truth + rng.integers(-1, 2, size=(3, 40)), 0, 3).astype(float)
    grades[0, 3] = grades[2, 17] = np.nan
    theirs = krippendorff.alpha(
        reliability_data=grades, level_of_measurement="ordinal", value_domain=[0, 1, 2, 3]
    )
    assert krippendorff_alpha(grades, "ordinal") == pytest.approx(theirs, abs=1e-9)
    # The bootstrap's weighted sums give the same point as the plain one.
    assert agreement(grades, "ordinal", resamples=0).alpha == pytest.approx(theirs, abs=1e-9)
    found = agreement(grades, "ordinal", resamples=199)
    assert found.ci_low is not None and found.ci_low <= theirs <= found.ci_high  # type: ignore[operator]


def test_alpha_of_answers_without_spread_is_undefined() -> None:
    assert np.isnan(krippendorff_alpha([[2, 2, 2], [2, 2, 2]], "ordinal"))
    assert agreement([[1.0, 1.0], [1.0, 1.0]]).alpha is None


def test_unweighted_kappa_is_cohens() -> None:
    rng = np.random.default_rng(5)
    for categories in ((0, 1), (0, 1, 2, 3)):
        for _ in range(10):
            a = rng.choice(categories, 30)
            b = np.where(rng.random(30) < 0.6, a, rng.choice(categories, 30))
            expected = cohen_kappa_score(a, b, labels=list(categories))
            assert kappa(a, b, categories=categories) == pytest.approx(expected, abs=1e-12)
    # Booleans are the two categories; both raters always "yes": chance agreement is certain.
    assert kappa(np.array([True, False]), np.array([True, True])) == pytest.approx(0.0)
    assert np.isnan(kappa(np.ones(5, bool), np.ones(5, bool)))
    with pytest.raises(ValueError, match="not one of the categories"):
        kappa([0, 1, 2.5], [0, 1, 2], categories=(0, 1, 2))


@pytest.mark.parametrize(
    ("p", "low", "high", "null", "moved"),
    [
        (0.01, 0.1, 0.3, 0.0, True),
        (0.01, -0.3, -0.1, 0.0, True),
        (0.01, -0.1, 0.3, 0.0, False),  # the interval holds the null
        (0.2, 0.1, 0.3, 0.0, False),  # p above α
        (None, 0.1, 0.3, 0.0, False),  # untested
        (0.01, None, None, 0.0, False),
        (0.01, 0.55, 0.7, 0.5, True),  # a win rate against ½
        (0.01, 0.45, 0.7, 0.5, False),
    ],
)
def test_beyond_noise_needs_p_below_alpha_and_an_interval_off_the_null(
    p: float | None, low: float | None, high: float | None, null: float, moved: bool
) -> None:
    assert beyond_noise(p, low, high, 0.05, null=null) is moved


def test_decide_gives_direction_aware_verdicts_by_the_rule() -> None:
    tests = {
        "up": PairedTest(30, 0.5, 0.6, 0.1, 0.05, 0.15, 0.001),
        "down": PairedTest(30, 0.5, 0.6, 0.1, 0.05, 0.15, 0.001),
        "flat": PairedTest(30, 0.5, 0.52, 0.02, -0.01, 0.05, 0.3),
        "untested": PairedTest(1, 0.5, 0.6, 0.1, None, None, None),
    }
    verdicts = {c.metric: c.verdict for c in decide(tests, {"down": False}, alpha=0.05)}
    assert verdicts == {
        "up": "improved",
        "down": "regressed",
        "flat": "no change beyond noise",
        "untested": "not tested (1 question(s) scored ok in both runs)",
    }


def _sources() -> dict[Path, str]:
    return {p: p.read_text(encoding="utf-8") for p in sorted(PACKAGE.rglob("*.py"))}


def _defined(name: str) -> list[Path]:
    return [
        path
        for path, text in _sources().items()
        for node in ast.walk(ast.parse(text))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == name
    ]


def test_scipys_bootstrap_is_called_once_and_only_under_stats() -> None:
    # The check by grep: `grep -rn "scipy.stats.bootstrap\|stats.bootstrap(" ragaudit`.
    pattern = re.compile(r"scipy\.stats\.bootstrap|stats\.bootstrap\(")
    found = [
        path.relative_to(PACKAGE).as_posix()
        for path, text in _sources().items()
        if pattern.search(text)
    ]
    assert found and all(p.startswith("stats/") for p in found), found
    calls = [
        path.relative_to(PACKAGE).as_posix()
        for path, text in _sources().items()
        for node in ast.walk(ast.parse(text))
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "bootstrap"
        and isinstance(node.func.value, ast.Name)
        and node.func.value.id == "stats"
    ]
    assert calls == ["stats/_resample.py"]


@pytest.mark.parametrize("name", ["beyond_noise", "decide", "kappa", "krippendorff_alpha"])
def test_each_rule_is_defined_once(name: str) -> None:
    assert [p.relative_to(PACKAGE).as_posix() for p in _defined(name)] == [
        f"stats/{'_tests' if name in ('beyond_noise', 'decide') else '_agreement'}.py"
    ]


def test_alignment_figures_resample_at_once_as_scipy_computes_them_one_by_one() -> None:
    """The vectorised ρ, τ-b and AUC equal scipy's own on every resample, ties included."""
    from scipy import stats

    from ragaudit.stats._figures import _auc, _kendall, _spearman, alignment_figures, auc_score

    rng = np.random.default_rng(4)
    human = rng.integers(0, 3, size=(50, 30)) / 2  # three values: many ties
    score = np.round(rng.random((50, 30)), 1)
    score[7] = 0.5  # one constant resample: undefined, as scipy says
    rho, tau = _spearman(human, score), _kendall(human, score)
    auc = _auc(human >= 0.5, score)
    for i in range(50):
        want_rho = stats.spearmanr(human[i], score[i]).statistic
        want_tau = stats.kendalltau(human[i], score[i]).statistic
        want_auc = auc_score(human[i] >= 0.5, score[i])
        assert rho[i] == pytest.approx(want_rho, nan_ok=True, abs=1e-12)
        assert tau[i] == pytest.approx(want_tau, nan_ok=True, abs=1e-12)
        assert auc[i] == pytest.approx(want_auc, nan_ok=True, abs=1e-12)
    figures = {f.statistic: f for f in alignment_figures(human[0], score[0], 0.5)}
    assert figures["spearman"].value == pytest.approx(stats.spearmanr(human[0], score[0])[0])
    for name in ("mae", "spearman", "kendall", "cohen_kappa"):
        found = figures[name]
        assert found.ci_low is not None and found.ci_low <= found.value <= found.ci_high
    assert figures["auc"].value == pytest.approx(auc_score(human[0] >= 0.5, score[0]))


def test_labels_uncorrelated_with_the_judge_still_correct_it() -> None:
    """ρ zero to rounding: ppi_py's plan would divide 0/0; the correction stands without it."""
    from ragaudit.stats import corrected_mean

    human, judge = [], []
    for k in range(6):
        for t in range(1, 5):
            human.append(float((k + t) % 2))
            judge.append(1 / t + 0.01 * k)
    got = corrected_mean("share", human, judge, judge + judge)
    assert got.ppi_corr is None and "do not correlate" in got.note
    assert got.ppi_ci_low is not None and got.ppi_ci_high is not None and got.ppi_mean is not None
    assert got.ppi_ci_low <= got.ppi_mean <= got.ppi_ci_high


def test_two_runs_equal_to_rounding_need_no_count_of_questions() -> None:
    import numpy as np

    from ragaudit.stats import power

    diffs = np.array([0.1, -0.1, 0.2, -0.2]) + 1e-17
    assert power(diffs).needed is None
