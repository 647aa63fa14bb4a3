"""The ``http`` answer source: the live system behind an HTTP endpoint.

A common QA service shape answers ``GET /qa?message=…&company_name=…`` with a stream
of lines, the last non-empty one being the answer; other services answer plain text or
JSON. Parameters and the JSON body are templates rendered leaf by leaf (as the search
templates are), so a question is always sent as data. Header values that are secrets come
from environment variables or Prefect Secret blocks and are registered for redaction.

A 200 is not yet an answer: an HTML page (a proxy's or load balancer's error page served with
status 200) or an empty body fails the question with the reason, retried like a 5xx, so it is
never stored as an ``ok`` answer and scored.

Failures are sorted for the retry loop: no connection, a timeout, a broken stream, 408, 425,
429 and 5xx may pass and are retried (429/503 after their Retry-After); other 4xx answers
will not change and fail the question at once.
"""

from __future__ import annotations

import email.utils
import json
import re
import time
from typing import Any

import httpx

from ragaudit.answers._base import AnswerError, CitedAnswer, register_source
from ragaudit.concurrency import PerLoop
from ragaudit.config import AnswerConfig, HttpAnswerConfig
from ragaudit.dataset import Question
from ragaudit.errors import ConfigError
from ragaudit.search import Template, TemplateRenderError
from ragaudit.secrets import redact, resolve_secret

_PATH_PART = re.compile(r"\.?([^.\[\]]+)|\[(-?\d+)\]|\[[\"']([^\"']+)[\"']\]")
_RETRYABLE_STATUS = frozenset({408, 425, 429})
_HTML_PAGE = re.compile(r"^\s*(?:<\?xml[^>]*>\s*)?(?:<!doctype\s+html|<html[\s>])", re.IGNORECASE)


def not_an_answer(content_type: str, body: str) -> str | None:
    """Why a successful HTTP response's body is no answer (None when it may be one).

    An HTML document (by its content type or its first tag) is a page a proxy or a login wall
    put in the answer's place; an answer that merely holds some markup is still an answer.
    """
    if not body.strip():
        return "an empty body, not an answer"
    media = content_type.split(";", 1)[0].strip().lower()
    if media in {"text/html", "application/xhtml+xml"} or _HTML_PAGE.match(body):
        title = re.search(r"<title[^>]*>(.*?)</title>", body, re.IGNORECASE | re.DOTALL)
        named = f" titled {' '.join(title.group(1).split())[:80]!r}" if title else ""
        return f"an HTML page{named} ({media or 'no content type'}), not an answer"
    return None


def json_path(value: Any, path: str) -> Any:
    """The value at ``path`` (``a.b[0].c``, ``$.a.b``, ``a["x.y"]``) in parsed JSON.

    Raises:
        KeyError: Nothing at that path.
    """
    rest = path.strip()
    if rest.startswith("$"):
        rest = rest[1:]
    pos = 0
    node = value
    while pos < len(rest):
        m = _PATH_PART.match(rest, pos)
        if not m or m.end() == pos:
            raise KeyError(f"cannot read path '{path}' at '{rest[pos:]}'")
        pos = m.end()
        key, index, quoted = m.groups()
        try:
            if index is not None:
                node = node[int(index)]
            else:
                node = node[quoted if quoted is not None else key]
        except (KeyError, IndexError, TypeError):
            raise KeyError(f"no value at '{path}'") from None
    return node


def _retry_after(headers: httpx.Headers) -> float | None:
    raw = headers.get("retry-after")
    if not raw:
        return None
    try:
        return max(0.0, float(raw))
    except ValueError:
        when = email.utils.parsedate_to_datetime(raw) if raw else None
        return max(0.0, when.timestamp() - time.time()) if when else None


class HttpSource:
    """Asks an HTTP endpoint per question."""

    name = "http"

    def __init__(
        self, config: HttpAnswerConfig, *, concurrency: int = 4, timeout_s: float = 120.0
    ) -> None:
        """Compile the templates and resolve the secret headers.

        Raises:
            ConfigError: No URL, a template that is not valid, a secret that cannot be read.
        """
        if not config.url:
            raise ConfigError(
                "collect.answers.http.url: required when collect.answers.source is 'http'"
            )
        self.config = config
        self.url = config.url
        self.params = Template(config.params, where="collect.answers.http.params")
        self.body = (
            Template(config.body, where="collect.answers.http.body") if config.body else None
        )
        headers = dict(config.headers)
        for header, ref in config.secret_headers.items():
            value = resolve_secret(
                ref.env, ref.secret, field=f"collect.answers.http.secret_headers.{header}"
            )
            headers[header] = f"{ref.prefix}{value}"
        self._headers = headers
        self._concurrency = concurrency
        self._timeout_s = timeout_s
        # A connection pool belongs to the event loop that opened it.
        self._clients = PerLoop(self._new_client)

    def _new_client(self) -> httpx.AsyncClient:
        verify: Any = (
            str(self.config.ca_certs) if self.config.ca_certs else self.config.verify_certs
        )
        return httpx.AsyncClient(
            headers=self._headers,
            timeout=httpx.Timeout(self._timeout_s, connect=min(self._timeout_s, 10.0)),
            limits=httpx.Limits(max_connections=self._concurrency),
            verify=verify,
            follow_redirects=True,
        )

    def _client(self) -> httpx.AsyncClient:
        return self._clients.get()

    def _render(self, q: Question) -> tuple[dict[str, str], Any]:
        variables = {
            "question": q.question,
            "question_id": q.question_id,
            "filters": dict(q.filters),
            "language": q.language,
            "metadata": dict(q.metadata),
        }
        try:
            params = {k: v for k, v in self.params.render(variables).items() if v is not None}
            body = self.body.render(variables) if self.body is not None else None
        except TemplateRenderError as exc:
            raise AnswerError(str(exc), retryable=False) from None
        flat = {
            k: v if isinstance(v, str) else json.dumps(v, ensure_ascii=False)
            for k, v in params.items()
        }
        return flat, body

    async def answer(self, question: Question) -> str:
        """The endpoint's answer to ``question``."""
        params, body = self._render(question)
        try:
            async with self._client().stream(
                self.config.method, self.url, params=params, json=body
            ) as resp:
                if not 200 <= resp.status_code < 300:
                    await self._raise_for(resp)
                text = await self._read(resp)
        except httpx.TimeoutException as exc:
            raise AnswerError(f"{self.url} timed out ({type(exc).__name__})") from None
        except httpx.ConnectError as exc:
            raise AnswerError(f"cannot reach {self.url} ({exc})") from None
        except httpx.HTTPError as exc:  # a stream cut short, a protocol error
            raise AnswerError(f"{self.url}: {type(exc).__name__}: {exc}") from None
        return text

    async def _raise_for(self, resp: httpx.Response) -> None:
        status = resp.status_code
        try:
            snippet = (await resp.aread()).decode("utf-8", "replace").strip()[:300]
        except httpx.HTTPError:
            snippet = ""
        hint = ""
        if status in (401, 403):
            hint = (
                "; the service refused the credentials: check collect.answers.http.secret_headers"
            )
        elif status == 404:
            hint = "; check collect.answers.http.url"
        raise AnswerError(
            redact(f"HTTP {status} from {self.url}{': ' + snippet if snippet else ''}{hint}"),
            retryable=status in _RETRYABLE_STATUS or status >= 500,
            retry_after=_retry_after(resp.headers) if status in (429, 503) else None,
        )

    async def _read(self, resp: httpx.Response) -> str:
        mode = self.config.response
        content_type = resp.headers.get("content-type", "")
        if mode == "lines":
            last = ""
            head: list[str] = []
            async for line in resp.aiter_lines():
                if len(head) < 20:
                    head.append(line)
                if line.strip():
                    last = line
            self._check_body(resp, content_type, "\n".join(head) if last.strip() else "")
            text = last.strip()
            if text and self.config.json_path:
                text = self._extract(text)
            return text
        raw = (await resp.aread()).decode(resp.encoding or "utf-8", "replace")
        self._check_body(resp, content_type, raw)
        if mode == "text":
            return raw.strip()
        return self._extract(raw)

    def _check_body(self, resp: httpx.Response, content_type: str, body: str) -> None:
        reason = not_an_answer(content_type, body)
        if reason is not None:
            raise AnswerError(redact(f"HTTP {resp.status_code} from {self.url} with {reason}"))

    def _extract(self, raw: str) -> str:
        try:
            data = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise AnswerError(f"{self.url} did not answer JSON ({exc}): {raw[:200]!r}") from None
        if not self.config.json_path:
            value = data
        else:
            try:
                value = json_path(data, self.config.json_path)
            except KeyError as exc:
                raise AnswerError(
                    f"{self.url}: {exc.args[0]} in the JSON answer "
                    f"(collect.answers.http.json_path): {raw[:200]}",
                    retryable=False,
                ) from None
        text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
        if self.config.citations_path:
            return CitedAnswer(text, self._citation_ids(data))
        return text

    def _citation_ids(self, data: Any) -> list[str]:
        """The ids of the documents the response lists as cited, in its order."""
        try:
            entries = json_path(data, self.config.citations_path or "")
        except KeyError:
            return []  # an answer that cites nothing may leave the list out
        if not isinstance(entries, list):
            raise AnswerError(
                f"{self.url}: collect.answers.http.citations_path does not hold a list",
                retryable=False,
            )
        field = self.config.citation_id_field
        # An entry without an id keeps its place, so that marker [n] still names the n-th entry:
        # dropping it would shift every later marker onto the next document. The empty id is
        # no context's, so the score stage counts that marker as an unknown citation.
        ids = [e.get(field) if isinstance(e, dict) else e for e in entries]
        return ["" if i is None else str(i) for i in ids]

    async def aclose(self) -> None:
        """Close the connection pool of the running loop."""
        client = self._clients.pop()
        if client is not None:
            await client.aclose()


@register_source("http")
def _http(config: AnswerConfig, options: object) -> HttpSource:
    return HttpSource(config.http, concurrency=config.concurrency, timeout_s=config.timeout_s)


__all__ = ["HttpSource", "json_path", "not_an_answer"]
