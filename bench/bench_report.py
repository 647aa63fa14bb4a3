"""The report model + report.xlsx of 1,000 questions × 20 metrics (a synthetic run folder).

Run: ``python bench/bench_report.py``. Prints the time of each step; the target is ≤ 10 s for
the model and the xlsx together (imports excluded, printed apart).
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _util  # noqa: E402,F401  (tests/ on the path, the bench home)

started = time.perf_counter()
from support.reporting_runs import write_run  # noqa: E402

import ragaudit.metrics  # noqa: E402  (the registered names the synthetic run scores)
from ragaudit.reporting import build_report, summarise, write_xlsx  # noqa: E402

IMPORT_S = time.perf_counter() - started
QUESTIONS, METRICS = 1000, 20


def main() -> None:
    import polars as pl

    from ragaudit.runfolder import RunFolder
    from ragaudit.schemas import SUMMARY, to_table

    rng = np.random.default_rng(0)
    names = sorted(ragaudit.metrics.METRICS)[:METRICS]
    values = {
        m: [None if rng.random() < 0.03 else float(v) for v in rng.random(QUESTIONS)] for m in names
    }
    with tempfile.TemporaryDirectory() as tmp:
        run_dir = write_run(Path(tmp), "bench", values, reason_chars=400)
        run = RunFolder(Path(tmp), "bench")
        t0 = time.perf_counter()
        scores = pl.from_arrow(run.read("scores"))
        rows = [
            {"run_id": "bench", **{k: getattr(s, k) for k in SUMMARY.names if k != "run_id"}}
            for s in summarise(scores, {}, 1000)
        ]
        run.write("summary", to_table(rows, SUMMARY))
        t1 = time.perf_counter()
        report = build_report(run_dir)
        t2 = time.perf_counter()
        write_xlsx(report, run_dir / "report.xlsx")
        t3 = time.perf_counter()
        size = (run_dir / "report.xlsx").stat().st_size
    print(f"{QUESTIONS} questions x {METRICS} metrics ({QUESTIONS * METRICS} score rows)")
    print(f"imports (ragas's metric registry included): {IMPORT_S:.2f} s")
    print(f"summary (scipy bootstrap, 1,000 resamples per metric): {t1 - t0:.2f} s")
    print(f"build_report: {t2 - t1:.2f} s")
    print(f"report.xlsx ({size / 1e6:.1f} MB, {METRICS + 3} sheets): {t3 - t2:.2f} s")
    total = t3 - t1
    print(f"model + xlsx: {total:.2f} s (target <= 10 s: {'ok' if total <= 10 else 'MISSED'})")


if __name__ == "__main__":
    main()
