"""report.html of 1,000 questions × 20 metrics: build time, file size, bytes per question.

Run: ``RAGAUDIT_SHARED_DATA=../shared/data python bench/bench_report_html.py [N]``. The run
folder is synthetic (tests/support/html_runs.py): real DuReader and WikiEval texts when the
shared data is there, top-10 of 20 candidates per question, ragas-style reasons on every score
row. The target is ≤ 10 s for the model and the page together (imports apart) and ≤ 10 MB.
"""

from __future__ import annotations

import json
import re
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _util  # noqa: E402,F401  (tests/ on the path, the bench home)

started = time.perf_counter()
from support.html_runs import SHARED, write_full_run  # noqa: E402

import ragaudit.metrics  # noqa: E402  (the registered names the synthetic run scores)
from ragaudit.reporting import build_report, write_html  # noqa: E402
from ragaudit.reporting._html import unpack  # noqa: E402

IMPORT_S = time.perf_counter() - started
METRICS = 20


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
    names = sorted(ragaudit.metrics.METRICS)[:METRICS]
    with tempfile.TemporaryDirectory() as tmp:
        run_dir = write_full_run(Path(tmp), "bench", n, names)
        t0 = time.perf_counter()
        report = build_report(run_dir)
        t1 = time.perf_counter()
        page = write_html(report)
        t2 = time.perf_counter()
        html = page.read_text(encoding="utf-8")
    size = len(html.encode("utf-8"))
    blob = re.search(r'id="drill">([^<]*)<', html).group(1)  # type: ignore[union-attr]
    raw = sum(len(json.dumps(r, ensure_ascii=False).encode("utf-8")) for r in unpack(blob))
    figs = {
        m.group(1): len(m.group(2).encode("utf-8"))
        for m in re.finditer(r'<figure class="(\w+)"(.*?)</figure>', html, flags=re.S)
    }
    print(f"{n} questions x {METRICS} metrics, texts from {SHARED if SHARED.is_dir() else 'demo'}")
    print(f"imports (ragas's metric registry included): {IMPORT_S:.2f} s")
    print(f"build_report: {t1 - t0:.2f} s; render + write report.html: {t2 - t1:.2f} s")
    total = t2 - t0
    print(f"model + html: {total:.2f} s (target <= 10 s: {'ok' if total <= 10 else 'MISSED'})")
    fits = "ok" if size <= 10e6 else "MISSED"
    print(f"report.html: {size / 1e6:.2f} MB (target <= 10 MB: {fits})")
    print(
        f"drill-down: {len(blob) / 1e6:.2f} MB packed ({len(blob) / n:.0f} B a question), "
        f"~{raw / 1e6:.1f} MB as JSON ({raw / n:.0f} B a question)"
    )
    print("charts (bytes): " + ", ".join(f"{k} {v:,}" for k, v in figs.items()))
    rest = size - len(blob) - sum(figs.values())
    print(f"rest of the page (tables, question list, script): {rest / 1e6:.2f} MB")


if __name__ == "__main__":
    main()
