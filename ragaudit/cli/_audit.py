"""``ragaudit audit``: a day of production traffic sampled, graded and estimated; ``promote``."""

from __future__ import annotations

import asyncio
import datetime as dt
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from ragaudit.cli._app import (
    ConfigOpt,
    DryRunOpt,
    EmbedderOpt,
    JudgeOpt,
    RootOpt,
    SetOpt,
    _overrides,
    app,
    console,
    err,
    held_folders,
    load_paid_config,
    quiet_prefect_runs,
)
from ragaudit.cli._label import DEFAULT_PORT
from ragaudit.config import RunConfig, load_config
from ragaudit.errors import RagauditError
from ragaudit.numbers import fixed
from ragaudit.secrets import install_log_filter

CONFIRM_ABOVE = 1_000
"""Paid judge calls a day may plan without ``--yes``: a sample of 5,000 requests at k = 10 is
50,000 grades, which must not start unasked."""
CONFIRM_TOKENS_ABOVE = 1_000_000
"""Judge prompt tokens the days may plan without ``--yes``: a few calls over very long texts
cost as much as many calls (one 50 MB query planned 12.5 M tokens in a handful of calls)."""

audit_app = typer.Typer(
    help="Audit a day of production traffic: sample it, grade what was served, estimate per "
    "segment with intervals, write report.html (ragaudit audit -c audit.yaml --day 2026-11-26).",
    invoke_without_command=True,
    no_args_is_help=False,
)
app.add_typer(audit_app, name="audit")

DayOpt = Annotated[
    str | None,
    typer.Option("--day", help="The day audited, YYYY-MM-DD (default: yesterday, UTC)."),
]
FromOpt = Annotated[
    str | None,
    typer.Option(
        "--from",
        help="Backfill: the first day of a range (YYYY-MM-DD); with --to, every missing day is "
        "audited in order, a day already done is not redone.",
    ),
]
ToOpt = Annotated[
    str | None,
    typer.Option("--to", help="Backfill: the last day of the range (default: yesterday, UTC)."),
]
YesOpt = Annotated[
    bool,
    typer.Option(
        "--yes",
        "-y",
        help=f"Start over {CONFIRM_ABOVE:,} paid judge calls or {CONFIRM_TOKENS_ABOVE:,} prompt "
        "tokens unasked.",
    ),
]


def parse_day(text: str | None) -> dt.date:
    """``--day``'s date; yesterday (UTC) when not given."""
    if text is None:
        from ragaudit.audit import previous_day

        return previous_day()
    try:
        return dt.date.fromisoformat(text)
    except ValueError:
        raise RagauditError(f"--day {text}: not a date; give YYYY-MM-DD") from None


def _confirm(cfg: RunConfig, days: list[dt.date], yes: bool) -> None:
    """Ask before paid judge calls or prompt tokens over their bounds.

    Counted as the dry run counts them: each day read and sampled, its grading and scoring
    planned, nothing called.
    """
    from ragaudit.cache.providers import provider_record

    judge = cfg.models.judge_model
    if yes or provider_record(judge).free:
        return
    from ragaudit.audit import planned_cost

    calls, tokens = asyncio.run(planned_cost(cfg, days))
    if calls <= CONFIRM_ABOVE and tokens <= CONFIRM_TOKENS_ABOVE:
        return
    planned = f"{calls:,} paid judge calls and {tokens:,} prompt tokens with {judge}"
    if not console.is_terminal:
        err.print(
            f"[bold red]audit:[/] {escape(planned)} (counted by the dry run), over "
            f"{CONFIRM_ABOVE:,} calls or {CONFIRM_TOKENS_ABOVE:,} tokens: pass --yes to start "
            "them (--dry-run shows them)",
            soft_wrap=True,
        )
        raise typer.Exit(2)
    if not typer.confirm(f"Start {planned}?"):
        raise typer.Exit(1)


@audit_app.callback()
def audit(
    ctx: typer.Context,
    config: ConfigOpt = None,
    day: DayOpt = None,
    judge: JudgeOpt = None,
    embedder: EmbedderOpt = None,
    runs_root: RootOpt = None,
    sets: SetOpt = None,
    dry_run: DryRunOpt = False,
    yes: YesOpt = False,
    start: FromOpt = None,
    end: ToOpt = None,
) -> None:
    """How good the answers of one day were for the questions people asked, per segment."""
    if ctx.invoked_subcommand is not None:
        return
    install_log_filter()
    if config is None:
        raise RagauditError("audit: give --config audit.yaml (with an audit: section)")
    overrides = _overrides(judge=judge, embedder=embedder, runs_root=runs_root, sets=sets)
    cfg = load_paid_config(config, overrides)
    from ragaudit.audit import audit_section

    section = audit_section(cfg)
    if (start or end) and day:
        raise RagauditError("audit: give --day, or a range with --from/--to, not both")
    days = day_range(start, end) if (start or end) else [parse_day(day)]
    if dry_run:
        for when in days:
            _dry_run(cfg, when)
        return
    # The memo opened (an unreachable Redis, an unwritable cache folder) before Prefect starts.
    from ragaudit.cache import memo_location, open_memo

    open_memo(memo_location(cfg)).close()
    from ragaudit.audit import check_day, check_days, day_done

    backfill = len(days) > 1
    if backfill:
        done = [when for when in days if day_done(cfg, when)]
        for when in done:
            err.print(f"audit {section.name} {when.isoformat()}: done already, not redone")
        todo, not_done = check_days(cfg, [when for when in days if when not in done])
    else:
        todo, not_done = [(days[0], check_day(cfg, days[0]))], []
    _confirm(cfg, [when for when, _ in todo], yes)
    status = 0
    # Every day to audit locked before Prefect's server starts: a second audit of one of them
    # is refused here, in one line, having paid nothing.
    with held_folders(*(folder for _, folder in todo), prepare=_import_flow):
        from ragaudit.flows.audit import run_audit

        quiet_prefect_runs()
        for when, folder in todo:
            err.print(
                f"audit {section.name} {when.isoformat()}: sample {section.sample}, top {section.k}"
            )
            out = run_audit(cfg, when)
            if "grading" not in out:
                why = (
                    f"audit {section.name} {when.isoformat()}: "
                    f"{out.get('failed') or 'the flow run ended without a result'} "
                    f"(the day's folder: {folder})"
                )
                if not backfill:
                    raise RagauditError(why)
                # One day's failure (a reader's, a provider's) leaves the rest of the range.
                err.print(f"[bold red]{escape(why)}[/]", soft_wrap=True)
                not_done.append((when, str(out.get("failed") or "failed")))
                status = max(status, 1)
                continue
            if out["status"] == "no_data":
                err.print(
                    f"[bold yellow]audit {escape(out['audit'])} {out['day']}: nothing to audit "
                    f"yet:[/] {escape(str(out['no_data']))}",
                    soft_wrap=True,
                )
                not_done.append((when, str(out["no_data"])))
                continue
            _print(out)
            if out["status"] == "completed_with_failures":
                err.print(
                    f"[bold red]audit {escape(out['audit'])} {out['day']} completed with "
                    "failures:[/] most of its judge calls failed (see failed rows in "
                    "verdicts.parquet and scores.parquet); run it again to ask them again",
                    soft_wrap=True,
                )
                not_done.append((when, "most of its judge calls failed"))
                status = max(status, 3)
            if out.get("failed"):
                err.print(f"[bold red]{escape(str(out['failed']))}[/] (audit.on_regression: fail)")
                status = max(status, 1)
    if not_done:
        err.print(f"audit {section.name}: {len(not_done)} of {len(days)} days not done:")
        for when, why in sorted(not_done):
            err.print(f"  {when.isoformat()}: {escape(why)}", soft_wrap=True)
        status = max(status, 3)
    if status:
        raise typer.Exit(status)


def _import_flow() -> None:
    """Import the audit flow's modules while Prefect's server starts."""
    import ragaudit.flows.audit  # noqa: F401


def day_range(start: str | None, end: str | None) -> list[dt.date]:
    """Every day from ``--from`` to ``--to`` (default: yesterday), in order."""
    if start is None:
        raise RagauditError("audit --to needs --from: the first day of the backfill")
    first, last = parse_day(start), parse_day(end)
    if last < first:
        raise RagauditError(f"audit --from {first} --to {last}: the range ends before it starts")
    return [first + dt.timedelta(days=i) for i in range((last - first).days + 1)]


def _print(out: dict[str, Any]) -> None:
    g = out["grading"]
    llm = out["llm"]
    read = out["read"]
    console.print(
        f"\n[bold]ragaudit audit[/] {escape(out['audit'])} {out['day']}  ->  "
        f"{escape(out['folder'])}",
        soft_wrap=True,
    )
    console.print(
        f"read {read['records']} requests ({read['bad']} records did not map); "
        f"sampled {out['sampled']}; grades: {g['from_store']} from the judgment store, "
        f"{g['from_memo']} from the memo, {g['paid']} paid, {g['failed']} failed, "
        f"{g['skipped']} skipped",
        soft_wrap=True,
    )
    for note in read.get("notes") or []:
        console.print(escape(note), soft_wrap=True)
    talks = out.get("conversations") or {}
    if talks.get("in_session"):
        console.print(
            f"conversations: {talks['follow_ups']} follow-ups judged with their session's earlier "
            f"turns, {talks['history_incomplete']} history incomplete (of {talks['in_session']} "
            f"sampled requests in {talks['sessions']} sessions)",
            soft_wrap=True,
        )
    console.print(
        f"LLM calls this invocation: {llm.get('calls', 0)} (memo hits "
        f"{llm.get('cache_hits', 0)}, provider calls {llm.get('provider_calls', 0)})"
    )
    if out["overall"]:
        table = Table(title="All segments (design-weighted, 95% CI)")
        for col in ("metric", "estimate", "95% CI", "n", "requests", "ess"):
            table.add_column(col, justify="left" if col == "metric" else "right")
        for r in out["overall"]:
            ci = "-" if r["ci_low"] is None else f"{fixed(r['ci_low'])}-{fixed(r['ci_high'])}"
            table.add_row(
                escape(r["metric"]),
                fixed(r["estimate"]),
                ci,
                str(r["n"]),
                # An estimated count (a sum of design weights): printed whole.
                fixed(r["requests"], 0),
                fixed(r.get("ess"), 1),
            )
        console.print(table)
    lines = out.get("moves") or []
    styles = {"alarm": "bold red", "traffic": "yellow", "better": "green", "small": "dim"}
    for m in lines:
        style = styles.get(m["kind"], "")
        console.print(
            f"[{style}]{escape(m['text'])}[/]" if style else escape(m["text"]), soft_wrap=True
        )
    if lines:
        console.print(
            "one line per segment and cause (against the day before and the trailing week); "
            "every change and its parts: changes.parquet and report.html",
            soft_wrap=True,
        )
    for note in out.get("notes") or []:
        console.print(escape(note), soft_wrap=True)
    console.print(f"report.html: {escape(str(Path(out['folder']) / 'report.html'))}")


def _dry_run(cfg: RunConfig, day: dt.date) -> None:
    from ragaudit.audit import run_audit_day, strata_rows

    out = asyncio.run(run_audit_day(cfg, day, dry_run=True))
    plan = out.plan
    assert plan is not None
    table = Table(title=f"audit --dry-run {day.isoformat()}: the strata and the draw (no call)")
    columns = ("segment", "band", "units", "requests", "expected", "drawn", "their requests")
    for col in (*columns, "graded"):
        table.add_column(col, justify="left" if col in ("segment", "band") else "right")
    for s in strata_rows(out.strata, out.sample):
        table.add_row(
            escape(str(s["segment"])),
            # With audit.turn_strata a stratum is a band at one turn band too.
            escape(str(s["band"]) + (f" · turn {s['turn_band']}" if s.get("turn_band") else "")),
            str(s["units"]),
            str(s["requests"]),
            s["expected"],
            str(s["drawn"]),
            str(s["drawn_requests"]),
            str(s["graded"]),
        )
    console.print(table)
    read = out.read
    console.print(
        f"read {read.records} requests ({read.bad} records did not map); "
        f"drew {out.sample['unit'].n_unique()} units, {out.sample.height} requests to grade",
        soft_wrap=True,
    )
    for note in read.notes:
        console.print(escape(note), soft_wrap=True)
    calls = Table(title="judge calls and prompt tokens (counted from the plans; no call)")
    for col in ("what", "calls", "prompt tokens"):
        calls.add_column(col, justify="left" if col == "what" else "right")
    calls.add_row(
        f"grades: {plan.pairs} served pairs, {plan.in_store} in the judgment store",
        str(plan.grade_calls),
        f"{plan.grade_tokens:,}",
    )
    for name in out.section.metrics:
        calls.add_row(
            f"score:{escape(name)}",
            f"{plan.metric_calls.get(name, 0.0):,.0f}",
            f"{plan.metric_tokens.get(name, 0.0):,.0f}",
        )
    console.print(calls)
    console.print(f"judge prompt tokens in all: {plan.judge_tokens:,}")


@audit_app.command()
def promote(
    audit_name: Annotated[str, typer.Argument(metavar="AUDIT", help="The audit's name.")],
    day: DayOpt = None,
    worst: Annotated[int, typer.Option("--worst", min=1, help="Requests promoted.")] = 50,
    output: Annotated[
        Path, typer.Option("--output", "-o", help="Question set written (JSONL).")
    ] = Path("promoted.jsonl"),
    metric: Annotated[
        str | None,
        typer.Option("--metric", help="Worst by this metric (default: nDCG@k of the served list)."),
    ] = None,
    against: Annotated[
        Path | None,
        typer.Option("--against", help="An existing question set: its questions are not repeated."),
    ] = None,
    config: ConfigOpt = None,
    runs_root: RootOpt = None,
    force: Annotated[
        bool, typer.Option("--force", help="Replace --output when it exists.")
    ] = False,
) -> None:
    """Write the worst sampled requests of a day as a question set for ``ragaudit run``."""
    from ragaudit.audit import promote_day

    root = runs_root or load_config(config).runs_root
    when = parse_day(day)
    written = promote_day(
        Path(root),
        audit_name,
        when,
        worst=worst,
        output=output,
        metric=metric,
        against=against,
        replace=force,
    )
    console.print(f"{written} questions -> {escape(str(output))}")


@audit_app.command("label")
def label(
    audit_name: Annotated[str, typer.Argument(metavar="AUDIT", help="The audit's name.")],
    day: DayOpt = None,
    annotator: Annotated[
        str | None, typer.Option("--annotator", help="Your name (else the page asks once).")
    ] = None,
    port: Annotated[
        int, typer.Option("--port", min=0, max=65535, help="0: any free port.")
    ] = DEFAULT_PORT,
    no_browser: Annotated[
        bool, typer.Option("--no-browser", help="Print the address; open no browser.")
    ] = False,
    config: ConfigOpt = None,
    runs_root: RootOpt = None,
) -> None:
    """Label a day's sampled requests in the browser: their served documents and answers.

    The labels fill the day's PPI figures when the day is audited again (nothing is paid).
    """
    from urllib.parse import quote

    from ragaudit.audit import read_label_items
    from ragaudit.runlock import check_run_id

    root = Path(runs_root or load_config(config).runs_root)
    when = parse_day(day)
    folder = root / check_run_id(f"audit-{audit_name}") / when.isoformat()
    if read_label_items(folder) is None:
        raise RagauditError(
            f"{folder}: no items to label (no finished audit day, or one audited before "
            f"labelling: ragaudit audit --day {when.isoformat()} again pays nothing)"
        )
    open_path = f"/runs/{quote(folder.parent.name)}/days/{when.isoformat()}/label"
    if annotator:
        open_path += f"?annotator={quote(annotator.strip())}"
    from ragaudit.viewer.server import open_in_browser, serve

    serve(root, port=port, open_path=open_path, on_ready=None if no_browser else open_in_browser)


__all__ = [
    "CONFIRM_ABOVE",
    "CONFIRM_TOKENS_ABOVE",
    "audit",
    "day_range",
    "label",
    "parse_day",
    "promote",
]
