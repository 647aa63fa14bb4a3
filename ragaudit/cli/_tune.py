"""``ragaudit tune``: compare collect variants on one pooled grading of their top-k."""

from __future__ import annotations

import asyncio
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
    LimitOpt,
    RootOpt,
    RunIdOpt,
    SetOpt,
    _overrides,
    app,
    console,
    demo_or_config,
    err,
    held_folders,
    load_paid_config,
    quiet_prefect_runs,
)
from ragaudit.config import RunConfig, set_path
from ragaudit.numbers import fixed
from ragaudit.secrets import install_log_filter, redact

TUNE_DEMO_CONFIG = Path("data/demo/tune.yaml")


@app.command()
def tune(
    config: ConfigOpt = None,
    demo: Annotated[
        bool,
        typer.Option("--demo", help="The bundled DuReader tune (data/demo/tune.yaml), offline."),
    ] = False,
    judge: JudgeOpt = None,
    embedder: EmbedderOpt = None,
    runs_root: RootOpt = None,
    limit: LimitOpt = None,
    sets: SetOpt = None,
    dry_run: DryRunOpt = False,
    run_id: RunIdOpt = None,
    yes: Annotated[
        bool, typer.Option("--yes", help="Run more variants than tune.max_variants.")
    ] = False,
) -> None:
    """Which collect variant retrieves better beyond noise, graded once per pooled document."""
    install_log_filter()
    path = demo_or_config("tune", demo, config, TUNE_DEMO_CONFIG)
    overrides = _overrides(
        judge=judge, embedder=embedder, runs_root=runs_root, limit=limit, sets=sets
    )
    if run_id is not None:
        # A tune's id is its folder under the runs root; the same id resumes it.
        set_path(overrides, "tune.name", run_id)
    cfg = load_paid_config(path, overrides)
    from ragaudit.dataset import load_questions
    from ragaudit.tuning import check_backend, judge_alone_notice, plan_variants

    # Every check that needs no search runs before Prefect starts.
    check_backend(cfg)
    variants = plan_variants(cfg, yes=yes)
    load_questions(cfg.questions, limit=cfg.limit)
    notice = judge_alone_notice(cfg)
    if notice:
        # Before any call, and in the dry run too: its token figures are the judge's alone.
        err.print(f"[yellow]{escape(notice)}[/]", soft_wrap=True)
    if dry_run:
        _dry_run(cfg, yes)
        return
    err.print(f"tune {cfg.tune.name}: {len(variants)} variants, depth {cfg.tune.depth}")
    from ragaudit.flows.tune import run_tuning

    # Once the flow's module is imported: importing Prefect's flow API configures its logging,
    # and an error inside the flow (a budget, a baseline the engine rejects) would come after
    # Prefect's traceback of it.
    quiet_prefect_runs()
    from ragaudit.tuning import tune_dir

    # Locked before Prefect starts: a second tune of the same folder is refused here.
    with held_folders(tune_dir(cfg)):
        out = run_tuning(cfg, yes=yes)
    _ranked(cfg, out["ranked"])
    for line in out["lines"]:
        console.print(escape(line), soft_wrap=True)
    for name, why in out["failed"].items():
        err.print(f"[red]variant {escape(name)} failed:[/] {escape(redact(why or ''))}")


def _ranked(cfg: RunConfig, rows: list[dict[str, Any]]) -> None:
    """The variants on the first metric, best first, each with its n and interval."""
    metric = cfg.tune.metrics[0]
    table = Table(
        title=f"{metric} on the tuning questions (95% bootstrap CI; p against the baseline, "
        f"{cfg.report.adjustment.upper()}-adjusted across variants)"
    )
    for col in ("rank", "variant", "n", "mean", "95% CI", "vs baseline", "p adj", "judged@k"):
        table.add_column(col, justify="left" if col == "variant" else "right")
    for r in rows:
        ci = "-" if r["ci_low"] is None else f"{fixed(r['ci_low'])}-{fixed(r['ci_high'])}"
        mark = " (recommended)" if r["recommended"] else ""
        table.add_row(
            str(r["rank"] or "-"),
            escape(r["variant"]) + mark,
            str(r["n_tuning"]),
            fixed(r["mean"]),
            ci,
            fixed(r["diff"], sign=True),
            fixed(r["p_adjusted"], 4),
            fixed(r["judged_at_k"], 2),
        )
    console.print(table)


def _dry_run(cfg: RunConfig, yes: bool) -> None:
    from ragaudit.cache import hold_gateway
    from ragaudit.tuning import dry_run

    with hold_gateway(cfg) as gateway:
        lines, size, stored, tokens = asyncio.run(dry_run(cfg, gateway, yes=yes))
    table = Table(title="tune --dry-run: what grading the pool would ask (no judge call)")
    for col in ("variant", "top-k pairs", "new to grade", "judge prompt tokens", "status"):
        table.add_column(col, justify="left" if col in ("variant", "status") else "right")
    for line in lines:
        status = "ok" if line.status == "ok" else f"failed: {line.error}"
        table.add_row(
            escape(line.variant), str(line.top_k), str(line.new), f"{line.tokens:,}", escape(status)
        )
    console.print(table)
    console.print(
        f"pool {size} documents: {stored} graded already (judgment store), {size - stored} to "
        f"grade for about {tokens:,} prompt tokens",
        soft_wrap=True,
    )
    rewrites = sum(line.rewrites for line in lines)
    if rewrites:
        console.print(
            f"query_form rewrite: {rewrites} turns for the judge to rewrite (about "
            f"{sum(line.rewrite_tokens for line in lines):,} prompt tokens; memo hits cost "
            "nothing); searched here in their history form, so that variant's pool is a guess",
            soft_wrap=True,
        )
