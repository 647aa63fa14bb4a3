"""The run page after a label: a full rebuild (as before) against the viewer's two-part page.

Run: ``python bench/bench_label_page.py [--questions N] [--labels K]``. A synthetic judged run
(tests/support/label_runs.py: N questions × 10 candidates graded 0–3, three judged metrics),
its labelling sample drawn, then K labels appended one at a time as the labelling page does.
After each label the run page is made twice, side by side on the same folder:

- **before**: ``render_html(build_report(run))``, the whole report (what the viewer did when
  the folder's signature changed);
- **after**: the viewer's ``Viewer.page`` (warm, as a running server is): the report without
  people and its rendered frame kept, only ``people_section`` (the judge against the labels,
  Krippendorff's α bootstrap included) and the labels' parts of the page done again.

Then ``compare.json`` is written into the run (as ``compare`` does into run B) and the page
made again: nothing should be rebuilt. The goal: the page answers a label in ≤ 1 s.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _util  # noqa: E402  (tests/ on the path, the offline environment)
from support.label_runs import write_label_run  # noqa: E402

from ragaudit import labels  # noqa: E402
from ragaudit.atomic import write_json  # noqa: E402
from ragaudit.reporting import build_report, people_section, render_html  # noqa: E402
from ragaudit.viewer._listing import signature  # noqa: E402
from ragaudit.viewer._pages import Viewer  # noqa: E402

GOAL_S = 1.0


def _timed(fn: object) -> tuple[float, object]:
    t0 = time.perf_counter()
    out = fn()  # type: ignore[operator]
    return time.perf_counter() - t0, out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--questions", type=int, default=40)
    parser.add_argument("--labels", type=int, default=5, help="labels timed one by one")
    parser.add_argument("--sample", type=int, default=200)
    args = parser.parse_args()

    root = _util.scratch("label-page")
    run_dir = write_label_run(root, "r1", n_questions=args.questions, hostile=False)
    sample, _ = labels.ensure_sample(run_dir, args.sample)
    rows = sample.to_pylist()
    rng = random.Random(0)

    def label(row: dict) -> None:
        value = (
            float(rng.randint(0, 3)) if row["kind"] == labels.GRADE else float(rng.randint(0, 1))
        )
        labels.append_labels(
            run_dir,
            [
                {
                    **{k: row[k] for k in ("item_id", "kind", "question_id", "candidate_id")},
                    "annotator": "ann",
                    "label": value,
                }
            ],
        )

    # Most of the sample labelled already (the page's figures are then the costly ones), and the
    # viewer warm on it, as a server is after its first view.
    for row in rows[: len(rows) // 2]:
        label(row)
    viewer = Viewer(root)
    viewer.page(run_dir, signature(run_dir))

    before: list[float] = []
    after: list[float] = []
    people: list[float] = []
    for row in rows[len(rows) // 2 : len(rows) // 2 + args.labels]:
        label(row)
        sig = signature(run_dir)
        t_after, page_after = _timed(lambda: viewer.page(run_dir, sig))  # noqa: B023
        t_before, page_before = _timed(lambda: render_html(build_report(run_dir)))
        t_people, _ = _timed(lambda: people_section(run_dir))
        # The same page either way (the timings of the charts apart).
        assert _strip(page_after) == _strip(page_before)  # type: ignore[arg-type]
        before.append(t_before)
        after.append(t_after)
        people.append(t_people)
    write_json({"written": "by compare"}, run_dir / "compare.json")
    t_compare, _ = _timed(lambda: viewer.page(run_dir, signature(run_dir)))

    b, a, p = (statistics.median(x) for x in (before, after, people))
    print(
        f"{args.questions} questions x 10 candidates, sample {sample.num_rows}, "
        f"{len(before)} labels timed"
    )
    print(
        _util.table(
            [
                ("before: full rebuild (build_report + render_html)", f"{b:.3f}"),
                ("after: Viewer.page (rest kept, people's part new)", f"{a:.3f}"),
                ("  people_section alone, timed apart (alpha inside)", f"{p:.3f}"),
                ("removed by the split (before - after)", f"{b - a:.3f}"),
                ("after compare.json lands (nothing rebuilt)", f"{t_compare:.3f}"),
            ],
            ("seconds per label answer (median)", "s"),
        )
    )
    print(f"after / before: {a / b:.3f}")
    if a <= GOAL_S:
        print(f"goal: the run page answers a label in <= {GOAL_S:.0f} s: met ({a:.2f} s)")
    else:
        print(
            f"goal: the run page answers a label in <= {GOAL_S:.0f} s: not met: {a:.2f} s, of "
            f"which people_section {p:.2f} s (the agreement figures' bootstrap, "
            "stats/_agreement.py)"
        )
    goal_c = "met" if t_compare <= GOAL_S else f"not met: {t_compare:.2f} s"
    print(f"goal: compare.json landing rebuilds nothing (<= {GOAL_S:.0f} s): {goal_c}")


def _strip(page: str) -> str:
    """A page without what differs between two renderings of one report in one process.

    The charts' time, and the gradient ids vl-convert numbers on from one rendering to the next.
    """
    import re

    page = re.sub(r"charts rendered offline in [0-9.]+ s", "", page)
    return re.sub(r"gradient_\d+", "gradient", page)


if __name__ == "__main__":
    main()
