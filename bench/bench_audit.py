"""Does the audit's daily estimate hold the truth, at a bounded judge cost? 30 simulated days.

The simulated service (``_traffic.py``): 100,000 requests a day over 6 segments, Zipf-distributed
queries typed several ways, a fixed served top-10 per query with a planted grade 0-3 per served
document. Each day the audit's own code draws the sample (:func:`ragaudit.audit.draw_sample`,
salt "bench"), grades each drawn request's top 10 through a judgment store (a dict keyed by
normalised query + document id, kept across days; a miss is one call to a scripted judge that
is off by one grade 15 % of the time), scores the lists (:func:`ragaudit.audit.list_metrics`)
and estimates per segment (:func:`ragaudit.audit.estimate`). The truth is each segment's mean
over **every** request of the day with the planted grades, computed with numpy apart from the
audit's code.

The requests table is built by the simulator directly with the ``requests.parquet`` columns
(no reader yet on this branch); day 1 is also written as the service's JSONL log
(kept with ``--jsonl DIR``) for a reader to read back. Printed, each met or not:

- the 95 % intervals of each segment's daily nDCG@10 and relevant share hold the planted truth
  in >= 93 % of (day, segment) cells;
- judge calls <= 2,000 a day, and from the second day on >= 70 % of grades come from the store.

Beside them, the same draws estimated with the planted grades instead of the judge's (what the
judge's noise costs the coverage), the PPI-corrected figure where people (who give the planted
grades) label ``--labels`` graded requests a day, coverage of the ``(all)`` cells too, the
intervals' half-widths and mean errors, and Kish's ESS over n.

    python bench/bench_audit.py [--days 30] [--sample 160] [--requests 100000] [--labels 40]
        [--vocabulary 20000] [--zipf 1.0] [--jsonl DIR]
"""

from __future__ import annotations

import argparse
import shutil
import time
from pathlib import Path

import numpy as np
import polars as pl
from _traffic import RELEVANT, ScriptedJudge, Service, write_jsonl
from _util import scratch, table

from ragaudit.audit import ALL, SampleOptions, draw_sample, estimate, list_metrics
from ragaudit.audit._sample import permanent_random

COVERAGE_GOAL = 0.93
MAX_CALLS = 2000
MIN_STORED = 0.70
SALT = "bench"


def grade_day(
    sample: pl.DataFrame,
    requests: pl.DataFrame,
    service: Service,
    judge: ScriptedJudge,
    store: dict[tuple[str, str], int],
) -> tuple[pl.DataFrame, pl.DataFrame, int, int]:
    """List metrics of every drawn request: with the judge's grades (through the store) and
    with the planted ones; and the grades paid for and taken from the store."""
    k = service.k
    drawn = sample.select("request_id", "segment", "query_norm").join(
        requests.select("request_id", "docs"), on="request_id"
    )
    judged, planted = [], []
    paid = stored = 0
    for request_id, segment, query_norm, docs in drawn.iter_rows():
        grades, truth = [], []
        for doc in docs[:k]:
            key = (query_norm, doc["id"])
            grade = store.get(key)
            if grade is None:
                grade = store[key] = judge.grade(segment, doc["id"])
                paid += 1
            else:
                stored += 1
            grades.append(grade)
            _, query, pos = doc["id"].rsplit("-", 2)
            truth.append(service.planted(segment, int(query[1:]), int(pos[1:])))
        for rows, got in ((judged, grades), (planted, truth)):
            for metric, value in list_metrics(got, k, RELEVANT).items():
                status = "ok" if value is not None else "skipped"
                rows.append(
                    {"request_id": request_id, "metric": metric, "value": value, "status": status}
                )
    schema = {
        "request_id": pl.String,
        "metric": pl.String,
        "value": pl.Float64,
        "status": pl.String,
    }
    return pl.DataFrame(judged, schema=schema), pl.DataFrame(planted, schema=schema), paid, stored


def people(planted: pl.DataFrame, n: int) -> pl.DataFrame:
    """People's values of ``n`` graded requests a day (the planted grades' metrics): those
    with the smallest hash under their own salt, so the labelled ones are a random subsample."""
    ids = sorted(set(planted["request_id"]), key=lambda r: permanent_random("people", r))[:n]
    return planted.filter(pl.col("request_id").is_in(ids), pl.col("status") == "ok").select(
        "request_id", "metric", "value"
    )


def print_coverage(
    cells: dict[tuple[str, str], list[bool]],
    overall: dict[tuple[str, str], list[bool]],
    widths: dict[str, list[float]],
    errors: dict[str, list[float]],
    ess_ratio: list[float],
) -> None:
    """Coverage per kind of grades and metric, then the judge's widths, errors and ESS / n."""
    summary = [
        (kind, metric, f"{np.mean(held):.1%}", f"{np.mean(overall[(kind, metric)]):.1%}")
        for (kind, metric), held in cells.items()
    ]
    print(table(summary, ("grades", "metric", "segment cells held", "(all) cells held")))
    print(
        "judge, per segment cell: "
        + "; ".join(
            f"{m} mean half-width {np.nanmean(widths[m]):.3f}, mean error {np.mean(errors[m]):+.4f}"
            for m in widths
        )
        + f"; Kish ESS / n {np.nanmean(ess_ratio):.2f}"
    )


def replicates(service: Service, opts: SampleOptions, n: int) -> None:
    """Coverage over independent draws of one day (``n`` salts), with the planted grades.

    The 30 days share most of their units (the hash sample is coordinated on purpose), so
    their errors are correlated and their coverage is a handful of independent trials; other
    salts draw independent samples of one day, which is what a 95 % interval promises about.
    """
    requests, truth = service.day(0), service.truth(0)
    metrics = (f"ndcg@{service.k}", "relevant share")
    held: dict[tuple[str, str], list[bool]] = {}
    for r in range(n):
        sample = draw_sample(requests.lazy(), opts, salt=f"replicate-{r}")
        _, planted, _, _ = grade_day(sample, requests, service, ScriptedJudge(service), {})
        for row in (
            estimate(planted, sample).filter(pl.col("metric").is_in(metrics)).iter_rows(named=True)
        ):
            scope = "(all)" if row["segment"] == ALL else "segment"
            target = truth[(row["segment"], row["metric"])]
            ok = row["ci_low"] is not None and row["ci_low"] <= target <= row["ci_high"]
            held.setdefault((scope, row["metric"]), []).append(ok)
    print(
        f"independent draws of day 1 ({n} salts, planted grades): "
        + "; ".join(f"{m} {s} cells {np.mean(v):.1%} of {len(v)}" for (s, m), v in held.items())
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--days", type=int, default=30)
    parser.add_argument("--sample", type=int, default=160, help="expected draws a day")
    parser.add_argument("--requests", type=int, default=100_000, help="requests a day")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--vocabulary", type=int, default=20_000, help="queries per segment")
    parser.add_argument("--zipf", type=float, default=1.0, help="Zipf exponent of the queries")
    parser.add_argument("--labels", type=int, default=40, help="requests people label a day")
    parser.add_argument("--jsonl", type=Path, default=None, help="keep day 1's JSONL log here")
    parser.add_argument(
        "--replicates", type=int, default=40, help="independent draws of day 1 (other salts)"
    )
    args = parser.parse_args()

    started = time.perf_counter()
    service = Service(
        requests_per_day=args.requests, vocabulary=args.vocabulary, zipf=args.zipf, seed=args.seed
    )
    judge = ScriptedJudge(service)
    opts = SampleOptions(sample=args.sample, k=service.k)
    store: dict[tuple[str, str], int] = {}
    metrics = (f"ndcg@{service.k}", "relevant share")
    print(
        f"service: {args.requests:,} requests/day, {len(service.segments)} segments, "
        f"{service.vocabulary:,} queries/segment (Zipf s={service.zipf}), top-{service.k}; "
        f"judge off by one {judge.off_by_one:.0%}; sample {args.sample}/day; people label "
        f"{args.labels} graded requests/day; built in {time.perf_counter() - started:.1f} s"
    )
    kinds = ("judge", "planted grades", "PPI (judge + labels)")
    cells: dict[tuple[str, str], list[bool]] = {(k, m): [] for m in metrics for k in kinds}
    overall: dict[tuple[str, str], list[bool]] = {(k, m): [] for m in metrics for k in kinds}
    widths: dict[str, list[float]] = {m: [] for m in metrics}
    errors: dict[str, list[float]] = {m: [] for m in metrics}
    rows, calls, shares, ess_ratio = [], [], [], []
    t_draw = t_estimate = 0.0
    for day in range(args.days):
        requests = service.day(day)
        if day == 0:
            out = args.jsonl or scratch("audit")
            t0 = time.perf_counter()
            path = write_jsonl(requests, out / "day-00.jsonl")
            print(
                f"day 1 as JSONL: {requests.height:,} lines, {path.stat().st_size / 1e6:.1f} MB "
                f"in {time.perf_counter() - t0:.1f} s" + (f" ({path})" if args.jsonl else "")
            )
            if args.jsonl is None:
                shutil.rmtree(out)
        t0 = time.perf_counter()
        sample = draw_sample(requests.lazy(), opts, salt=SALT)
        t_draw += time.perf_counter() - t0
        judged, planted, paid, stored = grade_day(sample, requests, service, judge, store)
        t0 = time.perf_counter()
        with_labels = estimate(judged, sample, labels=people(planted, args.labels))
        t_estimate += time.perf_counter() - t0
        estimates = {
            "judge": with_labels,
            "planted grades": estimate(planted, sample),
            "PPI (judge + labels)": with_labels.select(
                "segment",
                "metric",
                pl.col("ppi_estimate").alias("estimate"),
                pl.col("ppi_ci_low").alias("ci_low"),
                pl.col("ppi_ci_high").alias("ci_high"),
                "n",
                "ess",
            ),
        }
        truth = service.truth(day)
        held_today = 0
        for kind, frame in estimates.items():
            for row in frame.filter(pl.col("metric").is_in(metrics)).iter_rows(named=True):
                target = truth[(row["segment"], row["metric"])]
                low, high = row["ci_low"], row["ci_high"]
                held = low is not None and low <= target <= high
                (overall if row["segment"] == ALL else cells)[(kind, row["metric"])].append(held)
                if kind == "judge" and row["segment"] != ALL:
                    held_today += held
                    widths[row["metric"]].append((high - low) / 2 if low is not None else np.nan)
                    errors[row["metric"]].append(row["estimate"] - target)
                    ess_ratio.append(row["ess"] / row["n"] if row["n"] else np.nan)
        calls.append(paid)
        shares.append(stored / (paid + stored) if paid + stored else 0.0)
        rows.append(
            (
                day + 1,
                sample.height,
                paid,
                f"{shares[-1]:.0%}",
                f"{held_today}/{2 * len(service.segments)}",
            )
        )
    if rows:
        print(table(rows, ("day", "drawn", "judge calls", "from store", "cells held")))
        print()
        print_coverage(cells, overall, widths, errors, ess_ratio)
    print(
        f"draw {t_draw / max(args.days, 1):.2f} s/day, estimate "
        f"{t_estimate / max(args.days, 1):.2f} s/day; total {time.perf_counter() - started:.0f} s"
    )
    if args.replicates:
        replicates(service, opts, args.replicates)
    print()
    if not calls:
        return
    held = [h for m in metrics for h in cells[("judge", m)]]
    coverage = float(np.mean(held))
    reason = f"{coverage:.1%} < {COVERAGE_GOAL:.0%}"
    print(
        f"intervals hold the truth in {sum(held)}/{len(held)} (day, segment, metric) cells "
        f"({coverage:.1%}; goal >= {COVERAGE_GOAL:.0%}): "
        + ("met" if coverage >= COVERAGE_GOAL else f"not met: {reason}")
    )
    worst = max(calls)
    print(
        f"judge calls a day: max {worst:,}, mean {np.mean(calls):,.0f} (goal <= {MAX_CALLS:,}): "
        + ("met" if worst <= MAX_CALLS else f"not met: day {calls.index(worst) + 1} made {worst:,}")
    )
    later = shares[1:]
    if later:
        low = min(later)
        print(
            f"grades from the store from day 2 on: min {low:.0%}, mean {np.mean(later):.0%} "
            f"(goal >= {MIN_STORED:.0%}, store: a dict keyed by normalised query + document id): "
            + (
                "met"
                if low >= MIN_STORED
                else f"not met: day {later.index(low) + 2} took {low:.0%} from the store"
            )
        )


if __name__ == "__main__":
    main()
