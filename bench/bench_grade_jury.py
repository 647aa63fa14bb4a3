"""Relevance grades asked several times, end to end through the grading code and the gateway.

Run: ``python bench/bench_grade_jury.py``. No model: the fake provider is scripted per judge
model, each request through ``judging.grade_candidates`` and the gateway's memo, as a run's
sort stage asks it (``bench/bench_noise.py`` part 3 shows the same statistics on arrays).

1. A jury of three judges with different biases (``fake/over`` over-rates by one grade 30 % of
   the time, ``fake/under`` under-rates by one 30 %, ``fake/flip`` answers another grade at
   random 25 %) against each judge alone: the share of candidates whose grade is the true
   one, and of candidates on the right side of the relevant cut (grade ≥ 2), with the jury's
   ``majority`` and ``median``. Goal: the jury recovers the true grades more often than any
   one judge.
2. Self-agreement reported by the run (``grade_noise``) for a judge that answers another
   grade with probability p, 3 samples a candidate, 20 seeds each: how often the reported
   95 % interval holds the α the flip model implies. Goal: at least 17 of 20 (a 95 %
   interval over 20 seeds holds the truth 17 or more times with probability ≈ 0.98).

Measured on this machine (2 cores, shared; about four CPU-minutes, 2,400 fake calls a seed):

- jury, 600 candidates, exact grade (relevant cut): fake/over alone 0.795 (0.932), fake/under
  0.847 (0.952), fake/flip 0.750 (0.828); the majority jury 0.907 (0.955), the median jury
  0.937 (0.980). Met: the jury recovers the true grade more often than any one judge.
- self-agreement: p=0.1 the interval holds the flip model's α 20/20, p=0.3 18/20. Met.
"""

from __future__ import annotations

import asyncio
import hashlib
import shutil
from collections import Counter
from typing import Any

import _util  # noqa: F401  (offline environment first)
import numpy as np

from ragaudit.cache import Gateway
from ragaudit.cache._fake import FAKE, FakeRequest
from ragaudit.config import ModelsConfig
from ragaudit.dataset import Question
from ragaudit.judging import Judge, grade_candidates, grade_noise, grade_plan, sample_judges

QUESTIONS, PER_QUESTION = 30, 20
PRIOR = np.array([0.4, 0.3, 0.2, 0.1])
JURY = ("fake/over", "fake/under", "fake/flip")


def _unit(*parts: Any) -> float:
    digest = hashlib.sha256("|".join(map(str, parts)).encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def world(seed: int) -> tuple[dict[str, Question], dict[str, list[dict[str, Any]]], dict]:
    """Questions, their candidates, and each candidate text's true grade (drawn from PRIOR)."""
    rng = np.random.default_rng(seed)
    questions, candidates, truth = {}, {}, {}
    for q in range(QUESTIONS):
        qid = f"q{q:02d}"
        questions[qid] = Question(question_id=qid, question=f"question {q}", language="en")
        rows = []
        for c in range(PER_QUESTION):
            text = f"passage {q}-{c} seed {seed}"
            truth[text] = int(rng.choice(4, p=PRIOR))
            rows.append({"context_id": f"c{c:02d}", "text": text})
        candidates[qid] = rows
    return questions, candidates, truth


class Scripted:
    """Each judge model answers the true grade, biased as its name says.

    Every call of one request draws anew (a count per request and temperature), so repeated
    samples differ as a sampled model's do.
    """

    def __init__(self, truth: dict[str, int], flip: float = 0.25, seed: int = 0) -> None:
        self.truth, self.flip, self.seed = truth, flip, seed
        self.asked: Counter[str] = Counter()

    def __call__(self, req: FakeRequest) -> dict[str, Any] | None:
        if req.title != "RelevanceGrade":
            return None
        key = f"{req.model}|{req.digest()}|{req.params.get('temperature')}"
        self.asked[key] += 1
        u = _unit(key, self.asked[key], self.seed)
        g = self.truth[req.payload["context"]]
        if req.model == "over" and u < 0.3:
            g = min(3, g + 1)
        elif req.model == "under" and u < 0.3:
            g = max(0, g - 1)
        elif req.model not in ("over", "under") and u < self.flip:
            g = (g + 1 + int(_unit("other", key, self.asked[key], self.seed) * 3)) % 4
        return {"grade": g, "reason": "scripted"}


async def graded(
    models: tuple[str, ...], repeats: int, script: Scripted, seed: int, how: str = "majority"
) -> list[dict[str, Any]]:
    questions, candidates, _ = world(seed)
    root = _util.scratch("grade-jury")
    gateway = Gateway(root / "memo", concurrency=32, backoff_s=0.0)
    try:
        config = ModelsConfig(judge=models[0], judge_context_window=8192, max_output_tokens=256)
        judge = Judge.from_config(config, gateway, 64)
        judges = sample_judges(judge, grade_plan(models, repeats, 0.0, 0.3), config)
        with FAKE.script(script):
            out = await grade_candidates(judges, questions, candidates, aggregate=how)  # type: ignore[arg-type]
        return [row for g in out.values() for row in g.rows]
    finally:
        gateway.close()
        shutil.rmtree(root, ignore_errors=True)


def jury() -> list[str]:
    seed = 1
    _, candidates, truth = world(seed)
    true = [truth[c["text"]] for rows in candidates.values() for c in rows]
    lines = [f"1. a jury of three biased judges ({len(true)} candidates, through the gateway)"]
    rows = {
        how: asyncio.run(graded(JURY, 1, Scripted(truth), seed, how))
        for how in ("majority", "median")
    }
    majority = rows["majority"]
    alone = {}
    for k, model in enumerate(JURY):
        got = [r["grade_samples"][k] for r in majority]
        exact = np.mean([g == t for g, t in zip(got, true, strict=True)])
        cut = np.mean([(g >= 2) == (t >= 2) for g, t in zip(got, true, strict=True)])
        alone[model] = exact
        lines.append(f"  {model:<11} alone: exact {exact:.3f}, relevant cut {cut:.3f}")
    for how, got_rows in rows.items():
        got = [r["grade"] for r in got_rows]
        exact = np.mean([g == t for g, t in zip(got, true, strict=True)])
        cut = np.mean([(g >= 2) == (t >= 2) for g, t in zip(got, true, strict=True)])
        lines.append(f"  jury ({how}):  exact {exact:.3f}, relevant cut {cut:.3f}")
    best = float(np.mean([r["grade"] == t for r, t in zip(majority, true, strict=True)]))
    ok = best > max(alone.values())
    lines.append(f"  goal the majority jury beats every judge alone: {'met' if ok else 'NOT MET'}")
    return lines


def flip_truth(p: float, prior: np.ndarray) -> float:
    """Nominal α of a judge that answers another grade (uniformly) with probability p."""
    agree = (1 - p) ** 2 + p**2 / 3
    marginal = (1 - p) * prior + p * (1 - prior) / 3
    return 1 - (1 - agree) / (1 - float(np.sum(marginal**2)))


def self_agreement(seeds: int = 20) -> list[str]:
    lines = [f"2. self-agreement the run reports (grade_noise, 3 samples, {seeds} seeds)"]
    ok = True
    for p in (0.1, 0.3):
        covered = 0
        for seed in range(seeds):
            _, _, truth = world(seed)
            counts = np.bincount(list(truth.values()), minlength=4)
            target = flip_truth(p, counts / counts.sum())
            rows = asyncio.run(graded(("fake/judge",), 3, Scripted(truth, p, seed), seed))
            (figure,) = [r for r in grade_noise(rows) if r["scale"] == "grade"]
            covered += figure["ci_low"] <= target <= figure["ci_high"]
        lines.append(f"  p={p}: the interval holds the flip model's α {covered}/{seeds}")
        ok &= covered >= 17
    lines.append(f"  goal coverage ≥ 17/{seeds}: {'met' if ok else 'NOT MET'}")
    return lines


def main() -> None:
    for block in (jury(), self_agreement()):
        print("\n".join(block))


if __name__ == "__main__":
    main()
