"""The judge against people: agreement with their labels, and figures corrected for its bias.

A run's figures rest on its judge: every judged metric's mean, the share of candidates judged
relevant, the engine's NDCG@k with the judge's grades as gains. People's labels of a sample of
the run's items (its labels store, :mod:`ragaudit.labels`) measure how far the judge agrees
with them (the agreement figures of :mod:`ragaudit.stats`) and correct those figures by
prediction-powered inference (:func:`ragaudit.stats.corrected_mean`): the judge's mean over
every judged item plus the mean of people's label minus the judge's on the labelled ones,
whose 95 % interval stays valid however biased the judge is. This module reads the run's
labels and judgments and pairs them item by item; the arithmetic is the statistics package's.

Units: a judged metric's item is a question's answer; the relevant share's is a judged
candidate; NDCG@k's is a question whose every judged candidate a person graded (the only ones
whose human NDCG is known). Several people on one item count as the mean of their labels. The
labelled items are taken as a random sample of the judged ones, as the labelling sample draws
them; candidates of one question are not independent, so the relevant share's interval is
somewhat narrower than a question-level one would be.

With no labels nothing here runs, and a run's outputs are those it had before.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from ragaudit import labels as label_store
from ragaudit.ranking import ndcg_at_k
from ragaudit.runfolder import RunFolder
from ragaudit.stats import (
    Corrected,
    calibrate_grades,
    corrected_mean,
    engine_ndcg,
    grade_agreement,
    grade_confusion,
    rater_agreement,
    score_agreement,
)

NDCG_K = 10
GRADE = label_store.GRADE
RELEVANT_SHARE = "relevant share"
NDCG = f"NDCG@{NDCG_K}"


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
    return label_store.has_labels(run_dir)


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
    graded = [
        (qid, cid, rank.get((qid, cid)), h, by_question[qid][cid])
        for qid in covered
        for cid in by_question[qid]
        for h in human[(qid, cid)]
    ]
    note = f"{len(covered)} of {len(by_question)} question(s) have every judged candidate labelled"
    pairs = [(human[k][0], g) for k, g in judge.items() if k in human]
    if graded and pairs:
        calibration = calibrate_grades([p[1] for p in pairs], [p[0] for p in pairs], cut)
        found, n = engine_ndcg(graded, calibration, NDCG_K)
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


@dataclass(frozen=True)
class PersonLabel:
    """One person's latest label of an item: who, what, when."""

    annotator: str
    label: float
    time: str
    """ISO 8601, UTC ("" when the store holds none)."""


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

    For NDCG@10 without a labelled question: how many questions have every candidate labelled.
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
    metrics = [r for r in run.read("summary").to_pylist() if r.get("kind") in (None, "metric")]
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
    ndcg: dict[str, tuple[float, int]] = {}
    for qid, found in grades.items():
        # The engine's order of the judged candidates, gains the judge's grades: as the
        # judge-only NDCG@10 of judge_vs_people.
        order = sorted(found, key=lambda c: rank.get((qid, c)) or math.inf)  # noqa: B023
        value = ndcg_at_k(order, {c: float(g) for c, g in found.items() if g > 0}, NDCG_K)
        if math.isfinite(value):
            ndcg[qid] = (value, 1)
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
