"""``ragaudit judgments``: import a team's judgments, export them to its tools, sum the store up."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

import typer
from rich.markup import escape
from rich.table import Table

from ragaudit.cli._app import ConfigOpt, RootOpt, _num, _overrides, app, console
from ragaudit.config import RunConfig, load_config
from ragaudit.errors import InputError, RagauditError

if TYPE_CHECKING:
    import polars as pl

    from ragaudit.judgments import ImportReport, JudgmentFormat, StoreStats

judgments_app = typer.Typer(
    help="Judgments: import people's and other tools' judgments into the judgment store "
    "(Quepid, SRW, _rank_eval, Relevance Studio, RankLib, TREC, BEIR), export the store's, a "
    "run's or a tune's to them with a loss report, and sum the store up.",
    no_args_is_help=True,
)
app.add_typer(judgments_app, name="judgments")

FormatOpt = Annotated[
    str,
    typer.Option("--format", "-f", help="The format (ragaudit judgments formats lists them)."),
]
ScaleOpt = Annotated[
    str | None,
    typer.Option(
        "--scale",
        help="The source's (import) or target's (export) grade scale: a name (0-3, 0-1, 0-4, "
        "1-4, 0-10, srw, unit, coec, esci), inline JSON/YAML ({cuts: [...], marks: [...], "
        "decimals: 3}) or a file; default: the format's (or the file's own).",
    ),
]
OptionOpt = Annotated[
    list[str] | None,
    typer.Option("--option", help="A format option: --option name='My list' (repeatable)."),
]


def _config(config: Path | None, runs_root: Path | None) -> RunConfig:
    return load_config(config, _overrides(runs_root=runs_root))


def _store(cfg: RunConfig) -> Any:
    from ragaudit.judging import JudgmentStore
    from ragaudit.runfolder import RunsRoot

    return JudgmentStore(RunsRoot(cfg.runs_root).judgments_dir)


def _options(items: list[str] | None) -> dict[str, Any]:
    import yaml

    out: dict[str, Any] = {}
    for item in items or []:
        if "=" not in item:
            raise RagauditError(f"--option {item}: expected name=value, e.g. --option name=mine")
        key, raw = item.split("=", 1)
        out[key.strip()] = yaml.safe_load(raw)
    return out


def _engine(cfg: RunConfig, index: str | None, host: str | None) -> Any:
    """An engine backend on ``index``: the config's OpenSearch (credentials) or ``--host``."""
    from ragaudit.search import engine_options, make_backend

    if host is not None:
        return make_backend("opensearch", hosts=[host], index=index)
    name = cfg.collect.backend
    if name not in ("opensearch", "elasticsearch"):
        raise RagauditError(
            "--from-index: give --host URL, or a config whose collect.backend is opensearch"
        )
    options = engine_options(name, getattr(cfg.collect, name))
    return make_backend(name, **{**options, "index": index or options["index"]})


def _documents(cfg: RunConfig, corpus: Path | None, given: bool, source: str) -> Any:
    """Where documents' texts are found: the corpus, the configured backend, or nowhere."""
    from ragaudit.judgments import BackendTexts, CorpusTexts

    if source == "none":
        return None
    path = corpus or cfg.collect.corpus
    if source == "corpus" or (source == "auto" and path is not None):
        if path is None:
            raise RagauditError("--documents corpus: give --corpus FILE or collect.corpus")
        index = getattr(getattr(cfg.collect, cfg.collect.backend, None), "index", None)
        return CorpusTexts(path, index)
    if source == "backend" or (source == "auto" and given):
        from ragaudit.search import make_search_backend

        return BackendTexts(make_search_backend(cfg))
    return None


def _print_import(report: ImportReport, where: str) -> None:
    table = Table(title=f"imported {report.source} ({report.format}, scale {report.scale})")
    table.add_column("what")
    table.add_column("rows", justify="right")
    for state, n in sorted(report.states.items()):
        table.add_row(state, f"{n:,}")
    for grade, n in sorted(report.grades.items()):
        table.add_row(f"grade {grade}", f"{n:,}")
    table.add_row("queries", f"{report.queries:,}")
    table.add_row("pairs", f"{report.pairs:,}")
    table.add_row("annotators", f"{len(report.annotators):,}")
    table.add_row("resolved (question and document text known)", f"{report.resolved:,}")
    for why, n in sorted(report.unresolved.items(), key=lambda kv: -kv[1]):
        table.add_row(f"unresolved: {escape(why)}", f"{n:,}")
    if report.seeded:
        table.add_row("pairs standing for the judge's grade (seeded)", f"{report.seeded:,}")
    console.print(table)
    for note in report.notes:
        console.print(f"note: {escape(note)}")
    console.print(f"{report.rows:,} row(s) from {escape(where)} in the judgment store")


@judgments_app.command("import")
def import_cmd(
    files: Annotated[
        list[Path] | None, typer.Argument(help="Files to import (a .zip of one file is read).")
    ] = None,
    fmt_name: FormatOpt = "",
    name: Annotated[
        str | None,
        typer.Option("--name", help="The source's name (default: the file's own, else its stem)."),
    ] = None,
    scale: ScaleOpt = None,
    role: Annotated[
        Literal["people", "gold"],
        typer.Option(
            "--as",
            help="What the judgments stand as: people's labels (agreement, calibration) or gold.",
        ),
    ] = "people",
    seed: Annotated[
        bool,
        typer.Option(
            "--seed",
            help="Also store each resolved pair's grade as the config's judge's (the raters' "
            "lower median): a tune or run then pays nothing for it.",
        ),
    ] = False,
    config: ConfigOpt = None,
    runs_root: RootOpt = None,
    corpus: Annotated[
        Path | None,
        typer.Option(
            "--corpus", help="Corpus whose documents resolve ids (default collect.corpus)."
        ),
    ] = None,
    documents: Annotated[
        Literal["auto", "corpus", "backend", "none"],
        typer.Option(
            "--documents",
            help="Where document texts are found: the corpus, the configured backend "
            "(fetch_texts), or nowhere (auto: the corpus if any, else the config's backend).",
        ),
    ] = "auto",
    resolve: Annotated[
        Literal["id", "index-id", "text"],
        typer.Option(
            "--resolve",
            help="Documents by id, by _index and _id (another index is not resolved), or by the "
            "text the source carries, found in the corpus.",
        ),
    ] = "id",
    from_index: Annotated[
        str | None,
        typer.Option(
            "--from-index",
            help="Read live from an index (search-relevance-judgment, esrs-judgements).",
        ),
    ] = None,
    host: Annotated[
        str | None, typer.Option("--host", help="The engine for --from-index (else the config's).")
    ] = None,
    scenarios: Annotated[
        str | None,
        typer.Option(
            "--scenarios",
            help="Relevance Studio's scenarios (a file, or with --from-index an index such as "
            "esrs-scenarios): the queries' texts.",
        ),
    ] = None,
    option: OptionOpt = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
) -> None:
    """Import judgments into the judgment store, each row with its source, rater and state."""
    from ragaudit.judgments import file_bytes, import_read, make_format, read_index, scale_of

    if not fmt_name:
        raise RagauditError("judgments import: give --format (ragaudit judgments formats)")
    if bool(files) == bool(from_index):
        raise RagauditError("judgments import: give files, or --from-index NAME (not both)")
    cfg = _config(config, runs_root)
    fmt = make_format(fmt_name, _options(option))
    if scenarios is not None and fmt.name == "esrs" and from_index is None:
        from ragaudit.judgments import scenarios_file

        fmt.scenarios = scenarios_file(Path(scenarios))  # type: ignore[attr-defined]
    questions = None
    if config is not None:
        from ragaudit.dataset import load_questions

        questions = load_questions(cfg.questions)
    texts = _documents(cfg, corpus, config is not None, documents)
    grader = None
    if seed:
        if config is None:
            raise RagauditError("--seed: give --config: the judge a seeded grade stands for")
        from ragaudit.judging import config_grader

        grader = config_grader(cfg)
    store = _store(cfg)
    reports = []
    if from_index is not None:
        where = f"{host or 'the configured engine'}/{from_index}"
        scen = _engine(cfg, scenarios, host) if scenarios and fmt.name == "esrs" else None
        reads = [
            (where, read)
            for read in read_index(fmt, _engine(cfg, from_index, host), scenarios=scen)
        ]
    else:
        reads = [(str(p), fmt.read(file_bytes(p), str(p))) for p in files or []]
    for n, (where, read) in enumerate(reads):
        source = name or read.source or (Path(where).stem if from_index is None else from_index)
        if name is not None and len(reads) > 1:
            source = f"{name}-{n + 1}"
        report = asyncio.run(
            import_read(
                store,
                read,
                fmt,
                source=source,
                scale=scale_of(scale, read.scale or fmt.scale),
                where=where,
                role=role,
                questions=questions,
                documents=texts,
                how=resolve,
                seed=grader,
            )
        )
        reports.append(report)
        if not as_json:
            _print_import(report, where)
    if as_json:
        console.print_json(json.dumps([r.as_dict() for r in reports]))


def _tune_rows(cfg: RunConfig, rank_eval: bool) -> tuple[pl.DataFrame, list[dict[str, Any]], int]:
    """The pool grades of the config's tune, with the winner's requests for ``_rank_eval``."""
    import yaml

    from ragaudit.dataset import load_questions, read_qrels
    from ragaudit.judgments import graded_rows, with_requests
    from ragaudit.tuning import BEST, QRELS, tune_dir

    folder = tune_dir(cfg)
    if not (folder / QRELS).is_file():
        raise InputError(f"{folder}: no {QRELS} (run ragaudit tune with this config first)")
    questions = load_questions(cfg.questions)
    rows = graded_rows(questions, read_qrels(folder / QRELS).grades, judge=cfg.models.judge_model)
    if not rank_eval:
        return rows, [], 0
    best = yaml.safe_load((folder / BEST).read_text(encoding="utf-8")) or {}
    data = cfg.model_dump(mode="json")
    data["collect"] = best.get("collect") or data["collect"]
    winner = load_config(None, data, environ={})
    from ragaudit.search import make_search_backend

    out, notes = with_requests(rows, make_search_backend(winner), questions, winner.collect.top_n)
    return out, notes, 0


def _run_rows(
    run: str, cfg: RunConfig, rank_eval: bool
) -> tuple[pl.DataFrame, list[dict[str, Any]], int]:
    """A run's verdicts, with its requests for ``_rank_eval`` (rendered by its own config)."""
    from ragaudit.cli._reports import _run_dir
    from ragaudit.judgments import run_rows, with_requests
    from ragaudit.runfolder import RunFolder, stored_config

    path = _run_dir(run, cfg.runs_root)
    folder = RunFolder(path.parent, path.name)
    rows, failed = run_rows(folder)
    if not rank_eval:
        return rows, [], failed
    run_cfg = stored_config(folder)
    if run_cfg is None:
        raise InputError(f"{folder.path}: no stored config to render the run's requests with")
    from ragaudit.search import make_search_backend

    out, notes = with_requests(
        rows, make_search_backend(run_cfg), folder.questions(), run_cfg.collect.top_n
    )
    return out, notes, failed


def _for_questions(frame: pl.DataFrame, cfg: RunConfig) -> tuple[pl.DataFrame, dict[str, Any]]:
    """Rows mapped to the question set's ids (gold for ``gold.qrels``); the others left out."""
    import polars as pl

    from ragaudit.dataset import load_questions
    from ragaudit.judgments import match_questions

    matched, _ = match_questions(frame, load_questions(cfg.questions))
    ids = [q.question_id if q is not None else None for q in matched]
    texts = [q.question if q is not None else None for q in matched]
    doc = pl.col("extra").str.json_path_match("$.corpus_id")
    out = frame.with_columns(
        pl.Series("query_id", ids, dtype=pl.String),
        pl.Series("query", texts, dtype=pl.String),
        pl.coalesce(doc, pl.col("doc_id")).alias("doc_id"),
    )
    kept = out.filter(pl.col("query_id").is_not_null())
    left = frame.height - kept.height
    return kept, {
        "what": "rows whose query is not in the config's question set (by text or id)",
        "rows": left,
        "examples": frame.filter(pl.Series(ids).is_null())
        .select(pl.coalesce("query", "query_id"))
        .to_series()
        .unique(maintain_order=True)
        .head(3)
        .to_list(),
    }


@judgments_app.command("export")
def export_cmd(
    out: Annotated[Path, typer.Option("--out", "-o", help="The file written.")],
    fmt_name: FormatOpt = "",
    scale: ScaleOpt = None,
    source: Annotated[
        list[str] | None, typer.Option("--source", help="Only this source (repeatable).")
    ] = None,
    kind: Annotated[
        list[str] | None,
        typer.Option("--kind", help="Only rows of this kind: judge, person, imported."),
    ] = None,
    role: Annotated[
        list[str] | None,
        typer.Option(
            "--role", help="Only rows standing as: people, gold, seed (the judge's stand as none)."
        ),
    ] = None,
    run: Annotated[
        str | None,
        typer.Option("--run", help="A run (folder or id): its verdicts instead of the store's."),
    ] = None,
    tune: Annotated[
        bool,
        typer.Option(
            "--tune",
            help="The config's tune: its pool's grades (rank-eval: the winner's requests).",
        ),
    ] = False,
    for_questions: Annotated[
        bool,
        typer.Option(
            "--for-questions",
            help="Name queries by the config's question ids (a gold.qrels for runs); rows of "
            "queries the set lacks are left out and counted.",
        ),
    ] = False,
    config: ConfigOpt = None,
    runs_root: RootOpt = None,
    option: OptionOpt = None,
    loss: Annotated[
        Path | None,
        typer.Option("--loss", help="Where the loss report goes (default: <out>.loss.json)."),
    ] = None,
) -> None:
    """Export judgments to a format, with a loss report (JSON) of what the format cannot hold."""
    from ragaudit.atomic import write_bytes, write_json
    from ragaudit.judgments import (
        Selection,
        as_frame,
        export_frame,
        make_format,
        store_rows,
        with_texts,
    )

    if not fmt_name:
        raise RagauditError("judgments export: give --format (ragaudit judgments formats)")
    if run is not None and tune:
        raise RagauditError("judgments export: --run or --tune, not both")
    if (tune or for_questions) and config is None:
        raise RagauditError("--tune and --for-questions need --config (the tune, the questions)")
    cfg = _config(config, runs_root)
    fmt = make_format(fmt_name, _options(option), scale)
    notes: list[dict[str, Any]] = []
    failed = 0
    sources: list[str] = []
    if run is not None:
        frame, notes, failed = _run_rows(run, cfg, fmt.name == "rank-eval")
        sources = [f"run:{run}"]
    elif tune:
        frame, notes, failed = _tune_rows(cfg, fmt.name == "rank-eval")
        sources = [f"tune:{cfg.tune.name}"]
    else:
        store = _store(cfg)
        rows = store_rows(
            store, Selection(tuple(source or ()), tuple(kind or ()), tuple(role or ()))
        )
        if rows.height == 0:
            raise InputError(f"{store.folder}: no judgments match (see ragaudit judgments stats)")
        frame = as_frame(rows, fmt.grades)
        if "doc_text" in fmt.holds:
            frame = with_texts(frame, store)
        sources = sorted(set(rows["source"].to_list()))
    if for_questions:
        frame, left = _for_questions(frame, cfg)
        if left["rows"]:
            notes.append(left)
    exported = export_frame(frame, fmt, sources=sources)
    report = exported.loss
    report["notes"] = notes + report["notes"]
    if failed:
        report["notes"].append(
            {"what": "verdicts that failed (no grade to export)", "rows": failed}
        )
    if for_questions:
        report["rows_selected"] += sum(n["rows"] for n in notes if "question set" in n["what"])
        report["rows_not_written"] += sum(n["rows"] for n in notes if "question set" in n["what"])
    write_bytes(exported.data, out)
    loss_path = loss or out.with_name(out.name + ".loss.json")
    write_json(report, loss_path)
    _print_loss(report, out, loss_path)


def _print_loss(report: dict[str, Any], out: Path, loss_path: Path) -> None:
    console.print(
        f"{report['rows_written']:,} of {report['rows_selected']:,} row(s) written to "
        f"{escape(str(out))} ({report['label']})"
    )
    for entry in report["lost"]:
        console.print(
            f"  lost: {entry['field']} on {entry['rows']:,} row(s): {escape(entry['what'])}"
        )
    for entry in report["not_written"]:
        console.print(f"  not written: {entry['rows']:,} row(s) {escape(entry['what'])}")
    if report["merged"]:
        m = report["merged"]
        console.print(
            f"  merged: {m['rows']:,} row(s) of {m['pairs']:,} pair(s) with several raters "
            f"({m['pairs_disagreeing']:,} disagreeing)"
        )
    if report["scale"]["converted_rows"]:
        console.print(
            f"  scale: {report['scale']['converted_rows']:,} value(s) written as marks of "
            f"{report['scale']['target']}"
        )
    for note in report["notes"]:
        console.print(f"  note: {escape(note['what'])} ({note.get('rows', 0):,} row(s))")
    console.print(f"loss report: {escape(str(loss_path))}")


def _print_stats(stats: StoreStats, folder: Path) -> None:
    console.print(
        f"judgment store {escape(str(folder))}: {stats.rows:,} judgment(s) of {stats.pairs:,} "
        f"pair(s); {', '.join(f'{k} {v:,}' for k, v in stats.by_kind.items())}"
        + (f"; {stats.seeded:,} standing for a judge's grade" if stats.seeded else "")
    )
    table = Table(title="by source")
    for col in (
        "source",
        "kind",
        "format",
        "rows",
        "pairs",
        "graded",
        "unrateable",
        "later",
        "annotators",
    ):
        table.add_column(
            col, justify="right" if col not in ("source", "kind", "format") else "left"
        )
    for s in stats.sources:
        table.add_row(
            escape(s["source"]),
            s["kind"],
            s["format"] or "",
            *(
                f"{s[c]:,}"
                for c in ("rows", "pairs", "graded", "unrateable", "later", "annotators")
            ),
        )
    console.print(table)
    for title, key, listed, groups in (
        ("by annotator", "annotator", "sources", stats.annotators),
        (
            "people's labels by the page they were given on (source labelling)",
            "page",
            "annotators",
            stats.pages,
        ),
    ):
        if groups:
            table = Table(title=title)
            for col in (key, "rows", "pairs", listed):
                table.add_column(col)
            for g in groups:
                counts = (f"{g['rows']:,}", f"{g['pairs']:,}")
                table.add_row(escape(g[key]), *counts, escape(", ".join(g[listed])))
            console.print(table)
    if stats.answer_labels:
        console.print(f"people's yes/no on answers: {stats.answer_labels:,} (not pairs, apart)")
    for title, overlaps in (
        ("agreement between sources", stats.overlaps),
        ("agreement between raters of a source", stats.raters),
    ):
        if not overlaps:
            continue
        agree = Table(title=f"{title} (pairs both judged; 95% CI)")
        for col in ("a", "b", "pairs", "weighted κ", "ordinal α"):
            agree.add_column(col)
        for o in overlaps:
            cells = []
            for f in o.figures:
                if f.value is None:
                    cells.append(f"- ({f.note})")
                else:
                    ci = "" if f.ci_low is None else f" ({_num(f.ci_low, 2)}–{_num(f.ci_high, 2)})"
                    cells.append(f"{_num(f.value, 2)}{ci}")
            agree.add_row(escape(o.a), escape(o.b), f"{o.pairs:,}", *cells)
        console.print(agree)


@judgments_app.command("stats")
def stats_cmd(
    config: ConfigOpt = None,
    runs_root: RootOpt = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the summary as JSON.")] = False,
) -> None:
    """The judgment store: pairs, rows by source and annotator, agreement where they overlap."""
    from ragaudit.judgments import store_stats

    cfg = _config(config, runs_root)
    store = _store(cfg)
    stats = store_stats(store)
    if as_json:
        console.print_json(json.dumps(stats.as_dict(), default=str))
        return
    _print_stats(stats, store.folder)


@judgments_app.command("formats")
def formats_cmd() -> None:
    """The formats import and export take, and what each holds besides (query, document, grade)."""
    from ragaudit.judgments import format_names, make_format

    table = Table(title="judgment formats")
    for col in ("format", "what", "scale", "holds"):
        table.add_column(col)
    for name in format_names():
        fmt: JudgmentFormat = make_format(name)
        table.add_row(name, fmt.label, fmt.grades.name, ", ".join(sorted(fmt.holds)) or "-")
    console.print(table)


__all__ = ["judgments_app"]
