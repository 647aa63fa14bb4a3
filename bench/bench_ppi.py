"""Are the corrected figures honest? A planted truth, a judge that over-rates, 100 labels of 2,000.

Each seed plants a true relevance grade 0–3 for 2,000 candidates; a scripted judge grades each
one higher than the truth with chance 0.3 (it over-rates 30 % of the candidates, as LLM judges
lean); people label 100 candidates drawn at random with the true grade. The figure is the
relevant share (grade ≥ 2). Per seed, three 95 % intervals of it, computed by the code the
report uses (:func:`ragaudit.stats.corrected_mean`): the judge's alone over the 2,000, the PPI
one (judge + the 100 labels, ppi_py) and the labels' alone. Printed: how often each holds the
planted share, and the PPI interval's width over the labels-only one on the same labels. The
PPI interval is also drawn as ``ragaudit label`` draws its sample: the same number of items
from each judge grade, weighted back by each grade's size over the items drawn from it.

Then ``compare``'s PPI test (:func:`ragaudit.stats.ppi_paired_test`) under "nothing
changed": two runs of one system on the same 2,000 questions, each judged with its own noise
and bias and each with its own 100 labels; the share of seeds it calls "moved" at α = 0.05 is
its false-alarm rate. And one run folder of the same size through ``judge_vs_people``, the
report's path, to show the corrected share lands on the truth there too.

Then the loop itself, question by question (the design of ``ragaudit label``): per seed a run
folder of ``--questions`` questions, each with a judged pool of ``--pool`` candidates (true
grades planted, the engine ranking by grade plus noise, a judge grading a true 0 or 1 as 2
three times in ten), its sample drawn by ``labels.ensure_sample`` (two-stage: questions, then
the top ten and the pool), ``--design-labels`` of them labelled with the true grades, read by
``judge_vs_people``, the report's path. Printed: how often the PPI relevant share's and NDCG@10's
intervals and the judge-only ones hold the run's true figures, and how often the weighted κ's
interval holds the judge's κ against the truth over every candidate of the run.

    python bench/bench_ppi.py [--seeds 200] [--items 2000] [--labels 100] [--over 0.3]
        [--questions 40] [--pool 60] [--design-labels 200] [--only-design]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import time
from typing import Any

import numpy as np
from _util import scratch, table

from ragaudit import labels as label_store
from ragaudit.ppi import NDCG, NDCG_K, RELEVANT_SHARE, judge_vs_people
from ragaudit.ranking import ndcg_at_k
from ragaudit.stats import (
    corrected_mean,
    kappa,
    ppi_paired_test,
    share,
    skew_corrected_interval,
)

RELEVANT = 2
ALPHA = 0.05


def plant(rng: np.random.Generator, items: int, over: float) -> tuple[np.ndarray, np.ndarray]:
    """True grades and the scripted judge's: one grade higher with chance ``over``."""
    truth = rng.integers(0, 4, items)
    judge = np.minimum(3, truth + (rng.random(items) < over))
    return truth, judge


def coverage(seeds: int, items: int, n: int, over: float) -> dict[str, object]:
    """Per seed, whether each interval holds the planted share, and the width ratio."""
    held = {"judge only": 0, "PPI": 0, "labels only": 0, "PPI, per-grade draw": 0}
    ratios, narrower, halve = [], 0, []
    for seed in range(seeds):
        rng = np.random.default_rng(seed)
        truth, judge = plant(rng, items, over)
        y = (truth >= RELEVANT).astype(float)
        f = (judge >= RELEVANT).astype(float)
        target = float(y.mean())
        labelled = rng.choice(items, n, replace=False)
        c = corrected_mean(RELEVANT_SHARE, y[labelled], f[labelled], f, seed=seed)
        for name, low, high in (
            ("judge only", c.judge_ci_low, c.judge_ci_high),
            ("PPI", c.ppi_ci_low, c.ppi_ci_high),
            ("labels only", c.labels_ci_low, c.labels_ci_high),
        ):
            held[name] += int(low is not None and low <= target <= high)  # type: ignore[operator]
        # As ``ragaudit label`` draws: as many items from each judge grade, weighted back.
        per_grade, weights = [], []
        for g in range(4):
            stratum = np.flatnonzero(judge == g)
            take = min(len(stratum), n // 4)
            per_grade += rng.choice(stratum, take, replace=False).tolist()
            weights += [len(stratum) / take] * take
        s = corrected_mean(
            RELEVANT_SHARE, y[per_grade], f[per_grade], f, weights=weights, resamples=0
        )
        ok = s.ppi_ci_low is not None and s.ppi_ci_low <= target <= s.ppi_ci_high  # type: ignore[operator]
        held["PPI, per-grade draw"] += int(ok)
        if c.width_ratio is not None:
            ratios.append(c.width_ratio)
            narrower += int(c.width_ratio < 1)
        if c.labels_to_halve is not None:
            halve.append(c.labels_to_halve)
    return {"held": held, "ratios": ratios, "narrower": narrower, "halve": halve}


def false_alarms(seeds: int, items: int, n: int, over: float) -> tuple[int, int]:
    """How often compare's PPI test calls two runs of one system "moved" at α."""
    moved = 0
    for seed in range(seeds):
        rng = np.random.default_rng(10_000 + seed)
        truth = (rng.integers(0, 4, items) >= RELEVANT).astype(float)
        runs = []
        for bias in (over, over / 2):  # the two runs' judges even lean differently
            judged = np.where(truth == 1, 1.0, (rng.random(items) < bias).astype(float))
            picked = rng.choice(items, n, replace=False)
            runs.append((judged, truth[picked] - judged[picked]))
        (fa, ra), (fb, rb) = runs
        test = ppi_paired_test(fa, fb, ra, rb, resamples=1999, seed=seed)
        excludes = test.ci_low is not None and (test.ci_low > 0 or test.ci_high < 0)  # type: ignore[operator]
        moved += int(test.p_value is not None and test.p_value < ALPHA and excludes)
    return moved, seeds


def through_a_run(items: int, n: int, over: float) -> tuple[float, object]:
    """One run folder of ``items`` judged candidates, ``n`` labelled, read by judge_vs_people."""
    from support.labelled_runs import labelled_run

    root = scratch("ppi")
    per_question = 5
    run, truth = labelled_run(
        root, "run", questions=items // per_question, candidates=per_question, over=over,
        seed=1, with_labels=False, answer_labels=0,
    )  # fmt: skip
    rng = np.random.default_rng(1)
    keys = sorted(truth["grades"])
    picked = [keys[i] for i in rng.choice(len(keys), n, replace=False)]
    label_store.append_labels(
        run,
        [
            {
                "item_id": label_store.item_id("grade", q, c),
                "kind": "grade",
                "question_id": q,
                "candidate_id": c,
                "annotator": "bench",
                "label": float(truth["grades"][(q, c)]),
            }
            for q, c in picked
        ],
    )
    planted = float(np.mean([g >= RELEVANT for g in truth["grades"].values()]))
    people = judge_vs_people(run)
    assert people is not None
    return planted, people.corrected_for(RELEVANT_SHARE)


def design_coverage(seeds: int, questions: int, pool: int, n: int, over: float) -> dict[str, Any]:
    """Per seed: a planted run, the loop's sample, its labels, the report's figures."""
    from support.labelled_runs import label_sample_with_truth, planted_pool_run

    root = scratch("ppi-design")
    held = {
        "relevant share, PPI": 0,
        "relevant share, judge only": 0,
        f"{NDCG}, PPI": 0,
        f"{NDCG}, PPI with a plain t interval": 0,
        f"{NDCG}, judge only": 0,
        "weighted κ (run)": 0,
        "weighted κ (sample, unweighted)": 0,
    }
    reached, labelled, widths, plain_widths = 0, [], [], []
    for seed in range(seeds):
        run, truth, judged = planted_pool_run(
            root, f"s{seed}", questions=questions, pool=pool, over=over, seed=seed
        )
        label_store.ensure_sample(run, n, seed=seed)
        labelled.append(label_sample_with_truth(run, truth))
        people = judge_vs_people(run, seed=seed)
        assert people is not None
        keys = sorted(truth)
        target_share = float(np.mean([truth[k] >= RELEVANT for k in keys]))
        target_kappa = float(
            kappa(
                [truth[k] for k in keys],
                [judged[k] for k in keys],
                categories=(0, 1, 2, 3),
                weights="quadratic",
            )
        )
        target_ndcg = _true_ndcg(run, truth)
        for figure, target in ((RELEVANT_SHARE, target_share), (NDCG, target_ndcg)):
            c = people.corrected_for(figure)
            if c is None or c.ppi_ci_low is None:
                continue
            reached += figure == NDCG
            held[f"{figure}, PPI"] += int(c.ppi_ci_low <= target <= c.ppi_ci_high)  # type: ignore[operator]
            held[f"{figure}, judge only"] += int(c.judge_ci_low <= target <= c.judge_ci_high)  # type: ignore[operator]
            if figure == NDCG:
                widths.append(c.ppi_ci_high - c.ppi_ci_low)  # type: ignore[operator]
                # The same residuals (one a question, equal weights) under the t interval
                # without the skew correction, side by side.
                r = np.asarray(c.residuals)
                low, high = skew_corrected_interval(
                    c.ppi_mean, float(r.std(ddof=1) / np.sqrt(r.size)), 0.0, r.size
                )
                plain_widths.append(high - low)
                held[f"{NDCG}, PPI with a plain t interval"] += int(low <= target <= high)
        for line in people.agreement:
            if line.kind == "grade" and line.statistic == "weighted_kappa":
                name = "weighted κ (run)" if line.between == "judge vs people" else None
                if line.between.endswith("(sample, unweighted)"):
                    name = "weighted κ (sample, unweighted)"
                if name and line.ci_low is not None:
                    held[name] += int(line.ci_low <= target_kappa <= line.ci_high)  # type: ignore[operator]
        shutil.rmtree(run)
    return {
        "held": held,
        "reached": reached,
        "labelled": labelled,
        "widths": widths,
        "plain_widths": plain_widths,
    }


def _true_ndcg(run: Any, truth: dict[tuple[str, str], int]) -> float:
    """The run's engine NDCG@10 under the true grades, the ideal over each judged pool."""
    import polars as pl

    cands = pl.read_parquet(run / "candidates.parquet").sort("engine_rank")
    values = []
    for (qid,), part in cands.group_by("question_id", maintain_order=True):
        order = part["context_id"].to_list()
        values.append(ndcg_at_k(order, {c: float(truth[(qid, c)]) for c in order}, NDCG_K))
    return float(np.mean(values))


def print_design(seeds: int, questions: int, pool: int, n: int, over: float) -> None:
    """The loop's design over ``seeds`` planted runs, each goal met or not."""
    started = time.perf_counter()
    found = design_coverage(seeds, questions, pool, n, over)
    held: dict[str, int] = found["held"]
    labelled: list[int] = found["labelled"]
    print(
        f"\nthe loop's two-stage sample: {questions} questions × {pool} judged candidates, "
        f"{statistics.mean(labelled):.0f} labels per run (min {min(labelled)}), judge grades "
        f"a true 0/1 as 2 with chance {over:.0%}, {seeds} seeds "
        f"({time.perf_counter() - started:.1f} s)"
    )
    rows = []
    for name, k in held.items():
        s = share(k, seeds)
        rows.append((name, f"{k}/{seeds}", f"{s.share:.3f}", f"{s.ci_low:.3f}–{s.ci_high:.3f}"))
    print(table(rows, ("95% interval", "held the truth", "coverage", "exact 95% CI")))
    reached = found["reached"]
    print(
        f"{NDCG} corrected in {reached}/{seeds} runs at ~{n} labels "
        f"(median interval width {statistics.median(found['widths']):.3f}, "
        f"{statistics.median(found['plain_widths']):.3f} with a plain t interval): "
        + verdict(reached == seeds, f"only {reached}/{seeds}")
    )
    for name, goal, above in (
        ("relevant share, PPI", 0.93, True),
        (f"{NDCG}, PPI", 0.93, True),
        ("relevant share, judge only", 0.5, False),
        (f"{NDCG}, judge only", 0.5, False),
        ("weighted κ (run)", 0.90, True),
    ):
        cov = held[name] / seeds
        ok = cov >= goal if above else cov < goal
        print(
            f"{name} coverage {cov:.3f} {'≥' if above else '<'} {goal:.2f}: "
            + verdict(ok, f"{cov:.3f}")
        )


def verdict(ok: bool, why: str) -> str:
    return "goal met" if ok else f"goal not met: {why}"


def main(seeds: int, items: int, n: int, over: float) -> None:
    """Run every part and print each figure with its goal."""
    started = time.perf_counter()
    found = coverage(seeds, items, n, over)
    held: dict[str, int] = found["held"]  # type: ignore[assignment]
    rows = []
    for name, k in held.items():
        s = share(k, seeds)
        rows.append((name, f"{k}/{seeds}", f"{s.share:.3f}", f"{s.ci_low:.3f}–{s.ci_high:.3f}"))
    print(
        f"relevant share, {items} judged candidates, {n} labelled, judge over-rates "
        f"{over:.0%} of candidates, {seeds} seeds ({time.perf_counter() - started:.1f} s)"
    )
    print(table(rows, ("95% interval", "held the truth", "coverage", "exact 95% CI")))
    ppi_cov = held["PPI"] / seeds
    judge_cov = held["judge only"] / seeds
    print(f"PPI coverage {ppi_cov:.3f} ≥ 0.93: " + verdict(ppi_cov >= 0.93, f"{ppi_cov:.3f}"))
    drawn_cov = held["PPI, per-grade draw"] / seeds
    print(
        f"PPI coverage, labels drawn per judge grade and weighted back, {drawn_cov:.3f} ≥ 0.93: "
        + verdict(drawn_cov >= 0.93, f"{drawn_cov:.3f}")
    )
    print(
        f"judge-only coverage {judge_cov:.3f} < 0.50: "
        + verdict(judge_cov < 0.5, f"{judge_cov:.3f}")
    )
    ratios: list[float] = found["ratios"]  # type: ignore[assignment]
    mean_ratio = statistics.mean(ratios)
    print(
        f"PPI width / labels-only width on the same {n} labels: mean {mean_ratio:.3f}, "
        f"median {statistics.median(ratios):.3f}; narrower in {found['narrower']}/{len(ratios)} "
        "seeds: " + verdict(mean_ratio < 1, f"mean ratio {mean_ratio:.3f}")
    )
    halve: list[int] = found["halve"]  # type: ignore[assignment]
    if halve:
        print(
            f"more labels to halve the PPI interval: median {statistics.median(halve):.0f} "
            f"({len(halve)}/{seeds} seeds reachable within {items} items)"
        )
    else:
        print(f"more labels to halve the PPI interval: beyond {items} items in every seed")

    started = time.perf_counter()
    moved, total = false_alarms(seeds, items, n, over)
    s = share(moved, total)
    print(
        f"compare's PPI test, nothing changed: 'moved' in {moved}/{total} seeds "
        f"({s.share:.3f}, exact 95% CI {s.ci_low:.3f}–{s.ci_high:.3f}; "
        f"{time.perf_counter() - started:.1f} s): "
        + verdict(s.ci_low <= ALPHA, f"the false-alarm rate is above α = {ALPHA}")  # type: ignore[operator]
    )

    started = time.perf_counter()
    planted, c = through_a_run(items, n, over)
    print(
        f"one run folder through judge_vs_people ({time.perf_counter() - started:.1f} s): "
        f"planted share {planted:.3f}, judge {c.judge_mean:.3f} "  # type: ignore[attr-defined]
        f"({c.judge_ci_low:.3f}–{c.judge_ci_high:.3f}), PPI {c.ppi_mean:.3f} "  # type: ignore[attr-defined]
        f"({c.ppi_ci_low:.3f}–{c.ppi_ci_high:.3f}), labels only {c.labels_mean:.3f} "  # type: ignore[attr-defined]
        f"({c.labels_ci_low:.3f}–{c.labels_ci_high:.3f}): "  # type: ignore[attr-defined]
        + verdict(
            c.ppi_ci_low <= planted <= c.ppi_ci_high,  # type: ignore[attr-defined]
            "the PPI interval misses the planted share on this seed",
        )
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=200)
    parser.add_argument("--items", type=int, default=2000)
    parser.add_argument("--labels", type=int, default=100)
    parser.add_argument("--over", type=float, default=0.3)
    parser.add_argument("--questions", type=int, default=40)
    parser.add_argument("--pool", type=int, default=60)
    parser.add_argument("--design-labels", type=int, default=200)
    parser.add_argument("--only-design", action="store_true", help="only the loop's design")
    args = parser.parse_args()
    if not args.only_design:
        main(args.seeds, args.items, args.labels, args.over)
    print_design(args.seeds, args.questions, args.pool, args.design_labels, args.over)
