"""Paired tests of a change, their power, their adjustment, and the one "beyond noise" rule.

Per metric (or variant, or point), the questions scored in both runs are paired; the mean
difference (B − A) gets a paired bootstrap interval (``scipy.stats.bootstrap``, ``paired=True``,
through :func:`ragaudit.stats.bootstrap`) and a paired permutation test
(``scipy.stats.permutation_test``, ``permutation_type="samples"``: each question's two values
swap places). Where a question kept several judge samples (repeats or a jury) the test is
:func:`two_level_test` on each question's samples instead, and the result says so
(``noise``). The p-values are adjusted across what was tested
(``scipy.stats.false_discovery_control``). A difference is *beyond noise* only where the
(adjusted) p-value is below α and the interval excludes the null (:func:`beyond_noise`);
whether that is a regression depends on the metric's direction (:func:`decide`).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np

from ragaudit.stats._resample import CONFIDENCE, bootstrap


@dataclass(frozen=True)
class PairedTest:
    """The paired statistics of one metric (difference = B − A)."""

    n: int
    mean_a: float | None
    mean_b: float | None
    diff: float | None
    ci_low: float | None
    ci_high: float | None
    p_value: float | None
    noise: str = "questions"
    """What the interval and the p-value account for: ``questions`` (one judge sample per
    question and run) or ``questions and judge samples`` (repeats or a jury)."""
    judge_share: float | None = None
    """The judge's share of the variance of a question's difference (with samples only)."""


@dataclass(frozen=True)
class MetricChange:
    """One metric between the two runs."""

    metric: str
    higher_is_better: bool
    n_paired: int
    """Questions scored ``ok`` in both runs (the only ones compared)."""
    mean_a: float | None
    mean_b: float | None
    diff: float | None
    ci_low: float | None
    ci_high: float | None
    p_value: float | None
    p_adjusted: float | None
    moved: bool
    """Adjusted p below α and the interval excludes 0."""
    verdict: str
    """``improved``, ``regressed``, ``no change beyond noise`` or ``not tested`` (why)."""
    noise: str = "questions"
    """What the test accounted for: ``questions`` or ``questions and judge samples``."""
    judge_share: float | None = None
    """The judge's share of the variance of a question's difference (with samples only)."""


def _degenerate(values: np.ndarray) -> bool:
    return bool(np.all(values == values[0]))


def _mean_diff(a: np.ndarray, b: np.ndarray, axis: int = -1) -> np.ndarray:
    return np.mean(b - a, axis=axis)


def paired_test(a: np.ndarray, b: np.ndarray, resamples: int = 9999, seed: int = 0) -> PairedTest:
    """Mean difference B − A, its paired bootstrap interval and a paired permutation p-value.

    Fewer than two pairs: no interval and no p-value.
    """
    from scipy import stats  # scipy only when comparing: `runs` needs none of it

    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    n = len(a)
    if n == 0:
        return PairedTest(0, None, None, None, None, None, None)
    diff = float(np.mean(b - a))
    base = PairedTest(n, float(a.mean()), float(b.mean()), diff, None, None, None)
    if n < 2:
        return base
    d = b - a
    if _degenerate(d):
        # Every resample has the same mean difference (scipy returns NaN for such data).
        low = high = float(d[0])
    else:
        ci = bootstrap((a, b), _mean_diff, resamples=resamples, seed=seed, paired=True)
        low, high = ci.low, ci.high
    if not np.any(d):
        p = 1.0  # no pair differs: every permutation gives the observed statistic
    else:
        p = float(
            stats.permutation_test(
                (a, b),
                _mean_diff,
                permutation_type="samples",
                vectorized=True,
                n_resamples=resamples,
                alternative="two-sided",
                rng=np.random.default_rng(seed + 1),
            ).pvalue
        )
    return dataclasses.replace(base, ci_low=low, ci_high=high, p_value=p)


def _residual_means(
    rows: list[np.ndarray], rng: np.random.Generator, pick: np.ndarray
) -> np.ndarray:
    """Per resample and drawn question, the mean of its judge residuals drawn again.

    Residuals are the samples less their question's mean, inflated by √(r/(r−1)) so that the
    mean of r of them drawn with replacement has the variance of a mean of r fresh samples.
    ``pick`` (resamples × questions) says which question each position drew.
    """
    out = np.zeros(pick.shape)
    for i, samples in enumerate(rows):
        r = len(samples)
        where = pick == i
        if r < 2 or not where.any():
            continue
        residuals = (samples - samples.mean()) * np.sqrt(r / (r - 1))
        drawn = rng.integers(0, r, size=(int(where.sum()), r))
        out[where] = residuals[drawn].mean(axis=1)
    return out


def _within(rows: list[np.ndarray]) -> np.ndarray:
    """Per question, the variance of its samples' mean (0 for a single sample)."""
    return np.array([x.var(ddof=1) / len(x) if len(x) > 1 else 0.0 for x in rows])


def two_level_test(
    a: list[np.ndarray], b: list[np.ndarray], resamples: int = 9999, seed: int = 0
) -> PairedTest:
    """Mean difference B − A where each question has several judge samples in each run.

    The p-value is the paired permutation test on the question means of the samples
    (:func:`paired_test`): under "nothing changed" each question's two means are exchangeable
    whatever the judge's noise, so its error rate stays α. The interval is a two-level
    bootstrap: questions are drawn again, and within each drawn question each run's judge
    samples are drawn again. A question's difference of means already holds its judge noise,
    so drawing samples again on top of whole differences would count that noise twice (the
    interval came out √2 wide and "moved" was called at a fifth of α); the question-level
    part is shrunk by the judge's share of the difference's variance first (cluster bootstrap
    with adjusted means), which keeps the interval's width right and says how much of the
    noise is the judge's (``judge_share``).
    """
    a = [np.asarray(x, dtype=float) for x in a]
    b = [np.asarray(x, dtype=float) for x in b]
    if len(a) != len(b) or any(len(x) == 0 for x in a + b):
        raise ValueError("every paired question needs at least one sample in both runs")
    mean_a = np.array([x.mean() for x in a])
    mean_b = np.array([x.mean() for x in b])
    test = paired_test(mean_a, mean_b, resamples, seed)
    test = dataclasses.replace(test, noise="questions and judge samples")
    if test.n < 2 or test.p_value is None:
        return test
    d = mean_b - mean_a
    total = d.var(ddof=1)
    judge = float((_within(a) + _within(b)).mean())
    share = min(1.0, judge / total) if total > 0 else 1.0
    rng = np.random.default_rng(seed + 2)
    pick = rng.integers(0, len(d), size=(resamples, len(d)))
    centre = d.mean()
    between = centre + np.sqrt(1 - share) * (d[pick] - centre)
    draws = between + _residual_means(b, rng, pick) - _residual_means(a, rng, pick)
    tail = (1 - CONFIDENCE) / 2
    low, high = np.quantile(draws.mean(axis=1), [tail, 1 - tail])
    return dataclasses.replace(test, ci_low=float(low), ci_high=float(high), judge_share=share)


@dataclass(frozen=True)
class Power:
    """Whether a question set can show a change at all, and how many questions it would need."""

    n: int
    smallest_p: float
    """The smallest two-sided p-value a paired permutation test over ``n`` questions can give."""
    can_move: bool
    """Whether ``smallest_p`` is below α (otherwise nothing can ever move)."""
    needed: int | None
    """Questions the observed spread would need to show the observed difference at α with
    80 % power (normal approximation); None without a difference or a spread."""

    def text(self, alpha: float) -> str | None:
        """A sentence for the output when the question set is too small, else None."""
        need = (
            f"; the observed spread would need about {self.needed} questions"
            if (self.needed)
            else ""
        )
        if not self.can_move:
            return (
                f"{self.n} paired question(s) can never move at α = {alpha:g}: the smallest "
                f"p-value a permutation test over them can give is {self.smallest_p:.4g}{need}"
            )
        if self.needed is not None and self.needed > self.n:
            return (
                f"{self.n} paired question(s) are too few to show a difference of this size "
                f"at α = {alpha:g}{need}"
            )
        return None


def smallest_p(n: int) -> float:
    """The smallest two-sided p-value a paired permutation test over ``n`` questions can give.

    Its 2^n sign patterns make it 2 / 2^n: with 5 questions 0.0625, never below 0.05.
    """
    return min(1.0, 2.0 / 2.0**n) if n else 1.0


def _z(alpha: float, target: float) -> float:
    """z(1 − α/2) + z(power): a two-sided test at α with power ``target``, normal approximation."""
    from scipy import stats  # scipy only when comparing: `runs` needs none of it

    return float(stats.norm.ppf(1 - alpha / 2) + stats.norm.ppf(target))


def detectable(spread: float, n: int, alpha: float = 0.05, target: float = 0.8) -> float:
    """The difference a paired test over ``n`` questions detects with power ``target`` at α.

    (z(1 − α/2) + z(power)) · s / √n, s the spread of the per-question differences: the other
    side of :func:`power`'s question count.
    """
    return _z(alpha, target) * spread / math.sqrt(n)


def power(diffs: np.ndarray, alpha: float = 0.05, target: float = 0.8) -> Power:
    """The power check of a paired comparison over the per-question ``diffs``.

    A paired permutation test over n questions cannot go below p = 2 / 2^n
    (:func:`smallest_p`). The questions a difference d with spread s would need:
    ((z(1 − α/2) + z(power)) · s / d)².
    """
    d = np.asarray(diffs, dtype=float)
    n = len(d)
    smallest = smallest_p(n)
    needed = None
    spread = float(np.std(d, ddof=1)) if n >= 2 else 0.0
    # A mean difference within rounding of zero (two runs equal up to float noise) is no
    # difference: no count of questions would ever show it.
    if n >= 2 and spread > 0 and abs(d.mean()) > 1e-12 * max(1.0, spread):
        z = _z(alpha, target)
        needed = int(np.ceil((z * spread / abs(d.mean())) ** 2))
        # The permutation floor binds too: never fewer than the test can resolve.
        needed = max(needed, int(np.floor(np.log2(2 / alpha))) + 1)
    return Power(n, smallest, smallest < alpha, needed)


def adjust(p_values: list[float | None], method: str = "bh") -> list[float | None]:
    """p-values adjusted across the tested metrics (None stays None)."""
    from scipy import stats  # scipy only when comparing: `runs` needs none of it

    tested = [p for p in p_values if p is not None]
    if not tested:
        return list(p_values)
    adjusted = iter(stats.false_discovery_control(np.array(tested), method=method).tolist())
    return [None if p is None else float(next(adjusted)) for p in p_values]


def beyond_noise(
    p_value: float | None,
    ci_low: float | None,
    ci_high: float | None,
    alpha: float = 0.05,
    null: float = 0.0,
) -> bool:
    """Whether a difference moved beyond noise: p below α and the interval excludes ``null``.

    Both, because each alone misleads: a small p with an interval touching the null (a
    permutation test and a bootstrap disagree at the edge) is not a move one can size, and an
    interval off the null with a large p is a bootstrap too narrow for its few questions.
    Untested (None anywhere) is never a move.
    """
    if p_value is None or ci_low is None or ci_high is None:
        return False
    return p_value < alpha and (ci_low > null or ci_high < null)


def decide(
    tests: dict[str, PairedTest],
    higher_is_better: dict[str, bool],
    alpha: float = 0.05,
    method: str = "bh",
) -> list[MetricChange]:
    """Per metric: adjusted p-value, moved or not, and the direction-aware verdict."""
    names = list(tests)
    adjusted = adjust([tests[m].p_value for m in names], method)
    out = []
    for m, p_adj in zip(names, adjusted, strict=True):
        t = tests[m]
        up = higher_is_better.get(m, True)
        moved = beyond_noise(p_adj, t.ci_low, t.ci_high, alpha)
        if p_adj is None:
            verdict = f"not tested ({t.n} question(s) scored ok in both runs)"
        elif not moved:
            verdict = "no change beyond noise"
        else:
            better = (t.diff or 0.0) > 0 if up else (t.diff or 0.0) < 0
            verdict = "improved" if better else "regressed"
        out.append(
            MetricChange(
                metric=m,
                higher_is_better=up,
                n_paired=t.n,
                mean_a=t.mean_a,
                mean_b=t.mean_b,
                diff=t.diff,
                ci_low=t.ci_low,
                ci_high=t.ci_high,
                p_value=t.p_value,
                p_adjusted=p_adj,
                moved=moved,
                verdict=verdict,
                noise=t.noise,
                judge_share=t.judge_share,
            )
        )
    return out


__all__ = [
    "MetricChange",
    "PairedTest",
    "Power",
    "adjust",
    "beyond_noise",
    "decide",
    "detectable",
    "paired_test",
    "power",
    "smallest_p",
    "two_level_test",
]
