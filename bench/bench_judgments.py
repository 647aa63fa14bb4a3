"""``ragaudit judgments`` at scale: 100,000 judgments imported and exported, per format.

Goals (issue #57): 100,000 judgments import in ≤ 5 s and export in ≤ 5 s.

For each registered format a file of 100,000 judgments (2,000 queries × 50 documents; in the
formats that hold raters, two raters each on 25 documents of a query) is written by the format
itself, then timed:

- import: the file's bytes read, graded on the format's scale, keyed and appended to a fresh
  judgment store (one part), ids not resolved to texts;
- export: the store's rows selected, written in the format with its loss report;
- import with resolution (one format): the same, every document resolved against a corpus
  of 100,000 documents (``CorpusTexts``, read once before: its reading is printed apart) and
  every query matched to a question set of 2,000.

Each figure is the best of ``--repeat`` runs (a loaded machine's spikes are not the code's).

    python bench/bench_judgments.py
    python bench/bench_judgments.py --rows 20000 --repeat 1      # a quick look
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import time

import _util  # noqa: F401  (offline environment first)
import polars as pl  # noqa: E402

from ragaudit.dataset import Question  # noqa: E402
from ragaudit.judging import JudgmentStore  # noqa: E402
from ragaudit.judgments import (  # noqa: E402
    FRAME,
    CorpusTexts,
    Selection,
    as_frame,
    export_frame,
    format_names,
    import_read,
    make_format,
    store_rows,
)

GOAL_S = 5.0
DOCS_PER_QUERY = 50


def frame(rows: int, raters: bool) -> pl.DataFrame:
    """``rows`` judgments: queries of 50 documents; with raters, two raters on half of them."""
    per_query = DOCS_PER_QUERY
    n = pl.int_range(0, rows, eager=True)
    if raters:
        # Two raters on 25 documents of each query: the same 50 rows a query, half as many pairs.
        q, d = n // per_query, (n % per_query) // 2
        annotator = (
            pl.when(n % 2 == 0).then(pl.lit("ann@example.com")).otherwise(pl.lit("bob@example.com"))
        )
    else:
        q, d, annotator = n // per_query, n % per_query, pl.lit(None, dtype=pl.String)
    df = pl.DataFrame({"q": q, "d": d, "n": n}).with_columns(
        pl.format("what is topic {} about", pl.col("q")).alias("query"),
        pl.format("{}", pl.col("q")).alias("query_id"),
        pl.format("doc-{}-{}", pl.col("q"), pl.col("d")).alias("doc_id"),
        pl.lit("docs").alias("doc_index"),
        ((pl.col("q") * 7 + pl.col("d") * 3 + pl.col("n") % 2) % 4).cast(pl.String).alias("value"),
        annotator.alias("annotator"),
        pl.lit("graded").alias("state"),
    )
    return (
        df.select([c for c in FRAME if c in df.columns])
        .with_columns(
            *(pl.lit(None, dtype=FRAME[c]).alias(c) for c in FRAME if c not in df.columns)
        )
        .select(list(FRAME))
    )


def best(fn, repeat: int) -> tuple[float, object]:
    times, out = [], None
    for _ in range(repeat):
        start = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - start)
    return min(times), out


def verdict(seconds: float) -> str:
    return "met" if seconds <= GOAL_S else f"not met: {seconds:.2f} s > {GOAL_S:g} s"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    scratch = _util.scratch("judgments")
    print(
        f"bench_judgments: {args.rows:,} judgments a format, best of {args.repeat}; "
        f"load average {_util.load_average()}"
    )
    rows = []
    goals = []
    for name in format_names():
        fmt = make_format(name)
        data = fmt.write(frame(args.rows, "raters" in fmt.holds)).data
        runs = [0]

        def do_import(name: str = name, data: bytes = data, runs: list[int] = runs) -> object:
            runs[0] += 1
            folder = scratch / f"{name}-{runs[0]}"
            fmt = make_format(name)
            read = fmt.read(data, name)
            store = JudgmentStore(folder)
            return asyncio.run(
                import_read(
                    store, read, fmt, source=name, scale=read.scale or fmt.grades, where=name
                )
            )

        t_import, report = best(do_import, args.repeat)
        store = JudgmentStore(scratch / f"{name}-1")

        def do_export(name: str = name, store: JudgmentStore = store) -> object:
            fmt = make_format(name)
            selected = store_rows(store, Selection((name,)))
            return export_frame(as_frame(selected, fmt.grades), fmt, sources=[name])

        t_export, exported = best(do_export, args.repeat)
        loss = exported.loss  # type: ignore[attr-defined]
        assert loss["accounted"] and loss["rows_selected"] == report.rows  # type: ignore[attr-defined]
        rows.append(
            (
                name,
                f"{len(data) / 2**20:.1f}",
                f"{report.rows:,}",  # type: ignore[attr-defined]
                f"{t_import:.2f}",
                f"{t_import / GOAL_S:.2f}",
                f"{t_export:.2f}",
                f"{t_export / GOAL_S:.2f}",
                f"{loss['rows_written']:,}",
            )
        )
        goals.append((f"import {name} ≤ {GOAL_S:g} s", verdict(t_import)))
        goals.append((f"export {name} ≤ {GOAL_S:g} s", verdict(t_export)))
        for folder in scratch.glob(f"{name}-*"):
            shutil.rmtree(folder)
    print(
        _util.table(
            rows,
            ("format", "MiB", "rows", "import s", "/ goal", "export s", "/ goal", "written"),
        )
    )
    # Resolution: every document's text from a 100,000-document corpus, queries to questions.
    docs = frame(args.rows, False)
    corpus = scratch / "corpus.jsonl"
    corpus.write_text(
        "".join(
            json.dumps({"id": d, "text": f"Document {d}: notes on {q}."}) + "\n"
            for d, q in zip(docs["doc_id"], docs["query"], strict=True)
        ),
        encoding="utf-8",
    )
    questions = [
        Question(question_id=qid, question=q)
        for qid, q in docs.select("query_id", "query").unique(maintain_order=True).iter_rows()
    ]
    fmt = make_format("quepid-csv")
    data = fmt.write(docs).data
    t_corpus, texts = best(lambda: CorpusTexts(corpus), args.repeat)
    runs = [0]

    def do_resolved() -> object:
        runs[0] += 1
        read = fmt.read(data, "csv")
        return asyncio.run(
            import_read(
                JudgmentStore(scratch / f"resolved-{runs[0]}"),
                read,
                fmt,
                source="csv",
                scale=fmt.grades,
                where="csv",
                documents=texts,  # type: ignore[arg-type]
                questions=questions,
            )
        )

    t_resolved, report = best(do_resolved, args.repeat)
    print(
        f"reading the {args.rows:,}-document corpus (ragaudit's corpus reader, once per "
        f"import command): {t_corpus:.2f} s"
    )
    print(
        f"quepid-csv import resolving every document against it and every query against "
        f"{len(questions):,} questions: {t_resolved:.2f} s "
        f"({report.resolved:,} of {report.rows:,} rows resolved; "  # type: ignore[attr-defined]
        f"{t_resolved / GOAL_S:.2f} of the goal; with the corpus read "
        f"{(t_resolved + t_corpus) / GOAL_S:.2f})"
    )
    goals.append(
        (f"import with resolution ≤ {GOAL_S:g} s (corpus read apart)", verdict(t_resolved))
    )
    shutil.rmtree(scratch)
    width = max(len(g) for g, _ in goals)
    for goal, status in goals:
        print(f"goal {goal.ljust(width)}  {status}")


if __name__ == "__main__":
    main()
