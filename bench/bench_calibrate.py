"""Are calibration's intervals honest? A judge that flips a known share p of the oracle's verdicts.

Each seed flips a different set of verdicts (independently, with chance p each); the pairwise
agreement it implies is 1 - p on every WikiEval metric (a pair scores 1 when neither variant's
verdict flipped, ½ when one did, 0 when both did: (1-p)² + p(1-p) = 1-p). Prints, per metric,
the mean agreement over the seeds and the coverage: the share of seeds whose 95 % interval holds
1 - p (about 0.95 for an honest interval).

    python bench/bench_calibrate.py [--seeds 50] [--p 0.2] [--pairs 50]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time

from _util import REPO, scratch, table
from support.oracle import Oracle

import ragaudit  # noqa: F401
from ragaudit.cache import Gateway
from ragaudit.cache._fake import FAKE
from ragaudit.calibration import CalibrationInputs, load_wikieval, run_calibration
from ragaudit.metrics import Deps

SHARED = [r / "shared" / "data" / "wikieval" for r in (REPO.parent, REPO.parent.parent)]
BUNDLED = REPO / "data" / "calibration" / "wikieval"


async def main(seeds: int, p: float, pairs: int) -> None:
    """Run the seeds and print coverage."""
    source = next((s for s in SHARED if s.is_dir()), BUNDLED)
    inputs = CalibrationInputs(load_wikieval(source, pairs))
    expected = 1 - p
    gw = Gateway(scratch("calibrate") / "memo", concurrency=32, backoff_s=0.0, max_retries=1)
    values: dict[str, list[float]] = {}
    covered: dict[str, int] = {}
    widths: dict[str, list[float]] = {}
    started = time.perf_counter()
    for seed in range(seeds):
        # The seed in the model string keeps each seed's answers apart in the memo.
        deps = Deps.of(
            gw, f"fake/judge?seed={seed}", "fake/embed", {"answer_relevancy_strictness": 1}
        )
        with FAKE.script(Oracle.from_calibration(inputs, flip=p, seed=seed)):
            result = await run_calibration(inputs, deps, window=100_000, with_consistency=False)
        for f in result.figures:
            m = f["metric"]
            values.setdefault(m, []).append(f["value"])
            widths.setdefault(m, []).append(f["ci_high"] - f["ci_low"])
            covered[m] = covered.get(m, 0) + int(f["ci_low"] <= expected <= f["ci_high"])
    gw.close()
    rows = [
        (
            m,
            len(v),
            f"{expected:.3f}",
            f"{statistics.mean(v):.3f}",
            f"{statistics.mean(widths[m]):.3f}",
            f"{covered[m] / len(v):.2f}",
        )
        for m, v in sorted(values.items())
    ]
    print(f"WikiEval {source} ({pairs} pairs a metric), p = {p}, {seeds} seeds, 95 % intervals")
    print(
        table(rows, ("metric", "seeds", "implied", "mean agreement", "mean CI width", "coverage"))
    )
    print(f"{time.perf_counter() - started:.1f} s")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--seeds", type=int, default=50)
    parser.add_argument("--p", type=float, default=0.2)
    parser.add_argument("--pairs", type=int, default=50)
    args = parser.parse_args()
    asyncio.run(main(args.seeds, args.p, args.pairs))
