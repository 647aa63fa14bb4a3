"""``compare``: what moved beyond noise between two runs, and whether they are like for like.

Per metric, the questions scored ``ok`` in both runs are paired and tested
(:mod:`ragaudit.stats`: :func:`~ragaudit.stats.paired_test`, or
:func:`~ragaudit.stats.two_level_test` where a metric's rows kept several judge samples, or
:func:`~ragaudit.stats.ppi_paired_test` where both runs have people's labels); the p-values are
adjusted across metrics and each metric's verdict is :func:`~ragaudit.stats.decide`'s. This
module pairs the questions, says whether the runs are like for like, and lists the questions
that moved most.

Where either run has people's grade labels, the judge's figures over the judged candidates
(:data:`ragaudit.ppi.FIGURES`: the relevant share and NDCG@10, the figures a biased judge
moves most) are compared beside the metrics, in the same adjusted family, when both runs'
labels correct them: paired by question (a question's candidates are one unit: its relevant
share enters as its linearised ratio, :func:`~ragaudit.stats.ratio_values`; its NDCG@10 as is).
Otherwise a note gives the reason the labels went unused and no row is added.

A question set with conversations is also compared by turn (the report's breakdowns: turn
position, turn kind, answerability): each breakdown's cells, every shared metric in each, are one
family of paired tests adjusted together, shown beside the metrics; the gate
(:attr:`Comparison.regressed`, :func:`regressions`) reads the overall metrics alone.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ragaudit.reporting._model import Report, ScoreCell, _jsonable, labelled
from ragaudit.runfolder import stored_setting
from ragaudit.stats import (
    Corrected,
    MetricChange,
    PairedTest,
    decide,
    paired_test,
    power,
    ppi_paired_test,
    ratio_values,
    smallest_p,
    two_level_test,
)

# Run configuration that changes scores without being a judge, embedder or prompt: compared
# besides the score section (whose metric list may differ; only shared metrics are compared).
# A jury is the judge of its runs: another jury is another judge. The number of judge repeats
# is not: the test counts the samples each run has.
_MODEL_PARAMETERS = ("temperature", "max_output_tokens", "judge_context_window", "jury")


@dataclass(frozen=True)
class QuestionMove:
    """A question whose value moved much, with both runs' values and reasons side by side."""

    metric: str
    question_id: str
    question: str
    value_a: float
    value_b: float
    diff: float
    reason_a: str | None
    reason_b: str | None


@dataclass(frozen=True)
class Difference:
    """A configuration difference that makes two runs not like for like."""

    what: str
    a: Any
    b: Any


@dataclass(frozen=True)
class CellChange:
    """One metric within one cell of a breakdown between the two runs."""

    cell: str
    change: MetricChange
    """The paired test over the cell's questions, its p adjusted within its breakdown."""
    can_move: bool
    """Whether a permutation test over the cell's paired questions can reach α at all."""


@dataclass(frozen=True)
class BreakdownChanges:
    """A breakdown's cells between the runs: one family of paired tests, adjusted together."""

    name: str
    title: str
    cells: tuple[str, ...]
    changes: tuple[CellChange, ...]
    """Per shared metric, each cell in order."""
    note: str | None = None

    @property
    def moved(self) -> tuple[CellChange, ...]:
        """The cells that moved beyond noise (improved or regressed)."""
        return tuple(c for c in self.changes if c.change.moved)


@dataclass(frozen=True)
class Comparison:
    """The comparison of run B against run A."""

    run_a: str
    run_b: str
    dir_a: Path
    dir_b: Path
    judge_a: str | None
    judge_b: str | None
    alpha: float
    adjustment: str
    comparable: bool
    differences: tuple[Difference, ...]
    """What differs between the runs beyond the system under test (empty: like for like)."""
    notes: tuple[str, ...]
    """Things worth knowing that do not break comparability (metrics in one run only)."""
    metrics: tuple[MetricChange, ...]
    moved_questions: tuple[QuestionMove, ...]
    warnings: tuple[str, ...] = field(default_factory=tuple)
    incomplete: tuple[str, ...] = field(default_factory=tuple)
    """One sentence per run that did not complete (``ragaudit.runfolder.run_state``)."""
    missing_in_b: tuple[str, ...] = field(default_factory=tuple)
    """Metrics run A scored that run B did not: a gate cannot pass on what it never saw."""
    corrected: tuple[str, ...] = field(default_factory=tuple)
    """The metrics and figures whose means and difference people's labels of both runs
    corrected (PPI); every other row is the judge's."""
    labels_unused: tuple[str, ...] = field(default_factory=tuple)
    """The metrics and figures people labelled in a run whose labels were not used (labels in
    one run only, or too few to correct it): the notes say why."""
    breakdowns: tuple[BreakdownChanges, ...] = field(default_factory=tuple)
    """The metrics by turn position, turn kind and answerability (empty: no conversations).
    Shown, never gated: :attr:`regressed` and the gate read the overall metrics alone."""

    @property
    def gate_failures(self) -> tuple[str, ...]:
        """Why a CI gate must fail besides a regression: an incomplete run, a metric lost."""
        lost = [
            f"metric {m} was scored in run {self.run_a} but not in run {self.run_b}"
            for m in self.missing_in_b
        ]
        return (*self.incomplete, *lost)

    @property
    def regressed(self) -> tuple[str, ...]:
        """Metrics that regressed beyond noise."""
        return tuple(m.metric for m in self.metrics if m.verdict == "regressed")

    @property
    def improved(self) -> tuple[str, ...]:
        """Metrics that improved beyond noise."""
        return tuple(m.metric for m in self.metrics if m.verdict == "improved")

    @property
    def verdict(self) -> str:
        """One sentence: comparable or not, and what moved."""
        moved = (
            ", ".join(
                [f"{m} regressed" for m in self.regressed]
                + [f"{m} improved" for m in self.improved]
            )
            or "no metric moved beyond noise"
        )
        if self.gate_failures:
            moved = f"{moved}; NOT A VERDICT: {'; '.join(self.gate_failures)}"
        if not self.comparable:
            named = "; ".join(d.what for d in self.differences)
            return f"NOT like for like ({named}): the numbers are shown but do not compare; {moved}"
        return f"like for like; {moved}"

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form, with the verdict."""
        out = _jsonable(dataclasses.asdict(self))
        out.update(
            verdict=self.verdict, regressed=list(self.regressed), improved=list(self.improved)
        )
        return out


def _parameters(report: Report, manifest_models: dict[str, Any]) -> dict[str, Any]:
    params = {f"score.{k}": v for k, v in report.score_config.items() if k != "metrics"}
    params |= {f"models.{k}": manifest_models.get(k) for k in _MODEL_PARAMETERS}
    # A run from before juries has no field: no jury, as an empty one.
    params["models.jury"] = list(manifest_models.get("jury") or [])
    return params


def _unset(value: Any) -> Any:
    return None if value in ({}, [], ()) else value


def comparability(
    a: Report, b: Report, config_a: dict[str, Any], config_b: dict[str, Any]
) -> list[Difference]:
    """What differs between the runs besides the system under test."""
    out: list[Difference] = []
    if a.judge != b.judge:
        out.append(Difference("judge", a.judge, b.judge))
    if a.embedder != b.embedder:
        out.append(Difference("embedder", a.embedder, b.embedder))
    if a.question_set_hash != b.question_set_hash:
        out.append(
            Difference(
                "question set",
                f"{a.questions_file} ({len(a.questions)} questions, {a.question_set_hash})",
                f"{b.questions_file} ({len(b.questions)} questions, {b.question_set_hash})",
            )
        )
    stages_a = {s.stage: s.prompt_versions for s in a.calls}
    stages_b = {s.stage: s.prompt_versions for s in b.calls}
    for stage in sorted(set(stages_a) & set(stages_b)):
        if _other_versions(stages_a[stage], stages_b[stage]):
            out.append(
                Difference(
                    f"prompt versions of {stage}",
                    list(stages_a[stage]),
                    list(stages_b[stage]),
                )
            )
    pa = _parameters(a, config_a.get("models", {}))
    pb = _parameters(b, config_b.get("models", {}))
    for key in sorted(set(pa) | set(pb)):
        # A field a run's ragaudit did not have yet reads as unset, like an empty one.
        if _unset(pa.get(key)) != _unset(pb.get(key)):
            out.append(Difference(f"metric parameter {key}", pa.get(key), pb.get(key)))
    return out


def _other_versions(a: Sequence[str], b: Sequence[str]) -> bool:
    """Whether a prompt both runs asked (``name@version``) was asked at other versions.

    A prompt only one run asked is no difference: a run that built on its previous run's
    judged heads asks no ordering prompt at all when nothing changed, and judged nothing else.
    """

    def by_name(keys: Sequence[str]) -> dict[str, set[str]]:
        out: dict[str, set[str]] = {}
        for key in keys:
            name, _, version = key.partition("@")
            out.setdefault(name, set()).add(version)
        return out

    va, vb = by_name(a), by_name(b)
    return any(va[name] != vb[name] for name in va.keys() & vb.keys())


def _scored(cell: ScoreCell) -> np.ndarray:
    """A row's judge samples that were scored; its value alone when it has one sample."""
    found = [v for v in cell.samples if v is not None and np.isfinite(v)]
    return np.array(found if found else [cell.value], dtype=float)


def _paired(
    a: Report, b: Report, metric: str
) -> tuple[list[str], np.ndarray, np.ndarray, list[np.ndarray] | None, list[np.ndarray] | None]:
    """Questions scored ``ok`` in both runs, their values, and their judge samples.

    The samples are None unless a row of either run has several.
    """
    by_b = {q.question_id: q for q in b.questions}
    ids, va, vb = [], [], []
    sa: list[np.ndarray] = []
    sb: list[np.ndarray] = []
    for q in a.questions:
        other = by_b.get(q.question_id)
        ca = q.scores.get(metric)
        cb = other.scores.get(metric) if other else None
        if ca and cb and ca.status == "ok" and cb.status == "ok":
            ids.append(q.question_id)
            va.append(ca.value)
            vb.append(cb.value)
            sa.append(_scored(ca))
            sb.append(_scored(cb))
    sampled = any(len(x) > 1 for x in sa + sb)
    return (
        ids,
        np.array(va, dtype=float),
        np.array(vb, dtype=float),
        sa if sampled else None,
        sb if sampled else None,
    )


def _usable(found: Corrected | None) -> bool:
    return found is not None and found.ppi_mean is not None and len(found.residuals) >= 2


def _labels_for(
    name: str, a: Report, b: Report
) -> tuple[Corrected | None, Corrected | None, str | None]:
    """Both runs' corrected ``name`` when both can correct it, else why labels went unused.

    (None, None, None) when neither run has labels of it: nothing to say.
    """
    from ragaudit.ppi import uncorrected_reason

    found = [r.people.corrected_for(name) if r.people is not None else None for r in (a, b)]
    ca, cb = found
    if ca is None and cb is None:
        return None, None, None
    if _usable(ca) and _usable(cb):
        return ca, cb, None
    if (ca is None) != (cb is None):
        only = a.run_id if ca is not None else b.run_id
        return None, None, f"people's labels unused: only one run has people's labels ({only})"
    reasons = [
        f"run {r.run_id}'s {uncorrected_reason(r.people, c) or 'do not correct it'}"
        for r, c in ((a, ca), (b, cb))
        if c is not None and r.people is not None and not _usable(c)
    ]
    return None, None, "people's labels unused: " + "; ".join(reasons)


def _figure_tests(
    a: Report, b: Report, resamples: int, seed: int
) -> list[tuple[str, PairedTest | None, str, bool, np.ndarray]]:
    """The judged candidates' figures between the runs when either has grade labels.

    Per figure: its test (None when labels do not correct it in both runs: the judge alone
    is not a row), a note saying how it was paired and whether labels corrected it, whether
    they did, and the per-question differences (for the power check).
    """
    from ragaudit.ppi import FIGURES, RELEVANT_SHARE, judged_by_question

    graded = [r.people is not None and r.people.corrected_for(RELEVANT_SHARE) for r in (a, b)]
    if not any(graded):
        return []
    judged = [judged_by_question(r.run_dir) for r in (a, b)]
    out: list[tuple[str, PairedTest | None, str, bool, np.ndarray]] = []
    for figure in FIGURES:
        qa, qb = (j.get(figure, {}) for j in judged)
        if not qa or not qb:
            continue
        ids = [q for q in qa if q in qb]
        va = ratio_values([qa[q][0] for q in ids], [qa[q][1] for q in ids])
        vb = ratio_values([qb[q][0] for q in ids], [qb[q][1] for q in ids])
        unit = (
            "a question's judged candidates as one unit, its relevant share entering as its "
            "linearised ratio"
            if figure == RELEVANT_SHARE
            else f"a question's {figure} under the judge's grades"
        )
        paired = (
            f"paired by question over the {len(ids)} question(s) both runs judged "
            f"({len(qa)} in {a.run_id}, {len(qb)} in {b.run_id}; {unit})"
        )
        ca, cb, why = _labels_for(figure, a, b)
        if ca is not None and cb is not None:
            test = ppi_paired_test(
                va,
                vb,
                np.array(ca.residuals),
                np.array(cb.residuals),
                resamples,
                seed,
                ca.clusters,
                cb.clusters,
            )
            note = (
                f"{figure}: corrected by people's labels in both runs ({labelled(ca)} and "
                f"{labelled(cb)}; PPI with λ = 1, so a mean may differ a little from the run "
                f"page's power-tuned one); {paired}"
            )
        else:
            # Judged alone, the figure is the judge's view on both sides: shown in the notes,
            # never a row of the adjusted family, so labelling one run cannot change the gate.
            why = why or "no people's labels of it in either run"
            out.append(
                (
                    figure,
                    None,
                    f"{figure}: {why}: not compared (labels in both runs correct it); {paired}",
                    False,
                    vb - va,
                )
            )
            continue
        out.append((figure, test, note, True, vb - va))
    return out


def _breakdown_tests(
    a: Report,
    b: Report,
    metrics: Sequence[str],
    directions: dict[str, bool],
    alpha: float,
    adjustment: str,
    resamples: int,
    seed: int,
) -> tuple[BreakdownChanges, ...]:
    """Each breakdown's cells between the runs, one adjusted family per breakdown.

    A question's cell is run B's (run A's where B has no breakdowns: a like-for-like pair has
    the same set). Within a cell the questions scored ``ok`` in both runs are paired and tested
    as the metric is overall (:func:`two_level_test` with judge samples, else
    :func:`paired_test`): people's labels correct the overall means only, so a cell compares the
    judge's values. Every (metric, cell) test of one breakdown is adjusted together
    (``adjustment``) and :func:`decide` (:func:`beyond_noise`) says which moved.
    """
    split = b.breakdowns or a.breakdowns
    if not split:
        return ()
    paired = {m: _paired(a, b, m) for m in metrics}
    out = []
    for breakdown in split:
        tests: dict[str, PairedTest] = {}
        where: dict[str, tuple[str, str]] = {}
        for metric in metrics:
            ids, va, vb, sa, sb = paired[metric]
            for cell in breakdown.cells:
                mask = np.array([breakdown.members.get(q) == cell for q in ids], dtype=bool)
                picked = np.flatnonzero(mask)
                if sa is not None and sb is not None and len(picked):
                    test = two_level_test(
                        [sa[i] for i in picked], [sb[i] for i in picked], resamples, seed
                    )
                else:
                    test = paired_test(va[mask], vb[mask], resamples, seed)
                key = f"{metric}\x1f{cell}"
                tests[key] = test
                where[key] = (metric, cell)
        family = decide(
            tests, {k: directions.get(m, True) for k, (m, _) in where.items()}, alpha, adjustment
        )
        changes = tuple(
            CellChange(
                cell=where[c.metric][1],
                change=dataclasses.replace(c, metric=where[c.metric][0]),
                can_move=smallest_p(c.n_paired) < alpha,
            )
            for c in family
        )
        out.append(
            BreakdownChanges(
                breakdown.name, breakdown.title, breakdown.cells, changes, breakdown.note
            )
        )
    return tuple(out)


def compare_reports(
    a: Report,
    b: Report,
    *,
    alpha: float | None = None,
    adjustment: str | None = None,
    resamples: int | None = None,
    top: int | None = None,
    seed: int = 0,
) -> Comparison:
    """Compare run B against run A (options default to run B's report config)."""
    from ragaudit.reporting._build import run_folder

    cfg = b.report_config
    alpha = cfg.get("alpha", 0.05) if alpha is None else alpha
    adjustment = cfg.get("adjustment", "bh") if adjustment is None else adjustment
    resamples = cfg.get("compare_resamples", 9999) if resamples is None else resamples
    top = cfg.get("moved_questions", 10) if top is None else top
    config_a = stored_setting(run_folder(a.run_dir), default={})
    config_b = stored_setting(run_folder(b.run_dir), default={})

    shared = [m for m in b.metrics if m in a.metrics]
    notes = [
        f"metric {m} is only in run {run}"
        for run, only in ((a.run_id, a.metrics), (b.run_id, b.metrics))
        for m in only
        if m not in shared
    ]
    tests: dict[str, PairedTest] = {}
    moves: list[QuestionMove] = []
    corrected: list[str] = []
    unused: list[str] = []
    text_b = {q.question_id: q for q in b.questions}
    text_a = {q.question_id: q for q in a.questions}
    for metric in shared:
        ids, va, vb, sa, sb = _paired(a, b, metric)
        ca, cb, why = _labels_for(metric, a, b)
        if ca is not None and cb is not None:
            tests[metric] = ppi_paired_test(
                va, vb, np.array(ca.residuals), np.array(cb.residuals), resamples, seed
            )
            corrected.append(metric)
            notes.append(
                f"{metric}: both runs have people's labels ({ca.n_labelled} and "
                f"{cb.n_labelled}): means and difference corrected by them (PPI; bootstrap "
                "interval and a normal test on its standard error instead of the permutation test)"
            )
        elif sa is not None and sb is not None:
            # The value of a row aggregates its samples (a median or a majority need not be
            # their mean): the two-level test resamples the samples themselves, its means.
            tests[metric] = two_level_test(sa, sb, resamples, seed)
        else:
            tests[metric] = paired_test(va, vb, resamples, seed)
        if why is not None:
            unused.append(metric)
            notes.append(f"{metric}: {why}: the judge's means compared")
        if len(ids):
            too_few = power(vb - va, alpha).text(alpha)
            if too_few:
                notes.append(f"{metric}: {too_few}")
        order = np.argsort(-np.abs(vb - va), kind="stable")[:top]
        for i in order:
            if vb[i] == va[i]:
                continue
            qid = ids[i]
            moves.append(
                QuestionMove(
                    metric=metric,
                    question_id=qid,
                    question=text_b[qid].question,
                    value_a=float(va[i]),
                    value_b=float(vb[i]),
                    diff=float(vb[i] - va[i]),
                    reason_a=text_a[qid].scores[metric].reason,
                    reason_b=text_b[qid].scores[metric].reason,
                )
            )
    for figure, test, note, used, diffs in _figure_tests(a, b, resamples, seed):
        # The figures' names are not metric names (a metric cannot be called "relevant share").
        notes.append(note)
        (corrected if used else unused).append(figure)
        if test is None:
            continue
        tests[figure] = test
        too_few = power(diffs, alpha).text(alpha) if len(diffs) else None
        if too_few:
            notes.append(f"{figure}: {too_few}")
    directions = {s.metric: s.higher_is_better for s in b.summary}
    directions |= {s.metric: s.higher_is_better for s in a.summary if s.metric not in directions}
    changes = decide(tests, directions, alpha, adjustment)
    by_turn = _breakdown_tests(a, b, shared, directions, alpha, adjustment, resamples, seed)
    if by_turn:
        notes.append(
            "by turn: each breakdown's cells (every metric in each) are one family of paired "
            f"tests, {adjustment.upper()}-adjusted together; the judge's values (no people's "
            "labels); shown, not gated: --fail-on-regression reads the overall metrics alone"
        )
    differences = comparability(a, b, config_a, config_b)
    return Comparison(
        run_a=a.run_id,
        run_b=b.run_id,
        dir_a=a.run_dir,
        dir_b=b.run_dir,
        judge_a=a.judge,
        judge_b=b.judge,
        alpha=alpha,
        adjustment=adjustment,
        comparable=not differences,
        differences=tuple(differences),
        notes=tuple(notes),
        metrics=tuple(changes),
        moved_questions=tuple(moves),
        warnings=tuple(dict.fromkeys(a.warnings + b.warnings)),
        incomplete=tuple(r.incomplete for r in (a, b) if r.incomplete),
        missing_in_b=tuple(m for m in a.metrics if m not in shared),
        corrected=tuple(corrected),
        labels_unused=tuple(unused),
        breakdowns=by_turn,
    )


def compare_runs(run_a: Path | str, run_b: Path | str, **options: Any) -> Comparison:
    """Build both runs' reports and compare B against A."""
    from ragaudit.reporting._build import build_report

    return compare_reports(build_report(run_a), build_report(run_b), **options)


def regressions(cmp: Comparison, battles: Any = None) -> list[str]:
    """What regressed beyond noise: the metrics, and ``battles`` when B lost them.

    Runs that are not like for like never regress: their numbers do not compare.
    """
    if not cmp.comparable:
        return []
    lost = battles is not None and battles.verdict == "B worse"
    return list(cmp.regressed) + (["battles"] if lost else [])


__all__ = [
    "BreakdownChanges",
    "CellChange",
    "Comparison",
    "Difference",
    "QuestionMove",
    "comparability",
    "compare_reports",
    "compare_runs",
    "regressions",
]
