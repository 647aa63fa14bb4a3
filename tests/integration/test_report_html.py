"""report.html in a headless Chromium: offline, no console error, every chart drawn, drill-down.

Drives Debian's chromium (/usr/bin/chromium) with Playwright; skipped where no Chromium exists.
"""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import pytest
from support.html_runs import CHROMIUM, SMOKE_WARNING, offline_page, write_full_run

from ragaudit.reporting import build_report, render_compare_html, write_html
from ragaudit.reporting._html import unpack

# Figure → the fewest SVG marks (paths) a drawn chart of that kind has.
MIN_MARKS = {"means": 8, "distributions": 20, "heatmap": 20, "ndcg": 6, "spearman": 4, "calls": 6}

pytestmark = pytest.mark.skipif(
    not CHROMIUM.exists(), reason="no Chromium at /usr/bin/chromium (apt-get install chromium)"
)


def open_in_chromium(page_path: Path, *, open_question: str, screenshot: Path) -> dict:
    """Load the page offline; observe every request and console message; open one question."""
    with offline_page(page_path) as (page, found):
        page.wait_for_selector("html[data-drill=ready]", timeout=10_000)
        found["marks"] = page.evaluate(
            """() => Object.fromEntries([...document.querySelectorAll('figure')].map(
                f => [f.className, f.querySelectorAll('svg path').length]))"""
        )
        found["judge"] = page.inner_text("#judge")
        found["warnings"] = page.inner_text("#warnings") if page.query_selector("#warnings") else ""
        page.click(f"#q-{open_question} > summary")
        page.wait_for_selector(f"#q-{open_question} .body h3", timeout=5_000)
        found["drill"] = page.inner_text(f"#q-{open_question} .body")
        # A heatmap cell opens its question.
        cell = page.query_selector("figure.heatmap path[aria-label]")
        target = cell.get_attribute("aria-label")
        cell.click()
        page.wait_for_selector(f"#q-{target}[open] .body h3", timeout=5_000)
        page.click("#config > summary")  # the config is one click away
        found["config_json"] = page.inner_text("#config pre")
        page.click("#config > summary")
        page.screenshot(path=str(screenshot), full_page=False)
        page.evaluate(f"document.getElementById('q-{open_question}').scrollIntoView()")
        page.screenshot(path=str(screenshot.with_name("report-drill.png")), full_page=False)
    return found


def check(found: dict, page_path: Path, expect_in_drill: list[str]) -> None:
    assert found["errors"] == []
    assert found["requests"] == [page_path.as_uri()], found["requests"]
    for key, least in MIN_MARKS.items():
        assert found["marks"].get(key, 0) > least, (key, found["marks"])
    for text in expect_in_drill:
        assert text in found["drill"], text
    assert '"judge"' in found["config_json"]


@pytest.mark.usefixtures("prefect_harness")
def test_demo_run_report_html_in_chromium(config_factory, fake) -> None:
    from ragaudit.flows.evaluate import evaluate

    config = config_factory()
    asyncio.run(evaluate(config.model_dump_json(), "html", None))
    page_path = Path(config.runs_root) / "html" / "report.html"
    assert page_path.is_file(), "the report stage writes report.html"
    report = build_report(page_path.parent)
    chinese = next(q for q in report.questions if q.language == "zh")
    found = open_in_chromium(
        page_path, open_question=chinese.question_id, screenshot=page_path.with_name("report.png")
    )
    check(found, page_path, [chinese.question, "judge: relevant", "faithfulness"])
    assert found["judge"] == "fake/judge"


def test_200_question_report_html_in_chromium(tmp_path: Path) -> None:
    metrics = [
        "faithfulness",
        "answer_relevancy",
        "context_precision",
        "context_recall",
        "noise_sensitivity",
        "rouge_l",
    ]
    run_dir = write_full_run(tmp_path, "big", 200, metrics, warnings=[SMOKE_WARNING])
    report = build_report(run_dir)
    page_path = write_html(report)
    assert page_path.stat().st_size < 3_000_000
    html = page_path.read_text(encoding="utf-8")
    assert "<script src" not in html and "http://" not in html.split("<main>")[0]
    blob = re.search(r'id="drill">([^<]*)<', html).group(1)
    records = unpack(blob)
    assert [r["id"] for r in records] == [q.question_id for q in report.questions]
    chinese = report.questions[0]
    assert chinese.language == "zh" and len(chinese.contexts) == 10
    found = open_in_chromium(
        page_path, open_question=chinese.question_id, screenshot=run_dir / "report.png"
    )
    check(
        found,
        page_path,
        [
            chinese.question,
            chinese.contexts[0].text[:20],
            "NLIStatementOutput",
            "noise_sensitivity",
        ],
    )
    assert SMOKE_WARNING in found["warnings"]


def test_compare_html_renders_the_comparison(tmp_path: Path) -> None:
    from support.reporting_runs import write_run

    from ragaudit.reporting import compare_runs

    a = write_run(tmp_path, "a", {"faithfulness": [0.9] * 30, "rouge_l": [0.5] * 30})
    b = write_run(tmp_path, "b", {"faithfulness": [0.4] * 30, "rouge_l": [0.5] * 30})
    page = render_compare_html(compare_runs(a, b))
    assert "faithfulness" in page and "regressed" in page
    assert page.count("<svg") == 1 and "<script" not in page


def _cited_questions(path: Path) -> Path:
    """The demo questions with answers that cite their contexts as ``[1]`` and ``[2, 3]``."""
    import json

    from support.paths import REPO_ROOT

    rows = []
    for line in (REPO_ROOT / "data" / "demo" / "questions.jsonl").read_text().splitlines():
        row = json.loads(line)
        parts = [
            p.strip() for p in row["response"].replace("。", "。\n").split("\n") if p.strip()
        ] or [row["response"]]
        row["response"] = " ".join(
            f"{p} {'[1]' if i % 2 == 0 else '[2, 3]'}" for i, p in enumerate(parts)
        )
        rows.append(json.dumps(row, ensure_ascii=False))
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return path


@pytest.mark.usefixtures("prefect_harness")
def test_nuggets_citations_and_judge_cost_render_in_chromium(
    config_factory, fake, tmp_path
) -> None:
    """A run with nuggets, citations and the head ordering, every question opened in Chromium."""
    from support.html_runs import UNREADABLE, browse

    from ragaudit.flows.evaluate import evaluate

    metrics = ["faithfulness", "answer_relevancy", "nugget_recall_vital", "citation_recall"]
    config = config_factory(
        questions=str(_cited_questions(tmp_path / "cited.jsonl")),
        score__metrics=[*metrics, "citation_precision"],
        sort__order="head",
        sort__head_k=3,
    )
    asyncio.run(evaluate(config.model_dump_json(), "cited", None))
    page_path = Path(config.runs_root) / "cited" / "report.html"
    found = browse(page_path, open_all=True, screenshot=page_path.with_name("report.png"))
    assert found["errors"] == [] and found["requests"] == [page_path.as_uri()]
    text = found["text"]
    bad = sorted({m.group(0) for m in UNREADABLE.finditer(text)})
    assert bad == [], bad
    assert "Sort stage, judge per question: relevance" in text  # the judge's cost
    assert "ordering (head:window)" in text
    assert text.count("Nuggets (") == 5 and "held by:" in text
    # The citation metrics' sentences, with the contexts each cites and their support.
    assert "sentences" in text and "citation_support" in text
    # Ids and verdicts in the judge's reasons stay whole on one line.
    assert found["split_tokens"] == [], found["split_tokens"]
