"""The judge's own noise: self-agreement of its samples, juries, and a circular judge.

Every figure ragaudit reports rests on an LLM judge, and the judge is noisy:

- **Self-agreement**: the same request asked N times as independent samples; Krippendorff's α
  over (samples × items) at the ``interval`` level (:func:`ragaudit.stats.agreement`) says how
  much of the spread between items is the items' and not the judge's.
- **Juries**: several judges' answers combined per item (mean, median, or majority for
  grades, ties to the lower grade so a split jury never over-rates), and the judges'
  agreement with each other, by the same α.

The statistics themselves (α, per-grade calibration against people, the two-level test that
counts the judge's noise in a comparison) live in :mod:`ragaudit.stats`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from ragaudit.stats import Agreement, agreement


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
    "GradeAggregate",
    "ScoreNoise",
    "aggregate",
    "circular",
    "combined_grade",
    "judge_means",
    "score_noise",
]
