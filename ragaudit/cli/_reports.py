"""``report``, ``show``, ``compare`` and ``runs``: what finished runs hold."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from ragaudit.cli._app import ConfigOpt, RootOpt, SetOpt, _num, _overrides, app, console, err
from ragaudit.cli._run import _evaluate_with_flags
from ragaudit.config import DEFAULT_RUNS_ROOT, RunConfig, SortConfig, load_config
from ragaudit.directions import shown
from ragaudit.errors import RagauditError
from ragaudit.numbers import fixed


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
        REPORT_FILE,
        build_calibration,
        build_report,
        write_calibration_report,
        write_html,
    )

    if (run is None) == (run_id is None):
        raise RagauditError("report: give a RUN (folder or id) or --run-id, not both")
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
        root = load_config(config, _overrides(runs_root=runs_root, sets=sets)).runs_root
        page = Path(root) / run_id / REPORT_FILE
    else:
        assert run is not None  # exactly one of RUN and --run-id, checked above
        entry = _entry(run, runs_root)
        folder = entry.path
        # A calibration run folder renders as the calibration page (and its workbook).
        if entry.kind == "calibration" and build_calibration(folder) is not None:
            page, _ = write_calibration_report(folder)
        elif entry.kind != "run":
            # Every other kind writes its own page as it ends (a tune, an ablation, an audit day).
            own = entry.spec.page
            if own is None or not (folder / own).is_file():
                raise RagauditError(
                    f"'{run}' is {entry.spec.title} ({entry.state.status}); it has no "
                    f"{own or 'page'} yet: ragaudit {entry.kind} writes it when it ends"
                )
            page = folder / own
        else:
            report = build_report(folder)
            page = write_html(report)
            if report.people is not None:
                # Labels added since the run: summary.parquet gets their corrected means too.
                from ragaudit.ppi import write_corrected_summary

                write_corrected_summary(folder, report.people)
            if report.incomplete:
                err.print(f"[bold yellow]WARNING:[/] {report.incomplete}", soft_wrap=True)
        console.print(f"report.html: {page}")
    if open_page:
        import webbrowser

        webbrowser.open(page.resolve().as_uri())


@app.command()
def show(run_id: str, runs_root: RootOpt = None) -> None:
    """Print a folder's kind, state and manifest (a run, a tune, an audit day, …)."""
    entry = _entry(run_id, runs_root)
    line = f"{entry.spec.title}: {entry.state.status}"
    if entry.state.reason:
        line += f" ({entry.state.reason})"
    console.print(escape(line), soft_wrap=True)
    if entry.manifest:
        console.print_json(json.dumps(entry.manifest))
    _warn_incomplete(entry.path)


def _entry(name: str, runs_root: Path | None) -> Any:
    """The folder ``name`` (a path, or a name under the runs root: ``audit-shop/2026-11-20``).

    Any kind of folder; its kind, state and manifest read by the runs root's one rule.
    """
    from ragaudit.runfolder import MANIFEST, RunsRoot, folder_kinds

    root = runs_root or DEFAULT_RUNS_ROOT
    markers = {MANIFEST, *(m for k in folder_kinds() for m in k.legacy)}
    for folder in (Path(name), root / name):
        if any((folder / m).is_file() for m in markers):
            return RunsRoot(root).entry(folder)
    raise RagauditError(
        f"'{name}': no run of any kind at {name} or {root / name} (give a folder, or its name "
        "under --runs-root: a run id, a tune's name, audit-<name>/<day>)"
    )


def _config_of(folder: Path) -> RunConfig:
    """A run's stored config, validated by this version (one line when it does not load)."""
    from ragaudit.runfolder import stored_config

    config = stored_config(folder)
    if config is None:
        raise RagauditError(
            f"{folder}: its manifest holds no config this ragaudit version reads (written by "
            "another version, or damaged)"
        )
    return config


def _run_dir(
    name: str, runs_root: Path | None, markers: tuple[str, ...] = ("manifest.json",)
) -> Path:
    """A run given as a folder path, or as a run id under the runs root.

    A folder is a run when it holds one of ``markers`` (a calibration run has its own).
    """
    path = Path(name)
    under = (runs_root or DEFAULT_RUNS_ROOT) / name
    for folder in (path, under):
        if any((folder / m).is_file() for m in markers):
            return folder
    raise RagauditError(
        f"run '{name}': no {' or '.join(markers)} at {path} or {under} (give a run folder or a "
        "run id under --runs-root)"
    )


def _warn_incomplete(folder: Path) -> None:
    """Say on stderr when the run did not complete (the rule is ``run_state``'s)."""
    from ragaudit.runfolder import run_state

    warning = run_state(folder).warning
    if warning:
        err.print(f"[bold yellow]WARNING:[/] {warning}", soft_wrap=True)


def _change_cells(m: Any) -> list[str]:
    """A change's figures as the compare tables print them, from n to the adjusted p."""
    return [
        str(m.n_paired),
        _num(m.mean_a),
        _num(m.mean_b),
        fixed(m.diff, sign=True),
        "-" if m.ci_low is None else f"{fixed(m.ci_low, sign=True)} {fixed(m.ci_high, sign=True)}",
        _num(m.p_value, 4),
        _num(m.p_adjusted, 4),
    ]


def _verdict(m: Any) -> str:
    style = {"regressed": "bold red", "improved": "bold green"}.get(m.verdict, "")
    return f"[{style}]{m.verdict}[/]" if style else m.verdict


def _print_breakdown_changes(cmp: Any) -> None:
    """Each breakdown's cells B − A: one family adjusted together, shown and never gated."""
    for b in cmp.breakdowns:
        table = Table(
            title=f"B - A by {b.title}: its {len(b.changes)} tests one family, "
            f"{cmp.adjustment.upper()}-adjusted together (shown; the gate reads the overall "
            "metrics)"
        )
        columns = ("metric", "cell", "n", "mean A", "mean B", "B - A", "95% CI", "p", "p adj")
        for col in (*columns, "verdict"):
            table.add_column(col)
        for c in b.changes:
            m = c.change
            verdict = _verdict(m)
            if not c.can_move and m.p_adjusted is not None:
                verdict += f" (n {m.n_paired} can never reach alpha)"
            table.add_row(shown(m.metric, m.higher_is_better), c.cell, *_change_cells(m), verdict)
        console.print(table)
        if b.note:
            console.print(f"note: {escape(b.note)}", soft_wrap=True)


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
    if cmp.corrected:
        console.print(f"corrected by people's labels (PPI): {', '.join(cmp.corrected)}")
    if cmp.labels_unused:
        console.print(
            f"people's labels unused (the judge's figures compared; notes say why): "
            f"{', '.join(cmp.labels_unused)}"
        )
    table = Table(
        title=f"B - A per metric, paired by question (permutation test, {cmp.adjustment.upper()}"
        f"-adjusted, alpha {cmp.alpha})"
    )
    columns = ("metric", "n", "mean A", "mean B", "B - A", "95% CI", "p", "p adj", "noise counted")
    for col in (*columns, "verdict"):
        table.add_column(col)
    for m in cmp.metrics:
        table.add_row(shown(m.metric, m.higher_is_better), *_change_cells(m), m.noise, _verdict(m))
    console.print(table)
    _print_breakdown_changes(cmp)
    if cmp.moved_questions:
        console.print("Questions that moved most (A -> B):")
        for q in cmp.moved_questions:
            console.print(
                f"  {q.metric} {q.question_id}: {fixed(q.value_a)} -> {fixed(q.value_b)} "
                f"({fixed(q.diff, sign=True)})  {q.question[:60]}",
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
    xlsx: Annotated[
        bool, typer.Option("--xlsx", help="Also write compare.xlsx (every row, the notes).")
    ] = False,
    fail_on_regression: Annotated[
        bool,
        typer.Option(
            "--fail-on-regression",
            help="Exit 1 when a metric regressed beyond noise between comparable runs, when "
            "either run is incomplete, or when a metric of RUN_A is missing from RUN_B.",
        ),
    ] = False,
    alpha: Annotated[
        float | None,
        typer.Option("--alpha", help="Significance level (default: report.alpha of run B)."),
    ] = None,
    battles: Annotated[
        bool,
        typer.Option(
            "--battles",
            help="Also ask the judge which answer is better, per shared question, in both "
            "orders (default: report.battles of run B).",
        ),
    ] = False,
    dry_run: Annotated[
        bool,
        typer.Option("--dry-run", help="With --battles: count the battle calls, ask nothing."),
    ] = False,
) -> None:
    """What moved beyond noise from RUN_A to RUN_B, paired by question, adjusted across metrics."""
    from ragaudit.reporting import compare_runs, regressions
    from ragaudit.runfolder import write_json

    dir_a, dir_b = _run_dir(run_a, runs_root), _run_dir(run_b, runs_root)
    cfg_b = _config_of(dir_b)
    battles = battles or cfg_b.report.battles
    if dry_run:
        if not battles:
            raise RagauditError("--dry-run counts battle calls: give --battles too")
        _count_battles(dir_a, dir_b, cfg_b)
        return
    cmp = compare_runs(dir_a, dir_b, alpha=alpha)
    _print_comparison(cmp)
    report = cmp.to_dict()
    battle, duels = _battles(dir_a, dir_b, cfg_b, cmp.alpha) if battles else (None, [])
    if battle is not None:
        report["battles"] = dataclasses.asdict(battle)
    out = dir_b / "compare.json"
    write_json(report, out)
    console.print(f"compare.json: {out}")
    if html:
        from ragaudit.reporting import write_compare_html

        page = write_compare_html(cmp, dir_b / "compare.html", battle, duels)
        console.print(f"compare.html: {page}")
    if xlsx:
        from ragaudit.reporting import write_compare_xlsx

        console.print(f"compare.xlsx: {write_compare_xlsx(cmp, dir_b / 'compare.xlsx')}")
    if fail_on_regression and cmp.gate_failures:
        # Checked before comparability: a crashed run must never pass a gate by its absence.
        for why in cmp.gate_failures:
            err.print(f"[bold red]gate failed:[/] {why}", soft_wrap=True)
        raise typer.Exit(1)
    regressed = regressions(cmp, battle)
    if fail_on_regression and battle is not None and battle.power_note and not regressed:
        # A gate that cannot fail on the battles must not look like one the battles passed.
        err.print(
            f"[bold yellow]gate passed without the battles:[/] {escape(battle.power_note)}",
            soft_wrap=True,
        )
    if fail_on_regression and regressed:
        err.print(f"[bold red]regression beyond noise:[/] {', '.join(regressed)}")
        raise typer.Exit(1)


@app.command("battles")
def battles_cmd(
    runs_: Annotated[
        list[str], typer.Argument(metavar="RUNS...", help="Two or more runs: folders or run ids.")
    ],
    runs_root: RootOpt = None,
    resamples: Annotated[
        int, typer.Option("--resamples", help="Bootstrap resamples over questions.")
    ] = 500,
    out: Annotated[
        Path | None,
        typer.Option(
            "--out",
            help="Folder for battles.parquet and leaderboard.parquet "
            "(default: a new battles-<id> folder under the runs root).",
        ),
    ] = None,
) -> None:
    """Every pair of RUNS in blind battles; a Bradley–Terry (Davidson) leaderboard with ties."""
    import asyncio

    from ragaudit.battles import round_robin
    from ragaudit.cache import hold_gateway
    from ragaudit.runfolder import BATTLES, FolderRun, RunsRoot
    from ragaudit.runids import new_run_id

    dirs = [_run_dir(r, runs_root) for r in runs_]
    if len({d.name for d in dirs}) < 2:
        raise RagauditError("battles: give at least two different runs")
    # The judge settings of the last run, as compare takes run B's.
    cfg = _config_of(dirs[-1])
    # Checked before any battle is played.
    folder = out or (runs_root or DEFAULT_RUNS_ROOT) / new_run_id("battles")
    # A run's own battles.parquet is compare's (B against A); a round robin has its own folder,
    # never a run's, a tune's, an audit's or the judgment store.
    RunsRoot(folder.resolve().parent).claim(folder.resolve().name, "battles", "battles --out")
    _writable_folder(folder, "battles --out")

    async def play() -> Any:
        with hold_gateway(cfg) as gateway:
            return await round_robin(dirs, cfg, gateway)

    # The round robin's folder is a run of the battles kind: locked while it plays (a second
    # one into it is refused before paying), ``interrupted`` or ``failed`` when it stops early.
    with FolderRun(folder.resolve(), BATTLES.name, cfg, option="battles --out") as run:
        rows, pairings = asyncio.run(play())
        _leaderboard(rows, pairings, folder, resamples)
        run.finish("completed", runs=[d.name for d in dirs])


def _leaderboard(rows: Any, pairings: Any, folder: Path, resamples: int) -> None:
    """Print and write the round robin's verdicts and its Davidson leaderboard."""
    from ragaudit.battles import fit_davidson, verdict_frame, write_battles, write_leaderboard

    for (a, b), p in pairings.items():
        console.print(
            f"{a} vs {b}: {len(p.pairs)} shared question(s) answered ok in both "
            f"({p.only_a} only in {a}, {p.only_b} only in {b}, {p.not_ok} not ok)"
        )
    frame = verdict_frame(rows)
    failed = int(frame["verdict"].is_null().sum())
    if failed == frame.height:
        raise RagauditError("battles: no verdict could be had (no shared ok questions?)")
    board = fit_davidson(frame, resamples=resamples)
    table = Table(
        title=f"Leaderboard (Davidson model with ties, nu {fixed(board.tie_param)}; "
        f"log-strength centred at 0, 95% bootstrap CI over questions)"
    )
    for col in ("rank", "run", "strength", "95% CI"):
        table.add_column(col)
    for k, (run, s, low, high) in enumerate(
        zip(board.runs, board.strength, board.ci_low, board.ci_high, strict=True), 1
    ):
        table.add_row(
            str(k), run, fixed(s, sign=True), f"{fixed(low, sign=True)} {fixed(high, sign=True)}"
        )
    console.print(table)
    if board.unbounded:
        console.print(
            f"note: {', '.join(board.unbounded)}: no finite strength fits these verdicts (a "
            "run that wins every battle without a tie, or never wins but ties, has none, nor "
            "has a run between two such gaps): the figures are where the fit stopped at its "
            "bound (order only)"
        )
    if failed:
        console.print(f"{failed} battle answer(s) failed and were left out")
    folder.mkdir(parents=True, exist_ok=True)
    write_battles(rows, folder)
    write_leaderboard(board, frame.height - failed, folder)
    console.print(f"leaderboard and verdicts: {folder}")


def _writable_folder(folder: Path, where: str) -> None:
    """Make ``folder`` and check a file can be written in it, before anything is paid.

    Raises one line naming ``where`` when the path is a file, lies under one, or cannot be
    written.
    """
    import tempfile

    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".write-check-"):
            pass
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise RagauditError(f"{where} {folder}: cannot write there ({reason})") from None


def _count_battles(dir_a: Path, dir_b: Path, cfg: RunConfig) -> None:
    from ragaudit.battles import battle_calls, battle_plan, run_pairing

    pairing = run_pairing(dir_a, dir_b)
    samples = len(battle_plan(cfg))
    console.print(
        f"battles: {len(pairing.pairs)} shared question(s) answered ok in both runs "
        f"({pairing.only_a} only in A, {pairing.only_b} only in B, {pairing.not_ok} not ok); "
        f"{battle_calls(len(pairing.pairs), samples)} judge call(s) "
        f"(2 orders x {samples} judge sample(s))"
    )


def _battles(dir_a: Path, dir_b: Path, cfg: RunConfig, alpha: float) -> tuple[Any, list[Any]]:
    """Play the battles, write battles.parquet in B and print their statistics.

    Returns:
        The statistics and the questions for the page's drill-down (``battles.duels``).
    """
    import asyncio

    from ragaudit.battles import battle_verdict, duels
    from ragaudit.cache import hold_gateway

    async def play() -> Any:
        with hold_gateway(cfg) as gateway:
            return await battle_verdict(dir_a, dir_b, cfg, gateway, alpha)

    pairing, rows, st = asyncio.run(play())
    style = {"B worse": "bold red", "B better": "bold green"}.get(st.verdict, "")
    verdict = f"[{style}]{st.verdict}[/]" if style else st.verdict
    rate = "-" if st.win_rate is None else fixed(st.win_rate)
    ci = "-" if st.ci_low is None else f"{fixed(st.ci_low)}-{fixed(st.ci_high)}"
    cons = "-" if st.consistency is None else fixed(st.consistency)
    console.print(
        f"battles (blind, both orders, ties split): {st.n} question(s) "
        f"({pairing.only_a} only in A, {pairing.only_b} only in B, {pairing.not_ok} not ok); "
        f"verdicts (both orders, every judge sample): B won {st.wins}, tied {st.ties}, lost "
        f"{st.losses}; B's win rate {rate} "
        f"(95% CI {ci}), p {_num(st.p_value, 4)} (sign-flip permutation test over questions "
        f"against 0.5, alpha {st.alpha}); position consistency {cons}: {verdict}",
        soft_wrap=True,
    )
    if st.power_note:
        console.print(f"[bold yellow]WARNING:[/] battles: {escape(st.power_note)}", soft_wrap=True)
    console.print(f"battles.parquet: {dir_b / 'battles.parquet'}")
    return st, duels(pairing, rows)


@app.command()
def runs(
    runs_root: RootOpt = None,
    kind: Annotated[
        str | None,
        typer.Option(
            "--kind",
            help="List the folders of this kind instead (tune, ablation, battles, calibration, "
            "audit: one row per day), with their states.",
        ),
    ] = None,
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
    from ragaudit.reporting import corrected_text, list_runs
    from ragaudit.reporting import trend as metric_trend

    root = runs_root or DEFAULT_RUNS_ROOT
    if kind is not None:
        _list_kind(root, kind)
        return
    found = list_runs(root)
    if not found:
        console.print(f"no runs under {root}")
        return
    if trend is None:
        from ragaudit.reporting import runs_table

        console.print(runs_table(found, f"Runs under {root}", console.width))
        return
    chosen, series = metric_trend(found, trend, question_set)
    if not series:
        raise RagauditError(f"--trend {trend}: no run under {root} scored it for that set")
    table = Table(title=f"{trend} over the runs of question set {chosen}")
    # The mean corrected by people's labels beside the judge's, when a run of the set has one.
    labelled = any(trend in r.corrected for r in series)
    for col in ("run", "started", "judge", "mean", "95% CI") + (
        ("corrected by people's labels",) if labelled else ()
    ):
        table.add_column(col)
    for r in series:
        low, high = r.ci.get(trend, (None, None))
        ci = "-" if low is None else f"{fixed(low)}-{fixed(high)}"
        started = (r.started_at or "")[:19].replace("T", " ")
        people = (corrected_text(r.corrected.get(trend)) or "-",) if labelled else ()
        table.add_row(r.run_id, started, r.judge or "", _num(r.means[trend]), ci, *people)
    console.print(table)


def _list_kind(root: Path, kind: str) -> None:
    """Every folder of ``kind`` under ``root`` (the runs root's one scanner), with its state."""
    from ragaudit.runfolder import RunsRoot, folder_kind

    try:
        spec = folder_kind(kind)
    except KeyError as exc:
        raise RagauditError(f"--kind: {exc.args[0]}") from None
    found = RunsRoot(root).entries(spec.name)
    if not found:
        console.print(f"no {spec.name} folder under {root}")
        return
    table = Table(title=f"{spec.name} folders under {root} ({spec.layout})")
    for col in ("folder", "started", "status", "why not complete"):
        table.add_column(col)
    for e in found:
        started = e.started_at[:19].replace("T", " ")
        table.add_row(escape(e.run_id), started, e.state.status, escape(e.state.reason or ""))
    console.print(table)


@app.command("export-trec")
def export_trec_cmd(run: str, runs_root: RootOpt = None) -> None:
    """Write a run's TREC files (qrels.judge.txt, qrels.gold.txt, run.engine.txt) in its folder."""
    from ragaudit.trec import export_trec

    folder = _run_dir(run, runs_root)
    _warn_incomplete(folder)
    written = export_trec(folder)
    if not written:
        raise RagauditError(f"run '{run}': no candidates table, nothing to export")
    for path in written:
        console.print(str(path))
    # The qrels hold raw grades 0-3; trec_eval's default counts any grade > 0 as relevant, so
    # P@k, R@k and MRR would disagree with the agreement table without the level.
    from ragaudit.runfolder import stored_setting

    # The stored config's field when it has one, else the field's default (an older manifest);
    # read as a value, not validated, so a config of another version still gives its level.
    level = stored_setting(folder, "sort.relevant_grade", SortConfig().relevant_grade)
    console.print(
        f"grades are 0-3: run trec_eval -l {level} (pytrec_eval relevance_level={level}) so that "
        f"P@k, R@k and MRR count grade >= {level} as relevant, as the agreement table does",
        soft_wrap=True,
    )
