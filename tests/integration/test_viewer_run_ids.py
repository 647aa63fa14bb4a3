"""``ragaudit label`` on run ids that are not plain ASCII words: the printed address opens.

A real ``ragaudit label`` server on loopback; the address it prints is opened as printed (by
httpx, and by headless Chromium, which labels as "Ana Lee" through the page).
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlsplit

import httpx
import pytest
from support.html_runs import CHROMIUM, chromium_page, served_from
from support.label_runs import write_label_run
from support.viewer_runs import serving

from ragaudit import labels


def _label_server(run_dir: Path, *args: str) -> contextlib.AbstractContextManager[str]:
    """``python -m ragaudit label RUN_DIR ARGS --port 0 --no-browser``; yields the printed URL."""
    return serving(
        "label", str(run_dir), *args, "--port", "0", "--no-browser", "--sample", "5", wait=False
    )


@pytest.mark.parametrize("run_id", ["测试运行", "nightly 01", "a+b"])
def test_the_printed_address_opens_the_runs_labelling_page(tmp_path: Path, run_id: str) -> None:
    run_dir = write_label_run(tmp_path / "runs", run_id, n_questions=3, hostile=False)
    with _label_server(run_dir, "--annotator", "Ana Lee") as url:
        parts = urlsplit(url)
        # Encoded once: one decoding gives back the run id and the name as they were given.
        assert unquote(parts.path) == f"/runs/{run_id}/label"
        assert parse_qs(parts.query) == {"annotator": ["Ana Lee"]}
        assert httpx.get(url, timeout=30).status_code == 200
        start = httpx.get(
            f"{parts.scheme}://{parts.netloc}{parts.path}/api/start?{parts.query}", timeout=30
        )
        assert start.status_code == 200 and start.json()["run_id"] == run_id


@pytest.mark.skipif(not CHROMIUM.exists(), reason="needs Debian's chromium")
def test_a_label_given_through_the_page_is_filed_under_the_name_as_typed(tmp_path: Path) -> None:
    run_dir = write_label_run(tmp_path / "runs", "nightly 01", n_questions=3, hostile=False)
    with _label_server(run_dir, "--annotator", "Ana Lee") as url:
        origin = "{0.scheme}://{0.netloc}".format(urlsplit(url))
        with chromium_page(served_from(origin)) as (page, found):
            page.goto(url)
            page.wait_for_selector("html[data-position='0'][data-state='ready']", timeout=30_000)
            assert page.inner_text("#who strong") == "Ana Lee"
            key = page.eval_on_selector_all("#choices button", "bs => bs[0].dataset.key")
            page.keyboard.press(key)
            page.wait_for_selector(
                "html[data-position='1'][data-state='ready'], html[data-state='done']",
                timeout=30_000,
            )
            assert found["errors"] == [] and found["outside"] == []
    stored = labels.read_labels(run_dir)["annotator"].to_pylist()
    assert stored == ["Ana Lee"]
