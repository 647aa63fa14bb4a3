"""``ragaudit view`` as a real server on loopback, driven in headless Chromium (no network)."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
from support.html_runs import CHROMIUM, UNREADABLE, chromium_page, served_from
from support.viewer_runs import running_view, write_runs

needs_chromium = pytest.mark.skipif(not CHROMIUM.exists(), reason="needs Debian's chromium")


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    root = tmp_path_factory.mktemp("view") / "runs"
    write_runs(root, 3)
    (root / "notes").mkdir()  # a foreign folder among the runs
    with running_view(root) as url:
        yield url


@pytest.fixture
def browser_page(served: str) -> Iterator[tuple[Any, dict]]:
    """A Chromium page that may ask the viewer only; what it saw: console errors, requests."""
    origin = "{0.scheme}://{0.netloc}".format(urlsplit(served))
    with chromium_page(served_from(origin)) as (page, found):
        yield page, found


def _visible_runs(page: Any) -> list[str]:
    return page.eval_on_selector_all(
        "#runs tbody tr:not([hidden])", "rows => rows.map(r => r.dataset.run)"
    )


@needs_chromium
def test_list_open_compare_and_trend_in_chromium(served: str, browser_page) -> None:
    page, found = browser_page
    page.goto(served)
    assert sorted(_visible_runs(page)) == ["notes", "run-0", "run-1", "run-2"]
    assert "not a run folder" in page.inner_text("tr[data-run=notes]")

    # Filter, then sort by a metric's mean (both ways) as the table's script does it.
    page.fill("#filter", "run-1")
    assert _visible_runs(page) == ["run-1"]
    page.fill("#filter", "")
    means = {
        r: float(page.get_attribute(f"tr[data-run={r}] td:nth-child(9)", "data-key"))
        for r in ("run-0", "run-1", "run-2")
    }
    page.click("#runs th:nth-child(9)")
    assert _visible_runs(page)[:3] == sorted(means, key=means.get)
    page.click("#runs th:nth-child(9)")
    assert _visible_runs(page)[:3] == sorted(means, key=means.get, reverse=True)

    # Open a run: its report, built from the folder, with the drill-down inflated.
    page.click("#runs a[href='/runs/run-0']")
    page.wait_for_selector("html[data-drill=ready]", timeout=20_000)
    assert "run-0" in page.inner_text("nav.ra-nav")
    assert "Metric means" in page.inner_text("body")
    page.go_back()

    # Compare two runs picked in the list.
    page.check("input[name=a][value=run-0]")
    page.check("input[name=b][value=run-2]")
    page.click("#compare")
    page.wait_for_url(re.compile(r"/compare\?"))
    assert parse_qs(urlsplit(page.url).query) == {"a": ["run-0"], "b": ["run-2"]}
    text = page.inner_text("body")
    assert "run-0" in text and "run-2" in text and "verdict" in text.lower()
    assert "faithfulness" in text
    page.go_back()

    # A metric's trend over the runs of the question set, from a mean in the list.
    page.click("tr[data-run=run-1] td:nth-child(9) a")
    page.wait_for_selector("#trend-figure svg")
    rows = page.eval_on_selector_all(
        "#trend tbody tr td:first-child", "t => t.map(x => x.innerText)"
    )
    assert rows == ["run-0", "run-1", "run-2"]
    assert not UNREADABLE.search(page.inner_text("main"))

    # A question's drill-down.
    page.goto(served.rstrip("/") + "/runs/run-2/questions/q0003")
    assert page.inner_text("h1").startswith("q0003")
    assert page.locator("#scores tbody tr").count() == 3

    assert found["errors"] == []
    assert found["outside"] == []
    assert len(found["requests"]) > 5


def test_off_loopback_a_printed_token_is_required(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    write_runs(root, 1, questions=4)
    with running_view(root, "--host", "0.0.0.0", wait=False) as url:
        token = re.search(r"token=([\w-]+)", url)
        assert token is not None and len(token.group(1)) >= 24
        port = urlsplit(url).port
        plain = f"http://127.0.0.1:{port}/"
        assert httpx.get(plain).status_code == 401
        assert httpx.get(plain, params={"token": "guess"}).status_code == 401
        # The token moves into a cookie and out of the address, which then answers.
        opened = httpx.get(plain, params={"token": token.group(1)}, follow_redirects=True)
        assert opened.status_code == 200 and str(opened.url) == plain


_FIRST_PAGE = """
import json, sys
from pathlib import Path
from fastapi.testclient import TestClient
import ragaudit.cli
from ragaudit.viewer.app import create_app
page = TestClient(create_app(Path(sys.argv[1])), base_url="http://127.0.0.1").get("/")
assert page.status_code == 200 and page.text.count("data-run=") == 2, page.text[-2000:]
print(json.dumps(sorted(m for m in sys.argv[2:] if m in sys.modules)))
"""


def test_the_first_page_loads_no_chart_workbook_or_pandas(tmp_path: Path) -> None:
    """What the runs list never needs stays unimported: the start to the first page is short."""
    root = tmp_path / "runs"
    write_runs(root, 2, questions=4)
    heavy = ["altair", "vl_convert", "xlsxwriter", "pandas", "pyarrow.dataset", "litellm"]
    done = subprocess.run(
        [sys.executable, "-c", _FIRST_PAGE, str(root), *heavy],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().splitlines()[-1] == "[]"


def test_a_missing_root_is_one_line(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "ragaudit", "view", str(tmp_path / "nope"), "--no-browser"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 2
    assert "is not a folder" in done.stderr and "Traceback" not in done.stderr
