"""Per-question metrics of each variant over the pooled grades, and the choice of a winner.

The winner is picked on the tuning questions; its gain over the baseline is measured again on
questions that played no part in the choice (one holdout, or every question once across
``folds``), so the gain shown is not the winner's curse. Each variant is also tested against
the baseline on the tuning questions (paired permutation test), adjusted across variants.
The tests, intervals, power and the beyond-noise rule are the comparison's own
(:mod:`ragaudit.stats`: ``paired_test``, ``adjust``, ``bootstrap_ci``, ``detectable``,
``smallest_p``, ``beyond_noise``).
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from ragaudit.conversation import TURN_BANDS, turn_band
from ragaudit.dataset import Question
from ragaudit.registry import TUNE_METRICS
from ragaudit.stats import (
    adjust,
    beyond_noise,
    bootstrap_ci,
    detectable,
    paired_test,
    smallest_p,
)
from ragaudit.tuning._metrics import Judged

Values = dict[str, float]
"""Question id → a metric's value (NaN where it is undefined: no relevant document pooled)."""


def question_metrics(
    top: Sequence[str],
    grades: Mapping[str, int],
    depth: int,
    relevant_grade: int,
    metrics: Sequence[str],
) -> tuple[dict[str, float], float]:
    """One question's metrics for one variant's top-k, and its judged@k.

    Unjudged documents are left out of the list (a *condensed* list), so a document nobody
    graded neither helps nor hurts; with a fully graded pool nothing is left out. NDCG takes
    the grade as the gain and its ideal from every graded document of the question (the
    pool's qrels), as trec_eval does; the others count a grade at or above
    ``relevant_grade`` as relevant.
    """
    shown = list(top[:depth])
    judged = [c for c in shown if c in grades]
    share = len(judged) / len(shown) if shown else math.nan
    question = Judged(judged, grades, depth, relevant_grade)
    return {m: TUNE_METRICS.get(m)(question) for m in metrics}, share


def split_questions(
    qids: Sequence[str], holdout: float, seed: int, folds: int | None = None
) -> list[tuple[list[str], list[str]]]:
    """(tuning, held-out) question ids: one split, or one per fold.

    The order is a hash of the seed and the id, so a question's side does not depend on the
    file's order nor on which other questions are there.
    """
    order = sorted(qids, key=lambda q: hashlib.sha256(f"{seed}\x1f{q}".encode()).digest())
    if folds:
        k = min(folds, len(order))
        parts = [order[i::k] for i in range(k)]
        return [([q for p in parts if p is not part for q in p], part) for part in parts]
    n_out = max(1, round(holdout * len(order))) if len(order) >= 2 else 0
    return [(order[n_out:], order[:n_out])]


@dataclass
class VariantStats:
    """One variant × metric's figures."""

    variant: str
    metric: str
    n_tuning: int = 0
    mean: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    diff: float | None = None
    p_value: float | None = None
    p_adjusted: float | None = None
    n_heldout: int = 0
    heldout_gain: float | None = None
    heldout_ci_low: float | None = None
    heldout_ci_high: float | None = None
    heldout_p: float | None = None


@dataclass
class Decision:
    """The outcome of a tune."""

    stats: list[VariantStats] = field(default_factory=list)
    winner: str = ""
    """Best mean of the first metric on the tuning questions."""
    recommended: str = ""
    """The winner when it beats the baseline beyond noise on held-out questions, else the
    baseline."""
    heldout_gain: float | None = None
    heldout_ci: tuple[float | None, float | None] = (None, None)
    heldout_p: float | None = None
    n_heldout: int = 0
    why: str = ""
    fold_winners: list[str] = field(default_factory=list)
    """With folds: each fold's winner, chosen on the other folds (the gain pools them)."""
    holdout_note: str | None = None
    """With one holdout: the smallest gain it can show (and, when the tuning questions' gain is
    below it, the advice to use folds)."""


def _both(base: Values, other: Values, qids: Sequence[str]) -> list[str]:
    """The questions of ``qids`` with a value under both."""
    return [
        q
        for q in qids
        if math.isfinite(base.get(q, math.nan)) and math.isfinite(other.get(q, math.nan))
    ]


def _paired(base: Values, other: Values, qids: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    both = _both(base, other, qids)
    return (
        np.array([base[q] for q in both], dtype=float),
        np.array([other[q] for q in both], dtype=float),
    )


def _best(values: Mapping[str, Values], qids: Sequence[str], baseline: str) -> str:
    """The variant with the highest mean over ``qids`` (the baseline wins a tie)."""
    best, best_mean = baseline, -math.inf
    for name in [baseline, *[v for v in values if v != baseline]]:
        xs = [values[name][q] for q in qids if math.isfinite(values[name].get(q, math.nan))]
        mean = float(np.mean(xs)) if xs else -math.inf
        if mean > best_mean + 1e-12:
            best, best_mean = name, mean
    return best


def recommend(
    values: Mapping[str, Mapping[str, Values]],
    baseline: str,
    metrics: Sequence[str],
    splits: Sequence[tuple[Sequence[str], Sequence[str]]],
    *,
    alpha: float = 0.05,
    adjustment: str = "bh",
    resamples: int = 9999,
    bootstrap_samples: int = 1000,
    seed: int = 0,
) -> Decision:
    """Test every variant against the baseline and pick (or refuse) a winner.

    Args:
        values: Variant → metric → per-question values (only variants that did not fail).
        baseline: The baseline's name.
        metrics: Metric names; the first picks the winner.
        splits: (tuning, held-out) questions: one holdout split, or one per fold.
        alpha: A held-out gain counts when its p-value is below this and its interval
            excludes 0.
        adjustment: ``bh`` or ``by``, across variants per metric.
        resamples: Resamples of the paired tests.
        bootstrap_samples: Resamples of each mean's interval.
        seed: Seed of the resampling.
    """
    primary = metrics[0]
    tuning_all, heldout_all = splits[0]
    if len(splits) > 1:
        # Folds: every question is held out once; the per-variant columns use all of them.
        tuning_all = [q for _, part in splits for q in part]
        heldout_all = tuning_all
    decision = Decision()
    names = list(values)
    for metric in metrics:
        rows: list[VariantStats] = []
        per = {n: values[n][metric] for n in names}
        for name in names:
            s = VariantStats(name, metric)
            xs = np.array(
                [per[name][q] for q in tuning_all if math.isfinite(per[name].get(q, math.nan))]
            )
            s.n_tuning = len(xs)
            if len(xs):
                s.mean = float(xs.mean())
                s.ci_low, s.ci_high = bootstrap_ci(xs, bootstrap_samples, seed)
            if name != baseline:
                a, b = _paired(per[baseline], per[name], tuning_all)
                t = paired_test(a, b, resamples, seed)
                s.diff, s.p_value = t.diff, t.p_value
                if len(splits) == 1:
                    a, b = _paired(per[baseline], per[name], heldout_all)
                    h = paired_test(a, b, resamples, seed)
                    s.n_heldout, s.heldout_gain, s.heldout_p = h.n, h.diff, h.p_value
                    s.heldout_ci_low, s.heldout_ci_high = h.ci_low, h.ci_high
            rows.append(s)
        adjusted = adjust([r.p_value for r in rows], adjustment)
        for r, p in zip(rows, adjusted, strict=True):
            r.p_adjusted = p
        decision.stats += rows
    primary_values = {n: values[n][primary] for n in names}
    if len(splits) == 1:
        tuning, heldout = splits[0]
        decision.winner = _best(primary_values, tuning, baseline)
        a, b = _paired(primary_values[baseline], primary_values[decision.winner], heldout)
    else:
        # Each fold's winner is chosen without it and measured on it; the gain pools them.
        chosen, pa, pb = [], [], []
        for tuning, heldout in splits:
            w = _best(primary_values, tuning, baseline)
            chosen.append(w)
            x, y = _paired(primary_values[baseline], primary_values[w], heldout)
            pa.append(x)
            pb.append(y)
        a, b = np.concatenate(pa), np.concatenate(pb)
        decision.winner = _best(primary_values, tuning_all, baseline)
        decision.fold_winners = chosen
    test = paired_test(a, b, resamples, seed)
    decision.n_heldout = test.n
    decision.heldout_gain, decision.heldout_p = test.diff, test.p_value
    decision.heldout_ci = (test.ci_low, test.ci_high)
    # Who was measured on the held-out questions: the winner, or each fold's own.
    measured = (
        f"the tuning questions' winner, {decision.winner},"
        if len(splits) == 1
        else f"each fold's winner ({fold_tally(decision.fold_winners)}), measured on its own fold,"
    )
    if len(splits) == 1 and decision.winner != baseline:
        a_t, b_t = _paired(primary_values[baseline], primary_values[decision.winner], splits[0][0])
        decision.holdout_note = holdout_note(b_t - a_t, test.n, alpha)
    if decision.winner == baseline:
        decision.recommended = baseline
        decision.why = (
            "keep the baseline: no variant beat it on the tuning questions"
            if len(splits) == 1
            else "keep the baseline: no variant beat it over all the questions (fold winners: "
            f"{fold_tally(decision.fold_winners)})"
        )
    elif (
        beyond_noise(test.p_value, test.ci_low, test.ci_high, alpha)
        and test.ci_low is not None
        and test.ci_low > 0
    ):
        decision.recommended = decision.winner
        figures = (
            f"gain {test.diff:+.3f}, 95% CI {test.ci_low:+.3f} to {test.ci_high:+.3f}, "
            f"p {test.p_value:.3g}"
        )
        decision.why = (
            f"{decision.winner} beats the baseline on {test.n} held-out questions ({figures})"
            if len(splits) == 1
            else f"{measured} beats the baseline over the {test.n} questions ({figures}); "
            f"{decision.winner} scores best over all of them"
        )
    else:
        gain = "n/a" if test.diff is None else f"{test.diff:+.3f}"
        shown_p = "n/a" if test.p_value is None else f"{test.p_value:.3g}"
        decision.recommended = baseline
        where = (
            f"on {test.n} held-out questions"
            if len(splits) == 1
            else f"over the {test.n} questions"
        )
        decision.why = (
            f"keep the baseline: {measured} is not better beyond noise {where} "
            f"(gain {gain}, p {shown_p}, α {alpha:g})"
        )
    if decision.holdout_note:
        decision.why += f"; {decision.holdout_note}"
    return decision


KINDS = ("standalone", "non-standalone")
"""The groups of the ``turn_kind`` breakdown."""


def standalone_group(q: Question) -> tuple[str, bool]:
    """``q``'s group of :data:`KINDS`, and whether the set labelled it.

    The set's ``turn_kind`` where given (``standalone`` against ``follow-up`` and
    ``clarification``); else a conversation's first turn stands alone and its later ones do
    not; a question of no conversation stands alone.
    """
    if q.turn_kind:
        return ("standalone" if q.turn_kind == "standalone" else "non-standalone"), True
    if q.turn is not None and q.turn > 1:
        return "non-standalone", False
    return "standalone", False


@dataclass(frozen=True)
class TurnGain:
    """A variant's gain over the baseline on one group of turns, paired by question."""

    variant: str
    query_form: str
    metric: str
    breakdown: str
    """``turn_band`` (1, 2, 3-5, 6+) or ``turn_kind`` (standalone, non-standalone)."""
    group: str
    n: int
    """Questions with a value under both (the pairs)."""
    labelled: int | None
    """``turn_kind``: of them, those whose group the set gave (the rest by turn position)."""
    baseline: float | None
    mean: float | None
    gain: float | None
    """Mean of the variant less the baseline."""
    ci_low: float | None
    ci_high: float | None
    p_value: float | None
    p_adjusted: float | None = None
    """Adjusted across the groups of its breakdown (``report.adjustment``)."""


def turn_gains(
    values: Mapping[str, Mapping[str, Values]],
    questions: Sequence[Question],
    baseline: str,
    forms: Mapping[str, str],
    metrics: Sequence[str],
    qids: Sequence[str],
    *,
    adjustment: str = "bh",
    resamples: int = 9999,
    seed: int = 0,
) -> list[TurnGain]:
    """Each query-form variant's gain per turn band and for standalone against other turns.

    Only when the questions hold turns of conversations, and only for the variants whose query
    form (``forms``: variant → form) differs from the baseline's: what rewriting a turn (or
    searching its history) buys where. Over the questions ``qids``, paired by question; each
    gain's interval and p-value are the comparison's own (:func:`ragaudit.stats.paired_test`),
    adjusted across the groups of one breakdown. A question of no conversation is in no turn
    band and stands alone.
    """
    if not any(q.turn is not None for q in questions):
        return []
    chosen = set(qids)
    bands: dict[str, list[str]] = {b: [] for b in TURN_BANDS}
    kinds: dict[str, list[str]] = {k: [] for k in KINDS}
    labelled: set[str] = set()
    for q in questions:
        if q.question_id not in chosen:
            continue
        band = turn_band(q.turn)
        if band is not None:
            bands[band].append(q.question_id)
        kind, given = standalone_group(q)
        kinds[kind].append(q.question_id)
        if given:
            labelled.add(q.question_id)
    out: list[TurnGain] = []
    for name, form in forms.items():
        if name == baseline or name not in values or form == forms.get(baseline):
            continue
        for metric in metrics:
            for breakdown, groups in (("turn_band", bands), ("turn_kind", kinds)):
                rows = []
                base, other = values[baseline][metric], values[name][metric]
                for group, members in groups.items():
                    paired = _both(base, other, members)
                    if not paired:
                        continue
                    a, b = _paired(base, other, paired)
                    t = paired_test(a, b, resamples, seed)
                    rows.append(
                        TurnGain(
                            name,
                            form,
                            metric,
                            breakdown,
                            group,
                            t.n,
                            sum(1 for q in paired if q in labelled)
                            if breakdown == "turn_kind"
                            else None,
                            t.mean_a,
                            t.mean_b,
                            t.diff,
                            t.ci_low,
                            t.ci_high,
                            t.p_value,
                        )
                    )
                adjusted = adjust([r.p_value for r in rows], adjustment)
                out += [
                    dataclasses.replace(r, p_adjusted=p)
                    for r, p in zip(rows, adjusted, strict=True)
                ]
    return out


def fold_tally(names: Sequence[str]) -> str:
    """``bm25 in 3 of 5 folds, hybrid in 2``."""
    counts: dict[str, int] = {}
    for n in names:
        counts[n] = counts.get(n, 0) + 1
    ranked = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    if len(ranked) == 1:
        return f"{ranked[0][0]} in all {len(names)} folds"
    first, *rest = ranked
    return ", ".join(
        [f"{first[0]} in {first[1]} of {len(names)} folds", *(f"{n} in {c}" for n, c in rest)]
    )


def holdout_note(tuning_diffs: np.ndarray, n_heldout: int, alpha: float) -> str | None:
    """What a holdout of ``n_heldout`` questions can show, judged by the winner's spread.

    The gain a paired test over n questions detects with 80 % power
    (:func:`ragaudit.stats.detectable`), s the spread of per-question differences taken from
    the tuning questions, which the held-out test does not see; and over n questions a
    permutation test cannot go below p = 2/2ⁿ at all (:func:`ragaudit.stats.smallest_p`). When
    the gain seen on the tuning questions is below what the holdout detects, folds (every
    question held out once) are the better measure.
    """
    if n_heldout == 0 or len(tuning_diffs) < 2:
        return None
    if smallest_p(n_heldout) >= alpha:
        return (
            f"{n_heldout} held-out questions can never show a gain at α {alpha:g} (a permutation "
            "test over them cannot go below that p): set tune.folds (e.g. 5) to hold every "
            "question out once"
        )
    spread = float(np.std(tuning_diffs, ddof=1))
    if spread == 0:
        return None
    smallest = detectable(spread, n_heldout, alpha)
    seen = float(np.mean(tuning_diffs))
    text = (
        f"{n_heldout} held-out questions detect a gain of about {smallest:+.3f} or more "
        f"(80% power at α {alpha:g}, from the spread of the tuning questions' differences)"
    )
    if seen < smallest:
        text += (
            f"; the tuning questions' gain, {seen:+.3f}, is below it: set tune.folds (e.g. 5) "
            "to measure on every question"
        )
    return text


__all__ = [
    "KINDS",
    "Decision",
    "TurnGain",
    "Values",
    "VariantStats",
    "fold_tally",
    "holdout_note",
    "question_metrics",
    "recommend",
    "split_questions",
    "standalone_group",
    "turn_gains",
]
