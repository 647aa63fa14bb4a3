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


def test_the_piped_table_at_columns_80_keeps_every_figure(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # As `COLUMNS=80 ragaudit run --dry-run … | less` builds it: stdout is no terminal, and the
    # reader's width comes from COLUMNS (a pipe without COLUMNS gets 120 columns).
    from ragaudit.cli import _app

    monkeypatch.setenv("COLUMNS", "80")
    monkeypatch.setattr("sys.stdout.isatty", lambda: False)
    console = _app.stdout_console()
    assert not console.is_terminal and console.width == 80
    console.record = True
    monkeypatch.setattr(_dryrun, "console", console)
    lines = [
        SimpleNamespace(
            stage="score:answer_relevancy",
            step=step,
            model=model,
            calls=calls,
            tokens_in=tokens_in,
            tokens_out=tokens_out,
        )
        for step, model, calls, tokens_in, tokens_out in [
            ("questions", LONG_MODEL, 1_234_567, 98_765_432, 1_234_500),
            ("embeddings", "fake/embed", 10, 440, 0),
        ]
    ]
    estimate = SimpleNamespace(
        lines=lines, evidence=[], assumptions=SimpleNamespace(describe=list), notes=[]
    )
    with monkeypatch.context() as m:
        m.setattr(console, "file", __import__("io").StringIO())
        _dryrun.print_estimate(estimate)
    table = console.export_text().split("Total:")[0]
    for figure in ("1,234,567", "98,765,432", "1,234,500", "440"):
        assert figure in table, table
    assert max(len(row) for row in table.splitlines()) <= 80, table
    monkeypatch.delenv("COLUMNS")
    assert _app.stdout_console().width == 120
