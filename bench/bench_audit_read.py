"""The audit's readers at scale: a day of request-log lines read into ``requests.parquet``.

Goals (issue #45):
- reading 100,000 lines: the time and the peak memory (printed);
- 1,000,000 lines read in under 1.5 GB of peak memory (the read is streamed);
- the same requests, and the same estimates through the audit's draw and estimator, from the
  JSONL, OTLP and UBI forms of the same traffic.

With ``--against REV`` (issue #55's reading changes): the same day of ``--forms`` requests in
each form read by this tree and by ``REV`` (a temporary git worktree, removed at the end), in
alternating order over ``--rounds`` rounds; printed side by side (median seconds and CPU
seconds of each read) with this tree's CPU over ``REV``'s; goal: no form's read more than 10 %
slower in CPU (the wall moves with the shared machine's load more than with the code).

Each read runs in a child process, so its peak resident memory (``ru_maxrss``) is its own.
The log lines have the layout of the audit config's example (``id``, ``ts``, ``request.q``,
``retrieval.hits[*]``…): 6 collections, Zipf-distributed queries, 10 served documents each.

    python bench/bench_audit_read.py                # 100,000 and 1,000,000 lines, the forms
    python bench/bench_audit_read.py --lines 20000 --big 0   # a quick look
    python bench/bench_audit_read.py --against main --rounds 5   # this tree against main
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import random
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import _util  # noqa: F401  (offline environment first; tests/ on the path)
from support.audit_logs import FIELDS  # noqa: E402

DAY = dt.date(2026, 11, 26)
SEGMENTS = ["news", "finance", "sports", "tech", "health", "travel"]
GOAL_BYTES = 1.5 * 2**30
SLOWER_AT_MOST = 1.10  # this tree's read CPU over REV's, per form


def write_log(path: Path, n: int, seed: int = 7) -> None:
    """``n`` log lines of one day; every 1,000th line carries an e-mail to redact."""
    rng = random.Random(seed)
    weights = [1 / (r + 1) ** 1.1 for r in range(20_000)]  # Zipf over 20,000 distinct queries
    queries = rng.choices(range(20_000), weights=weights, k=n)
    start = dt.datetime.combine(DAY, dt.time(), dt.UTC)
    with path.open("w", encoding="utf-8") as fh:
        for i, q in enumerate(queries):
            seg = SEGMENTS[q % 6]
            hits = [
                {
                    "_id": f"{seg}-{(q * 7 + r) % 5000}",
                    "_score": round(10.0 - r * 0.7, 3),
                    "_source": {"content": f"{seg} article {(q * 7 + r) % 5000} on topic {q % 97}"},
                }
                for r in range(10)
            ]
            question = f"what happened with {seg} topic {q}?"
            if i % 1000 == 0:
                question += " mail me at reader@example.com"
            rec = {
                "id": f"req-{i}",
                "ts": (start + dt.timedelta(seconds=i * 86_400 / n)).isoformat(),
                "session_id": f"s-{rng.randrange(n // 4 + 1)}",
                "request": {"q": question, "filters": {"collection": seg}},
                "retrieval": {"hits": hits},
                "response": {"text": f"Answer about {seg} topic {q} [1].", "citations": [1]},
                "feedback": {"thumb": rng.choice(["up", "down", None, None])},
            }
            fh.write(json.dumps(rec) + "\n")


def child(fmt: str, pattern: str, out: str) -> None:
    """Read one day in this process and print its report as JSON (run by :func:`measure`)."""
    import ragaudit
    from ragaudit.audit import RedactOptions, SourceOptions, read_day

    fields = FIELDS if fmt in ("jsonl", "parquet") else {}
    ubi = {"events_path": pattern.replace("queries", "events")} if fmt == "ubi" else {}
    # ``fields`` and ``ubi`` as every tree takes them (a later one reads them as its options).
    src = SourceOptions(format=fmt, path=pattern, fields=fields, ubi=ubi)
    t0, cpu0 = time.perf_counter(), _cpu()
    report = read_day(
        src, RedactOptions(), DAY, segment="filters.collection", out=Path(out), max_bad_share=0.01
    )
    print(
        json.dumps(
            {
                "seconds": time.perf_counter() - t0,
                "cpu": _cpu() - cpu0,
                "ragaudit": ragaudit.__file__,
                "records": report.records,
                "bad": report.bad,
                "redactions": report.redactions,
                "maxrss_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
            }
        )
    )


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def measure(fmt: str, pattern: Path, out: Path, tree: Path | None = None) -> dict:
    """One read in a child process (of ``tree``'s ragaudit when given): its report, time, CPU
    and peak memory."""
    env = dict(os.environ, PYTHONPATH=str(tree)) if tree is not None else None
    proc = subprocess.run(
        [sys.executable, __file__, "--child", fmt, str(pattern), str(out)],
        capture_output=True,
        text=True,
        check=False,
        env=env,
    )
    if proc.returncode:
        raise RuntimeError(f"{fmt} read failed:\n{proc.stderr[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def same_requests(paths: dict[str, Path]) -> tuple[bool, str]:
    """Whether every form gave the same requests (query, session, time, segment, served ids)."""
    import polars as pl

    def key(path: Path) -> pl.DataFrame:
        df = pl.read_parquet(path)
        return df.select(
            "query",
            "session",
            "time",
            "segment",
            pl.col("docs").list.eval(pl.element().struct.field("id")).alias("ids"),
        ).sort("time", "query")

    base_name, base = next(iter(paths.items()))
    ref = key(base)
    for name, path in paths.items():
        other = key(path)
        if not ref.equals(other):
            return False, f"{name} differs from {base_name} ({other.height} vs {ref.height} rows)"
    return True, f"{ref.height:,} requests alike in {', '.join(paths)}"


def same_estimates(paths: dict[str, Path]) -> tuple[bool, str]:
    """Whether every form gives the same day's estimates through the audit's own draw and
    estimator, each drawn request's top 10 graded by one fixed rule of its query and document
    (a stand-in for the judge that any form's request gets alike)."""
    import hashlib

    import polars as pl

    from ragaudit.audit import SampleOptions, draw_sample, estimate, list_metrics

    def grade(query: str, doc: str) -> int:
        return hashlib.blake2b(f"{query}\x1f{doc}".encode(), digest_size=2).digest()[0] % 4

    def day(path: Path) -> pl.DataFrame:
        requests = pl.read_parquet(path)
        sample = draw_sample(requests.lazy(), SampleOptions(sample=400), salt="bench")
        docs = dict(requests.select("request_id", "docs").iter_rows())
        rows = []
        for unit, rid, query in sample.select("unit", "request_id", "query_norm").iter_rows():
            grades = [grade(query, d["id"]) for d in docs[rid][:10]]
            for metric, value in list_metrics(grades, 10, 2).items():
                ok = "ok" if value is not None else "skipped"
                rows.append({"unit": unit, "metric": metric, "value": value, "status": ok})
        values = pl.DataFrame(
            rows,
            schema={
                "unit": pl.String,
                "metric": pl.String,
                "value": pl.Float64,
                "status": pl.String,
            },
        )
        return estimate(values, sample).select("segment", "metric", "estimate", "ci_low", "ci_high")

    base_name, base = next(iter(paths.items()))
    ref = day(base)
    for name, path in paths.items():
        other = day(path)
        if other.shape != ref.shape or not all(
            ref[c].to_list() == other[c].to_list() for c in ("segment", "metric")
        ):
            return False, f"{name}'s estimates are other cells than {base_name}'s"
        worst = max(
            abs(a - b)
            for c in ("estimate", "ci_low", "ci_high")
            for a, b in zip(ref[c].fill_null(0), other[c].fill_null(0), strict=True)
        )
        if worst > 1e-12:
            return False, f"{name} differs from {base_name} by up to {worst:.3g}"
    return True, f"{ref.height} segment × metric estimates alike in {', '.join(paths)}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=100_000)
    parser.add_argument("--big", type=int, default=1_000_000)
    parser.add_argument("--forms", type=int, default=20_000, help="requests in the forms check")
    parser.add_argument("--child", nargs=3, metavar=("FORMAT", "PATTERN", "OUT"))
    parser.add_argument("--against", help="compare with this git revision (e.g. main)")
    parser.add_argument("--rounds", type=int, default=3, help="--against: reads of each")
    args = parser.parse_args()
    if args.child:
        child(*args.child)
        return
    if args.against:
        against(args.against, args.rounds, args.forms)
        return

    sys.path.insert(0, str(Path(__file__).parent))
    from _traffic_forms import parquet_rows, write_otlp, write_ubi
    from _util import scratch, table

    root = scratch("audit-read")
    rows = []
    results = {}
    for n in [args.lines] + ([args.big] if args.big else []):
        log = root / f"{n}" / "2026-11-26.jsonl"
        log.parent.mkdir()
        write_log(log, n)
        r = measure("jsonl", log.parent / "{day}.jsonl", root / f"{n}" / "requests.parquet")
        results[n] = r
        rows.append(
            (
                f"{n:,}",
                f"{log.stat().st_size / 2**20:,.0f}",
                f"{r['seconds']:.1f}",
                f"{n / r['seconds']:,.0f}",
                f"{r['maxrss_kb'] / 2**10:,.0f}",
                r["redactions"].get("email", 0),
            )
        )
    print(table(rows, ("lines", "log MB", "read s", "lines/s", "peak MB", "e-mails")))

    # The same traffic in the three forms, read side by side.
    n = args.forms
    base = root / "forms"
    (base / "jsonl").mkdir(parents=True)
    write_log(base / "jsonl" / "2026-11-26.jsonl", n, seed=11)
    outs = {"jsonl": base / "jsonl.parquet"}
    form_rows = [
        ("jsonl", *_timing(measure("jsonl", base / "jsonl" / "{day}.jsonl", outs["jsonl"])))
    ]
    (base / "otlp").mkdir()
    write_otlp(parquet_rows(outs["jsonl"]), base / "otlp" / "2026-11-26.jsonl")
    (base / "ubi").mkdir()
    write_ubi(
        parquet_rows(outs["jsonl"]),
        base / "ubi" / "queries-2026-11-26.jsonl",
        base / "ubi" / "events-2026-11-26.jsonl",
    )
    for fmt, pattern in (
        ("otlp", base / "otlp" / "{day}.jsonl"),
        ("ubi", base / "ubi" / "queries-{day}.jsonl"),
    ):
        outs[fmt] = base / f"{fmt}.parquet"
        form_rows.append((fmt, *_timing(measure(fmt, pattern, outs[fmt]))))
    print()
    print(table(form_rows, ("form", "requests", "read s", "requests/s", "peak MB")))
    print()

    first = results[args.lines]
    print(
        f"goal: reading {args.lines:,} lines — {first['seconds']:.1f} s, "
        f"peak {first['maxrss_kb'] / 2**10:,.0f} MB: met (printed)"
    )
    if args.big:
        big = results[args.big]
        peak = big["maxrss_kb"] * 1024
        verdict = (
            "met"
            if peak < GOAL_BYTES and big["records"] == args.big
            else f"not met: peak {peak / 2**30:.2f} GB, {big['records']:,} of {args.big:,} read"
        )
        print(f"goal: {args.big:,} lines under 1.5 GB — peak {peak / 2**30:.2f} GB: {verdict}")
    ok, why = same_requests(outs)
    print(
        f"goal: the same requests from the JSONL, OTLP and UBI forms — {why}: "
        f"{'met' if ok else 'not met: ' + why}"
    )
    ok, why = same_estimates(outs)
    print(
        f"goal: the same estimates from the JSONL, OTLP and UBI forms — {why}: "
        f"{'met' if ok else 'not met: ' + why}"
    )


def write_forms(base: Path, n: int) -> dict[str, Path]:
    """The same ``n`` requests as a JSONL log, OTLP trace lines and UBI exports: each form's
    file pattern (the OTLP and UBI forms are written from the JSONL day as this tree reads it)."""
    from _traffic_forms import parquet_rows, write_otlp, write_ubi

    (base / "jsonl").mkdir(parents=True)
    write_log(base / "jsonl" / "2026-11-26.jsonl", n, seed=11)
    read = base / "jsonl.parquet"
    measure("jsonl", base / "jsonl" / "{day}.jsonl", read)
    (base / "otlp").mkdir()
    write_otlp(parquet_rows(read), base / "otlp" / "2026-11-26.jsonl")
    (base / "ubi").mkdir()
    write_ubi(
        parquet_rows(read),
        base / "ubi" / "queries-2026-11-26.jsonl",
        base / "ubi" / "events-2026-11-26.jsonl",
    )
    return {
        "jsonl": base / "jsonl" / "{day}.jsonl",
        "otlp": base / "otlp" / "{day}.jsonl",
        "ubi": base / "ubi" / "queries-{day}.jsonl",
    }


def against(rev: str, rounds: int, n: int) -> None:
    """This tree against ``rev``: the same day of each form read by both, alternating."""
    from _util import REPO, load_average, scratch, table

    names = []
    for ref in (rev, "HEAD"):
        found = subprocess.run(
            ["git", "-C", str(REPO), "rev-parse", "--short", ref], capture_output=True, text=True
        )
        if found.returncode:
            raise SystemExit(f"--against {ref!r}: not a revision of {REPO}")
        names.append(found.stdout.strip())
    old, new = names[0], f"this tree ({names[1]})"
    root = scratch("audit-read-against")
    other = root / "tree"
    subprocess.run(
        ["git", "-C", str(REPO), "worktree", "add", "--detach", "-q", str(other), old], check=True
    )
    runs: dict[tuple[str, str], list[dict]] = {}
    try:
        patterns = write_forms(root / "forms", n)
        print(f"{n:,} requests a form; load {load_average()}", flush=True)
        for i in range(rounds):
            for fmt, pattern in patterns.items():
                order = [(new, REPO), (old, other)]
                for label, tree in order if i % 2 == 0 else order[::-1]:
                    out = root / f"{fmt}-{len(runs.get((fmt, label), []))}-{label[:4]}.parquet"
                    r = measure(fmt, pattern, out, tree)
                    if not r["ragaudit"].startswith(str(tree)):
                        raise SystemExit(f"{label} read with {r['ragaudit']}, not {tree}'s")
                    runs.setdefault((fmt, label), []).append(r)
                    print(f"round {i + 1} {fmt} {label}: {r['cpu']:.2f} s CPU", flush=True)
    finally:
        subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(other)])
        shutil.rmtree(root, ignore_errors=True)
    rows, goals = [], []
    for fmt in ("jsonl", "otlp", "ubi"):
        mine, theirs = runs[(fmt, new)], runs[(fmt, old)]
        cpu = statistics.median(r["cpu"] for r in mine) / statistics.median(
            r["cpu"] for r in theirs
        )
        wall = statistics.median(r["seconds"] for r in mine) / statistics.median(
            r["seconds"] for r in theirs
        )
        rows.append(
            (
                fmt,
                f"{mine[0]['records']:,} / {theirs[0]['records']:,}",
                f"{statistics.median(r['seconds'] for r in mine):.2f}",
                f"{statistics.median(r['seconds'] for r in theirs):.2f}",
                f"{statistics.median(r['cpu'] for r in mine):.2f}",
                f"{statistics.median(r['cpu'] for r in theirs):.2f}",
                f"{cpu:.3f}",
                f"{wall:.3f}",
            )
        )
        verdict = "met" if cpu <= SLOWER_AT_MOST else f"not met: {cpu:.3f} of {old}'s CPU"
        goals.append(f"goal: {fmt} read no more than 10 % slower than {old} (CPU): {verdict}")
    print()
    print(
        table(
            rows,
            (
                "form",
                "requests (this / old)",
                "wall s",
                f"wall s {old}",
                "CPU s",
                f"CPU s {old}",
                "CPU ratio",
                "wall ratio",
            ),
        )
    )
    print(f"medians of {rounds} reads each; load {load_average()}")
    print("\n".join(goals))


def _timing(r: dict) -> tuple[str, str, str, str]:
    return (
        f"{r['records']:,}",
        f"{r['seconds']:.1f}",
        f"{r['records'] / r['seconds']:,.0f}",
        f"{r['maxrss_kb'] / 2**10:,.0f}",
    )


if __name__ == "__main__":
    main()
