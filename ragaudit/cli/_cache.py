"""``ragaudit cache stats`` and ``cache clear``: the LLM memo."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from ragaudit.cli._app import ConfigOpt, RootOpt, _overrides, app, console
from ragaudit.config import load_config

cache_app = typer.Typer(help="The LLM memo (diskcache).", no_args_is_help=True)
app.add_typer(cache_app, name="cache")


@cache_app.command("stats")
def cache_stats(config: ConfigOpt = None, runs_root: RootOpt = None) -> None:
    """Entries and size of the memo, and call totals from every run's call log."""
    cfg = load_config(config, _overrides(runs_root=runs_root))
    import polars as pl

    from ragaudit.cache import memo_location, open_memo

    memo = open_memo(memo_location(cfg))
    try:
        info = memo.stats()
    finally:
        memo.close()
    console.print(
        f"memo {info['path']}: {info['entries']} entries, {info['bytes'] / 1e6:.1f} MB",
        soft_wrap=True,
        markup=False,
        emoji=False,  # a Redis memo's key prefix "ragaudit:memo:" is Rich's :memo: emoji code
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
    cfg = load_config(config)
    from ragaudit.cache import memo_identity, memo_location, open_memo

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
    console.print(f"cleared {where}: {deleted} entries", soft_wrap=True)
