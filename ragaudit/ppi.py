"""The judge against people: agreement with their labels, and figures corrected for its bias.

A run's figures rest on its judge: every judged metric's mean, the share of candidates judged
relevant, the engine's NDCG@k with the judge's grades as gains. People's labels of a sample of
the run's items (``labels.parquet``, :mod:`ragaudit.labels`) measure how far the judge agrees
with them (the calibration's agreement figures) and correct those figures by
prediction-powered inference (``ppi_py``, the authors' library): the judge's mean over every
judged item plus the mean of people's label minus the judge's on the labelled ones, with power
tuning, whose 95 % interval stays valid however biased the judge is. Its width depends on how
well the judge predicts the labels (the PPI correlation ρ); from ρ follows how many more labels
of this run would halve it.

Units: a judged metric's item is a question's answer; the relevant share's is a judged
candidate; NDCG@k's is a question whose every judged candidate a person graded (the only ones
whose human NDCG is known). Several people on one item count as the mean of their labels. The
labelled items are taken as a random sample of the judged ones, as the labelling sample draws
them; candidates of one question are not independent, so the relevant share's interval is
somewhat narrower than a question-level one would be.

With no labels nothing here runs, and a run's outputs are those it had before.
"""

from __future__ import annotations

import dataclasses
import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from ragaudit import labels as label_store
from ragaudit.calibration import (
    GradeLabel,
    engine_ndcg,
    grade_agreement,
    grade_confusion,
    rater_agreement,
    score_agreement,
)
from ragaudit.noise import calibrate_grades
from ragaudit.ranking import ndcg_at_k
from ragaudit.reporting import bootstrap_ci
from ragaudit.runfolder import RunFolder

CONFIDENCE = 0.95
NDCG_K = 10
GRADE = label_store.GRADE
RELEVANT_SHARE = "relevant share"
NDCG = f"NDCG@{NDCG_K}"
# The cost of a judged item relative to a person's label, only to ask ppi_py's planner for the
# PPI correlation: any small positive cost gives the same correlation.
_JUDGE_COST = 1e-3


@dataclass(frozen=True)
class Corrected:
    """One figure three ways: the judge's alone, corrected by the labels (PPI), labels alone."""

    figure: str
    """A judged metric's name, ``relevant share`` or ``NDCG@10``."""
    judge_mean: float | None
    judge_ci_low: float | None
    judge_ci_high: float | None
    n_judged: int
    ppi_mean: float | None
    ppi_ci_low: float | None
    ppi_ci_high: float | None
    n_labelled: int
    labels_mean: float | None
    labels_ci_low: float | None
    labels_ci_high: float | None
    ppi_corr: float | None
    """How well the judge predicts the labels (ρ of ppi_py's power analysis)."""
    labels_to_halve: int | None
    """More labels of this run that would halve the PPI interval at the observed ρ; None when
    this run's judged items are too few to get there."""
    note: str = ""
    residuals: tuple[float, ...] = ()
    """People's label minus the judge's on each labelled item, times its weight scaled to a
    mean of 1 (a per-stratum draw): their plain mean is the correction ``compare`` applies."""

    @property
    def width_ratio(self) -> float | None:
        """The PPI interval's width over the labels-only interval's (below 1: PPI is tighter)."""
        if None in (self.ppi_ci_low, self.ppi_ci_high, self.labels_ci_low, self.labels_ci_high):
            return None
        labels = self.labels_ci_high - self.labels_ci_low  # type: ignore[operator]
        return None if labels <= 0 else (self.ppi_ci_high - self.ppi_ci_low) / labels  # type: ignore[operator]


def labels_to_halve(n: int, total: int, rho: float) -> int | None:
    """More labels, drawn from the same ``total`` judged items, that halve the PPI interval.

    With n of N items labelled and PPI correlation ρ, PPI's effective sample size is
    n·N / (n + (1 − ρ²)(N − n)) (ppi_py's power analysis); the interval's width goes as its
    inverse square root, so halving it takes four times the effective size. Solved for n':
    n' = 4E(1 − ρ²)N / (N − 4Eρ²). None when no n' ≤ N gets there.
    """
    if n <= 0 or total <= n:
        return None
    r2 = min(rho * rho, 1.0)
    effective = n * total / (n + (1 - r2) * (total - n))
    target = 4 * effective
    denominator = total - target * r2
    if denominator <= 0:
        return None
    needed = math.ceil(target * (1 - r2) * total / denominator)
    return None if needed > total else max(needed - n, 0)


def corrected_mean(
    figure: str,
    human: Sequence[float],
    judge_labelled: Sequence[float],
    judge_all: Sequence[float],
    *,
    weights: Sequence[float] | None = None,
    resamples: int = 2000,
    seed: int = 0,
) -> Corrected:
    """The judge-only mean, the PPI mean and the labels-only mean of one figure, with intervals.

    The judge's side of PPI is its mean over every judged item, the labelled ones included (an
    unbiased mean of the population whatever way the labelled ones were drawn); the
    correction is the mean of label minus judge on the labelled items, weighted back to the
    population when they were drawn per stratum.

    Args:
        figure: What the figure is (shown as is).
        human: People's value of each labelled item.
        judge_labelled: The judge's value of the same items, in the same order.
        judge_all: The judge's value of every judged item, labelled or not.
        weights: Each labelled item's inverse chance of being drawn (its stratum's size over
            the items drawn from it); None for a uniform draw.
        resamples: Bootstrap resamples of the judge-only interval.
        seed: The bootstrap's seed.
    """
    # ppi_py here, not at the top: it loads statsmodels, pandas and scikit-learn (~1 s), which
    # a run without labels never needs.
    from ppi_py import classical_mean_ci, ppi_mean_ci, ppi_mean_pointestimate, ppi_mean_power

    y = np.asarray(human, dtype=float)
    f = np.asarray(judge_labelled, dtype=float)
    judged = np.asarray(judge_all, dtype=float)
    w = None if weights is None else np.asarray(weights, dtype=float)
    if y.shape != f.shape or (w is not None and w.shape != y.shape):
        raise ValueError(f"{figure}: {y.size} label(s) against {f.size} judge value(s)")
    judge_mean = float(judged.mean()) if judged.size else None
    judge_low, judge_high = bootstrap_ci(judged, resamples, seed)
    empty = Corrected(
        figure, judge_mean, judge_low, judge_high, int(judged.size),
        None, None, None, int(y.size), None, None, None, None, None,
    )  # fmt: skip
    if y.size < 2:
        return _replace(empty, note=f"{y.size} labelled item(s): no interval")
    alpha = 1 - CONFIDENCE
    labels_low, labels_high = (float(v) for v in classical_mean_ci(y, w=w, alpha=alpha))
    labels = {
        "labels_mean": float(np.average(y, weights=w)),
        "labels_ci_low": labels_low,
        "labels_ci_high": labels_high,
    }
    if judged.size <= y.size:
        return _replace(empty, note="every judged item is labelled: nothing to correct", **labels)
    # ρ is undefined when the judge or the labels do not vary (no correlation to use).
    rho: float | None = None
    if np.ptp(y) > 0 and np.ptp(f) > 0:
        planned = ppi_mean_power(
            y, f, cost_Y=1.0, cost_Yhat=_JUDGE_COST, effective_n=int(y.size), w=w
        )
        rho = float(planned["ppi_corr"])
    point = float(np.asarray(ppi_mean_pointestimate(y, f, judged, w=w)).ravel()[0])
    found = ppi_mean_ci(y, f, judged, alpha=alpha, w=w)
    low, high = (float(np.asarray(v).ravel()[0]) for v in found)
    return Corrected(
        figure,
        judge_mean,
        judge_low,
        judge_high,
        int(judged.size),
        point,
        low,
        high,
        int(y.size),
        labels["labels_mean"],
        labels_low,
        labels_high,
        rho,
        None if rho is None else labels_to_halve(int(y.size), int(judged.size), rho),
        ("" if rho is not None else "the judge or the labels do not vary: ρ is undefined")
        + ("" if w is None else ("; " if rho is None else "") + "strata weighted back"),
        tuple(float(v) for v in (y - f) * (1.0 if w is None else w * w.size / w.sum())),
    )


def _replace(c: Corrected, **changes: Any) -> Corrected:
    return dataclasses.replace(c, **changes)


@dataclass(frozen=True)
class AgreementLine:
    """One agreement figure of one kind of label: the judge against people, or people together."""

    kind: str
    """``grade`` or a judged metric's name."""
    between: str
    """``judge vs people`` or ``people vs people`` (the ceiling)."""
    statistic: str
    value: float | None
    ci_low: float | None
    ci_high: float | None
    n: int
    note: str = ""


@dataclass(frozen=True)
class ConfusionRow:
    """Of the candidates a person graded ``human``, how the judge graded them."""

    human: int
    n: int
    judge: tuple[tuple[int, int, float | None, float | None, float | None], ...]
    """Per judge grade: (grade, items, share, ci_low, ci_high)."""
    over_rated: float | None
    under_rated: float | None


@dataclass(frozen=True)
class JudgeVsPeople:
    """What people's labels of a run say about its judge."""

    annotators: tuple[str, ...]
    n_labels: int
    """Latest labels that are not skips, every person and kind together."""
    agreement: tuple[AgreementLine, ...]
    confusion: tuple[ConfusionRow, ...]
    ndcg: tuple[AgreementLine, ...]
    """The engine's NDCG@10 under human, judge and calibrated grades (``kind`` says which)."""
    ndcg_note: str
    corrected: tuple[Corrected, ...]
    invalid: int = 0
    """Labels left out: a grade not one of 0–3, or a verdict outside [0, 1]."""

    def corrected_for(self, figure: str) -> Corrected | None:
        """The corrected figure named ``figure``, or None."""
        return next((c for c in self.corrected if c.figure == figure), None)


def _labels(run_dir: Path) -> tuple[pl.DataFrame, int]:
    """Each (item, person)'s latest label that is not a skip, and how many were left out.

    A labels file comes from outside like the rest of the folder: a grade that is not one of
    0–3, or a verdict outside [0, 1], is left out and counted rather than trusted.
    """
    frame = pl.from_arrow(label_store.latest_labels(label_store.read_labels(run_dir)))
    assert isinstance(frame, pl.DataFrame)
    given = frame.filter(pl.col("label").is_not_null())
    grade = pl.col("kind") == GRADE
    valid = pl.col("label").is_finite() & pl.when(grade).then(
        pl.col("label").is_in([0.0, 1.0, 2.0, 3.0])
    ).otherwise(pl.col("label").is_between(0.0, 1.0))
    kept = given.filter(valid)
    return kept, given.height - kept.height


def has_labels(run_dir: Path | str) -> bool:
    """Whether the run has a labels store at all (the cheap test before anything is read)."""
    return (Path(run_dir) / label_store.FILE).exists()


def _drawn(run_dir: Path) -> dict[str, float]:
    """Each item of the labelling sample's inverse chance of being drawn (stratum size / drawn).

    ``ragaudit label`` draws as many items from each stratum of the judge's verdict: weighted
    back, the labels stand for the run's items again. {} when no sample was drawn.
    """
    sample = label_store.read_sample(run_dir)
    if sample is None:
        return {}
    frame = pl.from_arrow(sample.select(["item_id", "stratum_size", "stratum_sampled"]))
    assert isinstance(frame, pl.DataFrame)
    frame = frame.filter(pl.col("stratum_sampled") > 0)
    weights = (frame["stratum_size"] / frame["stratum_sampled"]).to_list()
    return dict(zip(frame["item_id"].to_list(), weights, strict=True))


def _weights(drawn: dict[str, float], items: Sequence[str]) -> list[float] | None:
    """The items' weights when the sample drew every one of them per stratum, else None.

    Labels of items outside the drawn sample (labelled some other way) make the draw unknown:
    the items are then taken as a uniform draw.
    """
    if not items or any(i not in drawn for i in items):
        return None
    found = [drawn[i] for i in items]
    return None if len(set(found)) == 1 else found


def _relevant_grade(run: RunFolder) -> int:
    from ragaudit.config import SortConfig

    configured = run.read_manifest().get("config", {}).get("sort", {}).get("relevant_grade")
    return int(configured or SortConfig().relevant_grade)


def _lines(kind: str, between: str, figures: Sequence[Any]) -> list[AgreementLine]:
    return [
        AgreementLine(kind, between, f.statistic, f.value, f.ci_low, f.ci_high, f.n, f.note)
        for f in figures
    ]


def _people_pairs(frame: pl.DataFrame) -> tuple[list[float], list[float]]:
    """The first two people (by name) of each item two or more people labelled."""
    a: list[float] = []
    b: list[float] = []
    for _, part in frame.sort("annotator").group_by("item_id", maintain_order=True):
        if part.height >= 2:
            a.append(float(part["label"][0]))
            b.append(float(part["label"][1]))
    return a, b


def _item_means(frame: pl.DataFrame, key: str) -> dict[Any, float]:
    grouped = frame.group_by(key).agg(pl.col("label").mean())
    return dict(zip(grouped[key].to_list(), grouped["label"].to_list(), strict=True))


def judge_vs_people(run_dir: Path | str, *, seed: int = 0) -> JudgeVsPeople | None:
    """The judge's agreement with the run's labels and its corrected figures (None: no labels)."""
    path = Path(run_dir)
    if not has_labels(path):
        return None
    frame, invalid = _labels(path)
    if frame.is_empty():
        return None
    run = RunFolder(path.parent, path.name)
    cut = _relevant_grade(run)
    drawn = _drawn(path)
    agreement: list[AgreementLine] = []
    corrected: list[Corrected] = []
    confusion: list[ConfusionRow] = []
    ndcg_lines: list[AgreementLine] = []
    ndcg_note = "no candidate grades labelled"

    grades = frame.filter(pl.col("kind") == GRADE)
    verdicts = pl.from_arrow(run.read("verdicts")) if run.has("verdicts") else None
    if not grades.is_empty() and isinstance(verdicts, pl.DataFrame):
        ok = verdicts.filter((pl.col("status") == "ok") & pl.col("grade").is_not_null())
        judge = {
            (r["question_id"], r["context_id"]): int(r["grade"]) for r in ok.iter_rows(named=True)
        }
        pairs = [
            (int(r["label"]), judge[(r["question_id"], r["candidate_id"])])
            for r in grades.iter_rows(named=True)
            if (r["question_id"], r["candidate_id"]) in judge
        ]
        if pairs:
            human, judged = [p[0] for p in pairs], [p[1] for p in pairs]
            agreement += _lines(GRADE, "judge vs people", grade_agreement(human, judged, seed))
            found = grade_confusion(human, judged, cut)
            for g in sorted(found.over_rated):
                cells = [c for c in found.cells if c.human == g]
                confusion.append(
                    ConfusionRow(
                        g,
                        cells[0].share.n,
                        tuple(
                            (c.judge, c.share.k, c.share.share, c.share.ci_low, c.share.ci_high)
                            for c in cells
                        ),
                        found.over_rated[g].share,
                        found.under_rated[g].share,
                    )
                )
        a, b = _people_pairs(grades)
        if a:
            agreement += _lines(GRADE, "people vs people", rater_agreement(a, b, True, seed))
        # The relevant share: a judged candidate's "relevant" against people's.
        means = _item_means(
            grades.with_columns(label=(pl.col("label") >= cut).cast(pl.Float64)),
            "item_id",
        )
        labelled = {
            (r["question_id"], r["candidate_id"]): means[r["item_id"]]
            for r in grades.unique("item_id").iter_rows(named=True)
        }
        keys = [k for k in judge if k in labelled]
        corrected.append(
            corrected_mean(
                RELEVANT_SHARE,
                [labelled[k] for k in keys],
                [float(judge[k] >= cut) for k in keys],
                [float(g >= cut) for g in judge.values()],
                weights=_weights(drawn, [label_store.item_id(GRADE, *k) for k in keys]),
                seed=seed,
            )
        )
        ndcg_lines, ndcg_note, ndcg_fig = _ndcg(run, grades, judge, cut, seed)
        if ndcg_fig is not None:
            corrected.append(ndcg_fig)

    scores = pl.from_arrow(run.read("scores")) if run.has("scores") else None
    if isinstance(scores, pl.DataFrame):
        ok_scores = scores.filter((pl.col("status") == "ok") & pl.col("value").is_not_null())
        for metric in scores["metric"].unique(maintain_order=True).to_list():
            part = frame.filter(pl.col("kind") == metric)
            if part.is_empty():
                continue
            values = dict(
                ok_scores.filter(pl.col("metric") == metric)
                .select("question_id", "value")
                .iter_rows()
            )
            people = [
                (float(r["label"]), values[r["question_id"]])
                for r in part.iter_rows(named=True)
                if r["question_id"] in values
            ]
            if people:
                agreement += _lines(
                    metric,
                    "judge vs people",
                    score_agreement([p[0] for p in people], [p[1] for p in people], seed),
                )
            a, b = _people_pairs(part)
            if a:
                agreement += _lines(metric, "people vs people", rater_agreement(a, b, False, seed))
            means = _item_means(part, "question_id")
            qids = [q for q in values if q in means]
            corrected.append(
                corrected_mean(
                    metric,
                    [means[q] for q in qids],
                    [values[q] for q in qids],
                    list(values.values()),
                    weights=_weights(drawn, [label_store.item_id(metric, q) for q in qids]),
                    seed=seed,
                )
            )
    annotators = tuple(sorted(set(frame["annotator"].to_list())))
    return JudgeVsPeople(
        annotators,
        frame.height,
        tuple(agreement),
        tuple(confusion),
        tuple(ndcg_lines),
        ndcg_note,
        tuple(corrected),
        invalid,
    )


def _ndcg(
    run: RunFolder,
    grades: pl.DataFrame,
    judge: dict[tuple[str, str], int],
    cut: int,
    seed: int,
) -> tuple[list[AgreementLine], str, Corrected | None]:
    """The engine's NDCG@10 under human, judge and calibrated grades, and its PPI figure.

    Only questions whose every judged candidate a person graded count for the human figure:
    NDCG's ideal order needs every gain.
    """
    if not run.has("candidates"):
        return [], "no candidates table", None
    candidates = pl.from_arrow(run.read("candidates"))
    assert isinstance(candidates, pl.DataFrame)
    rank = {
        (r["question_id"], r["context_id"]): r["engine_rank"]
        for r in candidates.iter_rows(named=True)
    }
    by_question: dict[str, dict[str, int]] = defaultdict(dict)
    for (qid, cid), g in judge.items():
        by_question[qid][cid] = g
    human: dict[tuple[str, str], list[int]] = defaultdict(list)
    for r in grades.iter_rows(named=True):
        human[(r["question_id"], r["candidate_id"])].append(int(r["label"]))
    covered = [qid for qid, cands in by_question.items() if all((qid, c) in human for c in cands)]

    def order(qid: str) -> list[str]:
        return sorted(by_question[qid], key=lambda c: rank.get((qid, c)) or math.inf)

    judged_values: dict[str, float] = {}
    for qid in by_question:
        gains = {c: float(g) for c, g in by_question[qid].items() if g > 0}
        v = ndcg_at_k(order(qid), gains, NDCG_K)
        if math.isfinite(v):
            judged_values[qid] = v
    lines: list[AgreementLine] = []
    labels_list, rows = [], []
    for qid in covered:
        for cid in by_question[qid]:
            for h in human[(qid, cid)]:
                labels_list.append(GradeLabel(qid, "", cid, "", h, rank.get((qid, cid))))
                rows.append({"judge_grade": by_question[qid][cid]})
    note = f"{len(covered)} of {len(by_question)} question(s) have every judged candidate labelled"
    pairs = [(human[k][0], g) for k, g in judge.items() if k in human]
    if labels_list and pairs:
        calibration = calibrate_grades([p[1] for p in pairs], [p[0] for p in pairs], cut)
        found, n = engine_ndcg(labels_list, rows, calibration)
        for kind, (mean, low, high) in (found or {}).items():
            lines.append(AgreementLine(kind, "engine", NDCG, mean, low, high, n))
    human_values: dict[str, float] = {}
    for qid in covered:
        cands = by_question[qid]
        gains = {c: float(np.mean(human[(qid, c)])) for c in cands}
        v = ndcg_at_k(order(qid), {c: g for c, g in gains.items() if g > 0}, NDCG_K)
        if math.isfinite(v) and qid in judged_values:
            human_values[qid] = v
    if not judged_values:
        return lines, note, None
    figure = corrected_mean(
        NDCG,
        list(human_values.values()),
        [judged_values[q] for q in human_values],
        list(judged_values.values()),
        seed=seed,
    )
    return lines, note, figure


SUMMARY_COLUMNS = ("ppi_mean", "ppi_ci_low", "ppi_ci_high", "n_labels", "labels_to_halve")
"""The summary table's PPI columns (schema version 2), null for a metric without labels."""


def summary_columns(people: JudgeVsPeople | None, metric: str) -> dict[str, Any]:
    """A metric's PPI columns of ``summary.parquet`` (all null without its labels)."""
    found = people.corrected_for(metric) if people is not None else None
    if found is None:
        return dict.fromkeys(SUMMARY_COLUMNS)
    return {
        "ppi_mean": found.ppi_mean,
        "ppi_ci_low": found.ppi_ci_low,
        "ppi_ci_high": found.ppi_ci_high,
        "n_labels": found.n_labelled,
        "labels_to_halve": found.labels_to_halve,
    }


def write_corrected_summary(run_dir: Path | str, people: JudgeVsPeople | None = None) -> bool:
    """Fill ``summary.parquet``'s PPI columns from the run's labels (rewritten atomically).

    ``people`` is :func:`judge_vs_people` of the run when the caller has it already. A summary
    of schema version 1 is rewritten as version 2. False, and nothing written, when the run has
    no summary or no labels.
    """
    from ragaudit.schemas import SUMMARY, to_table

    path = Path(run_dir)
    run = RunFolder(path.parent, path.name)
    if not run.has("summary") or not has_labels(path):
        return False
    people = people if people is not None else judge_vs_people(path)
    if people is None:
        return False
    rows = [
        {**{n: r.get(n) for n in SUMMARY.names}, **summary_columns(people, r["metric"])}
        for r in run.read("summary").to_pylist()
    ]
    run.write("summary", to_table(rows, SUMMARY))
    return True


__all__ = [
    "CONFIDENCE",
    "GRADE",
    "NDCG",
    "NDCG_K",
    "RELEVANT_SHARE",
    "SUMMARY_COLUMNS",
    "AgreementLine",
    "ConfusionRow",
    "Corrected",
    "JudgeVsPeople",
    "corrected_mean",
    "has_labels",
    "judge_vs_people",
    "labels_to_halve",
    "summary_columns",
    "write_corrected_summary",
]
