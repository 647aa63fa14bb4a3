"""Real servers on loopback for the collect tests (no tests of its own).

- :func:`seeded_clone`: a clone of the session's osmem-server (the OpenSearch-compatible
  in-memory server, started once by osmem's pytest plugin on 127.0.0.1 and a free port),
  seeded through ``ragaudit index``.
- :class:`EsFront`: an HTTP server that answers like Elasticsearch 9 in front of that clone:
  it accepts the 9.x client's ``compatible-with=9`` media types, sets
  ``X-Elastic-Product: Elasticsearch``, translates Elasticsearch's point-in-time endpoints
  to OpenSearch's, checks the Authorization header, and records every request. Searches are
  answered by the real engine behind it; only the wire format is translated.
- :class:`AnswerServer`: the QA service of the seed: ``GET /qa`` streams lines (the last
  non-empty one is the answer), ``POST /json`` answers JSON; it can be slow, fail, throttle
  or refuse credentials per question, and counts attempts.
"""

from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections import Counter, defaultdict
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from support.paths import REPO_ROOT

REPO = REPO_ROOT
DEMO_CORPUS = REPO / "data" / "demo" / "corpus.jsonl"

TOPICS = ["shipping", "warranty", "billing", "support", "returns", "pricing", "security", "privacy"]


def make_corpus(path: Path) -> Path:
    """A small English corpus with three collections (~1,100 documents).

    ``acme`` and ``globex`` (240 each) both talk about refunds, so only the filter keeps them
    apart; within ``acme`` the number of times a document says "refund policy" varies, so the
    boosted match has an order to produce. ``big`` (600) feeds the paging tests.
    """
    rows = []
    for coll, n in (("acme", 240), ("globex", 240)):
        for i in range(n):
            topic = TOPICS[i % len(TOPICS)]
            refund = " ".join(["refund policy"] * (i % 4)) if i % 3 else ""
            text = f"{coll} note {i} about {topic}. {refund} Contact the {topic} team for details."
            rows.append(
                {"id": f"{coll}-{i:03d}", "text": text, "metadata": {"collection": coll, "n": i}}
            )
    for i in range(600):
        text = f"inventory report {i} " + "stock level " * (i % 9) + f"warehouse {i % 13}"
        rows.append({"id": f"big-{i:03d}", "text": text, "metadata": {"collection": "big", "n": i}})
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    return path


def ragaudit(*args: str) -> str:
    """Run the ``ragaudit`` CLI in-process; returns its output, raising on failure."""
    from ragaudit.cli import app

    result = CliRunner().invoke(app, list(args))
    if result.exit_code != 0:
        raise AssertionError(
            f"ragaudit {' '.join(args)} failed ({result.exit_code}):\n{result.output}"
        )
    return result.output


def index_into(url: str, corpus: Path, index: str, *extra: str) -> str:
    """``ragaudit index`` of ``corpus`` into OpenSearch at ``url``."""
    return ragaudit(
        "index",
        str(corpus),
        "--backend",
        "opensearch",
        "--index",
        index,
        "--set",
        f"collect.opensearch.hosts=[{url}]",
        *extra,
    )


def seeded_clone(server: Any, tmp: Path) -> Iterator[Any]:
    """A clone of the session's osmem-server holding ``tests`` (test corpus) and ``demo``."""
    clone = server.clone()
    try:
        index_into(clone.url, make_corpus(tmp / "corpus.jsonl"), "tests")
        index_into(clone.url, DEMO_CORPUS, "demo")
        yield clone
    finally:
        clone.close()


def free_server(handler: type[BaseHTTPRequestHandler]) -> tuple[ThreadingHTTPServer, str]:
    """Serve ``handler`` on 127.0.0.1 and a free port in a daemon thread."""
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    httpd.daemon_threads = True
    # A short poll interval: shutdown() waits for one poll, 0.5 s by default, at every teardown.
    threading.Thread(
        target=httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
    ).start()
    return httpd, f"http://127.0.0.1:{httpd.server_address[1]}"


# ------------------------------------------------------------------------------ Elasticsearch


class EsFront:
    """Answers like Elasticsearch 9 on loopback, backed by an OpenSearch-compatible engine."""

    def __init__(self, backend_url: str) -> None:
        self.backend_url = backend_url.rstrip("/")
        self.requests: list[dict[str, Any]] = []
        self.accepted_auth: set[str] | None = (
            None  # None: any; else the Authorization values let in
        )
        self.forbidden_auth: set[str] = set()  # authenticated but not allowed (403)
        self.product_header = True
        self.delay_s = 0.0  # hold every answer this long (an overloaded cluster)
        self.lock = threading.Lock()
        front = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:  # keep pytest output clean
                pass

            def do_GET(self) -> None:
                front.handle(self)

            do_POST = do_PUT = do_DELETE = do_HEAD = do_GET

        self.httpd, self.url = free_server(Handler)

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def _reply(self, h: BaseHTTPRequestHandler, status: int, body: Any) -> None:
        data = b"" if body is None else json.dumps(body).encode()
        h.send_response(status)
        # Like Elasticsearch: the compatible-with media type to clients that ask for it.
        compat = "vnd.elasticsearch" in (h.headers.get("Accept") or "")
        h.send_header(
            "Content-Type",
            "application/vnd.elasticsearch+json;compatible-with=9"
            if compat
            else "application/json",
        )
        if self.product_header:
            h.send_header("X-Elastic-Product", "Elasticsearch")
        h.send_header("Content-Length", str(len(data)))
        h.end_headers()
        if h.command != "HEAD":
            h.wfile.write(data)

    def handle(self, h: BaseHTTPRequestHandler) -> None:
        length = int(h.headers.get("Content-Length") or 0)
        raw = h.rfile.read(length) if length else b""
        url = urllib.parse.urlsplit(h.path)
        record = {
            "method": h.command,
            "path": url.path,
            "query": dict(urllib.parse.parse_qsl(url.query)),
            "headers": {k.lower(): v for k, v in h.headers.items()},
            "body": raw.decode("utf-8", "replace"),
        }
        with self.lock:
            self.requests.append(record)
        if self.delay_s:
            time.sleep(self.delay_s)
        auth = h.headers.get("Authorization")
        if self.accepted_auth is not None and auth not in self.accepted_auth | self.forbidden_auth:
            return self._reply(
                h,
                401,
                {
                    "error": {
                        "type": "security_exception",
                        "reason": "unable to authenticate user",
                        "root_cause": [
                            {"type": "security_exception", "reason": "unable to authenticate user"}
                        ],
                    },
                    "status": 401,
                },
            )
        if auth in self.forbidden_auth:
            return self._reply(
                h,
                403,
                {
                    "error": {
                        "type": "security_exception",
                        "reason": "action [indices:data/read/search] is unauthorized",
                        "root_cause": [
                            {"type": "security_exception", "reason": "action is unauthorized"}
                        ],
                    },
                    "status": 403,
                },
            )
        path, query, body = url.path, url.query, raw
        parts = path.strip("/").split("/")
        if len(parts) == 2 and parts[1] == "_pit" and h.command == "POST":
            path = f"/{parts[0]}/_search/point_in_time"
            status, out = self._forward("POST", path, query, b"")
            return self._reply(h, status, {"id": out["pit_id"]} if status == 200 else out)
        if path == "/_pit" and h.command == "DELETE":
            pit = json.loads(raw or b"{}").get("id")
            status, out = self._forward(
                "DELETE", "/_search/point_in_time", "", json.dumps({"pit_id": [pit]}).encode()
            )
            return self._reply(
                h, status, {"succeeded": True, "num_freed": 1} if status == 200 else out
            )
        ctype = h.headers.get("Content-Type", "")
        status, out = self._forward(h.command, path, query, body, ndjson="ndjson" in ctype)
        return self._reply(h, status, out)

    def _forward(
        self, method: str, path: str, query: str, body: bytes, ndjson: bool = False
    ) -> tuple[int, Any]:
        url = f"{self.backend_url}{path}" + (f"?{query}" if query else "")
        req = urllib.request.Request(
            url,
            data=body or None,
            method=method,
            headers={"Content-Type": "application/x-ndjson" if ndjson else "application/json"},
        )
        try:
            with urllib.request.urlopen(req, timeout=30) as resp:
                status, text = resp.status, resp.read()
        except urllib.error.HTTPError as exc:
            status, text = exc.code, exc.read()
        return status, (json.loads(text) if text else None)

    def of(self, method: str, path_part: str) -> list[dict[str, Any]]:
        """Recorded requests of ``method`` whose path holds ``path_part``."""
        return [r for r in self.requests if r["method"] == method and path_part in r["path"]]


# ------------------------------------------------------------------------------ answer service


class AnswerServer:
    """The system under test: streamed lines on ``GET /qa``, JSON on ``POST /json``.

    Behaviour per question (by its ``company_name`` parameter or JSON ``collection``):
    ``plan[key]`` is a list of actions taken on successive attempts, the last repeating:
    ``ok``, ``fail`` (500), ``throttle`` (429, Retry-After: 0), ``slow`` (sleeps ``slow_s``
    before answering), ``empty`` (200 with blank lines only), ``missing`` (404).
    ``references[key]``, when set, is sent as the JSON answer's ``references`` list.
    """

    def __init__(self, api_key: str | None = None, slow_s: float = 2.0) -> None:
        self.api_key = api_key
        self.slow_s = slow_s
        self.plan: dict[str, list[str]] = {}
        self.references: dict[str, Any] = {}
        self.attempts: Counter[str] = Counter()
        self.headers_seen: dict[str, list[dict[str, str]]] = defaultdict(list)
        self.inflight = 0
        self.max_inflight = 0
        self.lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                server.handle(self)

            do_POST = do_GET

        self.httpd, self.url = free_server(Handler)

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def _plain(
        self,
        h: BaseHTTPRequestHandler,
        status: int,
        text: str,
        headers: dict[str, str] | None = None,
    ) -> None:
        data = text.encode()
        h.send_response(status)
        for k, v in (headers or {}).items():
            h.send_header(k, v)
        h.send_header("Content-Type", "text/plain; charset=utf-8")
        h.send_header("Content-Length", str(len(data)))
        h.end_headers()
        h.wfile.write(data)

    def _stream(self, h: BaseHTTPRequestHandler, lines: list[str], pause: float = 0.01) -> None:
        h.send_response(200)
        h.send_header("Content-Type", "text/plain; charset=utf-8")
        h.send_header("Transfer-Encoding", "chunked")
        h.end_headers()
        for line in lines:
            data = (line + "\n").encode()
            h.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            h.wfile.flush()
            time.sleep(pause)
        h.wfile.write(b"0\r\n\r\n")
        h.wfile.flush()

    def handle(self, h: BaseHTTPRequestHandler) -> None:
        with self.lock:
            self.inflight += 1
            self.max_inflight = max(self.max_inflight, self.inflight)
        try:
            self._handle(h)
        finally:
            with self.lock:
                self.inflight -= 1

    def _handle(self, h: BaseHTTPRequestHandler) -> None:
        url = urllib.parse.urlsplit(h.path)
        params = dict(urllib.parse.parse_qsl(url.query))
        length = int(h.headers.get("Content-Length") or 0)
        body = json.loads(h.rfile.read(length) or b"{}") if length else {}
        key = params.get("company_name") or body.get("collection") or ""
        question = params.get("message") or body.get("question") or ""
        with self.lock:
            self.attempts[key] += 1
            attempt = self.attempts[key]
            self.headers_seen[key].append({k.lower(): v for k, v in h.headers.items()})
        if self.api_key is not None and h.headers.get("X-API-Key") != self.api_key:
            return self._plain(h, 401, "missing or wrong API key")
        actions = self.plan.get(key, ["ok"])
        action = actions[min(attempt, len(actions)) - 1]
        if action == "fail":
            return self._plain(h, 500, "internal error: the model backend is down")
        if action == "throttle":
            return self._plain(h, 429, "slow down", {"Retry-After": "0"})
        if action == "missing":
            return self._plain(h, 404, "no such route")
        if action == "slow":
            time.sleep(self.slow_s)
        answer = f"An answer about {question} for {key}"
        if url.path == "/json":
            doc: dict[str, Any] = {"data": {"choices": [{"text": answer}]}, "question": question}
            if key in self.references:
                doc["references"] = self.references[key]
            data = json.dumps(doc)
            return self._plain(h, 200, data)
        if action == "empty":
            return self._stream(h, ["", "  ", ""])
        # A streaming QA service: progress lines, then the answer, then blank keep-alive lines.
        return self._stream(h, ["正在检索……", "正在生成答案……", answer, "", ""])


__all__ = [
    "AnswerServer",
    "EsFront",
    "free_server",
    "index_into",
    "make_corpus",
    "ragaudit",
    "seeded_clone",
]
