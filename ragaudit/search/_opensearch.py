"""The ``opensearch`` backend: an OpenSearch cluster through opensearch-py.

Searches go through ``AsyncOpenSearch`` (aiohttp) so that many questions are in flight at
once under the backend's concurrency limit; indexing uses the sync client's bulk helper.
Paging defaults to scroll: it works on every OpenSearch version, while point-in-time search
arrived in 2.4 (``paging: pit`` selects it). OpenSearch has no API keys of its own: an
``api_key`` is sent as ``Authorization: ApiKey …`` for proxies that expect one, a bearer
token as ``Authorization: Bearer …``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ragaudit.search._base import Capabilities, register_backend
from ragaudit.search._engine import EngineBackend, by_status, short_reason


@register_backend("opensearch")
class OpenSearchBackend(EngineBackend):
    """OpenSearch (1.x-3.x, or a compatible server) through opensearch-py."""

    name = "opensearch"
    capabilities = Capabilities(
        indexable=True, index_setting="collect.opensearch.index", template_section="opensearch"
    )
    product = "OpenSearch"
    default_paging = "scroll"

    def _client(self, *, asynchronous: bool) -> Any:
        import opensearchpy

        headers: dict[str, str] = {}
        if self.auth["api_key"]:
            headers["Authorization"] = f"ApiKey {self.auth['api_key']}"
        if self.auth["bearer"]:
            headers["Authorization"] = f"Bearer {self.auth['bearer']}"
        kwargs: dict[str, Any] = {
            "hosts": self.hosts,
            "timeout": self.timeout_s,
            # Retries are ours (bounded, with backoff, the same for both engines).
            "max_retries": 0,
            "retry_on_timeout": False,
            "verify_certs": self.verify_certs,
            "ssl_show_warn": self.verify_certs,
        }
        if headers:
            kwargs["headers"] = headers
        if self.auth["username"] is not None or self.auth["password"] is not None:
            kwargs["http_auth"] = (self.auth["username"] or "", self.auth["password"] or "")
        if self.ca_certs:
            kwargs["ca_certs"] = self.ca_certs
        cls = opensearchpy.AsyncOpenSearch if asynchronous else opensearchpy.OpenSearch
        return cls(**kwargs)

    def _classify(self, exc: BaseException) -> tuple[str, int | None, str] | None:
        from opensearchpy import exceptions as ex

        if isinstance(exc, ex.ConnectionTimeout):
            return "timeout", None, short_reason(exc.info) or "timed out"
        if isinstance(exc, ex.ConnectionError):
            return "unreachable", None, short_reason(exc.info) or type(exc).__name__
        if isinstance(exc, ex.TransportError) and isinstance(exc.status_code, int):
            return by_status(exc.status_code, exc.error, exc.info)
        if isinstance(exc, ex.OpenSearchException):
            return "protocol", None, f"{type(exc).__name__}: {exc}"
        return None

    async def _asearch(
        self, client: Any, body: dict[str, Any], *, index: str | None, scroll: str | None = None
    ) -> Mapping[str, Any]:
        params = {"scroll": scroll} if scroll else None
        return await client.search(body=body, index=index, params=params)

    async def _ascroll(self, client: Any, scroll_id: str) -> Mapping[str, Any]:
        return await client.scroll(body={"scroll_id": scroll_id, "scroll": self.keep_alive})

    async def _aclear_scroll(self, client: Any, scroll_id: str) -> None:
        await client.clear_scroll(body={"scroll_id": scroll_id})

    async def _aopen_pit(self, client: Any) -> str:
        resp = await client.create_pit(
            index=self.index_name, params={"keep_alive": self.keep_alive}
        )
        return str(resp["pit_id"])

    async def _aclose_pit(self, client: Any, pit_id: str) -> None:
        await client.delete_pit(body={"pit_id": [pit_id]})

    def _create(self, client: Any, body: dict[str, Any]) -> None:
        client.indices.create(index=self.index_name, body=body)

    def _helpers(self) -> Any:
        from opensearchpy import helpers

        return helpers


__all__ = ["OpenSearchBackend"]
