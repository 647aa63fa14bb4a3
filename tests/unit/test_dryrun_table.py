"""The dry run's table keeps its figures on a narrow terminal or a pipe."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from rich.console import Console

from ragaudit.cli import _dryrun

LONG_MODEL = "openrouter/meta-llama/llama-3.3-70b-instruct-with-a-long-deployment-name"


def test_a_long_model_string_leaves_the_calls_and_tokens_readable_at_80_columns(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    console = Console(width=80, force_terminal=False, record=True)
    monkeypatch.setattr(_dryrun, "console", console)
    line = SimpleNamespace(
        stage="sort",
        step="relevance grades",
        model=LONG_MODEL,
        calls=1200,
        tokens_in=345678,
        tokens_out=12345,
    )
    estimate = SimpleNamespace(
        lines=[line], evidence=[], assumptions=SimpleNamespace(describe=list), notes=[]
    )
    _dryrun.print_estimate(estimate)
    text = console.export_text()
    table = text.split("Total:")[0]
    for figure in ("1,200", "345,678", "12,345"):
        assert figure in table, table
    assert max(len(row) for row in table.splitlines()) <= 80
