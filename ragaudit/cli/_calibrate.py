"""``ragaudit calibrate``: measure the metrics with the configured judge."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.table import Table

from ragaudit.cli._app import (
    ConfigOpt,
    EmbedderOpt,
    JudgeOpt,
    RootOpt,
    RunIdOpt,
    SetOpt,
    _num,
    _overrides,
    app,
    console,
    err,
    load_paid_config,
)
from ragaudit.config import OFFLINE_JUDGE
from ragaudit.secrets import install_log_filter

if TYPE_CHECKING:
    # Only for annotations: the command imports the calibration library when it runs, so
    # the CLI starts without it.
    from ragaudit.calibration import GradeCalibrationResult
    from ragaudit.stats import Share

SMOKE_CALIBRATION_LIMIT = 2

# Paid judge calls a calibration may start without --yes: a labels file of 100,000 rows must
# not start 100,000 paid calls unasked.
CONFIRM_ABOVE = 1_000


def _planned(inputs: Any) -> tuple[dict[str, int], int]:
    """Rows per metric, and the judge's grade calls (one per distinct labelled context)."""
    from ragaudit.calibration import score_jobs

    rows = {name: len(samples) for name, samples in score_jobs(inputs).items()}
    contexts = {(g.question_id, g.context_id) for g in inputs.grade_labels}
    return rows, len(contexts)


def _print_plan(rows: dict[str, int], grade_calls: int, judge: str) -> None:
    table = Table(title=f"Dry run: what calibrate will ask {judge} (no model was called)")
    table.add_column("what")
    table.add_column("rows", justify="right", no_wrap=True)
    for name, n in sorted(rows.items()):
        table.add_row(f"metric {name} (its own calls per row, as in a run)", f"{n:,}")
    if grade_calls:
        table.add_row("relevance grades (one call per labelled context)", f"{grade_calls:,}")
    console.print(table)


def _print_grades(grades: GradeCalibrationResult) -> None:
    """The per-grade calibration as two small tables: per judge grade, per human grade."""
    cal = grades.calibration
    if cal is None:
        console.print(f"no labelled context got a judge grade ({grades.unjudged} failed)")
        return

    def cell(s: Share) -> str:
        if s.share is None:
            return "-"
        return f"{s.share:.2f} ({s.ci_low:.2f}-{s.ci_high:.2f})"

    given = Table(title=f"judge grade → human relevant (grade ≥ {cal.relevant_grade})")
    for col in ("judge grade", "P(human relevant), 95% CI", "n"):
        given.add_column(col)
    for g, s in sorted(cal.relevant_given_grade.items()):
        given.add_row(str(g), cell(s), str(s.n))
    console.print(given)
    rated = Table(title=f"human grade → judge over-/under-rating ({grades.judge})")
    for col in ("human grade", "over-rated, 95% CI", "under-rated, 95% CI", "n"):
        rated.add_column(col)
    for g in sorted(cal.over_rated):
        over, under = cal.over_rated[g], cal.under_rated[g]
        rated.add_row(str(g), cell(over), cell(under), str(over.n))
    console.print(rated)
    if grades.ndcg:
        ndcg = Table(title=f"engine NDCG@10 over {grades.ndcg_questions} ranked question(s)")
        for col in ("gains", "mean NDCG", "95% CI"):
            ndcg.add_column(col)
        for gains, (mean, low, high) in grades.ndcg.items():
            ci = "-" if low is None or high is None else f"{low:.3f}-{high:.3f}"
            ndcg.add_row(gains, _num(mean), ci)
        console.print(ndcg)
    if grades.unjudged:
        console.print(f"{grades.unjudged} label(s) without a judge grade left out")


@app.command("calibrate")
def calibrate_cmd(
    config: ConfigOpt = None,
    run_id: RunIdOpt = None,
    judge: JudgeOpt = None,
    embedder: EmbedderOpt = None,
    runs_root: RootOpt = None,
    limit: Annotated[
        int | None,
        typer.Option("--limit", help="Pairs per WikiEval/HaluEval file, base questions."),
    ] = None,
    sets: SetOpt = None,
    wikieval: Annotated[
        Path | None, typer.Option("--wikieval", help="Folder with WikiEval's ff/ar/cr.csv.")
    ] = None,
    halueval: Annotated[
        Path | None, typer.Option("--halueval", help="HaluEval QA file (JSON lines).")
    ] = None,
    labels: Annotated[
        Path | None,
        typer.Option(
            "--labels",
            help="Your labels: question, answer, contexts, labels (JSONL/CSV), or a run folder "
            "/ its labels store (ragaudit label).",
        ),
    ] = None,
    scenarios: Annotated[
        Path | None,
        typer.Option(
            "--scenarios", help="Question set with gold relevance to build scenarios from."
        ),
    ] = None,
    grade_labels: Annotated[
        Path | None,
        typer.Option(
            "--grade-labels",
            help="Human relevance grades 0-3 (JSONL/CSV: question, context, grade; a run "
            "folder / its labels store; or the judgment store, <runs_root>/judgments, with "
            "imported people's grades): calibrate the judge's grades per grade.",
        ),
    ] = None,
    threshold: Annotated[
        float, typer.Option("--threshold", help="Cut of scores and labels for κ and accuracy.")
    ] = 0.5,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Count what would be asked; call no model.")
    ] = False,
    yes: Annotated[
        bool,
        typer.Option("--yes", "-y", help=f"Start over {CONFIRM_ABOVE:,} paid judge rows unasked."),
    ] = False,
) -> None:
    """Measure the metrics with the configured judge (the bundled data when none is named)."""
    from ragaudit.calibration import GRADE_KIND, calibrate, gather_inputs

    started = time.perf_counter()
    cfg = load_paid_config(
        config,
        _overrides(judge=judge, embedder=embedder, runs_root=runs_root, run_id=run_id, sets=sets),
    )
    if (
        limit is None
        and cfg.models.judge_model == OFFLINE_JUDGE
        and not any((wikieval, halueval, labels, scenarios, grade_labels))
    ):
        # The smoke judge reads prompts slowly on a CPU: the whole bundle would take too
        # long for a smoke run, so it calibrates on a slice that finishes in minutes.
        limit = SMOKE_CALIBRATION_LIMIT
        err.print(
            f"calibrating the offline smoke judge on {limit} pairs and base questions per "
            "data set (--limit to change)"
        )
    inputs = gather_inputs(
        wikieval=wikieval,
        halueval=halueval,
        labels=labels,
        scenarios_from=scenarios,
        grade_labels=grade_labels,
        corpus=cfg.collect.corpus,
        limit=limit,
    )
    rows, grade_calls = _planned(inputs)
    if dry_run:
        _print_plan(rows, grade_calls, cfg.models.judge_model)
        return
    from ragaudit.cache.providers import provider_record

    asked = sum(rows.values()) + grade_calls
    if asked > CONFIRM_ABOVE and not yes and not provider_record(cfg.models.judge_model).free:
        _print_plan(rows, grade_calls, cfg.models.judge_model)
        question = f"Start {asked:,} paid judge rows with {cfg.models.judge_model}?"
        if not console.is_terminal:
            err.print(
                f"[bold red]calibrate:[/] {asked:,} paid judge rows with "
                f"{cfg.models.judge_model}, over {CONFIRM_ABOVE:,}: pass --yes to start them "
                "(--dry-run shows what they are)"
            )
            raise typer.Exit(2)
        if not typer.confirm(question):
            raise typer.Exit(1)
    install_log_filter()
    from ragaudit import progress

    # One line per metric (and for the grades) when it starts, every ~10 s, and when it ends.
    reporter = progress.LineReporter(lambda line: err.print(line, markup=False, highlight=False))
    progress.set_reporter(reporter)
    try:
        with reporter.heartbeat():
            result, run, warnings = asyncio.run(calibrate(cfg, inputs, threshold=threshold))
    finally:
        progress.set_reporter(None)
    models = f"judge {cfg.models.judge_model}, embedder {cfg.models.embedder_model}"
    table = Table(title=f"calibration {run.run_id} ({models})")
    for col in ("kind", "data", "metric", "family", "statistic", "value", "95% CI", "n", "note"):
        table.add_column(col)
    # The per-grade figures get their own two tables below, grades in rows and columns.
    figures = [f for f in result.figures if f["kind"] != GRADE_KIND]
    for f in figures:
        ci = "-" if f["ci_low"] is None else f"{f['ci_low']:.3f}-{f['ci_high']:.3f}"
        table.add_row(
            f["kind"],
            f["dataset"],
            f["metric"],
            f["family"] or "",
            f["statistic"],
            _num(f["value"]),
            ci,
            str(f["n"]),
            f["note"],
        )
    if figures or result.grades is None:
        console.print(table)
    if result.grades is not None:
        _print_grades(result.grades)
        console.print(
            f"{len(result.grades.rows)} human grade(s) against the judge's; "
            f"{run.table_path('calibration_grades')}"
        )
    failed = sum(r["status"] == "failed" for r in result.scores)
    # A grades-only calibration scores no items: say what it did, not "0 items scored".
    done = f"{len(result.scores)} items scored ({failed} failed)" if result.scores else "figures"
    console.print(
        f"{done} in {time.perf_counter() - started:.1f} s; {run.table_path('calibration')}"
    )
    console.print(f"report.html: {run.path / 'report.html'}")
    for warning in warnings:
        console.print(f"[bold yellow]WARNING:[/] {warning}")
