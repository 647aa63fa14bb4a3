"""``ragaudit ablate``: sweep the reference RAG pipeline."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ragaudit.cli._app import (
    ConfigOpt,
    EmbedderOpt,
    JudgeOpt,
    LimitOpt,
    RootOpt,
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
from ragaudit.config import set_path
from ragaudit.errors import RagauditError
from ragaudit.secrets import install_log_filter, redact

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
    path = demo_or_config("ablate", demo, config, ABLATE_DEMO_CONFIG)
    overrides = _overrides(
        judge=judge, embedder=embedder, runs_root=runs_root, limit=limit, sets=sets
    )
    if generator is not None:
        set_path(overrides, "models.generator", generator)
    cfg = load_paid_config(path, overrides)
    from ragaudit.ablation import objective_weights, plan, question_set
    from ragaudit.dataset import load_questions

    objective_weights(cfg)  # a bad objective fails before Prefect starts
    if cfg.ablate.corpus is None or not Path(cfg.ablate.corpus).exists():
        raise RagauditError(f"ablate.corpus: {cfg.ablate.corpus} not found")
    load_questions(question_set(cfg), limit=cfg.limit)
    points = plan(cfg.ablate)
    err.print(f"ablate: {len(points)} points, {cfg.ablate.parallel} at once")
    quiet_prefect_runs()
    from ragaudit.ablation import ablation_dir

    folder = ablation_dir(cfg)
    # Locked before Prefect starts: a second sweep into the same folder is refused here.
    with held_folders(folder):
        out = run_ablation(cfg)
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
