"""``--dry-run`` and ``ragaudit record``: what a run will ask, without calling a model."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from ragaudit.cli._app import RootOpt, app, console, load_paid_config
from ragaudit.config import load_config
from ragaudit.errors import RagauditError


def _dry_run(
    config_path: Path | None,
    overrides: dict[str, Any],
    assume: list[str] | None,
    records: list[Path] | None = None,
) -> None:
    """Estimate the run's calls, tokens and cost per stage without calling any model."""
    import ragaudit.metrics  # noqa: F401  (the config check of the metrics, as in a run)
    from ragaudit.dataset import check_gold
    from ragaudit.dryrun import Assumptions
    from ragaudit.flows import estimate_run

    config = load_paid_config(config_path, overrides)
    # The gold is read and checked before the estimate: a broken qrels shows before money.
    check_gold(config)
    estimate = asyncio.run(estimate_run(config, Assumptions.parse(assume), records=records or None))
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
    # The figures never wrap and are never cut: on a narrow terminal or a pipe (80 columns)
    # the text columns fold over lines instead (each keeps a few characters, so none
    # vanishes), and the figures' headers take two lines.
    for col in ("stage", "step", "model"):
        table.add_column(col, overflow="fold", min_width=6)
    for col in ("calls", "prompt\ntokens", "output\ntokens"):
        table.add_column(col, no_wrap=True, justify="right")
    table.add_column("cost", overflow="fold", justify="right", min_width=8)
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

    root = runs_root or load_config(None, {}).runs_root
    history = judge_history(Path(root), judge)
    if not history.runs:
        raise RagauditError(f"no finished run with judge {judge} under {root}")
    content = record_json(history, source or f"{len(history.runs)} finished runs under {root}")
    write_json(content, output)
    console.print(
        f"wrote {output}: {history.verdicts} relevance verdicts, {history.comparisons} pairwise "
        f"comparisons, {sum(r.calls for r in history.replies.values())} replies, "
        f"{len(history.reference_tokens)} references, from {len(history.runs)} runs"
    )
