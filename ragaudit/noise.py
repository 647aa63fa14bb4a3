"""The judge's own noise as measured quantities: self-agreement, juries, per-grade calibration.

Every figure ragaudit reports rests on an LLM judge, and the judge is noisy. Three
measurements make that noise visible:

- **Self-agreement**: the same request asked N times as independent samples. Krippendorff's
  α over (samples × items) says how much of the spread between items is the items' and not
  the judge's: α = 1 − observed disagreement within items / disagreement expected by chance.
  Scores are compared at the ``interval`` level (for a judge whose score is the item's value
  plus noise of variance σ², α estimates var(value) / (var(value) + σ²)); relevance grades at
  the ``nominal`` level (a grade is right or wrong, as Cohen's and Fleiss' κ count them).
  The interval is a bootstrap over items, since items, not samples, are the independent
  units.
- **Juries**: several judges' answers combined per item (mean, median, or majority for
  grades, ties to the lower grade so a split jury never over-rates), and the judges'
  agreement with each other, by the same α.
- **Per-grade calibration** against human labels: for each judge grade, the share of items a
  human calls relevant (a binomial proportion with its exact interval), and for each human
  grade, the share the judge graded higher (its over-rating) and lower.

The comparison that counts the judge's noise (two-level bootstrap) lives with the other
paired tests in ``ragaudit.reporting``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

Level = Literal["nominal", "interval"]
CONFIDENCE = 0.95


@dataclass(frozen=True)
class Agreement:
    """Krippendorff's α over items, with its bootstrap interval."""

    alpha: float | None
    ci_low: float | None
    ci_high: float | None
    n_items: int
    """Items with at least two answers (the only ones α can use)."""
    n_raters: int
    """Samples (self-agreement) or judges (a jury) per item, at most."""
    level: Level

    @property
    def text(self) -> str:
        """``α 0.81 (95% CI 0.74–0.86, 120 items × 3)``, or why there is none."""
        if self.alpha is None:
            return f"α not measurable ({self.n_items} item(s) with two answers or more)"
        ci = ""
        if self.ci_low is not None and self.ci_high is not None:
            ci = f", 95% CI {self.ci_low:.2f}–{self.ci_high:.2f}"
        return f"α {self.alpha:.2f} ({self.level}{ci}, {self.n_items} items × {self.n_raters})"


def _usable(matrix: np.ndarray) -> np.ndarray:
    """The columns (items) with at least two answers."""
    return matrix[:, np.sum(~np.isnan(matrix), axis=0) >= 2]


def _unit_terms(matrix: np.ndarray, level: Level) -> tuple[np.ndarray, ...]:
    """Per item: its answers m, and the sums α's disagreements add up over items.

    Returned as (m, within, s1, s2) for ``interval`` (within = m·SS/(m−1), s1 = Σx,
    s2 = Σx²) and (m, within, counts) for ``nominal`` (within = (m² − Σ n_c²)/(m−1),
    counts = answers per category).
    """
    present = ~np.isnan(matrix)
    m = present.sum(axis=0).astype(float)
    x = np.where(present, matrix, 0.0)
    if level == "interval":
        s1 = x.sum(axis=0)
        s2 = (x * x).sum(axis=0)
        within = m * (s2 - s1 * s1 / m) / (m - 1)
        return m, within, s1, s2
    categories = np.unique(matrix[present])
    counts = np.stack([((matrix == c) & present).sum(axis=0) for c in categories], axis=1)
    within = (m * m - (counts * counts).sum(axis=1)) / (m - 1)
    return m, within, counts.astype(float)


def _alpha_weighted(terms: tuple[np.ndarray, ...], weights: np.ndarray, level: Level) -> np.ndarray:
    """α of items taken ``weights`` times each (resamples × items): one α per resample.

    The same sums as Krippendorff's coincidence matrices (α = 1 − D_o / D_e), added per item
    so that a bootstrap of thousands of resamples is a few matrix products. The
    ``krippendorff`` package builds a value-by-value distance matrix per call, which for
    continuous scores made one interval take minutes; its value equals this one's for
    weights of one (tested against it).
    """
    m, within = terms[0], terms[1]
    n = weights @ m
    observed = (weights @ within) / n
    if level == "interval":
        s1, s2 = terms[2], terms[3]
        total_ss = weights @ s2 - (weights @ s1) ** 2 / n
        expected = 2 * total_ss / (n - 1)
        observed = 2 * observed
    else:
        per_category = weights @ terms[2]
        expected = (n * n - (per_category * per_category).sum(axis=1)) / (n * (n - 1))
    with np.errstate(divide="ignore", invalid="ignore"):
        return 1 - observed / expected


def agreement(
    answers: np.ndarray | Sequence[Sequence[float | None]],
    level: Level = "interval",
    *,
    resamples: int = 999,
    seed: int = 0,
) -> Agreement:
    """Krippendorff's α of ``answers`` (raters or samples × items; NaN/None = no answer).

    The interval is the percentile bootstrap over items. No spread at all (every answer
    equal) leaves α undefined: it is reported as None, never as 1. Levels: ``interval``
    (scores) and ``nominal`` (grades as categories).
    """
    matrix = np.array(answers, dtype=float)
    if matrix.ndim != 2:
        raise ValueError(f"answers must be raters × items, got shape {matrix.shape}")
    usable = _usable(matrix)
    raters, items = usable.shape
    values = usable[~np.isnan(usable)]
    if items < 2 or values.size == 0 or np.all(values == values[0]):
        return Agreement(None, None, None, items, raters, level)
    terms = _unit_terms(usable, level)
    point = float(_alpha_weighted(terms, np.ones((1, items)), level)[0])
    low = high = None
    if items >= 5 and resamples > 0:
        rng = np.random.default_rng(seed)
        drawn = rng.integers(0, items, size=(resamples, items))
        weights = np.zeros((resamples, items))
        np.add.at(weights, (np.arange(resamples)[:, None], drawn), 1.0)
        replicates = _alpha_weighted(terms, weights, level)
        replicates = replicates[np.isfinite(replicates)]
        if replicates.size:
            tail = (1 - CONFIDENCE) / 2
            low, high = (float(v) for v in np.quantile(replicates, [tail, 1 - tail]))
    return Agreement(point, low, high, items, raters, level)


def aggregate(
    answers: np.ndarray | Sequence[Sequence[float | None]],
    how: Literal["mean", "median", "majority"] = "mean",
) -> np.ndarray:
    """One answer per item from several judges' (judges × items; NaN = no answer).

    ``majority`` is for grades: the most frequent grade, a tie going to the lowest of the tied
    grades (a split jury does not over-rate). An item no judge answered is NaN.
    """
    matrix = np.array(answers, dtype=float)
    out = np.full(matrix.shape[1], np.nan)
    for j in range(matrix.shape[1]):
        column = matrix[:, j]
        column = column[~np.isnan(column)]
        if column.size == 0:
            continue
        if how == "mean":
            out[j] = column.mean()
        elif how == "median":
            out[j] = float(np.median(column))
        else:
            grades, counts = np.unique(column, return_counts=True)
            out[j] = grades[counts == counts.max()].min()
    return out


GradeAggregate = Literal["majority", "median"]


def combined_grade(grades: Sequence[int | None], how: GradeAggregate = "majority") -> int | None:
    """One grade from several samples' (None: a failed sample, left out).

    ``majority``: the most frequent grade, a tie going to the lowest of the tied grades;
    ``median``: the lower median. Both break toward the lower grade because LLM judges
    over-rate relevance more often than they under-rate it, and a split vote should not
    count a candidate relevant. None when every sample failed.
    """
    got = sorted(g for g in grades if g is not None)
    if not got:
        return None
    if how == "median":
        return got[(len(got) - 1) // 2]
    # One column of samples: the same majority rule as a jury's scores.
    return int(aggregate(np.array(got, dtype=float)[:, None], "majority")[0])


@dataclass(frozen=True)
class Share:
    """A binomial share with its exact (Clopper–Pearson) interval."""

    k: int
    n: int
    share: float | None
    ci_low: float | None
    ci_high: float | None


def share(k: int, n: int) -> Share:
    """``k`` of ``n``, with scipy's exact binomial interval."""
    if n == 0:
        return Share(0, 0, None, None, None)
    # scipy here, not at the top: the manifest's warnings import this module on every command.
    from scipy import stats

    ci = stats.binomtest(k, n).proportion_ci(confidence_level=CONFIDENCE, method="exact")
    return Share(k, n, k / n, float(ci.low), float(ci.high))


@dataclass(frozen=True)
class GradeCalibration:
    """How a judge's grades map onto a human's, per grade."""

    relevant_given_grade: dict[int, Share]
    """Judge grade → share of its items the human calls relevant."""
    over_rated: dict[int, Share]
    """Human grade → share of its items the judge graded higher."""
    under_rated: dict[int, Share]
    """Human grade → share of its items the judge graded lower."""
    relevant_grade: int


def calibrate_grades(
    judge: Sequence[int], human: Sequence[int], relevant_grade: int = 2
) -> GradeCalibration:
    """Per-grade calibration of ``judge`` grades against ``human`` grades of the same items.

    The human calls an item relevant at ``relevant_grade`` or above (TREC's cut is 2).
    """
    j = np.asarray(judge, dtype=int)
    h = np.asarray(human, dtype=int)
    if j.shape != h.shape:
        raise ValueError(f"{j.size} judge grade(s) against {h.size} human grade(s)")
    relevant = h >= relevant_grade
    given = {int(g): share(int(relevant[j == g].sum()), int((j == g).sum())) for g in np.unique(j)}
    over = {int(g): share(int((j[h == g] > g).sum()), int((h == g).sum())) for g in np.unique(h)}
    under = {int(g): share(int((j[h == g] < g).sum()), int((h == g).sum())) for g in np.unique(h)}
    return GradeCalibration(given, over, under, relevant_grade)


def calibrated_grades(judge: Sequence[int], calibration: GradeCalibration) -> np.ndarray:
    """Each judge grade replaced by the probability that a human calls its item relevant.

    A grade the labels never saw keeps NaN: there is nothing to calibrate it with.
    """
    table = calibration.relevant_given_grade
    return np.array(
        [table[g].share if g in table and table[g].share is not None else np.nan for g in judge],
        dtype=float,
    )


@dataclass(frozen=True)
class ScoreNoise:
    """One agreement figure of a metric's scores: a judge with itself, or the jury's judges."""

    kind: Literal["self", "jury"]
    judge: str | None
    """The judge whose repeats agree (``self``); None for the jury."""
    agreement: Agreement


def judge_means(samples: Sequence[float | None], judges: Sequence[str]) -> dict[str, float | None]:
    """Each judge's mean over its samples of one row that were scored (None: none was)."""
    out: dict[str, list[float]] = {}
    for value, judge in zip(samples, judges, strict=True):
        out.setdefault(judge, [])
        if value is not None and not np.isnan(value):
            out[judge].append(value)
    return {j: (float(np.mean(v)) if v else None) for j, v in out.items()}


def score_noise(
    rows: Sequence[tuple[Sequence[float | None], Sequence[str]]],
    *,
    resamples: int = 999,
    seed: int = 0,
) -> list[ScoreNoise]:
    """A metric's self-agreement per judge and, with several judges, the jury's agreement.

    ``rows`` are each scored row's (samples, their judges). Self-agreement is α (interval)
    over the rows with each judge's repeats as raters; the jury's is α over each judge's mean
    of its repeats, so a judge's own noise is averaged down before judges are compared.
    Nothing is returned for what the rows cannot show (one repeat, one judge).
    """
    per_judge: dict[str, list[list[float]]] = {}
    found = [judge_means(samples, judges) for samples, judges in rows]
    for (samples, judges), by_judge in zip(rows, found, strict=True):
        for judge in by_judge:
            mine = [
                np.nan if v is None else float(v)
                for v, j in zip(samples, judges, strict=True)
                if j == judge
            ]
            per_judge.setdefault(judge, []).append(mine)
    names = list(per_judge)
    # A row a judge did not score is NaN in its line: α uses the rows with two judges or more.
    means = {
        judge: [np.nan if by.get(judge) is None else by[judge] for by in found] for judge in names
    }
    out = []
    for judge in names:
        items = per_judge[judge]
        width = max(len(x) for x in items)
        if width < 2:
            continue
        matrix = np.full((width, len(items)), np.nan)
        for j, values in enumerate(items):
            matrix[: len(values), j] = values
        out.append(ScoreNoise("self", judge, agreement(matrix, resamples=resamples, seed=seed)))
    if len(names) > 1:
        matrix = np.array([means[j] for j in names], dtype=float)
        out.append(ScoreNoise("jury", None, agreement(matrix, resamples=resamples, seed=seed)))
    return out


def _model_name(model: str) -> str:
    """A model string without its options (``?latency=…``) and without case."""
    return model.split("?", 1)[0].strip().lower()


def circular(generator: str | None, judges: Sequence[str]) -> str | None:
    """A warning when the system under test's model is one of the judges, else None.

    A system tuned to its own judge, or answered by it, scores near perfect against it: its
    scores say how much the model agrees with itself, not how good the answers are. Models
    are compared without provider options; ``openai/gpt-4o`` and ``gpt-4o`` are the same
    model.
    """
    if not generator:
        return None
    gen = _model_name(generator)
    for judge in judges:
        name = _model_name(judge)
        if name == gen or name.split("/", 1)[-1] == gen.split("/", 1)[-1]:
            return (
                f"the system under test's model ({generator}) is also a judge ({judge}): its "
                "scores measure how much the model agrees with itself, not how good the "
                "answers are; judge with another model"
            )
    return None


__all__ = [
    "Agreement",
    "GradeAggregate",
    "GradeCalibration",
    "ScoreNoise",
    "Share",
    "agreement",
    "aggregate",
    "calibrate_grades",
    "calibrated_grades",
    "circular",
    "combined_grade",
    "judge_means",
    "score_noise",
    "share",
]
