"""Context ranking: the ordering strategies side by side in one run, through the real sort stage.

One question with 200 candidates, of which 50 (then 200) are relevant. The judge is the fake
provider at 200 ms a call behind the real gateway (concurrency 16, a fresh memo per strategy so
no answer is free). A scripted responder knows the true order: relevance verdicts are right,
and each pairwise call is wrong with probability 10 %, decided by a seeded hash of the request,
so a rerun gets the same answers and the two orders of a pair are independent. Both orders of
every pair are asked (disagreement is a tie), for every strategy.

The engine's order of the candidates is the true order blurred by noise (Spearman about 0.45
among the relevant ones, close to the 0.44 observed between an LLM judge's order and
Elasticsearch's on a production QA set); the strategies see the relevant candidates in that order.

Printed per strategy: judge calls of the ordering phase, its wall time, its ideal (calls x
latency / concurrency), the ratios, and Kendall's tau-b of the result (with its tie groups)
against the true order. Then the goals for ``sample`` against
``insertion``: wall time at most 20 % of insertion's and at most 1.3 times its own ideal, at
most 1.5 times insertion's calls, tau at least 0.1 higher.

    python bench/bench_sort.py                     # 50 and 200 relevant, all strategies
    python bench/bench_sort.py --relevant 50 --strategies sample insertion
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import random
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from _util import scratch, table
from scipy.stats import kendalltau, spearmanr
from support.runs import write_question

import ragaudit  # noqa: F401  (offline environment first)
from ragaudit.cache import Gateway
from ragaudit.cache._fake import FAKE, FakeRequest
from ragaudit.config import load_config
from ragaudit.ordering import _SampleSort
from ragaudit.ranking import average_ranks
from ragaudit.runfolder import RunFolder
from ragaudit.tasks._common import StageContext
from ragaudit.tasks.sort import sort

LATENCY_S = 0.2
CONCURRENCY = 16
WRONG = 0.10
CANDIDATES_N = 200
ENGINE_NOISE = 0.56  # sd of the engine's noise, in units of the relevant set's quality range
SEED = 0

# Variants of the sample sort measured to justify its parts: (label, strategy, class overrides).
VARIANTS: dict[str, tuple[str, dict[str, Any]]] = {
    "sample": ("sample", {}),
    "sample -checks -repair": ("sample", {"CHECK_BUCKET": float("inf"), "REPAIR_ROUNDS": 0}),
    "insertion": ("insertion", {}),
    "merge": ("merge", {}),
    "quick": ("quick", {}),
}


@dataclass
class World:
    """The synthetic question: texts, the true order of the relevant ones, the engine's order."""

    texts: dict[str, str]
    truth: list[str]  # relevant ids, best first
    engine: list[str]  # every id in engine order

    @property
    def relevant(self) -> set[str]:
        return set(self.truth)


def make_world(n_relevant: int, seed: int = SEED) -> World:
    rng = random.Random(seed)
    ids = [f"c{i:03d}" for i in range(CANDIDATES_N)]
    rng.shuffle(ids)
    truth = ids[:n_relevant]
    # Quality 1 (best) .. 0 for the relevant ones, below 0 for the rest; the engine sees it blurred.
    quality = {cid: 1 - i / max(1, n_relevant - 1) for i, cid in enumerate(truth)}
    quality.update({cid: -rng.random() for cid in ids[n_relevant:]})
    score = {cid: q + rng.gauss(0, ENGINE_NOISE) for cid, q in quality.items()}
    engine = sorted(ids, key=lambda c: -score[c])
    texts = {cid: f"[{cid}] Passage {cid} about the history of the port city." for cid in ids}
    return World(texts, truth, engine)


def _unit(*parts: Any) -> float:
    digest = hashlib.sha256("|".join(map(str, parts)).encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def responder(world: World):
    """The scripted judge: right relevance; pairwise right except with probability WRONG."""
    by_text = {text: cid for cid, text in world.texts.items()}
    rank = {cid: i for i, cid in enumerate(world.truth)}

    def answer(req: FakeRequest) -> dict[str, Any] | None:
        p = req.payload
        if req.title == "RelevanceGrade":
            cid = by_text[p["context"]]
            return {"grade": 3 if cid in world.relevant else 0, "reason": "scripted"}
        if req.title == "PairwisePreference":
            a, b = by_text[p["context_1"]], by_text[p["context_2"]]
            better = 1 if rank[a] < rank[b] else 2
            # Per request: the two orders of a pair are different requests, hence independent.
            if _unit("wrong", req.digest(), SEED) < WRONG:
                better = 3 - better
            return {"better": better, "reason": "scripted"}
        return None

    return answer


async def run_one(label: str, world: World, root: Path) -> dict[str, Any]:
    strategy, overrides = VARIANTS[label]
    slug = label.replace(" ", "_")
    config = load_config(
        None,
        {
            "runs_root": str(root / "runs"),
            "cache_dir": str(
                root / f"cache-{slug}-{len(world.truth)}"
            ),  # fresh memo: nothing is free
            "models": {
                "judge": f"fake/judge?latency={LATENCY_S}",
                "concurrency": CONCURRENCY,
                "backoff_s": 0.0,
            },
            "sort": {"strategy": strategy, "order": "full"},
        },
        environ={},
    )
    run = RunFolder(config.runs_root, f"{slug}-{len(world.truth)}")
    write_question(
        run, {cid: world.texts[cid] for cid in world.engine}, "What is the port city's history?"
    )
    gateway = Gateway(config.cache_dir, concurrency=CONCURRENCY, backoff_s=0.0)
    ctx = StageContext(config=config, run=run, gateway=gateway)
    saved = {k: getattr(_SampleSort, k) for k in overrides}
    timings: dict[str, float] = {}
    samples: list[tuple[float, int, int]] = []
    sampler = asyncio.ensure_future(_sample_inflight(gateway, samples)) if TIMELINE else None
    try:
        for k, v in overrides.items():
            setattr(_SampleSort, k, v)
        with FAKE.script(responder(world)), gateway.scope("sort"):
            await sort(ctx, timings=timings)
    finally:
        if sampler is not None:
            sampler.cancel()
        for k, v in saved.items():
            setattr(_SampleSort, k, v)
        gateway.close()
    row = run.read("ranking").to_pylist()[0]
    assert sorted(row["ordered_ids"]) == sorted(world.truth), (
        "the relevant set must be ordered whole"
    )
    calls = row["judge_calls"] - CANDIDATES_N
    ideal = calls * LATENCY_S / CONCURRENCY
    ranks = average_ranks(row["ordered_ids"], row["tie_group"])
    got = [ranks[c] for c in world.truth]
    true = list(range(len(world.truth)))
    if TIMELINE:
        _print_timeline(label, samples, timings)
    return {
        "label": label,
        "relevant": len(world.truth),
        "comparisons": row["comparisons"],
        "calls": calls,
        "wall": timings["ordering_s"],
        "relevance_wall": timings["relevance_s"],
        "ideal": ideal,
        "tau": kendalltau(true, got).statistic,
        "rho": spearmanr(true, got).statistic,
        "ties": len(row["tie_group"]) - len(set(row["tie_group"])),
    }


TIMELINE = False


async def _sample_inflight(gateway: Gateway, out: list[tuple[float, int, int]]) -> None:
    """Every 5 ms: (time, calls in flight, calls waiting for a slot) of the judge's limit."""
    while True:
        now = time.perf_counter()
        limiters = list(gateway._loops.get().limiters.values())
        if limiters:
            limiter = limiters[-1]
            out.append((now, limiter.in_use, len(limiter._waiters)))
        await asyncio.sleep(0.005)


def _print_timeline(label: str, samples: list[tuple[float, int, int]], timings: dict) -> None:
    """Mean calls in flight per 0.2 s of the ordering phase, and the idle share of the slots."""
    if not samples:
        return
    end = samples[-1][0]
    start = end - timings["ordering_s"]
    rows = [s for s in samples if s[0] >= start]
    line, idle, full = [], 0.0, 0
    for k in range(int((end - start) / 0.2) + 1):
        win = [r[1] for r in rows if start + 0.2 * k <= r[0] < start + 0.2 * (k + 1)]
        if win:
            mean = sum(win) / len(win)
            line.append(f"{mean:4.1f}")
            idle += (CONCURRENCY - mean) * 0.2
            full += mean >= CONCURRENCY - 0.5
    print(f"  timeline {label}: idle slot-seconds {idle:.2f} ({idle / CONCURRENCY:.2f} s of wall)")
    for k in range(0, len(line), 20):
        print(f"    {k * 0.2:5.1f}s " + " ".join(line[k : k + 20]))


async def gateway_floor(root: Path, calls: int) -> float:
    """wall / ideal of ``calls`` independent calls at the same latency and concurrency: what the
    gateway and this machine's load cost on their own, with no ordering logic at all."""
    gateway = Gateway(root / "cache-floor", concurrency=CONCURRENCY, backoff_s=0.0)
    from ragaudit.prompts import PAIRWISE, PairwiseInput

    async def one(i: int) -> None:
        inp = PairwiseInput(question="q", context_1=f"floor {i} a", context_2=f"floor {i} b")
        await gateway.astructured(
            model=f"fake/judge?latency={LATENCY_S}",
            messages=PAIRWISE.messages(inp),
            schema=PAIRWISE.output_model,
            prompt_version=PAIRWISE.key,
        )

    started = time.perf_counter()
    await asyncio.gather(*(one(i) for i in range(calls)))
    wall = time.perf_counter() - started
    gateway.close()
    return wall / (calls * LATENCY_S / CONCURRENCY)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--relevant", type=int, nargs="+", default=[50, 200])
    parser.add_argument("--strategies", nargs="+", default=list(VARIANTS), choices=list(VARIANTS))
    parser.add_argument(
        "--timeline", action="store_true", help="print the calls in flight over time"
    )
    args = parser.parse_args()
    global TIMELINE
    TIMELINE = args.timeline
    root = scratch("sort")
    results: list[dict[str, Any]] = []
    for n in args.relevant:
        world = make_world(n)
        for label in args.strategies:
            results.append(asyncio.run(run_one(label, world, root)))
            r = results[-1]
            print(
                f"  done: {label} @ {n} relevant: {r['calls']} calls, {r['wall']:.1f} s", flush=True
            )
    floor = asyncio.run(gateway_floor(root, 800))

    print(
        f"\nOrdering phase, 1 question x {CANDIDATES_N} candidates, fake judge "
        f"{LATENCY_S * 1000:.0f} ms/call, {WRONG:.0%} wrong answers per call, both orders asked, "
        f"concurrency {CONCURRENCY}"
    )
    rows = []
    for r in results:
        base = next(
            (b for b in results if b["label"] == "insertion" and b["relevant"] == r["relevant"]),
            None,
        )
        rows.append(
            (
                r["label"],
                r["relevant"],
                r["comparisons"],
                r["calls"],
                f"{r['wall']:.1f}",
                f"{r['ideal']:.1f}",
                f"{r['wall'] / r['ideal']:.2f}",
                f"{r['calls'] / base['calls']:.2f}" if base else "-",
                f"{r['wall'] / base['wall']:.3f}" if base else "-",
                f"{r['tau']:.3f}",
                f"{r['tau'] - base['tau']:+.3f}" if base else "-",
                f"{r['rho']:.3f}",
            )
        )
    print(
        table(
            rows,
            (
                "strategy",
                "relevant",
                "pairs",
                "calls",
                "wall s",
                "ideal s",
                "wall/ideal",
                "calls/ins",
                "wall/ins",
                "tau",
                "tau-ins",
                "rho",
            ),
        )
    )
    print(
        f"\nGateway floor on this machine now: 800 independent calls at concurrency {CONCURRENCY} "
        f"take {floor:.2f} x their ideal (no ordering logic at all)."
    )
    relevance = [r["relevance_wall"] for r in results]
    print(
        f"Relevance phase ({CANDIDATES_N} verdicts, all at once): "
        f"{min(relevance):.1f}-{max(relevance):.1f} s "
        f"(ideal {CANDIDATES_N * LATENCY_S / CONCURRENCY:.1f} s)."
    )

    print("\nGoals, sample vs insertion:")
    for n in args.relevant:
        s = next((r for r in results if r["label"] == "sample" and r["relevant"] == n), None)
        i = next((r for r in results if r["label"] == "insertion" and r["relevant"] == n), None)
        if not s or not i:
            continue
        checks = [
            ("wall <= 20% of insertion", s["wall"] / i["wall"], s["wall"] / i["wall"] <= 0.20),
            ("wall <= 1.3 x own ideal", s["wall"] / s["ideal"], s["wall"] / s["ideal"] <= 1.3),
            ("calls <= 1.5 x insertion", s["calls"] / i["calls"], s["calls"] / i["calls"] <= 1.5),
            ("tau >= insertion + 0.1", s["tau"] - i["tau"], s["tau"] - i["tau"] >= 0.1),
        ]
        for name, value, ok in checks:
            print(f"  {n:>3} relevant  {name:<26} {value:7.3f}  {'PASS' if ok else 'FAIL'}")
    print("\n" + json.dumps({"results": results, "gateway_floor": floor}, default=float))


if __name__ == "__main__":
    main()
