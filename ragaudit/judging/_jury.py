"""Several grades of one candidate: the judge's repeated samples and a jury's members.

The plan (:func:`grade_plan`) says which samples every relevance grade is asked as: each
grading model (the jury, else the judge) ``repeats`` times. The grading code and the dry run
both read it, so an estimate counts exactly the calls a run makes. A candidate's grade is the
aggregate of its samples' grades (:func:`combined_grade`), and :func:`grade_noise` measures how
much the samples agree.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ragaudit.config import ModelsConfig
from ragaudit.judging._judge import Judge
from ragaudit.noise import GradeAggregate, combined_grade
from ragaudit.stats import Agreement, agreement

# The agreement rows' ``kind``: one judge's repeats, or the jury's members with each other.
SELF = "self"
JURY = "jury"


@dataclass(frozen=True)
class GradeSample:
    """One independent sample every relevance grade is asked as.

    Attributes:
        model: The grading model.
        index: The judge repeat (0: the request as asked once, one memo entry with the runs
            before repeats).
        temperature: The sampling temperature: the judge's own for sample 0, the sampling
            temperature after it (at temperature 0 every sample would repeat the first).
    """

    model: str
    index: int
    temperature: float


def grade_plan(
    graders: Sequence[str], repeats: int, temperature: float, sampling_temperature: float
) -> tuple[GradeSample, ...]:
    """Every sample each candidate's grade is asked as: each grader ``repeats`` times."""
    return tuple(
        GradeSample(model, r, temperature if r == 0 else sampling_temperature)
        for model in graders
        for r in range(max(1, repeats))
    )


def sample_judges(judge: Judge, plan: Sequence[GradeSample], models: ModelsConfig) -> list[Judge]:
    """One judge per planned sample.

    Each is the sample's model as a member of ``judge``'s jury (:meth:`Judge.member`: the
    judge itself, or the model with the config's limits and its own window) with the sample's
    temperature and repeat.
    """
    return [
        dataclasses.replace(
            judge.member(models, s.model), temperature=s.temperature, repeat=s.index
        )
        for s in plan
    ]


def _matrix(columns: Sequence[Sequence[int | None]]) -> np.ndarray:
    """Raters × items from one list of answers per item (None: no answer)."""
    width = max((len(c) for c in columns), default=0)
    out = np.full((width, len(columns)), np.nan)
    for j, column in enumerate(columns):
        for i, g in enumerate(column):
            if g is not None:
                out[i, j] = g
    return out


def _row(kind: str, judge: str | None, scale: str, a: Agreement, disagreed: int) -> dict[str, Any]:
    return {
        "kind": kind,
        "judge": judge,
        "scale": scale,
        "level": a.level,
        "alpha": a.alpha,
        "ci_low": a.ci_low,
        "ci_high": a.ci_high,
        "n_items": a.n_items,
        "n_raters": a.n_raters,
        "disagreed": disagreed,
    }


def _figures(
    kind: str,
    judge: str | None,
    columns: Sequence[Sequence[int | None]],
    relevant_grade: int,
    seed: int,
) -> list[dict[str, Any]]:
    """α on the grades and on the relevant/not cut, with the items the answers split on."""
    answered = [[g for g in c if g is not None] for c in columns]
    usable = [c for c in answered if len(c) >= 2]
    matrix = _matrix(columns)
    cut = np.where(np.isnan(matrix), np.nan, (matrix >= relevant_grade).astype(float))
    return [
        _row(
            kind,
            judge,
            "grade",
            agreement(matrix, "nominal", seed=seed),
            sum(len(set(c)) > 1 for c in usable),
        ),
        _row(
            kind,
            judge,
            "relevant",
            agreement(cut, "nominal", seed=seed),
            sum(len({g >= relevant_grade for g in c}) > 1 for c in usable),
        ),
    ]


def grade_noise(
    samples: Sequence[Mapping[str, Any]],
    *,
    relevant_grade: int = 2,
    how: GradeAggregate = "majority",
    seed: int = 0,
) -> list[dict[str, Any]]:
    """The agreement of a run's grade samples: each judge with itself, and the jury's members.

    Krippendorff's α at the nominal level, a bootstrap interval over candidates (the
    independent units), on two scales: the grade (0–3, equal or not, the multi-rater form
    of Cohen's κ) and the relevant/not-relevant cut (what every later stage reads). Nominal
    and not ordinal: the grades are four labels whose distances nobody calibrated (a 1 and a
    2 fall on either side of the cut, a 2 and a 3 on one side), and the cut's scale states
    the disagreement that matters downstream on its own.

    Args:
        samples: One mapping per candidate: ``grade_samples`` (grades, None for a failed
            sample) and ``grade_judges`` (the model of each), as the ``verdicts`` table holds.
        relevant_grade: The lowest grade that counts as relevant.
        how: How a judge's own repeats become its grade for the jury's agreement.
        seed: The bootstrap's seed.

    Returns:
        Rows of the ``grade_noise`` table: ``self`` rows per judge with more than one sample a
        candidate, ``jury`` rows when there are several judges; none with a single sample.
    """
    models: dict[str, None] = {}
    for row in samples:
        models.update(dict.fromkeys(row.get("grade_judges") or []))
    per_judge: dict[str, list[list[int | None]]] = {m: [] for m in models}
    for row in samples:
        grades, judges = row.get("grade_samples") or [], row.get("grade_judges") or []
        for model in models:
            per_judge[model].append([g for g, m in zip(grades, judges, strict=True) if m == model])
    rows: list[dict[str, Any]] = []
    for model, columns in per_judge.items():
        if max((len(c) for c in columns), default=0) >= 2:
            rows += _figures(SELF, model, columns, relevant_grade, seed)
    if len(models) >= 2:
        columns = [
            [combined_grade(per_judge[m][j], how) for m in models] for j in range(len(samples))
        ]
        rows += _figures(JURY, ", ".join(models), columns, relevant_grade, seed)
    return rows


__all__ = [
    "JURY",
    "SELF",
    "GradeAggregate",
    "GradeSample",
    "combined_grade",
    "grade_noise",
    "grade_plan",
    "sample_judges",
]
