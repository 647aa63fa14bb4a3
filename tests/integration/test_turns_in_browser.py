"""A conversational run's report.html in headless Chromium: each turn below its conversation.

A history turn holding markup (``<script>``, an ``<img onerror>``) is shown as its text and never
runs; the exchanges the judge's prompts left out are marked; the breakdown tables are on the
page. Skipped where no Chromium exists.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from support.chat_runs import write_chat_run
from support.html_runs import CHROMIUM, UNREADABLE, offline_page

from ragaudit.reporting import build_report, write_html

pytestmark = pytest.mark.skipif(
    not CHROMIUM.exists(), reason="no Chromium at /usr/bin/chromium (apt-get install chromium)"
)

HOSTILE = '<script>window.ran = 1</script><img src=x onerror="window.ran = 2">'


def test_a_turns_history_is_text_on_the_run_page(tmp_path: Path) -> None:
    run_dir = write_chat_run(
        tmp_path / "runs",
        "chat",
        lambda m, k, t: 0.9 - 0.1 * t,
        conversations=3,
        turns=4,
        cut=lambda turn: 1 if turn == 4 else 0,
        said=lambda k, turn: HOSTILE if turn == 1 else f"and the next thing {turn}?",
    )
    page_path = write_html(build_report(run_dir))
    with offline_page(page_path) as (page, found):
        dialogs: list[str] = []
        page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
        page.wait_for_selector("html[data-drill=ready]", timeout=10_000)
        page.click("#q-c1\\:\\:4 > summary")
        page.wait_for_selector("#q-c1\\:\\:4 .body .turn", timeout=5_000)
        body = page.inner_text("#q-c1\\:\\:4 .body")
        turns = page.eval_on_selector_all(
            "#q-c1\\:\\:4 .body .turn", "ts => ts.map(t => [t.className, t.innerText])"
        )
        ran = page.evaluate("() => window.ran === undefined ? null : window.ran")
        elements = page.eval_on_selector_all(
            "#q-c1\\:\\:4 .body script, #q-c1\\:\\:4 .body img", "e => e.length"
        )
        tables = page.inner_text("#breakdowns ~ table")
        bands = page.inner_text("#breakdown-turn_band")
    assert found["errors"] == [] and found["requests"] == [page_path.as_uri()]
    assert ran is None and dialogs == [] and elements == 0
    # Three earlier exchanges; the oldest (turn 1, the hostile one) left out of the prompts.
    assert [c for c, _ in turns] == ["turn user cut", "turn assistant cut"] + [
        "turn user",
        "turn assistant",
    ] * 2
    assert HOSTILE in turns[0][1] and "left out of the judge's prompts" in turns[0][1]
    assert "left out the 1 oldest exchange(s)" in body
    assert body.index("and the next thing 3?") < body.index("Question")
    assert "6+" not in bands and "3-5" in bands and tables
    assert not UNREADABLE.search(bands)
