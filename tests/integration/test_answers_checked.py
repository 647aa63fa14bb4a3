"""The system under test's answers are checked: an HTML page or an empty body is no answer."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from ragaudit.answers import answer_one, make_source
from ragaudit.answers._http import not_an_answer
from ragaudit.config import AnswerConfig
from ragaudit.dataset import Question

PROXY_PAGE = (
    "<!DOCTYPE html>\n<html>\n<head><title>502 Bad Gateway</title></head>\n"
    "<body><center><h1>502 Bad Gateway</h1></center><hr><center>nginx</center></body>\n"
    "</html>\n"
)
# What each path answers, always with status 200: (content type, body).
PAGES = {
    "/html": ("text/html", PROXY_PAGE),
    "/html-as-text": ("text/plain", PROXY_PAGE),
    "/empty": ("text/plain", ""),
    "/markup": ("text/plain", "The answer is <b>42</b>."),
    "/json-html": ("text/html; charset=utf-8", PROXY_PAGE),
}


class _Handler(BaseHTTPRequestHandler):
    def log_message(self, *args: Any) -> None:
        pass

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        content_type, body = PAGES[self.path.split("?", 1)[0]]
        data = body.encode()
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@pytest.fixture(scope="module")
def base_url() -> Iterator[str]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


def _ask(url: str, response: str) -> dict[str, Any]:
    config = AnswerConfig.model_validate(
        {
            "source": "http",
            "http": {"url": url, "params": {"q": "{{ question }}"}, "response": response},
            "retries": 1,
            "backoff_s": 0.0,
        }
    )

    async def go() -> dict[str, Any]:
        source = make_source(config)
        try:
            return await answer_one(source, Question(question_id="q1", question="hi"), config, "r")
        finally:
            await source.aclose()

    return asyncio.run(go())


@pytest.mark.parametrize("response", ["lines", "text"])
@pytest.mark.parametrize("path", ["/html", "/html-as-text"])
def test_an_html_page_with_status_200_is_a_failed_answer(
    base_url: str, path: str, response: str
) -> None:
    row = _ask(base_url + path, response)
    assert row["status"] == "failed", row
    assert "HTML page titled '502 Bad Gateway'" in row["error"]
    assert row.get("response") is None


def test_an_html_page_where_json_is_expected_names_the_page(base_url: str) -> None:
    row = _ask(base_url + "/json-html", "json")
    assert row["status"] == "failed" and "HTML page" in row["error"]


@pytest.mark.parametrize("response", ["lines", "text", "json"])
def test_an_empty_body_is_a_failed_answer(base_url: str, response: str) -> None:
    row = _ask(base_url + "/empty", response)
    assert row["status"] == "failed" and "empty body" in row["error"]


def test_an_answer_holding_some_markup_is_still_an_answer(base_url: str) -> None:
    row = _ask(base_url + "/markup", "text")
    assert row["status"] == "ok" and row["response"] == "The answer is <b>42</b>."


def test_not_an_answer_reads_the_content_type_and_the_first_tag() -> None:
    assert not_an_answer("text/plain", "plain answer") is None
    assert "HTML" in (not_an_answer("application/xhtml+xml", "x") or "")
    assert "HTML" in (not_an_answer("", "  <html lang='en'><body>x</body></html>") or "")
    assert not_an_answer("text/plain", "<htmlish> is not a tag we know") is None


def no_answer(question: str, filters: dict[str, Any]) -> str:
    """An answer entrypoint whose system is down for every question."""
    raise ConnectionError("the QA service is down")


def test_a_run_whose_answers_mostly_failed_exits_3(config_factory, fake, tmp_path) -> None:
    from typer.testing import CliRunner

    from ragaudit.cli import app
    from ragaudit.runfolder import RunFolder

    config = config_factory(
        collect__answers__source="entrypoint",
        collect__answers__entrypoint=f"{__name__}:no_answer",
        collect__answers__retries=0,
        score__metrics=["faithfulness"],
    )
    path = tmp_path / "config.json"
    path.write_text(config.model_dump_json(), encoding="utf-8")
    result = CliRunner().invoke(app, ["run", "--config", str(path), "--run-id", "no-answers"])
    assert result.exit_code == 3, result.output
    assert "system under test failed to answer" in result.output
    manifest = RunFolder(config.runs_root, "no-answers").read_manifest()
    assert manifest["status"] == "completed_with_failures"
    assert any("failed to answer" in w for w in manifest["warnings"])


def test_a_few_failed_answers_do_not_fail_the_run() -> None:
    from ragaudit.answers import answer_failure_warnings

    assert answer_failure_warnings(["ok", "ok", "failed", "skipped", "skipped"]) == []
    assert answer_failure_warnings(["failed", "failed", "ok", "skipped"])
    assert answer_failure_warnings([]) == []
