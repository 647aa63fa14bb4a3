"""Judge noise as measured quantities: the figures behind ``ragaudit.noise`` and ``compare``.

Run: ``python bench/bench_noise.py``. Scripted judges of known noise, no model calls:

1. Self-agreement: scores = value + N(0, σ²) with 3 samples per item (truth α = 1 / (1 + σ²)),
   grades flipped to another grade with probability p (truth from the flip model), 50 seeds
   each: how often the 95 % interval holds the truth.
2. Comparisons that count the judge: two runs of the same answers judged with noise,
   repeated 200 times. The two-level test on 3 samples per question against today's paired
   test on one sample each: the rate of "moved" calls, each with its binomial 95 % interval,
   against α = 0.05.
3. A jury of three judges with different biases (one over-rates by a grade 30 % of the time,
   one under-rates 30 %, one flips 25 % of grades at random) against each judge alone: share
   of items graded right.
4. Per-grade calibration of a judge that over-rates by one grade 30 % of the time.
5. With ``--end-to-end``: the wiring, once. Two real runs (the flow, the fake judge flipping
   30 % of its verdicts, a different draw of that noise in each run) of the same answers,
   with ``models.judge_repeats`` 3, compared with ``compare``: which test each metric got,
   the judge's share of the variance, the self-agreement the report shows; and the same two
   runs' first samples alone (what one repeat would have scored), compared the old way.
   Repeating this 200 times end to end is too slow: the 200-pair rate is part 2's.

Measured (2026-11-25, loaded 2-core machine): self-agreement intervals held the truth 44–49 of
50 seeds; "moved" on judge noise alone 9/200 = 0.045 (95 % CI 0.021–0.084) two-level, 10/200
one sample each; jury majority 0.894 right against 0.821 for the best judge alone; over-rating
0.299/0.300/0.316 recovered around 0.3. End to end (40 questions): context precision's CI
−0.048…+0.079 with 3 repeats (judge 70 % of the variance) against −0.063…+0.135 on the first
samples alone; self-agreement α −0.01 (the fake's verdicts on random text are mostly noise).

    python bench/bench_noise.py [--end-to-end]
"""

from __future__ import annotations

import _util  # noqa: F401  (offline environment first)
import numpy as np
from scipy import stats

from ragaudit.noise import aggregate
from ragaudit.stats import agreement, calibrate_grades, paired_test, two_level_test

ALPHA = 0.05
PRIOR = np.array([0.4, 0.3, 0.2, 0.1])


def flipped(truth: np.ndarray, p: float, rng: np.random.Generator) -> np.ndarray:
    other = (truth + rng.integers(1, 4, size=truth.shape)) % 4
    return np.where(rng.random(truth.shape) < p, other, truth)


def nominal_truth(p: float) -> float:
    agree = (1 - p) ** 2 + p**2 / 3
    marginal = (1 - p) * PRIOR + p * (1 - PRIOR) / 3
    return 1 - (1 - agree) / (1 - float(np.sum(marginal**2)))


def rate(k: int, n: int) -> str:
    ci = stats.binomtest(k, n).proportion_ci(method="exact")
    return f"{k}/{n} = {k / n:.3f} (95% CI {ci.low:.3f}-{ci.high:.3f})"


def verdict(ok: bool, what: str, why: str) -> str:
    return f"  goal {what}: {'met' if ok else 'NOT MET — ' + why}"


def self_agreement() -> list[str]:
    lines = ["1. self-agreement (Krippendorff's α, 3 samples, 50 seeds)"]
    for sigma in (0.3, 0.5, 1.0):
        truth, covered = 1 / (1 + sigma**2), 0
        for seed in range(50):
            rng = np.random.default_rng(seed)
            value = rng.normal(0, 1, 120)
            a = agreement(value + rng.normal(0, sigma, (3, 120)), "interval", seed=seed)
            covered += a.ci_low <= truth <= a.ci_high
        lines.append(f"  scores σ={sigma}: truth α {truth:.3f}, interval holds it {covered}/50")
    for p in (0.1, 0.15, 0.3):
        truth, covered = nominal_truth(p), 0
        for seed in range(50):
            rng = np.random.default_rng(1000 + seed)
            grades = rng.choice(4, size=150, p=PRIOR)
            samples = np.stack([flipped(grades, p, rng) for _ in range(3)]).astype(float)
            a = agreement(samples, "nominal", seed=seed)
            covered += a.ci_low <= truth <= a.ci_high
        lines.append(f"  grades p={p}: truth α {truth:.3f}, interval holds it {covered}/50")
    return lines


def comparisons(reps: int = 200, questions: int = 30, sigma: float = 0.15) -> list[str]:
    two = one = 0
    for rep in range(reps):
        rng = np.random.default_rng(rep)
        value = rng.uniform(0.2, 0.9, questions)
        a = [value[i] + rng.normal(0, sigma, 3) for i in range(questions)]
        b = [value[i] + rng.normal(0, sigma, 3) for i in range(questions)]
        t = two_level_test(a, b, resamples=1999, seed=rep)
        two += t.p_value < ALPHA and (t.ci_low > 0 or t.ci_high < 0)
        s = paired_test(np.array([x[0] for x in a]), np.array([x[0] for x in b]), 1999, rep)
        one += s.p_value < ALPHA and (s.ci_low > 0 or s.ci_high < 0)
    ci = stats.binomtest(two, reps).proportion_ci(method="exact")
    return [
        f"2. 'moved' calls between two runs differing only in judge noise ({reps} pairs, "
        f"{questions} questions, σ={sigma} per sample, α={ALPHA})",
        f"  two-level test, 3 samples per question: {rate(two, reps)}",
        f"  today's paired test, one sample each:   {rate(one, reps)}",
        verdict(ci.low <= ALPHA <= ci.high, "two-level rate's CI holds α", "α outside its CI"),
    ]


def jury() -> list[str]:
    rng = np.random.default_rng(3)
    truth = rng.choice(4, size=5000, p=PRIOR)
    up = np.minimum(truth + (rng.random(truth.size) < 0.3), 3)
    down = np.maximum(truth - (rng.random(truth.size) < 0.3), 0)
    noisy = flipped(truth, 0.25, rng)
    judges = np.stack([up, down, noisy]).astype(float)
    alone = [float((j == truth).mean()) for j in judges]
    together = float((aggregate(judges, "majority") == truth).mean())
    between = agreement(judges, "nominal")
    return [
        "3. a jury of three biased judges (5,000 items)",
        f"  alone: over-rating {alone[0]:.3f}, under-rating {alone[1]:.3f}, "
        f"noisy {alone[2]:.3f}; majority of the three {together:.3f}",
        f"  the judges' agreement with each other: {between.text}",
        verdict(together > max(alone), "jury beats every judge", "a judge alone did better"),
    ]


def calibration() -> list[str]:
    rng = np.random.default_rng(11)
    human = rng.choice(4, size=3000, p=PRIOR)
    judge = np.minimum(human + (rng.random(human.size) < 0.3), 3)
    cal = calibrate_grades(judge.tolist(), human.tolist())
    lines = ["4. per-grade calibration, judge over-rates by one grade 30 % of the time"]
    held = True
    for g in (0, 1, 2):
        s = cal.over_rated[g]
        held &= s.ci_low <= 0.3 <= s.ci_high
        lines.append(
            f"  human grade {g}: over-rated {s.share:.3f} ({s.ci_low:.3f}-{s.ci_high:.3f})"
        )
    for g, s in sorted(cal.relevant_given_grade.items()):
        lines.append(f"  judge grade {g}: P(human relevant) {s.share:.3f} (n={s.n})")
    lines.append(verdict(held, "0.3 inside every over-rating CI", "a CI misses 0.3"))
    return lines


def end_to_end(rows: int = 40) -> list[str]:
    import asyncio

    from _util import scratch
    from prefect.testing.utilities import prefect_test_harness
    from support.synthetic import write_questions

    from ragaudit.config import load_config
    from ragaudit.flows.evaluate import evaluate
    from ragaudit.reporting import build_report, compare_runs

    tmp = scratch("noise-e2e")
    questions = write_questions(tmp / "questions.jsonl", rows, candidates=4)

    def config(seed: int, repeats: int) -> object:
        return load_config(
            None,
            {
                "questions": str(questions),
                "runs_root": str(tmp / "runs"),
                "cache_dir": str(tmp / "cache"),
                "collect": {"backend": "question_set"},
                "sort": {"enabled": False},
                "ground_truth": {"enabled": False},
                "models": {
                    "judge": f"fake/judge?wrong=0.3&seed={seed}",
                    "embedder": "fake/embed",
                    "judge_repeats": repeats,
                    "backoff_s": 0,
                },
                "score": {"top_k": 4, "metrics": ["context_precision", "rouge_l"]},
                "report": {"formats": []},
            },
            environ={},
        )

    with prefect_test_harness(server_startup_timeout=120):
        for name, seed, repeats in (("a", 1, 3), ("b", 2, 3), ("a1", 1, 1), ("b1", 2, 1)):
            c = config(seed, repeats)
            asyncio.run(evaluate(c.model_dump_json(), name))  # type: ignore[attr-defined]
    root = tmp / "runs"
    lines = [f"5. end to end: two runs of {rows} questions, noisy fake judge, compare"]
    for a, b, what in (("a", "b", "3 repeats"), ("a1", "b1", "1 repeat (first sample)")):
        cmp = compare_runs(root / a, root / b, resamples=1999)
        for m in cmp.metrics:
            share = "" if m.judge_share is None else f", judge {m.judge_share:.0%} of variance"
            lines.append(
                f"  {what}: {m.metric} diff {m.diff:+.3f} CI {m.ci_low:+.3f}..{m.ci_high:+.3f} "
                f"p {m.p_value:.3f}: {m.verdict} (noise counted: {m.noise}{share})"
            )
    for n in build_report(root / "a").judge_noise:
        lines.append(f"  run a self-agreement, {n.metric}: {n.text}")
    return lines


if __name__ == "__main__":
    import sys

    blocks = [self_agreement(), comparisons(), jury(), calibration()]
    if "--end-to-end" in sys.argv:
        blocks.append(end_to_end())
    for block in blocks:
        print("\n".join(block))
