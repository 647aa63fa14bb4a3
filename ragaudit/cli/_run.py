"""``demo``, ``run`` and one command per stage: the evaluate flow with progress bars."""

from __future__ import annotations

import asyncio
import contextlib
import signal
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)
from rich.table import Table

from ragaudit.cli._app import (
    AssumeOpt,
    ConfigOpt,
    DryRunOpt,
    EmbedderOpt,
    Interrupted,
    JudgeOpt,
    LimitOpt,
    QuestionsOpt,
    RecordOpt,
    RootOpt,
    RunIdOpt,
    SetOpt,
    _overrides,
    app,
    console,
    err,
    field_range,
    load_paid_config,
    quiet_prefect_runs,
)
from ragaudit.cli._dryrun import _dry_run
from ragaudit.config import ModelsConfig, RunConfig
from ragaudit.errors import RagauditError
from ragaudit.flows import STAGES
from ragaudit.numbers import fixed
from ragaudit.secrets import install_log_filter

DEMO_CONFIG = Path("data/demo/config.yaml")


class _RichReporter:
    """Rich progress bars for stage progress (ragaudit.progress)."""

    def __init__(self, progress: Progress) -> None:
        self.progress = progress

    def start(self, label: str, total: int) -> int:
        return int(self.progress.add_task(label, total=max(total, 1)))

    def advance(self, handle: int, n: int = 1) -> None:
        self.progress.advance(TaskID(handle), n)

    def finish(self, handle: int, stopped: bool = False) -> None:
        task = self.progress.tasks[[t.id for t in self.progress.tasks].index(TaskID(handle))]
        if stopped:
            # The count stays where the stage stopped; a full bar would read as done.
            self.progress.update(TaskID(handle), description=f"{task.description} (stopped)")
        else:
            self.progress.update(TaskID(handle), completed=task.total)


def _import_flow() -> None:
    """Import the flow's modules (flow engine, gateway, stages) while Prefect's server starts."""
    import ragaudit.flows.evaluate  # noqa: F401


def _run_flow(config: RunConfig, stages: list[str] | None) -> dict[str, Any]:
    """Run the evaluate flow with progress bars; returns the manifest.

    SIGINT and SIGTERM stop the run in order: the flow's task is cancelled (asyncio's own
    Ctrl-C handling, which SIGTERM is routed into), the manifest says ``interrupted``, and the
    ephemeral Prefect server, which the signal never reaches, is stopped last.

    Raises:
        Interrupted: A signal stopped the run.
    """
    from prefect.exceptions import TerminationSignal

    from ragaudit import stopping
    from ragaudit._server import ephemeral_server
    from ragaudit.runfolder import RunFolder
    from ragaudit.runlock import RunLock

    run_id = config.resolved_run_id()
    try:
        with (
            stopping.sigterm_as_sigint(),
            RunLock(RunFolder(config.runs_root, run_id).path),  # before Prefect: refused at once
            ephemeral_server(_import_flow),
            Progress(
                TextColumn("{task.description:<32}"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                console=err,
                transient=False,
            ) as progress,
        ):
            from ragaudit import progress as prog

            # Live bars need a terminal; a CI log gets a line per stage every ~10 s instead.
            if err.is_terminal:
                reporter: Any = _RichReporter(progress)
                beating: Any = contextlib.nullcontext()
            else:
                reporter = prog.LineReporter(
                    lambda line: err.print(line, markup=False, highlight=False)
                )
                beating = reporter.heartbeat()
            prog.set_reporter(reporter)
            from ragaudit.flows.evaluate import flow_for

            # Once the flow's modules are imported: importing Prefect's flow API configures its
            # logging (the root's handlers, these levels).
            install_log_filter()
            quiet_prefect_runs()
            try:
                with beating:
                    return asyncio.run(flow_for(config)(config.model_dump_json(), run_id, stages))
            finally:
                prog.set_reporter(None)
    except (KeyboardInterrupt, asyncio.CancelledError, TerminationSignal) as exc:
        signum = getattr(exc, "signal", None) or stopping.received()
        _mark_interrupted(config, run_id, signal.Signals(signum).name)
        raise Interrupted(run_id, signum) from None


def _mark_interrupted(config: RunConfig, run_id: str, signal_name: str) -> None:
    """Record in the run's manifest that a signal stopped it (when the run had started)."""
    from ragaudit.runfolder import RunFolder

    run = RunFolder(config.runs_root, run_id)
    manifest = run.read_manifest()
    if not manifest:
        return
    manifest["status"] = "interrupted"
    manifest["error"] = f"interrupted by {signal_name}"
    run.write_manifest(manifest)


def _print_summary(config: RunConfig, manifest: dict[str, Any]) -> None:
    from ragaudit.runfolder import RunFolder

    _print_report(RunFolder(config.runs_root, manifest["run_id"]).path, manifest)


def _print_report(run_dir: Path, manifest: dict[str, Any] | None = None) -> None:
    """Render a run's report model (ragaudit.reporting) on the console."""
    from ragaudit.reporting import build_report

    report = build_report(run_dir)
    console.print(f"\n[bold]ragaudit run[/] {report.run_id}  ->  {report.run_dir}")
    console.print(f"judge: [bold]{report.judge}[/]   embedder: {report.embedder}")
    total = report.calls_total
    seconds = (manifest or {}).get("timings", report.timings).get("total_s")
    time_text = "" if seconds is None else f"; time {seconds:.1f} s"
    now = (manifest or {}).get("llm")
    if now is not None:
        # The call log holds every call the run id ever made; a re-run that found its stages
        # done makes none, and saying only the total would read as calls made just now.
        console.print(
            f"LLM calls this invocation: {now.get('calls', 0)} (memo hits "
            f"{now.get('cache_hits', 0)}, provider calls {now.get('provider_calls', 0)})"
            + time_text
        )
    if total is not None:
        cost = "" if total.cost_usd is None else f", cost ${total.cost_usd:.4f}"
        label = "LLM calls" if now is None else f"LLM calls of run {report.run_id} in total"
        console.print(
            f"{label}: {total.calls} (memo hits {total.memo_hits}, "
            f"provider calls {total.provider_calls}){cost}" + (time_text if now is None else "")
        )
    if report.summary:
        table = Table(title="Metrics (mean over ok rows, 95% bootstrap CI)")
        for col in ("metric", "mean", "95% CI", "ok", "failed", "skipped", "threshold", "flag"):
            table.add_column(col)
        for s in report.summary:
            mean = fixed(s.mean)
            ci = "-" if s.ci_low is None else f"{fixed(s.ci_low, 2)}-{fixed(s.ci_high, 2)}"
            side = "<" if s.higher_is_better else ">"
            thr = "" if s.threshold is None else f"{side} {s.threshold}"
            flag = ""
            if s.flagged:
                flag = (
                    "[red]BELOW THRESHOLD[/]" if s.higher_is_better else "[red]ABOVE THRESHOLD[/]"
                )
            table.add_row(
                s.metric, mean, ci, str(s.n_ok), str(s.n_failed), str(s.n_skipped), thr, flag
            )
        console.print(table)
    _print_breakdowns(report)
    lines = []
    for metric in report.metrics:
        rows = [w for w in report.worst if w.metric == metric]
        if rows:
            lines.append(
                f"  {metric}: " + ", ".join(f"{w.question_id} ({fixed(w.value, 2)})" for w in rows)
            )
    if lines:
        console.print("Worst questions:\n" + "\n".join(lines))
    shown = {"spearman", "kendall_tau", "top_k_overlap", "ndcg"}
    text = "; ".join(
        f"{a.comparison} {a.metric} {fixed(a.value, 2)} (n={a.n_questions})"
        for a in report.overall_agreement
        if a.status == "ok" and a.metric in shown and a.value is not None
    )
    if text:
        console.print(f"Ranking agreement (mean over questions): {text}")
    judged = report.judge_cost
    if judged is not None and judged.fresh_notes:
        # Why the heads cost what they did: a previous run not built on says why here.
        console.print(f"Sort stage, {judged.line()}", soft_wrap=True, markup=False)
    if report.judge_noise:
        console.print(
            "Judge noise (Krippendorff's α):\n"
            + "\n".join(
                f"  {n.metric} {n.kind}{'' if n.judge is None else f' ({n.judge})'}: {n.text}"
                for n in report.judge_noise
            ),
            soft_wrap=True,
        )
    refs = report.reference_counts()
    if refs:
        console.print(
            "Reference answers: " + ", ".join(f"{k} {v}" for k, v in sorted(refs.items()))
        )
    for name in ("report.html", "report.xlsx"):
        if (report.run_dir / name).is_file():
            console.print(f"{name}: {report.run_dir / name}")
    for warning in report.warnings:
        console.print(f"[bold yellow]WARNING:[/] {warning}")


def _print_breakdowns(report: Any) -> None:
    """Each metric by turn position, turn kind and answerability (a set with conversations)."""
    for b in report.breakdowns:
        table = Table(title=f"By {b.title} (mean, 95% bootstrap CI, n ok; ! past the threshold)")
        table.add_column("metric")
        for cell in b.cells:
            table.add_column(f"{cell} ({b.size(cell)} q)")
        for metric in report.metrics:
            row = [metric]
            for cell in b.cells:
                s = b.summary(cell, metric)
                if s is None:
                    row.append("-")
                    continue
                ci = "" if s.ci_low is None else f" {fixed(s.ci_low, 2)}-{fixed(s.ci_high, 2)}"
                row.append(f"{fixed(s.mean)}{ci} n={s.n_ok}" + (" [red]![/]" if s.flagged else ""))
            table.add_row(*row)
        console.print(table)
        if b.note:
            console.print(f"note: {escape(b.note)}", soft_wrap=True)


def _evaluate(
    config_path: Path | None, overrides: dict[str, Any], stages: list[str] | None
) -> None:
    # Registers the metrics and their config check: an unknown metric or option is then
    # rejected as the config loads, before any stage has paid for a call.
    import ragaudit.metrics  # noqa: F401

    config = load_paid_config(config_path, overrides)
    if config.run_id is not None:
        from ragaudit.runfolder import RunsRoot

        # Before anything is written (the memo's folder included): a tune's, a round robin's,
        # an audit's folder or the judgment store taken as a run would get a run's files.
        RunsRoot(config.runs_root).claim(config.run_id, "run")
    if stages is None or "collect" in stages:
        # Check the collect stage's inputs before Prefect starts: a malformed question set or
        # a missing corpus then fails at once with one clean message, not after the server
        # start, a task retry and two tracebacks.
        from ragaudit.search import capabilities, check_corpus
        from ragaudit.tasks.collect import check_inputs

        check_inputs(config)
        if config.collect.corpus is not None and capabilities(config.collect.backend).searches:
            check_corpus(config.collect.corpus)
    # The memo opened (an unreachable Redis, an unwritable cache folder) before Prefect too.
    from ragaudit.cache import memo_location, open_memo

    open_memo(memo_location(config)).close()
    # An error a stage raised comes back inside Prefect's; the error boundary finds its cause.
    manifest = _run_flow(config, stages)
    _print_summary(config, manifest)
    if manifest.get("status") == "completed_with_failures":
        # A CI gate must not read a run resting on a failing judge as a pass.
        err.print(
            f"[bold red]run {manifest['run_id']} completed with failures:[/] the judge or the "
            "system under test failed on most of its calls (see the warnings above)"
        )
        raise typer.Exit(3)


JudgeRepeatsOpt = Annotated[
    int | None,
    typer.Option(
        "--judge-repeats",
        help="Independent samples of every judge request (models.judge_repeats).",
        **field_range(ModelsConfig, "judge_repeats"),
    ),
]


def _repeats(sets: list[str] | None, judge_repeats: int | None) -> list[str]:
    """``sets`` with ``--judge-repeats`` as the config field it sets (validated like --set)."""
    extra = [f"models.judge_repeats={judge_repeats}"] if judge_repeats is not None else []
    return [*(sets or []), *extra]


@app.command()
def demo(
    run_id: RunIdOpt = "demo",
    judge: JudgeOpt = None,
    runs_root: RootOpt = None,
    sets: SetOpt = None,
    dry_run: DryRunOpt = False,
    assume: AssumeOpt = None,
    record: RecordOpt = None,
    judge_repeats: JudgeRepeatsOpt = None,
) -> None:
    """Run the whole DAG on the bundled data, offline (smoke-quality judge unless --judge)."""
    if not DEMO_CONFIG.is_file():
        raise RagauditError(f"{DEMO_CONFIG} not found: run the demo from the ragaudit checkout")
    sets = _repeats(sets, judge_repeats)
    overrides = _overrides(run_id=run_id, judge=judge, runs_root=runs_root, sets=sets)
    if dry_run:
        _dry_run(DEMO_CONFIG, overrides, assume, record)
        return
    _evaluate(DEMO_CONFIG, overrides, None)


@app.command()
def run(
    config: ConfigOpt = None,
    questions: QuestionsOpt = None,
    run_id: RunIdOpt = None,
    judge: JudgeOpt = None,
    embedder: EmbedderOpt = None,
    runs_root: RootOpt = None,
    limit: LimitOpt = None,
    sets: SetOpt = None,
    dry_run: DryRunOpt = False,
    assume: AssumeOpt = None,
    record: RecordOpt = None,
    task_runner: Annotated[
        str | None,
        typer.Option(
            "--task-runner",
            help="Where batch tasks run: default (this process), dask or ray (scale.task_runner).",
        ),
    ] = None,
    workers: Annotated[
        int | None,
        typer.Option("--workers", help="Local Dask/Ray workers (scale.workers)."),
    ] = None,
    judge_repeats: JudgeRepeatsOpt = None,
) -> None:
    """Run the whole evaluation DAG (collect, sort, ground_truth, score, report)."""
    # Plain config fields: --set validates them and names the field when a value is wrong.
    sets = _repeats(sets, judge_repeats)
    sets += [f"scale.task_runner={task_runner}"] if task_runner is not None else []
    sets += [f"scale.workers={workers}"] if workers is not None else []
    _evaluate_with_flags(
        None,
        config=config,
        questions=questions,
        run_id=run_id,
        judge=judge,
        embedder=embedder,
        runs_root=runs_root,
        limit=limit,
        sets=sets,
        dry_run=dry_run,
        assume=assume,
        record=record,
    )


def _evaluate_with_flags(
    stages: list[str] | None,
    *,
    config: Path | None,
    questions: Path | None,
    run_id: str | None,
    judge: str | None,
    embedder: str | None,
    runs_root: Path | None,
    limit: int | None,
    sets: list[str] | None,
    dry_run: bool = False,
    assume: list[str] | None = None,
    record: list[Path] | None = None,
) -> None:
    """What ``run`` and every stage command share: flags to overrides, then flow or estimate."""
    overrides = _overrides(
        questions=questions,
        run_id=run_id,
        judge=judge,
        embedder=embedder,
        runs_root=runs_root,
        limit=limit,
        sets=sets,
    )
    if dry_run:
        _dry_run(config, overrides, assume, record)
        return
    _evaluate(config, overrides, stages)


def _stage_command(stage: str, doc: str) -> None:
    def command(
        config: ConfigOpt = None,
        questions: QuestionsOpt = None,
        run_id: Annotated[
            str, typer.Option("--run-id", help="Run folder to read and write.")
        ] = ...,  # type: ignore[assignment]
        judge: JudgeOpt = None,
        embedder: EmbedderOpt = None,
        runs_root: RootOpt = None,
        limit: LimitOpt = None,
        sets: SetOpt = None,
        judge_repeats: JudgeRepeatsOpt = None,
    ) -> None:
        _evaluate_with_flags(
            [stage],
            config=config,
            questions=questions,
            run_id=run_id,
            judge=judge,
            embedder=embedder,
            runs_root=runs_root,
            limit=limit,
            sets=_repeats(sets, judge_repeats),
        )

    command.__doc__ = doc
    app.command(name=stage.replace("_", "-"))(command)


for _stage in STAGES:
    if _stage.help is not None:
        _stage_command(_stage.command or _stage.name, _stage.help)
