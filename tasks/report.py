"""Stage 5, report: the summary table, the report model's exports and the Prefect artifacts.

The statistics and the model live in ``ragaudit.reporting``; this stage writes the summary
(means with bootstrap intervals, threshold flags), builds the model from the run folder and
renders what ``report.formats`` names: ``report.xlsx``, ``report.html``, the Prefect artifacts.
"""

from __future__ import annotations

import dataclasses

import polars as pl

from ragaudit.reporting import (
    breakdown_rows,
    breakdowns,
    build_report,
    directions,
    judge_noise,
    score_cells,
    summarise,
)
from ragaudit.schemas import JUDGE_NOISE, SUMMARY, to_table
from ragaudit.tasks._common import StageContext


def write_summary(ctx: StageContext) -> None:
    """Summarise ``scores`` into the ``summary`` table, by turn too when the set has turns."""
    scores: pl.DataFrame = pl.from_arrow(ctx.run.read("scores"))  # type: ignore[assignment]
    cfg = ctx.config.report
    metrics = scores["metric"].unique(maintain_order=True).to_list()
    up = directions(metrics)
    rows = [
        {
            "run_id": ctx.run.run_id,
            "kind": "metric",
            **{k: v for k, v in dataclasses.asdict(s).items() if k != "higher_is_better"},
        }
        for s in summarise(scores, cfg.thresholds, cfg.bootstrap_samples, up)
    ]
    # Each metric by turn position, turn kind and answerability: none for lone questions.
    found = breakdowns(ctx.run.questions(), scores, cfg.thresholds, cfg.bootstrap_samples, up)
    rows += breakdown_rows(ctx.run.run_id, found)
    ctx.run.write("summary", to_table(rows, SUMMARY))
    # A re-run of a labelled run (a run id people already labelled): its corrected means.
    from ragaudit.ppi import has_labels, write_corrected_summary

    if has_labels(ctx.run.path):
        write_corrected_summary(ctx.run.path)


def write_judge_noise(ctx: StageContext) -> None:
    """The judges' agreement per metric into ``judge_noise`` (empty without repeats or a jury).

    Written even empty: a re-run of the run id with one judge sample must not leave the
    figures of an earlier run with several standing.
    """
    scores: pl.DataFrame = pl.from_arrow(ctx.run.read("scores"))  # type: ignore[assignment]
    metrics = tuple(scores["metric"].unique(maintain_order=True).to_list())
    found, _ = judge_noise(metrics, score_cells(scores), {})
    rows = [{"run_id": ctx.run.run_id, **dataclasses.asdict(n)} for n in found]
    for row in rows:
        del row["text"]  # rebuilt from the figures when read
    ctx.run.write("judge_noise", to_table(rows, JUDGE_NOISE))


async def report(ctx: StageContext) -> list[str]:
    """Write ``summary``, then what ``report.formats`` asks: xlsx, html, Prefect artifacts."""
    from ragaudit.reporting import publish_artifacts, write_html, write_xlsx

    write_summary(ctx)
    write_judge_noise(ctx)
    formats = set(ctx.config.report.formats)
    if not formats:
        return ["summary", "judge_noise"]
    model = build_report(ctx.run.path)
    if "xlsx" in formats:
        write_xlsx(model, ctx.run.path / "report.xlsx")
    if "html" in formats:
        write_html(model)
    if "artifacts" in formats:
        await publish_artifacts(model)
    return ["summary", "judge_noise"]


__all__ = ["report", "write_judge_noise", "write_summary"]
