"""Per-question metrics of each variant over the pooled grades, and the choice of a winner.

The winner is picked on the tuning questions; its gain over the baseline is measured again on
questions that played no part in the choice (one holdout, or every question once across
``folds``), so the gain shown is not the winner's curse. Each variant is also tested against
the baseline on the tuning questions (paired permutation test), adjusted across variants.
The tests, intervals and the beyond-noise rule are the comparison's own (:mod:`ragaudit.stats`:
``paired_test``, ``adjust``, ``bootstrap_ci``, ``beyond_noise``).
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from ragaudit.registry import TUNE_METRICS
from ragaudit.stats import adjust, beyond_noise, bootstrap_ci, paired_test
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


def _paired(base: Values, other: Values, qids: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    both = [
        q
        for q in qids
        if math.isfinite(base.get(q, math.nan)) and math.isfinite(other.get(q, math.nan))
    ]
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
    test = paired_test(a, b, resamples, seed)
    decision.n_heldout = test.n
    decision.heldout_gain, decision.heldout_p = test.diff, test.p_value
    decision.heldout_ci = (test.ci_low, test.ci_high)
    if decision.winner == baseline:
        decision.recommended = baseline
        decision.why = "keep the baseline: no variant beat it on the tuning questions"
    elif (
        beyond_noise(test.p_value, test.ci_low, test.ci_high, alpha)
        and test.ci_low is not None
        and test.ci_low > 0
    ):
        decision.recommended = decision.winner
        decision.why = (
            f"{decision.winner} beats the baseline on {test.n} held-out questions "
            f"(gain {test.diff:+.3f}, 95% CI {test.ci_low:+.3f} to {test.ci_high:+.3f}, "
            f"p {test.p_value:.3g})"
        )
    else:
        gain = "n/a" if test.diff is None else f"{test.diff:+.3f}"
        shown_p = "n/a" if test.p_value is None else f"{test.p_value:.3g}"
        decision.recommended = baseline
        decision.why = (
            f"keep the baseline: the tuning questions' winner, {decision.winner}, is not better "
            f"beyond noise on {test.n} held-out questions (gain {gain}, p {shown_p}, "
            f"α {alpha:g})"
        )
    return decision


__all__ = ["Decision", "Values", "VariantStats", "question_metrics", "recommend", "split_questions"]
