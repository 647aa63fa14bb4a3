"""Do an audit day's intervals hold the truth when requests of one query were served different
lists? Independent draws of a day, coverage per kind of figure (issue 55, items 9 and 10).

Two days (``tests/support/audit_coverage.py``): the bundled example day (57 requests of 12
queries, ``data/audit``, read by the JSONL reader, drawn with the bundled config's options;
requests of one query were served lists in different orders and with different documents) and a
day of 2,000 requests whose requests of a query are served one of three lists. Every request
is graded once by a scripted judge that over-rates 15 % of (query, document) pairs; people give
the true grades. A cell is a segment (or ``(all)``) × list metric of one draw; its truth is the
judge's mean over every request of the day (the judge's figure) or people's (the PPI figure).
Each draw is another salt of the audit's own ``draw_sample`` and ``estimate``; people label the
first ``--labels`` graded requests of the labelling order.

Printed: per day and kind of figure, the share of cells whose 95 % interval held the truth (a
cell with no interval did not), the intervals given, those of no width, the cells with no
interval, the mean half-width and the requests graded per draw; then each goal as met or not
met:

- every kind of figure holds the truth in >= 93 % of cells on both days;
- no interval of no width where the day's requests were not all graded.

    python bench/bench_audit_coverage.py [--replicates 200] [--labels 12] [--varied-labels 20]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np
from _util import table
from support.audit_coverage import (
    Coverage,
    bundled_day,
    bundled_options,
    coverage,
    varied_day,
)

from ragaudit.audit import SampleOptions

GOAL = 0.93


def rows(name: str, found: Coverage) -> list[tuple[str, ...]]:
    """One row per kind of figure."""
    out = []
    for kind in ("judge", "PPI"):
        widths = found.widths.get(kind, [])
        out.append(
            (
                name,
                kind,
                f"{found.share(kind):.1%}",
                str(len(found.held.get(kind, []))),
                str(found.zero_width(kind)),
                str(found.missing.get(kind, 0)),
                f"{np.mean(widths) / 2:.3f}" if widths else "-",
                f"{np.mean(found.graded):.1f}",
            )
        )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replicates", type=int, default=200, help="independent draws a day")
    parser.add_argument("--labels", type=int, default=12, help="requests labelled, bundled day")
    parser.add_argument("--varied-labels", type=int, default=20, help="requests labelled, varied")
    args = parser.parse_args()

    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="ragaudit-bench-coverage-") as tmp:
        bundled = bundled_day(Path(tmp))
    opts = bundled_options()
    days = {
        f"bundled (sample {opts.sample})": coverage(
            bundled, opts, replicates=args.replicates, labels=args.labels
        ),
        "varied (sample 60)": coverage(
            varied_day(),
            SampleOptions(sample=60, k=3),
            replicates=args.replicates,
            labels=args.varied_labels,
        ),
    }
    print(
        f"{args.replicates} draws a day; bundled: {bundled.height} requests, "
        f"{bundled['query'].str.to_lowercase().n_unique()} queries; "
        f"{time.perf_counter() - started:.0f} s"
    )
    print(
        table(
            [r for name, found in days.items() for r in rows(name, found)],
            (
                "day",
                "figure",
                "cells held",
                "intervals",
                "no width",
                "no interval",
                "mean half-width",
                "graded a draw",
            ),
        )
    )
    print()
    worst = min((found.share(k), f"{name} {k}") for name, found in days.items() for k in found.held)
    print(
        f"every kind of figure holds the truth in >= {GOAL:.0%} of cells on both days: "
        + ("met" if worst[0] >= GOAL else f"not met: {worst[1]} {worst[0]:.1%}")
    )
    points = {
        f"{name} {k}": found.zero_width(k) for name, found in days.items() for k in found.held
    }
    bad = {k: n for k, n in points.items() if n}
    print(
        "no interval of no width where a day's requests were not all graded: "
        + ("met" if not bad else "not met: " + ", ".join(f"{k} {n}" for k, n in bad.items()))
    )


if __name__ == "__main__":
    main()
