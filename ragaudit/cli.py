"""The ``ragaudit`` command line: the whole DAG, one command per stage, the demo and the cache."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import sys
import time
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)
from rich.table import Table

import ragaudit  # noqa: F401  (offline environment before anything else)
from ragaudit.config import OFFLINE_JUDGE, RunConfig, load_config, set_path
from ragaudit.errors import RagauditError
from ragaudit.secrets import install_log_filter, redact

app = typer.Typer(
    name="ragaudit",
    help="Evaluate retrieval-augmented QA on Elasticsearch/OpenSearch: rank contexts with an "
    "LLM judge, write reference answers, score RAGAS metrics, as cached, resumable Prefect flows.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
cache_app = typer.Typer(help="The LLM memo (diskcache).", no_args_is_help=True)
app.add_typer(cache_app, name="cache")
# Piped output (CI logs, `make demo | tee`) would otherwise be cut to 80 columns.
console = Console(stderr=False, width=None if sys.stdout.isatty() else 120)
# Errors are never wrapped: a path or a message cut at 80 columns when piped can neither be
# grepped nor copied.
err = Console(stderr=True, soft_wrap=True)

DEMO_CONFIG = Path("data/demo/config.yaml")

ConfigOpt = Annotated[
    Path | None, typer.Option("--config", "-c", help="YAML/TOML/JSON config file.")
]
RunIdOpt = Annotated[
    str | None, typer.Option("--run-id", help="Run id; the same id resumes a run.")
]
QuestionsOpt = Annotated[
    Path | None, typer.Option("--questions", "-q", help="Question set (JSONL/CSV/Parquet).")
]
JudgeOpt = Annotated[str | None, typer.Option("--judge", help="Judge model (any litellm string).")]
EmbedderOpt = Annotated[
    str | None, typer.Option("--embedder", help="Embedding model (any litellm string).")
]
RootOpt = Annotated[Path | None, typer.Option("--runs-root", help="Folder of run folders.")]
LimitOpt = Annotated[int | None, typer.Option("--limit", help="Only the first N questions.")]
SetOpt = Annotated[
    list[str] | None, typer.Option("--set", help="Any config field: --set score.top_k=5")
]
DryRunOpt = Annotated[
    bool,
    typer.Option(
        "--dry-run", help="Print the calls, tokens and cost per stage; call no model, write no run."
    ),
]
AssumeOpt = Annotated[
    list[str] | None,
    typer.Option("--assume", help="A dry-run prior: --assume relevant_share=0.5"),
]

RecordOpt = Annotated[
    list[Path] | None,
    typer.Option(
        "--record",
        help="A judge record file (ragaudit record) the dry run reads when no earlier run under "
        "the runs root used the judge.",
    ),
]


class _RichReporter:
    """Rich progress bars for stage progress (ragaudit.progress)."""

    def __init__(self, progress: Progress) -> None:
        self.progress = progress

    def start(self, label: str, total: int) -> int:
        return int(self.progress.add_task(label, total=max(total, 1)))

    def advance(self, handle: int, n: int = 1) -> None:
        self.progress.advance(TaskID(handle), n)

    def finish(self, handle: int) -> None:
        task = self.progress.tasks[[t.id for t in self.progress.tasks].index(TaskID(handle))]
        self.progress.update(TaskID(handle), completed=task.total)


def _overrides(
    *,
    questions: Path | None = None,
    judge: str | None = None,
    embedder: str | None = None,
    runs_root: Path | None = None,
    limit: int | None = None,
    run_id: str | None = None,
    sets: list[str] | None = None,
) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for dotted, value in (
        ("questions", questions),
        ("models.judge", judge),
        ("models.embedder", embedder),
        ("runs_root", runs_root),
        ("limit", limit),
        ("run_id", run_id),
    ):
        if value is not None:
            set_path(out, dotted, str(value) if isinstance(value, Path) else value)
    for item in sets or []:
        if "=" not in item:
            raise RagauditError(f"--set {item}: expected field=value, e.g. --set score.top_k=5")
        dotted, raw = item.split("=", 1)
        import yaml

        set_path(out, dotted.strip(), yaml.safe_load(raw))
    return out


def _fail(exc: BaseException) -> None:
    err.print(f"[bold red]error:[/] {redact(str(exc))}")
    # 130 = 128 + SIGINT, as shells report a run stopped by Ctrl-C.
    raise typer.Exit(130 if isinstance(exc, Interrupted) else 2)


class Interrupted(RagauditError):
    """The run was stopped by a signal (Ctrl-C, SIGTERM)."""


def _run_flow(config: RunConfig, stages: list[str] | None) -> dict[str, Any]:
    """Run the evaluate flow with progress bars; returns the manifest.

    SIGINT and SIGTERM stop the run in order: the flow's task is cancelled (asyncio's own
    Ctrl-C handling, which SIGTERM is routed into), the manifest says ``interrupted``, and the
    ephemeral Prefect server, which the signal never reaches, is stopped last.

    Raises:
        Interrupted: A signal stopped the run.
    """
    from ragaudit._server import ephemeral_server
    from ragaudit.flows.evaluate import flow_for

    run_id = config.run_id or time.strftime("%Y%m%d-%H%M%S")
    install_log_filter()
    if not os.environ.get("RAGAUDIT_DEBUG"):
        # A failed stage is reported once, cleanly, by this CLI; Prefect's own ERROR records
        # would print the same failure again with tracebacks.
        for name in ("prefect.flow_runs", "prefect.task_runs"):
            logging.getLogger(name).setLevel(logging.CRITICAL)
    received: list[str] = []

    def on_signal(signum: int, _frame: Any) -> None:
        received.append(signal.Signals(signum).name)
        # asyncio.run cancels its main task on the first SIGINT and raises KeyboardInterrupt
        # when it is done: SIGTERM takes the same orderly way out.
        signal.raise_signal(signal.SIGINT)

    previous = signal.signal(signal.SIGTERM, on_signal)
    try:
        with (
            ephemeral_server(),
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

            prog.set_reporter(_RichReporter(progress))
            try:
                return asyncio.run(flow_for(config)(config.model_dump_json(), run_id, stages))
            finally:
                prog.set_reporter(None)
    except (KeyboardInterrupt, asyncio.CancelledError):
        name = received[0] if received else "SIGINT"
        _mark_interrupted(config, run_id, name)
        raise Interrupted(f"run {run_id} interrupted by {name}; re-run it to resume") from None
    finally:
        signal.signal(signal.SIGTERM, previous)


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
    if total is not None:
        cost = "" if total.cost_usd is None else f", cost ${total.cost_usd:.4f}"
        console.print(
            f"LLM calls: {total.calls} (memo hits {total.memo_hits}, "
            f"provider calls {total.provider_calls}){cost}"
            + ("" if seconds is None else f"; time {seconds:.1f} s")
        )
    if report.summary:
        table = Table(title="Metrics (mean over ok rows, 95% bootstrap CI)")
        for col in ("metric", "mean", "95% CI", "ok", "failed", "skipped", "threshold", "flag"):
            table.add_column(col)
        for s in report.summary:
            mean = "-" if s.mean is None else f"{s.mean:.3f}"
            ci = "-" if s.ci_low is None else f"{s.ci_low:.2f}-{s.ci_high:.2f}"
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
    lines = []
    for metric in report.metrics:
        rows = [w for w in report.worst if w.metric == metric]
        if rows:
            lines.append(
                f"  {metric}: " + ", ".join(f"{w.question_id} ({w.value:.2f})" for w in rows)
            )
    if lines:
        console.print("Worst questions:\n" + "\n".join(lines))
    shown = {"spearman", "kendall_tau", "top_k_overlap", "ndcg"}
    text = "; ".join(
        f"{a.comparison} {a.metric} {a.value:.2f} (n={a.n_questions})"
        for a in report.overall_agreement
        if a.status == "ok" and a.metric in shown and a.value is not None
    )
    if text:
        console.print(f"Ranking agreement (mean over questions): {text}")
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


def _evaluate(
    config_path: Path | None, overrides: dict[str, Any], stages: list[str] | None
) -> None:
    try:
        config = load_config(config_path, overrides)
        if stages is None or "collect" in stages:
            # Check the collect stage's inputs before Prefect starts: a malformed question set or
            # a missing corpus then fails at once with one clean message, not after the server
            # start, a task retry and two tracebacks.
            from ragaudit.tasks.collect import check_inputs

            check_inputs(config)
        manifest = _run_flow(config, stages)
    except RagauditError as exc:
        _fail(exc)
    except Exception as exc:  # an error a stage raised, re-raised by Prefect
        cause: BaseException = exc
        while cause.__cause__ is not None and not isinstance(cause, RagauditError):
            cause = cause.__cause__
        if isinstance(cause, RagauditError):
            _fail(cause)
        raise
    _print_summary(config, manifest)
    if manifest.get("status") == "completed_with_failures":
        # A CI gate must not read a run resting on a failing judge as a pass.
        err.print(
            f"[bold red]run {manifest['run_id']} completed with failures:[/] the judge failed "
            "on most of its calls (see the warnings above)"
        )
        raise typer.Exit(3)


def _dry_run(
    config_path: Path | None,
    overrides: dict[str, Any],
    assume: list[str] | None,
    records: list[Path] | None = None,
) -> None:
    """Estimate the run's calls, tokens and cost per stage without calling any model."""
    from ragaudit.estimate import Assumptions, estimate_run

    try:
        config = load_config(config_path, overrides)
        estimate = asyncio.run(
            estimate_run(config, Assumptions.parse(assume), records=records or None)
        )
    except RagauditError as exc:
        _fail(exc)
    print_estimate(estimate)


def _usd(model: str, value: float | None) -> str:
    from ragaudit.cache.providers import IN_PROCESS

    if model.split("/", 1)[0] in IN_PROCESS:
        return "free (runs here)"
    return "unknown price" if value is None else f"${value:.4f}"


def print_estimate(estimate: Any) -> None:
    """The dry run's table: per stage and step, calls, tokens and cost, then the assumptions."""
    from ragaudit.cache.providers import IN_PROCESS as here
    from ragaudit.estimate import price

    table = Table(title="Dry run: what the run will ask (no model was called)")
    for col in ("stage", "step", "model", "calls", "prompt tokens", "output tokens", "cost"):
        table.add_column(col, no_wrap=col in {"stage", "model", "cost"})
    total = 0.0
    unknown: set[str] = set()
    for line in estimate.lines:
        if not line.calls:
            continue
        cost = price(line.model, line.tokens_in, line.tokens_out)
        if cost is None:
            unknown.add(line.model)
        else:
            total += cost
        table.add_row(
            line.stage,
            line.step,
            line.model,
            f"{line.calls:,.0f}",
            f"{line.tokens_in:,.0f}",
            f"{line.tokens_out:,.0f}",
            _usd(line.model, cost),
        )
    console.print(table)
    calls = sum(line.calls for line in estimate.lines)
    tokens_in = sum(line.tokens_in for line in estimate.lines)
    tokens_out = sum(line.tokens_out for line in estimate.lines)
    billed = [
        line
        for line in estimate.lines
        if line.calls and line.model not in unknown and line.model.split("/", 1)[0] not in here
    ]
    parts = [f"${total:.4f}"] if billed else []
    if unknown:
        parts.append(f"unknown price for {', '.join(sorted(unknown))}")
    if not parts:
        parts.append("free (every model runs here)")
    cost_text = " + ".join(parts)
    console.print(
        f"Total: {calls:,.0f} calls, {tokens_in:,.0f} prompt tokens, {tokens_out:,.0f} output "
        f"tokens, {cost_text} (litellm's price map; memo hits would cost nothing)",
        soft_wrap=True,
    )
    console.print("What only the judge decides:", soft_wrap=True)
    for line in estimate.evidence:
        console.print(f"  - {line}", soft_wrap=True)
    console.print(
        "Priors (used only where no observation above replaces them): "
        + ", ".join(estimate.assumptions.describe()),
        soft_wrap=True,
    )
    for note in estimate.notes:
        console.print(f"  - {note}", soft_wrap=True)


@app.command("record")
def record_cmd(
    judge: Annotated[str, typer.Option("--judge", help="The judge whose record to write.")],
    output: Annotated[Path, typer.Option("--output", "-o", help="The record file to write.")],
    runs_root: RootOpt = None,
    source: Annotated[
        str, typer.Option("--source", help="What the record was measured on, kept in the file.")
    ] = "",
) -> None:
    """Write a judge's record (what it did in finished runs) for dry runs elsewhere."""
    from ragaudit.estimate import judge_history, record_json
    from ragaudit.runfolder import write_json

    try:
        root = runs_root or load_config(None, {}).runs_root
    except RagauditError as exc:
        _fail(exc)
    history = judge_history(Path(root), judge)
    if not history.runs:
        _fail(RagauditError(f"no finished run with judge {judge} under {root}"))
    content = record_json(history, source or f"{len(history.runs)} finished runs under {root}")
    write_json(content, output)
    console.print(
        f"wrote {output}: {history.verdicts} relevance verdicts, {history.comparisons} pairwise "
        f"comparisons, {sum(r.calls for r in history.replies.values())} replies, "
        f"{len(history.reference_tokens)} references, from {len(history.runs)} runs"
    )


@app.command()
def demo(
    run_id: RunIdOpt = "demo",
    judge: JudgeOpt = None,
    runs_root: RootOpt = None,
    sets: SetOpt = None,
    dry_run: DryRunOpt = False,
    assume: AssumeOpt = None,
    record: RecordOpt = None,
) -> None:
    """Run the whole DAG on the bundled data, offline (smoke-quality judge unless --judge)."""
    if not DEMO_CONFIG.is_file():
        _fail(RagauditError(f"{DEMO_CONFIG} not found: run the demo from the ragaudit checkout"))
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
) -> None:
    """Run the whole evaluation DAG (collect, sort, ground_truth, score, report)."""
    # Plain config fields: --set validates them and names the field when a value is wrong.
    sets = [*(sets or [])]
    sets += [f"scale.task_runner={task_runner}"] if task_runner is not None else []
    sets += [f"scale.workers={workers}"] if workers is not None else []
    _evaluate_with_flags(None, **locals())


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
    **_: object,
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
    ) -> None:
        _evaluate_with_flags([stage], **locals())

    command.__doc__ = doc
    app.command(name=stage.replace("_", "-"))(command)


_stage_command("collect", "Stage 1: fetch candidates and the system's answers into the run folder.")
_stage_command(
    "sort", "Stage 2: judge relevance and order the candidates; agreement with the engine."
)
_stage_command("ground_truth", "Stage 3: write reference answers from the relevant candidates.")
_stage_command("score", "Stage 4: score every configured metric on the top-k contexts.")


@app.command("report")
def report_cmd(
    run: Annotated[
        str | None,
        typer.Argument(help="A run folder or run id: render report.html from its tables alone."),
    ] = None,
    open_page: Annotated[
        bool, typer.Option("--open", help="Open report.html in the default browser.")
    ] = False,
    config: ConfigOpt = None,
    run_id: Annotated[
        str | None,
        typer.Option("--run-id", help="Run the report stage (summary, xlsx, html, artifacts)."),
    ] = None,
    runs_root: RootOpt = None,
    sets: SetOpt = None,
) -> None:
    """Stage 5 (--run-id), or report.html of a finished RUN: charts and a question drill-down."""
    from ragaudit.reporting import (
        CALIBRATION_META,
        REPORT_FILE,
        build_calibration,
        build_report,
        write_calibration_report,
        write_html,
    )

    if (run is None) == (run_id is None):
        _fail(RagauditError("report: give a RUN (folder or id) or --run-id, not both"))
    if run_id is not None:
        _evaluate_with_flags(
            ["report"],
            config=config,
            questions=None,
            run_id=run_id,
            judge=None,
            embedder=None,
            runs_root=runs_root,
            limit=None,
            sets=sets,
        )
        try:
            root = load_config(config, _overrides(runs_root=runs_root, sets=sets)).runs_root
        except RagauditError as exc:
            _fail(exc)
        page = Path(root) / run_id / REPORT_FILE
    else:
        assert run is not None  # exactly one of RUN and --run-id, checked above
        try:
            folder = _run_dir(run, runs_root, ("manifest.json", CALIBRATION_META))
            # A calibration run folder renders as the calibration page (and its workbook).
            if build_calibration(folder) is not None:
                page, _ = write_calibration_report(folder)
            else:
                page = write_html(build_report(folder))
        except RagauditError as exc:
            _fail(exc)
        console.print(f"report.html: {page}")
    if open_page:
        import webbrowser

        webbrowser.open(page.resolve().as_uri())


@app.command()
def metrics() -> None:
    """List the metrics with their inputs and what they need."""
    from ragaudit.metrics import METRICS

    table = Table(title="Metrics")
    # Names are what the config takes: never wrapped, whatever the width.
    table.add_column("name", no_wrap=True)
    for col in ("inputs", "judge", "embeddings", "what it measures"):
        table.add_column(col)
    for m in METRICS.values():
        table.add_row(
            m.name,
            ", ".join(m.inputs),
            "yes" if m.needs_llm else "",
            "yes" if m.needs_embeddings else "",
            m.description,
        )
    console.print(table)


@app.command("index")
def index_cmd(
    corpus: Annotated[
        Path, typer.Argument(help="JSONL or Parquet file, or a folder of .txt/.md files.")
    ],
    config: ConfigOpt = None,
    backend: Annotated[
        str | None,
        typer.Option(
            "--backend", help="local, elasticsearch or opensearch (default: collect.backend)."
        ),
    ] = None,
    index_name: Annotated[
        str | None,
        typer.Option(
            "--index", help="Index to write (the local backend's table); default from the config."
        ),
    ] = None,
    chunk_size: Annotated[
        int, typer.Option("--chunk-size", min=0, help="Units per chunk; 0 keeps documents whole.")
    ] = 0,
    chunk_overlap: Annotated[
        int, typer.Option("--chunk-overlap", min=0, help="Units shared by neighbouring chunks.")
    ] = 0,
    chunk_unit: Annotated[
        str,
        typer.Option(
            "--chunk-unit", help="chars, or tokens (a CJK character or a Latin word each)."
        ),
    ] = "chars",
    keep_context: Annotated[
        bool,
        typer.Option(
            "--keep-context/--no-keep-context", help="Start each chunk with its title and headings."
        ),
    ] = False,
    metadata: Annotated[
        list[str] | None,
        typer.Option("--metadata", "-m", help="key=value added to every document (repeatable)."),
    ] = None,
    id_field: Annotated[
        str, typer.Option("--id-field", help="Id field/column of a JSONL or Parquet corpus.")
    ] = "id",
    text_field: Annotated[
        str, typer.Option("--text-field", help="Text field/column of a JSONL or Parquet corpus.")
    ] = "text",
    recreate: Annotated[
        bool, typer.Option("--recreate", help="Drop the index first (after changing chunking).")
    ] = False,
    batch_size: Annotated[
        int, typer.Option("--batch-size", min=1, help="Documents per write.")
    ] = 500,
    sets: SetOpt = None,
) -> None:
    """Load a corpus into a search backend (chunked, with metadata); re-running it is idempotent."""
    from ragaudit.runfolder import RunFolder
    from ragaudit.search import ENGINES, Chunking, index_corpus
    from ragaudit.tasks._common import gateway_for

    install_log_filter()
    try:
        overrides = _overrides(sets=sets)
        if backend is not None:
            set_path(overrides, "collect.backend", backend)
        cfg = load_config(config, overrides)
        name = cfg.collect.backend
        if index_name is not None and name in (*ENGINES, "local"):
            set_path(
                overrides,
                f"collect.{name}.index" if name in ENGINES else "collect.table",
                index_name,
            )
            cfg = load_config(config, overrides)
        extra: dict[str, str] = {}
        for item in metadata or []:
            key, sep, value = item.partition("=")
            if not sep or not key.strip():
                raise RagauditError(
                    f"--metadata {item}: expected key=value, e.g. --metadata collection=handbook"
                )
            extra[key.strip()] = value
        try:
            chunking = Chunking(
                size=chunk_size or None,
                overlap=chunk_overlap,
                unit=chunk_unit,
                keep_context=keep_context,
            )
        except ValueError as exc:
            raise RagauditError(f"--chunk-*: {exc}") from None
        with Progress(
            TextColumn("{task.description:<32}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=err,
        ) as bar:
            task = bar.add_task(f"index: {name}", total=1)
            report = index_corpus(
                cfg,
                corpus,
                chunking,
                metadata=extra,
                id_field=id_field,
                text_field=text_field,
                recreate=recreate,
                batch_size=batch_size,
                make_gateway=lambda: gateway_for(cfg),
                # Embedding calls are logged beside the runs, where `cache stats` finds them.
                calls_dir=RunFolder(cfg.runs_root, "index").calls_dir,
                on_start=lambda n: bar.update(task, total=max(n, 1)),
                on_batch=lambda n: bar.advance(task, n),
            )
    except RagauditError as exc:
        _fail(exc)
    chunked = f" as {report.chunks} chunks" if chunking.size else ""
    console.print(
        f"indexed {report.documents} documents{chunked} into {report.target}: "
        f"{report.written} written, {report.total} in the index",
        soft_wrap=True,
    )


@cache_app.command("stats")
def cache_stats(config: ConfigOpt = None, runs_root: RootOpt = None) -> None:
    """Entries and size of the memo, and call totals from every run's call log."""
    try:
        cfg = load_config(config, _overrides(runs_root=runs_root))
    except RagauditError as exc:
        _fail(exc)
    import polars as pl

    from ragaudit.cache import open_memo
    from ragaudit.tasks._common import memo_location

    try:
        memo = open_memo(memo_location(cfg))
        try:
            info = memo.stats()
        finally:
            memo.close()
    except RagauditError as exc:
        _fail(exc)
    console.print(
        f"memo {info['path']}: {info['entries']} entries, {info['bytes'] / 1e6:.1f} MB",
        soft_wrap=True,
    )
    logs = sorted(Path(cfg.runs_root).glob("*/llm_calls/*.parquet"))
    if not logs:
        console.print("no call logs yet")
        return
    calls = pl.concat([pl.read_parquet(p) for p in logs], how="diagonal_relaxed")
    stats = (
        calls.group_by("model")
        .agg(
            pl.len().alias("calls"),
            pl.col("cache_hit").sum().alias("memo_hits"),
            (~pl.col("cache_hit")).sum().alias("provider_calls"),
            pl.col("tokens_in").sum(),
            pl.col("tokens_out").sum(),
            pl.col("cost_usd").sum(),
            pl.col("error").is_not_null().sum().alias("errors"),
        )
        .sort("calls", descending=True)
    )
    table = Table(title=f"Calls logged in {len(logs)} files under {cfg.runs_root}")
    for col in stats.columns:
        table.add_column(col)
    for row in stats.iter_rows():
        table.add_row(
            *["" if v is None else (f"{v:.4f}" if isinstance(v, float) else str(v)) for v in row]
        )
    console.print(table)


@cache_app.command("clear")
def cache_clear(
    config: ConfigOpt = None, yes: Annotated[bool, typer.Option("--yes", "-y")] = False
) -> None:
    """Empty the memo (every model answer will be asked again)."""
    try:
        cfg = load_config(config)
    except RagauditError as exc:
        _fail(exc)
    from ragaudit.cache import memo_identity, open_memo
    from ragaudit.tasks._common import memo_location

    try:
        location = memo_location(cfg)
        where = memo_identity(location)
        if not yes and not typer.confirm(f"Delete every memoised answer in {where}?"):
            raise typer.Exit(1)
        memo = open_memo(location)
        try:
            # Entry by entry, not the folder: another process may be using the memo.
            deleted = memo.clear()  # type: ignore[attr-defined]
        finally:
            memo.close()
    except RagauditError as exc:
        _fail(exc)
    console.print(f"cleared {where}: {deleted} entries", soft_wrap=True)


@app.command()
def serve(
    config: Annotated[Path, typer.Option("--config", "-c", help="Config file of the evaluation.")],
    cron: Annotated[
        str, typer.Option("--cron", help="Cron schedule, e.g. '0 3 * * *'.")
    ] = "0 3 * * *",
    name: Annotated[str, typer.Option("--name", help="Deployment name.")] = "ragaudit-scheduled",
) -> None:
    """Serve the scheduled re-evaluation (needs a Prefect server: PREFECT_API_URL).

    Each run evaluates the question set again and compares it with the previous run like it
    (artifacts; a ragaudit.regression event when a metric regressed, see nightly.on_regression).
    Without a worker or work pool: this process runs the scheduled runs itself.
    """
    try:
        load_config(config)
    except RagauditError as exc:
        _fail(exc)
    from ragaudit.flows.nightly import reevaluate

    reevaluate.serve(name=name, cron=cron, parameters={"config_path": str(config.resolve())})


@app.command()
def show(run_id: str, runs_root: RootOpt = None) -> None:
    """Print a run's manifest."""
    root = runs_root or Path("data/runs")
    path = root / run_id / "manifest.json"
    if not path.is_file():
        _fail(RagauditError(f"no manifest at {path}"))
    console.print_json(json.dumps(json.loads(path.read_text(encoding="utf-8"))))


@app.command("export-trec")
def export_trec_cmd(run: str, runs_root: RootOpt = None) -> None:
    """Write a run's TREC files (qrels.judge.txt, qrels.gold.txt, run.engine.txt) in its folder."""
    from ragaudit.trec import export_trec

    try:
        written = export_trec(_run_dir(run, runs_root))
    except RagauditError as exc:
        _fail(exc)
    if not written:
        _fail(RagauditError(f"run '{run}': no candidates table, nothing to export"))
    for path in written:
        console.print(str(path))


def _run_dir(
    name: str, runs_root: Path | None, markers: tuple[str, ...] = ("manifest.json",)
) -> Path:
    """A run given as a folder path, or as a run id under the runs root.

    A folder is a run when it holds one of ``markers`` (a calibration run has its own).
    """
    path = Path(name)
    under = (runs_root or Path("data/runs")) / name
    for folder in (path, under):
        if any((folder / m).is_file() for m in markers):
            return folder
    raise RagauditError(
        f"run '{name}': no {' or '.join(markers)} at {path} or {under} (give a run folder or a "
        "run id under --runs-root)"
    )


def _num(value: float | None, digits: int = 3) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _print_comparison(cmp: Any) -> None:
    console.print(
        f"\n[bold]compare[/] {cmp.run_a} (A) -> {cmp.run_b} (B)   judge A: {cmp.judge_a}   "
        f"judge B: {cmp.judge_b}"
    )
    if not cmp.comparable:
        console.print("[bold red]NOT LIKE FOR LIKE:[/] these runs differ in")
        for d in cmp.differences:
            console.print(f"  [red]{d.what}[/]: A {d.a!r}  B {d.b!r}", soft_wrap=True)
    for note in cmp.notes:
        console.print(f"note: {note}")
    table = Table(
        title=f"B - A per metric, paired by question (permutation test, {cmp.adjustment.upper()}"
        f"-adjusted, alpha {cmp.alpha})"
    )
    for col in ("metric", "n", "mean A", "mean B", "B - A", "95% CI", "p", "p adj", "verdict"):
        table.add_column(col)
    for m in cmp.metrics:
        style = {"regressed": "bold red", "improved": "bold green"}.get(m.verdict, "")
        verdict = f"[{style}]{m.verdict}[/]" if style else m.verdict
        table.add_row(
            m.metric + ("" if m.higher_is_better else " (lower is better)"),
            str(m.n_paired),
            _num(m.mean_a),
            _num(m.mean_b),
            _num(m.diff),
            "-" if m.ci_low is None else f"{m.ci_low:+.3f} {m.ci_high:+.3f}",
            _num(m.p_value, 4),
            _num(m.p_adjusted, 4),
            verdict,
        )
    console.print(table)
    if cmp.moved_questions:
        console.print("Questions that moved most (A -> B):")
        for q in cmp.moved_questions:
            console.print(
                f"  {q.metric} {q.question_id}: {q.value_a:.3f} -> {q.value_b:.3f} "
                f"({q.diff:+.3f})  {q.question[:60]}",
                soft_wrap=True,
            )
    for warning in cmp.warnings:
        console.print(f"[bold yellow]WARNING:[/] {warning}")
    console.print(f"[bold]verdict:[/] {cmp.verdict}", soft_wrap=True)


@app.command()
def compare(
    run_a: Annotated[str, typer.Argument(help="The earlier run: a folder or a run id.")],
    run_b: Annotated[str, typer.Argument(help="The later run: a folder or a run id.")],
    runs_root: RootOpt = None,
    html: Annotated[bool, typer.Option("--html", help="Also write compare.html.")] = False,
    fail_on_regression: Annotated[
        bool,
        typer.Option(
            "--fail-on-regression",
            help="Exit 1 when a metric regressed beyond noise between comparable runs.",
        ),
    ] = False,
    alpha: Annotated[
        float | None,
        typer.Option("--alpha", help="Significance level (default: report.alpha of run B)."),
    ] = None,
) -> None:
    """What moved beyond noise from RUN_A to RUN_B, paired by question, adjusted across metrics."""
    from ragaudit.reporting import compare_runs
    from ragaudit.runfolder import write_json

    try:
        dir_a, dir_b = _run_dir(run_a, runs_root), _run_dir(run_b, runs_root)
        cmp = compare_runs(dir_a, dir_b, alpha=alpha)
    except RagauditError as exc:
        _fail(exc)
    _print_comparison(cmp)
    out = dir_b / "compare.json"
    write_json(cmp.to_dict(), out)
    console.print(f"compare.json: {out}")
    if html:
        from ragaudit.reporting import write_compare_html

        console.print(f"compare.html: {write_compare_html(cmp, dir_b / 'compare.html')}")
    if fail_on_regression and cmp.comparable and cmp.regressed:
        err.print(f"[bold red]regression beyond noise:[/] {', '.join(cmp.regressed)}")
        raise typer.Exit(1)


@app.command()
def runs(
    runs_root: RootOpt = None,
    trend: Annotated[
        str | None, typer.Option("--trend", help="Print this metric over the runs of one set.")
    ] = None,
    question_set: Annotated[
        str | None,
        typer.Option(
            "--question-set",
            help="With --trend: a question-set hash (prefix) or file; default the newest run's.",
        ),
    ] = None,
) -> None:
    """The runs under the runs root: date, question set, judge and key means."""
    from ragaudit.reporting import list_runs
    from ragaudit.reporting import trend as metric_trend

    root = runs_root or Path("data/runs")
    found = list_runs(root)
    if not found:
        console.print(f"no runs under {root}")
        return
    if trend is None:
        metrics = list(dict.fromkeys(m for r in found for m in r.means))[:4]
        table = Table(title=f"Runs under {root}")
        cost_cols = ("relevance calls/tokens per q", "ordering calls/tokens per q")
        for col in ("run", "started", "status", "question set", "n", "judge", *cost_cols):
            table.add_column(col, no_wrap=col in {"run", "started", "judge"})
        for m in metrics:
            table.add_column(m)
        for r in found:
            short = (r.question_set_hash or "").removeprefix("k1:")[:10]
            c = r.judge_cost
            table.add_row(
                r.run_id,
                (r.started_at or "")[:16].replace("T", " "),
                r.status or "",
                f"{Path(r.questions_file or '').name} {short}",
                str(r.n_questions),
                r.judge or "",
                "-" if c is None else f"{c.relevance_calls:,.0f} / {c.relevance_tokens:,.0f}",
                "-" if c is None else f"{c.ordering_calls:,.0f} / {c.ordering_tokens:,.0f}",
                *[_num(r.means.get(m)) for m in metrics],
            )
        console.print(table)
        return
    chosen, series = metric_trend(found, trend, question_set)
    if not series:
        _fail(RagauditError(f"--trend {trend}: no run under {root} scored it for that set"))
    table = Table(title=f"{trend} over the runs of question set {chosen}")
    for col in ("run", "started", "judge", "mean", "95% CI"):
        table.add_column(col)
    for r in series:
        low, high = r.ci.get(trend, (None, None))
        ci = "-" if low is None else f"{low:.3f}-{high:.3f}"
        started = (r.started_at or "")[:19].replace("T", " ")
        table.add_row(r.run_id, started, r.judge or "", _num(r.means[trend]), ci)
    console.print(table)


ABLATE_DEMO_CONFIG = Path("data/ablation/ablate.yaml")


@app.command()
def ablate(
    config: ConfigOpt = None,
    demo: Annotated[
        bool, typer.Option("--demo", help="The bundled DuReader sweep (data/ablation/ablate.yaml).")
    ] = False,
    judge: JudgeOpt = None,
    generator: Annotated[
        str | None, typer.Option("--generator", help="Generator model (default: the judge).")
    ] = None,
    embedder: EmbedderOpt = None,
    runs_root: RootOpt = None,
    limit: LimitOpt = None,
    sets: SetOpt = None,
) -> None:
    """Sweep the reference RAG pipeline one factor at a time; charts and the best combination."""
    from ragaudit.flows.ablate import run_ablation

    install_log_filter()
    if demo and config is not None:
        _fail(RagauditError("--demo and --config: pick one"))
    path = ABLATE_DEMO_CONFIG if demo else config
    if path is None:
        _fail(RagauditError("ablate: give --config ablate.yaml, or --demo"))
    if demo and not ABLATE_DEMO_CONFIG.is_file():
        _fail(RagauditError(f"{ABLATE_DEMO_CONFIG} not found: run the demo from the checkout"))
    try:
        overrides = _overrides(
            judge=judge, embedder=embedder, runs_root=runs_root, limit=limit, sets=sets
        )
        if generator is not None:
            set_path(overrides, "models.generator", generator)
        cfg = load_config(path, overrides)
        from ragaudit.ablation import objective_weights, plan, question_set
        from ragaudit.dataset import load_questions

        objective_weights(cfg)  # a bad objective fails before Prefect starts
        if cfg.ablate.corpus is None or not Path(cfg.ablate.corpus).exists():
            raise RagauditError(f"ablate.corpus: {cfg.ablate.corpus} not found")
        load_questions(question_set(cfg), limit=cfg.limit)
        points = plan(cfg.ablate)
        err.print(f"ablate: {len(points)} points, {cfg.ablate.parallel} at once")
        if not os.environ.get("RAGAUDIT_DEBUG"):
            for name in ("prefect.flow_runs", "prefect.task_runs"):
                logging.getLogger(name).setLevel(logging.CRITICAL)
        out = run_ablation(cfg)
    except RagauditError as exc:
        _fail(exc)
    from ragaudit.ablation import ablation_dir

    folder = ablation_dir(cfg)
    llm = out["llm"]
    console.print(
        f"{out['evaluated']}/{out['points']} points evaluated, {out['indexes']} indexes "
        f"({out['indexes_built']} built now); {llm['provider_calls']} provider calls, "
        f"{llm['cache_hits']} memo hits",
        soft_wrap=True,
    )
    console.print(f"best: {out['best']}", soft_wrap=True)
    console.print(f"report: {folder / 'report.html'}  table: {folder / 'ablation.parquet'}")
    for pid, why in out["failed"].items():
        err.print(f"[red]point {pid} failed:[/] {redact(why)}")
    if out["failed"]:
        raise typer.Exit(3)


@app.command("testset")
def testset_cmd(
    out: Annotated[Path, typer.Argument(help="Question set to write (JSONL).")],
    corpus: Annotated[
        Path | None,
        typer.Option(
            "--corpus",
            help="Corpus: JSONL, Parquet or a folder of .txt/.md (default: collect.corpus).",
        ),
    ] = None,
    size: Annotated[int, typer.Option("--size", min=1, help="Questions to keep.")] = 20,
    scenarios: Annotated[
        Path | None,
        typer.Option(
            "--scenarios-from",
            help="Instead: write the scenario families of this question set with gold relevance.",
        ),
    ] = None,
    seed: Annotated[int, typer.Option("--seed", help="Order of plans, random orders.")] = 0,
    config: ConfigOpt = None,
    judge: JudgeOpt = None,
    embedder: EmbedderOpt = None,
    sets: SetOpt = None,
) -> None:
    """Generate a checked question set from a corpus, or scenario sets from a question set."""
    from ragaudit.calibration import make_scenarios
    from ragaudit.dataset import load_questions
    from ragaudit.metrics import Deps
    from ragaudit.search import read_corpus
    from ragaudit.tasks._common import hold_gateway
    from ragaudit.testset import generate_testset, write_question_set

    try:
        cfg = load_config(config, _overrides(judge=judge, embedder=embedder, sets=sets))
        source = corpus or cfg.collect.corpus
        if scenarios is not None:
            docs = read_corpus(source) if source is not None else []
            scenario_rows = make_scenarios(load_questions(scenarios), docs, seed=seed)
            write_question_set(
                [r.model_dump(mode="json", exclude_none=True) for r in scenario_rows], out
            )
            console.print(f"{len(scenario_rows)} scenario rows written to {out}")
            return
        if source is None or not Path(source).exists():
            raise RagauditError(f"testset: corpus {source} not found (--corpus or collect.corpus)")
        chunks = [{"id": d.id, "text": d.text, "metadata": d.metadata} for d in read_corpus(source)]
        m = cfg.models
        with hold_gateway(cfg) as gateway, gateway.scope("testset"):
            deps = Deps(
                gateway, m.judge_model, m.embedder_model, {}, m.temperature, m.max_output_tokens
            )
            rows = asyncio.run(
                generate_testset(chunks, deps, generator=m.generator_model, size=size, seed=seed)
            )
    except RagauditError as exc:
        _fail(exc)
        return
    write_question_set(rows, out)
    console.print(
        f"{len(rows)} questions written to {out} "
        f"(generator {cfg.models.generator_model}, checked by {cfg.models.judge_model})"
    )
    if len(rows) < size:
        err.print(f"[bold yellow]WARNING:[/] only {len(rows)} of {size} questions passed the check")
    from ragaudit.manifest import judge_warnings

    for warning in judge_warnings(cfg):
        console.print(f"[bold yellow]WARNING:[/] {warning}")


SMOKE_CALIBRATION_LIMIT = 2


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
        typer.Option("--labels", help="Your labels: question, answer, contexts, labels."),
    ] = None,
    scenarios: Annotated[
        Path | None,
        typer.Option(
            "--scenarios", help="Question set with gold relevance to build scenarios from."
        ),
    ] = None,
    threshold: Annotated[
        float, typer.Option("--threshold", help="Cut of scores and labels for κ and accuracy.")
    ] = 0.5,
) -> None:
    """Measure the metrics with the configured judge (the bundled data when none is named)."""
    from ragaudit.calibration._write import calibrate, gather_inputs

    started = time.perf_counter()
    try:
        cfg = load_config(
            config,
            _overrides(
                judge=judge, embedder=embedder, runs_root=runs_root, run_id=run_id, sets=sets
            ),
        )
        if (
            limit is None
            and cfg.models.judge_model == OFFLINE_JUDGE
            and not any((wikieval, halueval, labels, scenarios))
        ):
            # The smoke judge reads ~400 prompt tokens a second on 2 cores: the whole bundle
            # took over 12 minutes, so it calibrates on a slice that finishes in minutes.
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
            corpus=cfg.collect.corpus,
            limit=limit,
        )
        install_log_filter()
        result, run, warnings = asyncio.run(calibrate(cfg, inputs, threshold=threshold))
    except RagauditError as exc:
        _fail(exc)
        return
    models = f"judge {cfg.models.judge_model}, embedder {cfg.models.embedder_model}"
    table = Table(title=f"calibration {run.run_id} ({models})")
    for col in ("kind", "data", "metric", "family", "statistic", "value", "95% CI", "n", "note"):
        table.add_column(col)
    for f in result.figures:
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
    console.print(table)
    failed = sum(r["status"] == "failed" for r in result.scores)
    console.print(
        f"{len(result.scores)} items scored ({failed} failed) in "
        f"{time.perf_counter() - started:.1f} s; {run.table_path('calibration')}"
    )
    console.print(f"report.html: {run.path / 'report.html'}")
    for warning in warnings:
        console.print(f"[bold yellow]WARNING:[/] {warning}")


def main() -> None:
    """Entry point for ``python -m ragaudit``."""
    try:
        app()
    except RagauditError as exc:
        err.print(f"[bold red]error:[/] {redact(str(exc))}")
        sys.exit(2)


__all__ = ["app", "main"]
