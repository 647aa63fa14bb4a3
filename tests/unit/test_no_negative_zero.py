"""A score that is zero up to floating-point noise prints as zero everywhere, never "-0.00".

The offline embedder's answer relevancy gave -1e-17 for an unrelated question: the console's
worst questions printed "(-0.00)" and the page "-0.000".
"""

from __future__ import annotations

from pathlib import Path

import pytest
from support.reporting_runs import write_run

from ragaudit.cli._app import console
from ragaudit.cli._reports import _print_comparison
from ragaudit.cli._run import _print_report
from ragaudit.numbers import fixed
from ragaudit.reporting import (
    build_report,
    compare_runs,
    findings_markdown,
    render_compare_html,
    write_html,
)

TINY = -1e-17


@pytest.mark.parametrize(
    ("value", "kwargs", "text"),
    [
        (TINY, {}, "0.000"),
        (-0.0004, {}, "0.000"),
        (-0.0, {"digits": 2}, "0.00"),
        (-0.0006, {}, "-0.001"),
        (TINY, {"sign": True}, "0.000"),
        (0.25, {"sign": True}, "+0.250"),
        (-0.25, {"sign": True}, "-0.250"),
        (None, {}, "-"),
        (float("nan"), {"missing": "–"}, "–"),
    ],
)
def test_fixed(value: float | None, kwargs: dict, text: str) -> None:
    assert fixed(value, **kwargs) == text


def test_no_negative_zero_in_console_page_artifact_or_compare(tmp_path: Path) -> None:
    a = write_run(tmp_path, "a", {"answer_relevancy": [TINY, 0.5, TINY, 0.8]})
    b = write_run(tmp_path, "b", {"answer_relevancy": [0.0, 0.5, TINY, 0.8]})
    with console.capture() as out:
        _print_report(a, None)
        _print_comparison(compare_runs(a, b))
    printed = out.get()
    assert "q0000 (0.00)" in printed  # the worst question is listed, as zero
    report = build_report(a)
    page = write_html(report).read_text(encoding="utf-8")
    texts = {
        "console": printed,
        "page": page,
        "markdown": findings_markdown(report),
        "compare page": render_compare_html(compare_runs(a, b)),
    }
    for where, text in texts.items():
        assert "-0.00" not in text, where
