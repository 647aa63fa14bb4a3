"""Battles' error rates and power, with a scripted judge, through the statistics functions.

The scripted judge answers each (question, order) on its own: a tie with probability 0.1;
otherwise it picks the better answer with probability 0.7, plus 0.15 when the better answer is
shown first and less 0.15 when it is shown second (position bias); where neither answer is
better it picks the first shown with probability 0.5 + 0.15. "B truly better on 60 % of the
questions" plants B better on 60 of 100 questions and the two answers equal on the other 40;
"equal runs" plants them equal on all 100. No LLM is called: verdicts go straight into
:func:`ragaudit.battles.battle_stats`, which is what ``compare --battles`` computes.

Goals: B better → "B better" in ≥ 90 % of seeds; equal runs → "better" or "worse" in ≤ 5 % of
seeds; position consistency recovered within 0.05 of the planted value (its expectation under
the scripted judge), averaged over the seeds of each scenario; the share of single seeds
within 0.05 is printed beside it (one seed of 100 questions has a standard deviation near
0.05, so a per-seed goal would measure the sample size, not the estimator).

Power (``--power``): how many questions each comparison needs to say "B better" in 80 % of
seeds, on the same simulated runs. Each question has a latent quality for A, uniform in
0.5-0.9; B's is 0.1 higher on the 60 % of questions where B is better and equal elsewhere. The
battles judge is the scripted one above; the faithfulness judge scores each answer as its
quality plus Gaussian noise (sd 0.2, clipped to 0-1), and the paired permutation test on the
faithfulness delta is what ``compare`` runs on a metric. Both figures are printed; the goal is
that both are found within the sizes tried.

    python bench/bench_battles.py [--seeds 200] [--questions 100] [--resamples 1999] [--power]
"""

from __future__ import annotations

import argparse
import time

import _util  # noqa: F401  (the offline environment first)
import numpy as np
import polars as pl

from ragaudit.battles import ORDERS, battle_stats
from ragaudit.stats import paired_test

TIE, SKILL, BIAS = 0.10, 0.70, 0.15


def _probs(better: str | None, order: str) -> dict[str, float]:
    """P(verdict) for one order: ``better`` is ``A``, ``B`` or None (equal answers)."""
    first = order[0]
    if better is None:
        p_first = 0.5 + BIAS
    else:
        p_good = SKILL + (BIAS if better == first else -BIAS)
        p_first = p_good if better == first else 1 - p_good
    second = order[1]
    return {first: (1 - TIE) * p_first, second: (1 - TIE) * (1 - p_first), "tie": TIE}


def planted_consistency(share_better: float) -> float:
    """The expected share of pairs whose two orders agree under the scripted judge."""

    def agree(better: str | None) -> float:
        ab, ba = _probs(better, "AB"), _probs(better, "BA")
        return sum(ab[v] * ba[v] for v in ("A", "B", "tie"))

    return share_better * agree("B") + (1 - share_better) * agree(None)


def simulate(rng: np.random.Generator, n: int, share_better: float) -> pl.DataFrame:
    n_better = round(n * share_better)
    rows = []
    for q in range(n):
        better = "B" if q < n_better else None
        for order in ORDERS:
            p = _probs(better, order)
            verdict = rng.choice(list(p), p=list(p.values()))
            rows.append({"question_id": f"q{q:04d}", "order": order, "verdict": str(verdict)})
    return pl.DataFrame(rows)


def scenario(
    seeds: int, n: int, share: float, resamples: int
) -> tuple[dict[str, int], list[float]]:
    verdicts: dict[str, int] = {"B better": 0, "B worse": 0, "no difference": 0}
    consistency = []
    for seed in range(seeds):
        rng = np.random.default_rng(seed)
        st = battle_stats(simulate(rng, n, share), resamples=resamples, seed=seed)
        verdicts[st.verdict] += 1
        consistency.append(st.consistency or 0.0)
    return verdicts, consistency


QUALITY_GAIN, SCORE_NOISE = 0.1, 0.2
POWER_SIZES = (10, 20, 30, 40, 60, 80, 100, 130, 160, 200, 260, 330, 400)


def faithfulness(rng: np.random.Generator, n: int, share_better: float) -> tuple[np.ndarray, ...]:
    """Per-question faithfulness of A and B on the runs :func:`simulate` plants."""
    quality_a = rng.uniform(0.5, 0.9, n)
    quality_b = quality_a + QUALITY_GAIN * (np.arange(n) < round(n * share_better))
    noisy = [np.clip(q + rng.normal(0, SCORE_NOISE, n), 0, 1) for q in (quality_a, quality_b)]
    return noisy[0], noisy[1]


def power_at(n: int, seeds: int, resamples: int, alpha: float = 0.05) -> tuple[float, float]:
    """Share of seeds in which battles, and the faithfulness test, say B is better."""
    hits_battle = hits_metric = 0
    for seed in range(seeds):
        rng = np.random.default_rng(10_000 + seed)
        st = battle_stats(simulate(rng, n, 0.6), resamples=resamples, seed=seed)
        hits_battle += st.verdict == "B better"
        a, b = faithfulness(rng, n, 0.6)
        test = paired_test(a, b, resamples=resamples, seed=seed)
        hits_metric += (
            test.p_value is not None and test.p_value < alpha and (test.ci_low or 0.0) > 0
        )
    return hits_battle / seeds, hits_metric / seeds


def power_needed(seeds: int, resamples: int) -> bool:
    """The questions each comparison needs for 80 % power; False when one is not found."""
    needed: dict[str, int | None] = {"battles": None, "faithfulness delta": None}
    for n in POWER_SIZES:
        battle, metric = power_at(n, seeds, resamples)
        print(f"  {n:4d} questions: power battles {battle:.1%}, faithfulness delta {metric:.1%}")
        for name, p in (("battles", battle), ("faithfulness delta", metric)):
            if needed[name] is None and p >= 0.8:
                needed[name] = n
        if all(v is not None for v in needed.values()):
            break
    for name, n in needed.items():
        print(f"questions for 80 % power, {name}: " + (f"{n}" if n else f"> {POWER_SIZES[-1]}"))
    found = all(v is not None for v in needed.values())
    print(
        "goal both figures found within the sizes tried -> "
        + ("met" if found else "not met: a comparison needs more questions than tried")
    )
    return found


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, default=200)
    ap.add_argument("--questions", type=int, default=100)
    ap.add_argument("--resamples", type=int, default=1999)
    ap.add_argument("--power", action="store_true", help="Also the questions for 80 % power.")
    args = ap.parse_args()
    t0 = time.perf_counter()
    better, cons_b = scenario(args.seeds, args.questions, 0.6, args.resamples)
    equal, cons_e = scenario(args.seeds, args.questions, 0.0, args.resamples)
    wall = time.perf_counter() - t0
    power = better["B better"] / args.seeds
    false = (equal["B better"] + equal["B worse"]) / args.seeds
    print(f"B better on 60 % of {args.questions} questions: {better} over {args.seeds} seeds")
    print(f"equal runs: {equal} over {args.seeds} seeds  ({wall:.1f} s for both)")
    ok = True
    goal = power >= 0.90
    ok &= goal
    print(
        f"goal 'B better' in >= 90 % of seeds: {power:.1%} -> "
        + ("met" if goal else "not met: the test lacks power at this size")
    )
    goal = false <= 0.05
    ok &= goal
    print(
        f"goal better/worse on equal runs in <= 5 % of seeds: {false:.1%} -> "
        + ("met" if goal else "not met: the test rejects too often")
    )
    for name, share, cons in (("B better", 0.6, cons_b), ("equal", 0.0, cons_e)):
        planted = planted_consistency(share)
        off = np.abs(np.array(cons) - planted)
        goal = abs(float(np.mean(cons)) - planted) <= 0.05
        ok &= goal
        print(
            f"goal position consistency within 0.05 of planted ({name}): planted {planted:.3f}, "
            f"mean recovered {np.mean(cons):.3f}, seeds within 0.05 {np.mean(off <= 0.05):.1%} "
            f"(one seed's sd at {args.questions} questions: "
            f"{np.sqrt(planted * (1 - planted) / args.questions):.3f}) -> "
            + ("met" if goal else "not met: the estimate is biased")
        )
    if args.power:
        print(f"power over {args.seeds} seeds per size:")
        ok &= power_needed(args.seeds, args.resamples)
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
