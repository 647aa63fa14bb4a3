"""Stage 4, score: one task per metric over the batch, on the system's top-k contexts.

A thin adapter: it reads the run folder's questions, answers, references and candidates,
hands them to :mod:`ragaudit.scoring` (which scores the rows, fits k to the judge's window and
keeps every row ``ok``, ``failed`` or ``skipped``) and writes the part table.
"""

from __future__ import annotations

import json
from typing import Any

from ragaudit import progress, scoring
from ragaudit.config import RunConfig
from ragaudit.errors import ConfigError
from ragaudit.metrics import Deps, Metric, Sample, resolve
from ragaudit.schemas import SCORES, to_table
from ragaudit.scoring import (
    MESSAGE_OVERHEAD_TOKENS,
    fit_k,
    forget_counts,
    prompt_tokens,
    score_one,
    score_rows,
)
from ragaudit.tasks._common import (
    StageContext,
    combine_parts,
    in_flight,
    part_name,
    split_part,
)


def build_samples(ctx: StageContext) -> tuple[list[Sample], dict[str, str]]:
    """The context's questions as samples with their top-k contexts, and why one has no answer."""
    return scoring.build_samples(
        ctx.judged_questions(),
        ctx.run.answers(ctx.ids),
        ctx.run.ground_truth(ctx.ids),
        ctx.run.candidates(ids=ctx.ids),
        ctx.config.score.top_k,
        nuggets=question_nuggets(ctx),
    )


def question_nuggets(
    ctx: StageContext,
) -> dict[str, tuple[list[dict[str, Any]], str | None]] | None:
    """Each question's nuggets (in rank order) and why its list is empty or incomplete.

    None when the run has no nuggets table.
    """
    if not ctx.run.has("nuggets"):
        return None
    out: dict[str, tuple[list[dict[str, Any]], str | None]] = {}
    rows = ctx.run.rows("nuggets", ctx.ids)
    for row in sorted(rows, key=lambda r: (r["question_id"], r["nugget_index"] or 0)):
        note = row["reason"] or (None if row["status"] == "ok" else row["status"])
        found, _ = out.setdefault(row["question_id"], ([], note))
        if row["text"] is not None:
            found.append(
                {
                    "text": row["text"],
                    "importance": row["importance"],
                    "context_ids": list(row["context_ids"] or []),
                }
            )
    return out


def make_deps(ctx: StageContext) -> Deps:
    """The models and options the metrics of this run use, with the stage's judge."""
    return scoring.make_deps(ctx.config, ctx.llm)


def metric_for(ctx: StageContext, name: str) -> Metric:
    """The metric ``name`` of this run's config; a clear config error when there is none."""
    try:
        return resolve(name, ctx.config.score.model_dump())
    except (KeyError, ValueError) as exc:
        raise ConfigError(f"score.metrics: {exc.args[0]}") from None


async def score_metric(ctx: StageContext, part: str) -> list[str]:
    """Score one metric on the context's questions; writes the part table ``scores/<part>``.

    ``part`` is the metric's name, or ``<metric>@<batch>`` for one batch of the questions.
    """
    name = split_part(part)[0]
    assert name is not None
    m = metric_for(ctx, name)
    samples, no_answer = build_samples(ctx)
    deps = make_deps(ctx)
    panel = scoring.make_panel(ctx.config, ctx.llm, name)
    with progress.bar(f"score: {part}", len(samples)) as bar:
        rows = await score_rows(
            m,
            samples,
            deps,
            window=ctx.window(),
            no_answer=no_answer,
            limit=in_flight(ctx),
            on_row=bar.advance,
            panel=panel,
        )
    rows = [{"run_id": ctx.run.run_id, **r} for r in rows]
    out = f"scores/{part}"
    ctx.run.write(out, to_table(rows, SCORES))
    return [out]


def score_parts(config: RunConfig, batches: list[str]) -> list[str]:
    """One part per metric, and per batch when the questions are batched (metric-major)."""
    chosen: list[str | None] = list(batches) or [None]
    return [part_name(m, b) for m in config.score.metrics for b in chosen]


def combine_scores(ctx: StageContext, parts: list[str]) -> list[str]:
    """Concatenate the parts (metric × batch) into ``scores``."""
    return combine_parts(ctx, ["scores"], parts)


def reasons(row: dict[str, Any]) -> Any:
    """The decoded reason column of a score row."""
    return json.loads(row["reason"]) if row.get("reason") else None


__all__ = [
    "MESSAGE_OVERHEAD_TOKENS",
    "build_samples",
    "combine_scores",
    "fit_k",
    "forget_counts",
    "make_deps",
    "metric_for",
    "prompt_tokens",
    "reasons",
    "score_metric",
    "score_one",
    "score_parts",
    "score_rows",
]
