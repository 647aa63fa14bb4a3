"""The ``ragaudit`` command line: the whole DAG, one command per stage, the demo and the cache."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import shutil
import signal
import sys
import time
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

import ragaudit  # noqa: F401  (offline environment before anything else)
from ragaudit.config import RunConfig, load_config, set_path
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


class _RichReporter:
    """Rich progress bars for stage progress (ragaudit.progress)."""

    def __init__(self, progress: Progress) -> None:
        self.progress = progress

    def start(self, label: str, total: int) -> int:
        return int(self.progress.add_task(label, total=max(total, 1)))

    def advance(self, handle: int, n: int = 1) -> None:
        self.progress.advance(handle, n)  # type: ignore[arg-type]

    def finish(self, handle: int) -> None:
        task = self.progress.tasks[[t.id for t in self.progress.tasks].index(handle)]
        self.progress.update(handle, completed=task.total)  # type: ignore[arg-type]


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
    from ragaudit.flows.evaluate import evaluate

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
                return asyncio.run(evaluate(config.model_dump_json(), run_id, stages))
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
    from ragaudit.tasks.report import worst_questions

    run = RunFolder(config.runs_root, manifest["run_id"])
    console.print(f"\n[bold]ragaudit run[/] {manifest['run_id']}  ->  {run.path}")
    models = manifest["models"]
    console.print(f"judge: [bold]{models['judge']}[/]   embedder: {models['embedder']}")
    llm = manifest["llm"]
    console.print(
        f"LLM calls: {llm['calls']} (memo hits {llm['cache_hits']}, "
        f"provider calls {llm['provider_calls']}); "
        f"time {manifest['timings']['total_s']:.1f} s"
    )
    if run.has("summary"):
        table = Table(title="Metrics (mean over ok rows, 95% bootstrap CI)")
        for col in ("metric", "mean", "95% CI", "ok", "failed", "skipped", "threshold", "flag"):
            table.add_column(col)
        for r in run.read("summary").to_pylist():
            mean = "-" if r["mean"] is None else f"{r['mean']:.3f}"
            ci = "-" if r["ci_low"] is None else f"{r['ci_low']:.2f}-{r['ci_high']:.2f}"
            thr = "" if r["threshold"] is None else f"< {r['threshold']}"
            flag = "[red]BELOW THRESHOLD[/]" if r["flagged"] else ""
            table.add_row(
                r["metric"],
                mean,
                ci,
                str(r["n_ok"]),
                str(r["n_failed"]),
                str(r["n_skipped"]),
                thr,
                flag,
            )
        console.print(table)
    if run.has("scores"):
        import polars as pl

        worst = worst_questions(pl.from_arrow(run.read("scores")), config.report.worst)
        lines = [
            f"  {m}: " + ", ".join(f"{q} ({v:.2f})" for q, v in rows)
            for m, rows in worst.items()
            if rows
        ]
        if lines:
            console.print("Worst questions:\n" + "\n".join(lines))
    if run.has("agreement"):
        import polars as pl

        # The sort stage writes the means over questions as rows with question_id "__all__".
        agree = pl.from_arrow(run.read("agreement")).filter(
            (pl.col("status") == "ok") & (pl.col("question_id") == "__all__")
        )
        shown = {"spearman", "kendall_tau", "top_k_overlap", "ndcg"}
        text = "; ".join(
            f"{r['comparison']} {r['metric']} {r['value']:.2f} (n={r['n_questions']})"
            for r in agree.iter_rows(named=True)
            if r["metric"] in shown
        )
        if text:
            console.print(f"Ranking agreement (mean over questions): {text}")
    for warning in manifest.get("warnings", []):
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
        cause = exc
        while cause.__cause__ is not None and not isinstance(cause, RagauditError):
            cause = cause.__cause__
        if isinstance(cause, RagauditError):
            _fail(cause)
        raise
    _print_summary(config, manifest)


@app.command()
def demo(
    run_id: RunIdOpt = "demo",
    judge: JudgeOpt = None,
    runs_root: RootOpt = None,
    sets: SetOpt = None,
) -> None:
    """Run the whole DAG on the bundled data, offline (smoke-quality judge unless --judge)."""
    if not DEMO_CONFIG.is_file():
        _fail(RagauditError(f"{DEMO_CONFIG} not found: run the demo from the ragaudit checkout"))
    _evaluate(
        DEMO_CONFIG, _overrides(run_id=run_id, judge=judge, runs_root=runs_root, sets=sets), None
    )


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
) -> None:
    """Run the whole evaluation DAG (collect, sort, ground_truth, score, report)."""
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
    **_: object,
) -> None:
    """What ``run`` and every stage command share: flags to overrides, then the flow."""
    overrides = _overrides(
        questions=questions,
        run_id=run_id,
        judge=judge,
        embedder=embedder,
        runs_root=runs_root,
        limit=limit,
        sets=sets,
    )
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
_stage_command("report", "Stage 5: summary table, threshold flags and the Prefect artifact.")


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
    from ragaudit.search import Chunking, chunk_documents, index_documents, read_corpus
    from ragaudit.tasks.collect import ENGINES, make_search_backend

    install_log_filter()
    try:
        overrides = _overrides(sets=sets)
        if backend is not None:
            set_path(overrides, "collect.backend", backend)
        cfg = load_config(config, overrides)
        name = cfg.collect.backend
        if name not in (*ENGINES, "local"):
            raise RagauditError(
                f"--backend: '{name}' cannot be indexed into "
                "(use local, elasticsearch or opensearch)"
            )
        if index_name is not None:
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
        sources = read_corpus(corpus, id_field=id_field, text_field=text_field)
        docs = chunk_documents(sources, chunking, extra)
        target = _index_target(cfg)
        embed = None
        if name == "local" and cfg.collect.mode != "bm25":
            from ragaudit.tasks._common import gateway_for

            gateway = gateway_for(cfg, "index")

            async def embed(texts: list[str]) -> list[list[float]]:
                return await gateway.aembed(texts, model=cfg.models.embedder_model)

        store = make_search_backend(cfg, embed=embed)
        try:
            if recreate:
                _drop_index(cfg, store)
            with Progress(
                TextColumn("{task.description:<32}"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                console=err,
            ) as bar:
                task = bar.add_task(f"index: {name}", total=max(len(docs), 1))
                written = index_documents(
                    store, docs, batch_size=batch_size, on_batch=lambda n: bar.advance(task, n)
                )
            total = store.count()
        finally:
            close = getattr(store, "close", None)
            if close is not None:
                close()
    except RagauditError as exc:
        _fail(exc)
    chunked = f" as {len(docs)} chunks" if chunking.size else ""
    console.print(
        f"indexed {len(sources)} documents{chunked} into {target}: "
        f"{written} written, {total} in the index",
        soft_wrap=True,
    )


def _index_target(cfg: RunConfig) -> str:
    name = cfg.collect.backend
    if name == "local":
        return f"local table '{cfg.collect.table}' at {cfg.collect.index_path}"
    section = getattr(cfg.collect, name)
    return f"{name} index '{section.index}' at {', '.join(section.hosts)}"


def _drop_index(cfg: RunConfig, store: Any) -> None:
    if cfg.collect.backend == "local":
        import lancedb

        path = Path(cfg.collect.index_path)
        if path.exists():
            lancedb.connect(path).drop_table(cfg.collect.table, ignore_missing=True)
        return
    store.drop()


@cache_app.command("stats")
def cache_stats(config: ConfigOpt = None, runs_root: RootOpt = None) -> None:
    """Entries and size of the memo, and call totals from every run's call log."""
    try:
        cfg = load_config(config, _overrides(runs_root=runs_root))
    except RagauditError as exc:
        _fail(exc)
    import diskcache
    import polars as pl

    path = Path(cfg.cache_dir)
    with diskcache.Cache(str(path)) as memo:
        console.print(f"memo {path}: {len(memo)} entries, {memo.volume() / 1e6:.1f} MB")
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
    path = Path(cfg.cache_dir)
    if not yes and not typer.confirm(f"Delete every memoised answer in {path}?"):
        raise typer.Exit(1)
    if path.exists():
        shutil.rmtree(path)
    console.print(f"cleared {path}")


@app.command()
def serve(
    config: Annotated[Path, typer.Option("--config", "-c", help="Config file of the evaluation.")],
    cron: Annotated[
        str, typer.Option("--cron", help="Cron schedule, e.g. '0 3 * * *'.")
    ] = "0 3 * * *",
    name: Annotated[str, typer.Option("--name", help="Deployment name.")] = "ragaudit-scheduled",
) -> None:
    """Serve a scheduled re-evaluation (needs a Prefect server: PREFECT_API_URL)."""
    try:
        load_config(config)
    except RagauditError as exc:
        _fail(exc)
    from ragaudit.flows.evaluate import evaluate_config

    evaluate_config.serve(name=name, cron=cron, parameters={"config_path": str(config.resolve())})


@app.command()
def show(run_id: str, runs_root: RootOpt = None) -> None:
    """Print a run's manifest."""
    root = runs_root or Path("data/runs")
    path = root / run_id / "manifest.json"
    if not path.is_file():
        _fail(RagauditError(f"no manifest at {path}"))
    console.print_json(json.dumps(json.loads(path.read_text(encoding="utf-8"))))


def main() -> None:
    """Entry point for ``python -m ragaudit``."""
    try:
        app()
    except RagauditError as exc:
        err.print(f"[bold red]error:[/] {redact(str(exc))}")
        sys.exit(2)


__all__ = ["app", "main"]
