"""``ragaudit metrics``: the registered metrics."""

from __future__ import annotations

from rich.table import Table

from ragaudit.cli._app import app, console


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
