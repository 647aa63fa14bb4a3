"""Secrets echoed back by a provider or a search server end nowhere: not in a run folder file,
not in the manifest, not on the console, also not in their base64 forms."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import subprocess
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import httpx
import litellm
import pyarrow as pa
import pytest
from support.cli import cli_command, cli_env, run_args
from support.servers import free_server

from ragaudit.runfolder import RunFolder
from ragaudit.schemas import RETRIEVAL, to_table
from ragaudit.secrets import redact, register

KEY = "sk-proj-Zx81LeakedKeyForTests0000abcd"
USER, PASSWORD = "auditor", "s3cret-Password-42"


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def leaks(root: Path, *secrets: str) -> list[str]:
    """Files under ``root`` holding any of ``secrets`` (Parquet is compressed: read it)."""
    import pyarrow.parquet as pq

    found = []
    for path in root.rglob("*"):
        if not path.is_file():
            continue
        if path.suffix == ".parquet":
            text = json.dumps(pq.read_table(path).to_pylist(), default=str, ensure_ascii=False)
        else:
            text = path.read_text(encoding="utf-8", errors="replace")
        found += [f"{path}: {s[:8]}…" for s in secrets if s in text]
    return found


def test_a_variable_naming_a_place_is_not_a_secret(monkeypatch: pytest.MonkeyPatch) -> None:
    """ragaudit sets ``TIKTOKEN_CACHE_DIR`` itself: its path must survive in error messages."""
    from ragaudit.secrets import known_secrets

    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", "/opt/site-packages/tokenizers")
    monkeypatch.setenv("HF_TOKEN", "hf_NotARealTokenButLongEnough")
    found = known_secrets()
    assert "hf_NotARealTokenButLongEnough" in found
    assert "/opt/site-packages/tokenizers" not in found
    assert redact("cannot read /opt/site-packages/tokenizers/x.json") == (
        "cannot read /opt/site-packages/tokenizers/x.json"
    )


def test_base64_forms_of_a_secret_are_redacted() -> None:
    from ragaudit.secrets import register_basic_auth

    register(KEY)
    register_basic_auth(USER, PASSWORD)
    assert redact(f"key {b64(KEY)} seen") == "key *** seen"
    assert redact(f"Authorization: Basic {b64(f'{USER}:{PASSWORD}')}") == "Authorization: Basic ***"
    assert "42" not in redact(f"password {PASSWORD} echoed")


def test_run_folder_writes_redact_every_string(tmp_path: Path) -> None:
    register(KEY)
    run = RunFolder(tmp_path, "r")
    row = {"run_id": "r", "question_id": "q1", "status": "failed", "error": f"401 {KEY}"}
    run.write("retrieval", to_table([row], RETRIEVAL))
    run.write_manifest({"error": f"echo {b64(KEY)}", "nested": [{"why": KEY}]})
    assert leaks(tmp_path, KEY, b64(KEY)) == []
    assert run.read("retrieval").to_pylist()[0]["error"] == "401 ***"
    assert json.loads(run.manifest_path.read_text())["nested"] == [{"why": "***"}]
    # A list<string> column is redacted too; other types pass untouched.
    from ragaudit.runfolder import redact_table

    table = pa.table({"a": [[KEY, "ok"]], "n": [1]})
    assert redact_table(table).to_pylist() == [{"a": ["***", "ok"], "n": 1}]


@pytest.mark.usefixtures("prefect_harness")
def test_a_provider_401_echoing_the_key_ends_nowhere_in_the_run_folder(
    config_factory, fake, monkeypatch
) -> None:
    from ragaudit.flows.evaluate import evaluate

    monkeypatch.setenv("OPENAI_API_KEY", KEY)  # where litellm reads a judge's key

    def unauthorised(req: Any) -> Any:
        # What OpenAI answers to a wrong key: the key itself, in the error body.
        raise litellm.AuthenticationError(
            message=f"Incorrect API key provided: {KEY}. You can find your API key at ...",
            llm_provider="openai",
            model=req.model,
            response=httpx.Response(401, request=httpx.Request("POST", "http://fake.invalid")),
        )

    config = config_factory(limit=2)
    # The run may fail as a whole; what it wrote is what is checked.
    with fake.script(unauthorised), contextlib.suppress(Exception):
        asyncio.run(evaluate(config.model_dump_json(), "leak", None))
    run = RunFolder(config.runs_root, "leak")
    assert run.has("scores") or run.manifest_path.is_file()
    assert leaks(run.path, KEY, b64(KEY)) == []


class EchoAuth(BaseHTTPRequestHandler):
    """A search server that refuses every request, echoing the Authorization header."""

    def do_GET(self) -> None:  # noqa: N802
        self._refuse()

    def do_POST(self) -> None:  # noqa: N802
        self._refuse()

    do_HEAD = do_GET  # noqa: N815

    def _refuse(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        auth = self.headers.get("Authorization", "")
        body = json.dumps(
            {"error": {"type": "security_exception", "reason": f"bad credentials in [{auth}]"}}
        ).encode()
        self.send_response(401)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def echo_server() -> Iterator[str]:
    httpd, url = free_server(EchoAuth)
    yield url
    httpd.shutdown()


@pytest.mark.slow  # a CLI subprocess starting its own Prefect server
def test_a_search_server_echoing_basic_auth_leaks_nothing(tmp_path: Path, echo_server) -> None:
    env = {**cli_env(tmp_path), "SEARCH_TEST_PW": PASSWORD}
    proc = subprocess.run(
        [
            *cli_command(),
            *run_args(tmp_path),
            "--set",
            "collect.backend=opensearch",
            "--set",
            f"collect.opensearch.hosts=[{echo_server}]",
            "--set",
            f"collect.opensearch.username={USER}",
            "--set",
            "collect.opensearch.password_env=SEARCH_TEST_PW",
            "--set",
            "collect.opensearch.retries=0",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        cwd=tmp_path,
    )
    credential = b64(f"{USER}:{PASSWORD}")
    assert proc.returncode == 2, proc.stderr
    assert "refused the credentials" in proc.stderr
    for secret in (credential, PASSWORD):
        assert secret not in proc.stdout and secret not in proc.stderr
    assert list((tmp_path / "runs").glob("*/manifest.json")), "no manifest written"
    assert leaks(tmp_path / "runs", credential, PASSWORD) == []
    # Prefect's database (under the run's home) got the stage's error too.
    assert leaks(tmp_path / "home", credential, PASSWORD) == []
