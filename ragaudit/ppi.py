"""The judge against people: agreement with their labels, and figures corrected for its bias.

A run's figures rest on its judge: every judged metric's mean, the share of candidates judged
relevant, the engine's NDCG@10 with the judge's grades as gains. People's labels of a sample of
the run's items (its labels store, :mod:`ragaudit.labels`) measure how far the judge agrees
with them and correct those figures by prediction-powered inference: the judge's mean over
every judged item plus the mean of people's label minus the judge's on the labelled ones, whose
95 % interval stays valid however biased the judge is. This module reads the run's labels, its
judgments and the sample's design, and pairs them item by item; the arithmetic is the
statistics package's.

The design (``labels.draw_sample``, ADR 0020): questions drawn at random, then inside each
drawn question candidates from the engine's top ten and from the rest of the pool by the
judge's grade, each item with its chance of being drawn. Every grade figure is then estimated
as the survey literature estimates a two-stage sample: each label weighted by its inverse
chance of being drawn, intervals over the drawn questions (the primary sampling units: labels
of one question are not independent), never over the labels one by one.

- Relevant share (unit: a judged candidate): the judge's share over every judged candidate
  plus the design-weighted mean of label minus judge (:func:`ragaudit.stats.design_corrected_mean`).
- NDCG@10 (unit: a question; gains the 0–3 grades; the ideal order over the question's judged
  candidates): per drawn question, its human NDCG@10 estimated from the judge's grades plus
  the question's weighted (label − judge) residuals (a difference estimator inside the
  question: the top ten's gains for the numerator, the count of each grade in the whole pool
  for the ideal, as infNDCG estimates it from a sampled pool); then the same correction
  across questions. A question whose every judged candidate is labelled has its NDCG exactly.
- Agreement (κ, α, the per-grade confusion): weighted back to the run, intervals by a
  delete-one-question jackknife (Student t); the sample's unweighted figures beside them,
  named as such.
- A judged metric (unit: a question's answer, one per question): its sample is stratified by
  a third of the score scale, items independent, corrected by ``ppi_py``
  (:func:`ragaudit.stats.corrected_mean`).

Several people on one item count as the mean of their labels. Labels outside the drawn sample
are left out of the estimates and counted; a sample drawn from other judged items than the
run's (copied from another run, or the run judged again since) refuses the labels with a note.
With no sample at all, the labelled questions are taken as a random draw of the run's and the
labelled candidates of each as a random draw of its pool.

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
from ragaudit.directions import about
from ragaudit.ranking import dcg, discounted, ideal_dcg, ndcg_at_k
from ragaudit.runfolder import RunFolder, stored_setting
from ragaudit.stats import (
    Corrected,
    GradeConfusion,
    calibrate_grades,
    corrected_mean,
    design_corrected_mean,
    design_grade_agreement,
    rater_agreement,
    score_agreement,
    share_ci,
)

NDCG_K = label_store.TOP_K
GRADE = label_store.GRADE
RELEVANT_SHARE = "relevant share"
NDCG = f"NDCG@{NDCG_K}"
SAMPLE_UNWEIGHTED = "judge vs people (sample, unweighted)"
"""The ``between`` of the agreement figures of the labelled sample as drawn (not the run's)."""


@dataclass(frozen=True)
class AgreementLine:
    """One agreement figure of one kind of label: the judge against people, or people together."""

    kind: str
    """``grade`` or a judged metric's name."""
    between: str
    """``judge vs people`` (weighted back to the run), ``judge vs people (sample,
    unweighted)`` or ``people vs people`` (the ceiling)."""
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
    """Per person's grade, the judge's grades: shares weighted back to the run."""
    ndcg: tuple[AgreementLine, ...]
    """The engine's NDCG@10 under human, judge and calibrated grades (``kind`` says which)."""
    ndcg_note: str
    corrected: tuple[Corrected, ...]
    invalid: int = 0
    """Labels left out: a grade not one of 0–3, or a verdict outside [0, 1]."""
    confusion_sample: tuple[ConfusionRow, ...] = ()
    """The same rows over the labelled sample as drawn, unweighted."""
    outside_sample: int = 0
    """Labels of items the drawn sample does not hold, left out of every estimate."""
    notes: tuple[str, ...] = ()
    """What the design did with the labels (refused, left out, assumed), one line each."""

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
    return label_store.has_labels(run_dir)


@dataclass(frozen=True)
class _Design:
    """The drawn sample as the estimates need it (None fields: no sample drawn)."""

    rows: dict[str, dict[str, Any]]
    """item id → its sample row."""
    kinds: frozenset[str]
    refused: str = ""


def _design(path: Path) -> _Design | None:
    """The run's sample, checked against the run's judged items (None: no sample drawn)."""
    sample = label_store.read_sample(path)
    if sample is None:
        return None
    rows = {r["item_id"]: r for r in sample.to_pylist()}
    signatures = {r["run_signature"] for r in rows.values()} - {None}
    refused = ""
    if signatures and signatures != {label_store.run_signature(path)}:
        refused = (
            f"{label_store.SAMPLE_FILE} was drawn from other judged items than this run's "
            "(copied from another run, or the run judged again since): its labels are not "
            "used; draw a new sample to label this run"
        )
    return _Design(rows, frozenset(r["kind"] for r in rows.values()), refused)


def _in_sample(frame: pl.DataFrame, design: _Design | None) -> tuple[pl.DataFrame, int]:
    """The labels the design can weight, and how many it cannot (outside the drawn sample).

    A kind the sample does not hold at all (labelled some other way) is kept: its labels are
    taken as a random draw. A label of a drawn item counts whenever and wherever it was given:
    the sample chose the item, and a person's label of its pair (kept once in the judgment
    store, given on another page before this sample was drawn) is that item's label.
    """
    if design is None:
        return frame, 0
    drawn = pl.Series(list(design.rows), dtype=pl.String)
    inside = pl.col("item_id").is_in(drawn) | ~pl.col("kind").is_in(list(design.kinds))
    kept = frame.filter(inside)
    return kept, frame.height - kept.height


def _relevant_grade(run: RunFolder) -> int:
    from ragaudit.config import SortConfig

    configured = stored_setting(run, "sort.relevant_grade")
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


@dataclass(frozen=True)
class _GradeWeights:
    """Each labelled grade item's design weight and cluster, and what the design says."""

    weight: dict[tuple[str, str], float]
    cluster: dict[tuple[str, str], str]
    strata: dict[str, dict[str, list[str]]]
    """Per question used, its second-stage strata (every judged candidate, labelled or not)."""
    questions_total: int
    notes: tuple[str, ...]


def _grade_weights(
    labelled: set[tuple[str, str]],
    design: _Design | None,
    frame: dict[str, list[tuple[str, str, int | None]]],
) -> _GradeWeights:
    """Design weights of the labelled grade items, recomputed from the labels actually given.

    Two-stage sample: a drawn question counts once every stratum drawn in it has a label (the
    items come question by question in random order, so the questions labelled so far are a
    random draw of the drawn ones); its stage weight is the frame's questions over the
    questions counted, its items' the stratum's size over the stratum's labelled items. A
    sample of the first form (items drawn one by one per judge grade): each item its own
    cluster, weighted by its stratum's size over the items drawn from it. No sample: every
    labelled question counted, its labelled candidates a random draw of its pool.
    """
    notes: list[str] = []
    by_q: dict[str, list[str]] = defaultdict(list)
    for qid, cid in sorted(labelled):
        by_q[qid].append(cid)
    rows = design.rows if design is not None else {}
    first_form = design is not None and any(
        r["kind"] == GRADE and r["design"] is None for r in rows.values()
    )
    weight: dict[tuple[str, str], float] = {}
    cluster: dict[tuple[str, str], str] = {}
    if first_form:
        for qid, cids in by_q.items():
            for cid in cids:
                r = rows[label_store.item_id(GRADE, qid, cid)]
                weight[(qid, cid)] = r["stratum_size"] / max(r["stratum_sampled"], 1)
                cluster[(qid, cid)] = label_store.item_id(GRADE, qid, cid)
        notes.append(
            "a sample of the first form (candidates drawn one by one): strata weighted back"
        )
        return _GradeWeights(weight, cluster, {}, len(frame), tuple(notes))
    used: dict[str, dict[str, list[str]]] = {}
    partial = 0
    for qid, cids in by_q.items():
        if qid not in frame:
            continue
        strata = label_store.question_strata(frame[qid])
        if design is not None:
            drawn = {
                r["stratum"]
                for r in rows.values()
                if r["kind"] == GRADE and r["question_id"] == qid
            }
            labelled_strata = {rows[label_store.item_id(GRADE, qid, c)]["stratum"] for c in cids}
            if drawn - labelled_strata:
                partial += 1
                continue
        else:
            # No sample: the labelled candidates taken as one random draw of the pool.
            strata = {"pool": [c for c, _, _ in frame[qid]]}
        used[qid] = strata
    if partial:
        notes.append(f"{partial} question(s) partly labelled left out until done")
    m = len(used)
    for qid, strata in used.items():
        where = {c: s for s, cs in strata.items() for c in cs}
        mine = [c for c in by_q[qid] if c in where]
        per_stratum: dict[str, int] = defaultdict(int)
        for c in mine:
            per_stratum[where[c]] += 1
        for c in mine:
            s = where[c]
            weight[(qid, c)] = (len(frame) / m) * (len(strata[s]) / per_stratum[s])
            cluster[(qid, c)] = qid
    if design is None and m:
        notes.append(
            "no sample drawn: the labelled questions taken as a random draw of the run's, "
            "their labelled candidates as a random draw of each pool"
        )
    return _GradeWeights(weight, cluster, used, len(frame), tuple(notes))


def _confusion_rows(found: GradeConfusion) -> tuple[ConfusionRow, ...]:
    rows = []
    for g in sorted(found.over_rated):
        cells = [c for c in found.cells if c.human == g]
        rows.append(
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
    return tuple(rows)


def judge_vs_people(run_dir: Path | str, *, seed: int = 0) -> JudgeVsPeople | None:
    """The judge's agreement with the run's labels and its corrected figures (None: no labels)."""
    path = Path(run_dir)
    if not has_labels(path):
        return None
    frame, invalid = _labels(path)
    if frame.is_empty():
        return None
    annotators = tuple(sorted(set(frame["annotator"].to_list())))
    design = _design(path)
    if design is not None and design.refused:
        return JudgeVsPeople(
            annotators, frame.height, (), (), (), "labels refused", (), invalid,
            notes=(design.refused,),
        )  # fmt: skip
    frame, outside = _in_sample(frame, design)
    notes: list[str] = []
    if outside:
        notes.append(
            f"{outside} label(s) of items outside the drawn sample (or given before it was "
            "drawn) left out of every estimate"
        )
    run = RunFolder(path.parent, path.name)
    cut = _relevant_grade(run)
    agreement: list[AgreementLine] = []
    corrected: list[Corrected] = []
    confusion: tuple[ConfusionRow, ...] = ()
    confusion_sample: tuple[ConfusionRow, ...] = ()
    ndcg_lines: list[AgreementLine] = []
    ndcg_note = "no candidate grades labelled"

    grades = frame.filter(pl.col("kind") == GRADE)
    verdicts = pl.from_arrow(run.read("verdicts")) if run.has("verdicts") else None
    if not grades.is_empty() and isinstance(verdicts, pl.DataFrame):
        ok = verdicts.filter((pl.col("status") == "ok") & pl.col("grade").is_not_null())
        judge = {
            (r["question_id"], r["context_id"]): int(r["grade"]) for r in ok.iter_rows(named=True)
        }
        grades = grades.filter(
            pl.struct("question_id", "candidate_id").map_elements(
                lambda r: (r["question_id"], r["candidate_id"]) in judge, return_dtype=pl.Boolean
            )
        )
        labelled = {(r["question_id"], r["candidate_id"]) for r in grades.iter_rows(named=True)}
        found = _grade_weights(labelled, design, label_store.grade_frame(path))
        notes += found.notes
        rows = [
            r
            for r in grades.iter_rows(named=True)
            if (r["question_id"], r["candidate_id"]) in found.weight
        ]
        if rows:
            keys = [(r["question_id"], r["candidate_id"]) for r in rows]
            per_item: dict[tuple[str, str], int] = defaultdict(int)
            for k in keys:
                per_item[k] += 1
            human = [int(r["label"]) for r in rows]
            judged = [judge[k] for k in keys]
            # Several people on one item share its weight: the item counts once in the run.
            w = [found.weight[k] / per_item[k] for k in keys]
            clusters = [found.cluster[k] for k in keys]
            run_figures = design_grade_agreement(human, judged, w, clusters, cut)
            agreement += _lines(GRADE, "judge vs people", run_figures.figures)
            confusion = _confusion_rows(run_figures.confusion)
            items = [label_store.item_id(GRADE, *k) for k in keys]
            sample_figures = design_grade_agreement(human, judged, [1.0] * len(rows), items, cut)
            agreement += _lines(GRADE, SAMPLE_UNWEIGHTED, sample_figures.figures)
            confusion_sample = _confusion_rows(sample_figures.confusion)
        a, b = _people_pairs(grades)
        if a:
            agreement += _lines(GRADE, "people vs people", rater_agreement(a, b, True, seed))
        # The relevant share: a judged candidate's "relevant" against people's.
        means = _item_means(
            grades.with_columns(label=(pl.col("label") >= cut).cast(pl.Float64)), "item_id"
        )
        keys = sorted(found.weight)
        if keys:
            share = design_corrected_mean(
                RELEVANT_SHARE,
                [means[label_store.item_id(GRADE, *k)] for k in keys],
                [float(judge[k] >= cut) for k in keys],
                [float(g >= cut) for g in judge.values()],
                weights=[found.weight[k] for k in keys],
                clusters=[found.cluster[k] for k in keys],
                units_total=found.questions_total,
                bounds=about(RELEVANT_SHARE).range,
                seed=seed,
            )
            if any("strata weighted back" in n for n in found.notes):
                share = dataclasses.replace(share, note=share.note + "; strata weighted back")
            corrected.append(share)
        ndcg_lines, ndcg_note, ndcg_fig = _ndcg(run, grades, judge, found, cut, seed)
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
                    weights=_answer_weights(design, [label_store.item_id(metric, q) for q in qids]),
                    seed=seed,
                )
            )
    return JudgeVsPeople(
        annotators,
        frame.height + outside,
        tuple(agreement),
        confusion,
        tuple(ndcg_lines),
        ndcg_note,
        tuple(corrected),
        invalid,
        confusion_sample,
        outside,
        tuple(notes),
    )


def _answer_weights(design: _Design | None, items: Sequence[str]) -> list[float] | None:
    """An answer item's weight (its stratum's size over the items drawn from it), or None.

    None when the sample drew none of them (labelled some other way: a uniform draw), or when
    every weight is the same (a uniform draw too).
    """
    if design is None or not items or any(i not in design.rows for i in items):
        return None
    found = [
        design.rows[i]["stratum_size"] / max(design.rows[i]["stratum_sampled"], 1) for i in items
    ]
    return None if len(set(found)) == 1 else found


def _question_ndcg(
    order: list[str],
    judge: dict[str, int],
    human: dict[str, float],
    human_share: dict[str, dict[int, float]],
    strata: dict[str, list[str]],
) -> float:
    """One question's human NDCG@10, estimated from its judged pool and its labelled candidates.

    Inside the question each stratum's labelled candidates stand for the whole stratum
    (weight: its size over its labelled): the numerator is the judge's DCG plus the weighted
    (label − judge) of the labelled top candidates at their discounts, the ideal the
    judge's count of each grade in the pool plus the weighted difference of the labelled
    candidates' (the difference estimator, unbiased for each). Every candidate labelled: the
    exact NDCG@10.
    """
    rank = {c: i for i, c in enumerate(order)}
    found = dcg(judge[c] for c in order[:NDCG_K])
    counts = {g: float(sum(1 for c in judge if judge[c] == g)) for g in (1, 2, 3)}
    for cands in strata.values():
        mine = [c for c in cands if c in human]
        if not mine:
            continue
        scale = len(cands) / len(mine)
        for c in mine:
            if rank[c] < NDCG_K:
                found += discounted(scale * (human[c] - judge[c]), rank[c])
            for g in counts:
                counts[g] += scale * (human_share[c].get(g, 0.0) - float(judge[c] == g))
    ideal = ideal_dcg({g: max(v, 0.0) for g, v in counts.items()}, NDCG_K)
    return max(found, 0.0) / ideal if ideal > 0 else math.nan


def _engine_order(qid: str, grades: dict[str, int], rank: dict[tuple[str, str], Any]) -> list[str]:
    """A question's judged candidates in the engine's order (unranked last, then by id)."""
    return sorted(grades, key=lambda c: (rank.get((qid, c)) or math.inf, c))


def _judge_ndcg(
    by_question: dict[str, dict[str, int]], rank: dict[tuple[str, str], Any]
) -> dict[str, float]:
    """Each question's NDCG@10 in the engine's order with the judge's grades as gains."""
    out: dict[str, float] = {}
    for qid, grades in by_question.items():
        gains = {c: float(g) for c, g in grades.items()}
        value = ndcg_at_k(_engine_order(qid, grades, rank), gains, NDCG_K)
        if math.isfinite(value):
            out[qid] = value
    return out


def _ndcg(
    run: RunFolder,
    grades: pl.DataFrame,
    judge: dict[tuple[str, str], int],
    found: _GradeWeights,
    cut: int,
    seed: int,
) -> tuple[list[AgreementLine], str, Corrected | None]:
    """The engine's NDCG@10 under human, judge and calibrated grades, and its PPI figure.

    Unit: a question. Gains: the 0–3 grades (the calibrated gain of a judge grade is the human
    grade its items get on average, weighted back to the run). Ideal: the best order of the
    question's judged candidates. Per question counted by the design, its human NDCG@10 is
    estimated (:func:`_question_ndcg`); the judge's NDCG@10 of every question is the other
    side of the correction (:func:`ragaudit.stats.design_corrected_mean`, the questions as
    clusters, drawn with equal chance).
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

    def order(qid: str) -> list[str]:
        return _engine_order(qid, by_question[qid], rank)

    judged_values = _judge_ndcg(by_question, rank)
    labels: dict[tuple[str, str], list[int]] = defaultdict(list)
    for r in grades.iter_rows(named=True):
        key = (r["question_id"], r["candidate_id"])
        if key in found.weight:
            labels[key].append(int(r["label"]))
    used = sorted(found.strata) if found.strata else sorted({q for q, _ in found.weight})
    complete = sum(1 for q in used if all((q, c) in labels for c in by_question.get(q, {})))
    note = (
        f"{len(used)} of {len(by_question)} question(s) labelled by the design "
        f"({complete} with every judged candidate labelled); gains the 0–3 grades, the ideal "
        "order over each question's judged candidates"
    )
    pairs = [(h, judge[k]) for k, hs in labels.items() for h in hs]
    if not pairs:
        return [], note, None
    calibration = calibrate_grades(
        [p[1] for p in pairs],
        [p[0] for p in pairs],
        cut,
        weights=[found.weight[k] / len(hs) for k, hs in labels.items() for _ in hs],
    )
    per_question: dict[str, tuple[float, float, float]] = {}
    for qid in used:
        if qid not in judged_values:
            continue
        mine = {c: hs for (q, c), hs in labels.items() if q == qid}
        human = {c: float(np.mean(hs)) for c, hs in mine.items()}
        human_share = {c: {g: hs.count(g) / len(hs) for g in set(hs)} for c, hs in mine.items()}
        strata = found.strata.get(qid) or {"pool": list(by_question[qid])}
        value = _question_ndcg(order(qid), by_question[qid], human, human_share, strata)
        calibrated = ndcg_at_k(
            order(qid),
            {c: calibration.expected_grade.get(g, float(g)) for c, g in by_question[qid].items()},
            NDCG_K,
        )
        if math.isfinite(value):
            per_question[qid] = (value, judged_values[qid], calibrated)
    if len(per_question) < len([q for q in used if q in judged_values]):
        note += "; a question whose estimated ideal holds no gain left out"
    lines: list[AgreementLine] = []
    if per_question:
        n = len(per_question)
        for i, kind in enumerate(("human", "judge", "calibrated")):
            mean, low, high = share_ci([v[i] for v in per_question.values()], seed=seed)
            lines.append(AgreementLine(kind, "engine", NDCG, mean, low, high, n))
    if not judged_values or not per_question:
        return lines, note, None
    qids = sorted(per_question)
    figure = design_corrected_mean(
        NDCG,
        [per_question[q][0] for q in qids],
        [per_question[q][1] for q in qids],
        list(judged_values.values()),
        weights=[len(by_question) / len(qids)] * len(qids),
        clusters=qids,
        units_total=len(by_question),
        bounds=about(NDCG).range,
        # The labelled items behind the questions' values: a question's value is not a label.
        n_labels=sum(1 for q, _ in labels if q in per_question),
        seed=seed,
    )
    return lines, note, figure


@dataclass(frozen=True)
class PersonLabel:
    """One person's latest label of an item: who, what, when."""

    annotator: str
    label: float
    time: str
    """ISO 8601, UTC ("" when the store holds none)."""
    given_in: str = ""
    """Where it was given: the folder of the page (this run's, another's where the same pair
    appeared) or ``imported: <source>``."""


@dataclass(frozen=True)
class LabelledItem:
    """An item people labelled, with the judge's value of it and its texts."""

    kind: str
    """``grade`` (a candidate's relevance, 0–3) or a judged metric's name (yes/no)."""
    question_id: str
    candidate_id: str | None
    question: str | None
    candidate: str | None
    """The candidate's text (a grade item), None for an answer's."""
    engine_rank: int | None
    judge: float | None
    """The judge's grade, or its score of the answer (None: no ``ok`` verdict)."""
    people: tuple[PersonLabel, ...]
    """Each person's latest label, skips left out, by name."""

    @property
    def disagrees(self) -> bool:
        """Some person's latest label differs from the judge's.

        A grade differs when it is another grade; a metric's score in [0, 1] is the judge's
        "yes" at ½ and over, the cut the agreement figures take for yes/no labels.
        """
        if self.judge is None:
            return False
        judged = self.judge if self.kind == GRADE else float(self.judge >= 0.5)
        return any(p.label != judged for p in self.people)


def people_labels(run_dir: Path | str) -> list[LabelledItem]:
    """Every item some person labelled (not skipped), with the judge's value, in item order."""
    path = Path(run_dir)
    if not has_labels(path):
        return []
    frame, _ = _labels(path)
    if frame.is_empty():
        return []
    run = RunFolder(path.parent, path.name)
    ids = set(frame["question_id"].to_list())
    questions = (
        {r["question_id"]: r["question"] for r in run.rows("questions", ids)}
        if run.has("questions")
        else {}
    )
    pool = run.candidates(ids=ids) if run.has("candidates") else {}
    texts = {(q, c["context_id"]): c for q, cands in pool.items() for c in cands}
    judge: dict[tuple[str, str, str | None], float] = {}
    if run.has("verdicts"):
        for r in run.rows("verdicts", ids):
            if r["status"] == "ok" and r.get("grade") is not None:
                judge[(GRADE, r["question_id"], r["context_id"])] = float(r["grade"])
    if run.has("scores"):
        for r in run.rows("scores", ids):
            if r["status"] == "ok" and r["value"] is not None:
                judge[(r["metric"], r["question_id"], None)] = float(r["value"])
    out = []
    for part in frame.sort("item_id", "annotator").partition_by("item_id", maintain_order=True):
        first = part.row(0, named=True)
        kind, qid = first["kind"], first["question_id"]
        cid = first["candidate_id"] if kind == GRADE else None
        cand = texts.get((qid, cid)) if cid is not None else None
        out.append(
            LabelledItem(
                kind,
                qid,
                cid,
                questions.get(qid),
                cand["text"] if cand else None,
                cand["engine_rank"] if cand else None,
                judge.get((kind, qid, cid)),
                tuple(
                    # A store copied in from elsewhere may lack a time: said as unknown.
                    PersonLabel(
                        r["annotator"],
                        float(r["label"]),
                        r["time"].isoformat() if r["time"] is not None else "",
                        r["given_in"] or "",
                    )
                    for r in part.iter_rows(named=True)
                ),
            )
        )
    return out


def disagreements(run_dir: Path | str) -> list[LabelledItem]:
    """The labelled items where some person's latest label differs from the judge's."""
    return [item for item in people_labels(run_dir) if item.disagrees]


SUMMARY_COLUMNS = ("ppi_mean", "ppi_ci_low", "ppi_ci_high", "n_labels", "labels_to_halve")
"""The summary table's PPI columns (schema version 2), null for a metric without labels."""

FIGURES = (RELEVANT_SHARE, NDCG)
"""The judge's figures over the judged candidates that grade labels correct (not metrics): the
summary's rows of kind ``figure`` and the rows ``compare`` adds to the score metrics."""


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


def uncorrected_reason(people: JudgeVsPeople, found: Corrected) -> str:
    """The corrected figure's note (why it has no PPI interval, or how labels were weighted).

    For NDCG@10 without a labelled question: the NDCG note (questions labelled, gains, ideal).
    """
    if found.figure == NDCG and found.ppi_mean is None and found.n_labelled == 0:
        return people.ndcg_note
    return found.note


def figure_rows(people: JudgeVsPeople | None) -> list[dict[str, Any]]:
    """The summary rows of kind ``figure`` (schema version 3): each of :data:`FIGURES` corrected.

    The judge's mean and interval over its judged items beside the PPI columns; [] without
    grade labels.
    """
    if people is None:
        return []
    rows = []
    for figure in FIGURES:
        found = people.corrected_for(figure)
        if found is None:
            continue
        rows.append(
            {
                "metric": figure,
                "kind": "figure",
                "mean": found.judge_mean,
                "ci_low": found.judge_ci_low,
                "ci_high": found.judge_ci_high,
                "n_ok": found.n_judged,
                "flagged": False,
                **summary_columns(people, figure),
                "ppi_note": corrected_note(people, figure),
            }
        )
    return rows


def write_corrected_summary(run_dir: Path | str, people: JudgeVsPeople | None = None) -> bool:
    """Fill ``summary.parquet``'s PPI columns and figure rows from the run's labels (atomically).

    ``people`` is :func:`judge_vs_people` of the run when the caller has it already. A summary
    of schema version 1 or 2 is rewritten as version 3: its metric rows keep the judge's
    figures, gain the PPI columns, and the corrected figures of the judged candidates
    (:func:`figure_rows`) follow them. False, and nothing written, when the run has no summary
    or no labels.
    """
    from ragaudit.schemas import SUMMARY, to_table

    path = Path(run_dir)
    run = RunFolder(path.parent, path.name)
    if not run.has("summary") or not has_labels(path):
        return False
    people = people if people is not None else judge_vs_people(path)
    if people is None:
        return False
    stored = run.read("summary").to_pylist()
    metrics = [r for r in stored if r.get("kind") in (None, "metric")]
    rows = [
        {
            **{n: r.get(n) for n in SUMMARY.names},
            "kind": "metric",
            **summary_columns(people, r["metric"]),
            "ppi_note": corrected_note(people, r["metric"]),
        }
        for r in metrics
    ]
    rows += [{"run_id": run.run_id, **r} for r in figure_rows(people)]
    # The metrics by turn (version 4) are the judge's alone: kept as the report stage wrote them.
    rows += [{n: r.get(n) for n in SUMMARY.names} for r in stored if r.get("kind") == "breakdown"]
    run.write("summary", to_table(rows, SUMMARY))
    return True


def corrected_note(people: JudgeVsPeople | None, name: str) -> str | None:
    """The summary's ``ppi_note`` of a metric or figure: :func:`uncorrected_reason`, or None."""
    found = people.corrected_for(name) if people is not None else None
    return None if found is None or people is None else uncorrected_reason(people, found) or None


def judged_by_question(run_dir: Path | str) -> dict[str, dict[str, tuple[float, int]]]:
    """Per figure of :data:`FIGURES`, each question's judge total and the items it sums.

    The relevant share's is (candidates the judge graded relevant, candidates it graded) — a
    question's candidates are one unit, as they are not independent; NDCG@10's is (the judge's
    NDCG@10 with its grades as gains, 1). ``compare`` pairs two runs' questions on these. {}
    without judged candidates.
    """
    path = Path(run_dir)
    run = RunFolder(path.parent, path.name)
    if not run.has("verdicts"):
        return {}
    verdicts = pl.from_arrow(run.read("verdicts"))
    assert isinstance(verdicts, pl.DataFrame)
    ok = verdicts.filter((pl.col("status") == "ok") & pl.col("grade").is_not_null())
    cut = _relevant_grade(run)
    grades: dict[str, dict[str, int]] = defaultdict(dict)
    for r in ok.iter_rows(named=True):
        grades[r["question_id"]][r["context_id"]] = int(r["grade"])
    share = {
        qid: (float(sum(g >= cut for g in found.values())), len(found))
        for qid, found in grades.items()
    }
    out: dict[str, dict[str, tuple[float, int]]] = {RELEVANT_SHARE: share} if share else {}
    if not run.has("candidates") or not grades:
        return out
    candidates = pl.from_arrow(run.read("candidates"))
    assert isinstance(candidates, pl.DataFrame)
    rank = {
        (r["question_id"], r["context_id"]): r["engine_rank"]
        for r in candidates.iter_rows(named=True)
    }
    # The judge-only NDCG@10 of judge_vs_people, question by question.
    ndcg = {qid: (value, 1) for qid, value in _judge_ndcg(grades, rank).items()}
    if ndcg:
        out[NDCG] = ndcg
    return out


__all__ = [
    "FIGURES",
    "GRADE",
    "NDCG",
    "NDCG_K",
    "RELEVANT_SHARE",
    "SUMMARY_COLUMNS",
    "AgreementLine",
    "ConfusionRow",
    "JudgeVsPeople",
    "LabelledItem",
    "PersonLabel",
    "corrected_note",
    "disagreements",
    "figure_rows",
    "has_labels",
    "judge_vs_people",
    "judged_by_question",
    "people_labels",
    "summary_columns",
    "uncorrected_reason",
    "write_corrected_summary",
]
