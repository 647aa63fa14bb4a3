"""Stage 5, report: the summary table, the report model's exports and the Prefect artifacts.

The statistics and the model live in ``ragaudit.reporting``; this stage writes the summary
(means with bootstrap intervals, threshold flags), builds the model from the run folder and
renders it: ``report.xlsx``, ``report.html`` and the Prefect artifacts.
"""

from __future__ import annotations

import dataclasses

import polars as pl

from ragaudit.reporting import build_report, directions, summarise
from ragaudit.schemas import SUMMARY, to_table
from ragaudit.tasks._common import StageContext


def write_summary(ctx: StageContext) -> None:
    """Summarise ``scores`` into the ``summary`` table."""
    scores: pl.DataFrame = pl.from_arrow(ctx.run.read("scores"))  # type: ignore[assignment]
    cfg = ctx.config.report
    metrics = scores["metric"].unique(maintain_order=True).to_list()
    up = directions(metrics, ctx.config.score.model_dump(mode="json"))
    rows = [
        {
            "run_id": ctx.run.run_id,
            **{k: v for k, v in dataclasses.asdict(s).items() if k != "higher_is_better"},
        }
        for s in summarise(scores, cfg.thresholds, cfg.bootstrap_samples, up)
    ]
    ctx.run.write("summary", to_table(rows, SUMMARY))


async def report(ctx: StageContext) -> list[str]:
    """Write ``summary``, ``report.xlsx`` and ``report.html``, and publish the Prefect artifacts."""
    from ragaudit.reporting import publish_artifacts, write_html, write_xlsx

    write_summary(ctx)
    model = build_report(ctx.run.path)
    write_xlsx(model, ctx.run.path / "report.xlsx")
    write_html(model)
    await publish_artifacts(model)
    return ["summary"]


__all__ = ["report", "write_summary"]
