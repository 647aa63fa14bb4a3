"""``compare``: what moved beyond noise between two runs, and whether they are like for like.

Per metric, the questions scored ``ok`` in both runs are paired; the mean difference (B − A)
gets a paired bootstrap interval (``scipy.stats.bootstrap``, ``paired=True``) and a paired
permutation test (``scipy.stats.permutation_test``, ``permutation_type="samples"``: each
question's two values swap places). Where a metric's rows kept several judge samples (repeats or
a jury) in either run, the test is :func:`two_level_test` on each question's samples instead,
and the result says so (``noise``). The p-values are adjusted across metrics
(``scipy.stats.false_discovery_control``). A metric *moved* only where the adjusted p-value is
below α and the interval excludes 0; whether that is a regression depends on the metric's
direction.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ragaudit.reporting._model import Report, ScoreCell, _jsonable
from ragaudit.reporting._stats import CONFIDENCE

# Run configuration that changes scores without being a judge, embedder or prompt: compared
# besides the score section (whose metric list may differ; only shared metrics are compared).
# A jury is the judge of its runs: another jury is another judge. The number of judge repeats
# is not: the test counts the samples each run has.
_MODEL_PARAMETERS = ("temperature", "max_output_tokens", "judge_context_window", "jury")


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
        ci = stats.bootstrap(
            (a, b),
            _mean_diff,
            paired=True,
            vectorized=True,
            n_resamples=resamples,
            confidence_level=CONFIDENCE,
            method="percentile",
            rng=np.random.default_rng(seed),
        ).confidence_interval
        low, high = float(ci.low), float(ci.high)
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


def power(diffs: np.ndarray, alpha: float = 0.05, target: float = 0.8) -> Power:
    """The power check of a paired comparison over the per-question ``diffs``.

    A paired permutation test over n questions has 2^n sign patterns, so its smallest
    two-sided p-value is 2 / 2^n: with 5 questions 0.0625, never below 0.05. The questions a
    difference d with spread s would need: ((z(1 − α/2) + z(power)) · s / d)².
    """
    from scipy import stats  # scipy only when comparing: `runs` needs none of it

    d = np.asarray(diffs, dtype=float)
    n = len(d)
    smallest = min(1.0, 2.0 / 2.0**n) if n else 1.0
    needed = None
    if n >= 2 and np.std(d, ddof=1) > 0 and d.mean() != 0:
        z = stats.norm.ppf(1 - alpha / 2) + stats.norm.ppf(target)
        needed = int(np.ceil((z * np.std(d, ddof=1) / abs(d.mean())) ** 2))
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
        moved = (
            p_adj is not None
            and p_adj < alpha
            and t.ci_low is not None
            and t.ci_high is not None
            and (t.ci_low > 0 or t.ci_high < 0)
        )
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
                moved=bool(moved),
                verdict=verdict,
                noise=t.noise,
                judge_share=t.judge_share,
            )
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
    config_a = run_folder(a.run_dir).read_manifest().get("config", {})
    config_b = run_folder(b.run_dir).read_manifest().get("config", {})

    shared = [m for m in b.metrics if m in a.metrics]
    notes = [
        f"metric {m} is only in run {run}"
        for run, only in ((a.run_id, a.metrics), (b.run_id, b.metrics))
        for m in only
        if m not in shared
    ]
    tests: dict[str, PairedTest] = {}
    moves: list[QuestionMove] = []
    text_b = {q.question_id: q for q in b.questions}
    text_a = {q.question_id: q for q in a.questions}
    for metric in shared:
        ids, va, vb, sa, sb = _paired(a, b, metric)
        if sa is not None and sb is not None:
            # The value of a row aggregates its samples (a median or a majority need not be
            # their mean): the two-level test resamples the samples themselves, its means.
            tests[metric] = two_level_test(sa, sb, resamples, seed)
        else:
            tests[metric] = paired_test(va, vb, resamples, seed)
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
    directions = {s.metric: s.higher_is_better for s in b.summary}
    directions |= {s.metric: s.higher_is_better for s in a.summary if s.metric not in directions}
    changes = decide(tests, directions, alpha, adjustment)
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
    )


def compare_runs(run_a: Path | str, run_b: Path | str, **options: Any) -> Comparison:
    """Build both runs' reports and compare B against A."""
    from ragaudit.reporting._build import build_report

    return compare_reports(build_report(run_a), build_report(run_b), **options)


__all__ = [
    "Comparison",
    "Power",
    "Difference",
    "MetricChange",
    "PairedTest",
    "QuestionMove",
    "adjust",
    "comparability",
    "compare_reports",
    "compare_runs",
    "decide",
    "paired_test",
    "power",
    "two_level_test",
]
