"""The ``elasticsearch`` backend: an Elasticsearch cluster through the official 9.x client.

Searches go through ``AsyncElasticsearch`` (aiohttp), indexing through the sync client's
bulk helper. The query, paging and hit reading are the ones the ``opensearch`` backend uses
(:mod:`ragaudit.search._engine`); only the client calls differ. Paging defaults to
``search_after`` over a point in time, Elasticsearch's recommended way past the result
window.

The 9.x client sends ``compatible-with=9`` media types and refuses any server whose answers
lack ``X-Elastic-Product: Elasticsearch``: pointing it at OpenSearch fails with a message
saying to use the ``opensearch`` backend.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ragaudit.search._base import Capabilities, register_backend
from ragaudit.search._engine import EngineBackend, by_status, short_reason


@register_backend("elasticsearch")
class ElasticsearchBackend(EngineBackend):
    """Elasticsearch 8.x/9.x through the official client."""

    name = "elasticsearch"
    capabilities = Capabilities(
        indexable=True,
        index_setting="collect.elasticsearch.index",
        template_section="elasticsearch",
    )
    product = "Elasticsearch"
    default_paging = "pit"

    def _client(self, *, asynchronous: bool) -> Any:
        import elasticsearch

        kwargs: dict[str, Any] = {
            "hosts": self.hosts,
            "request_timeout": self.timeout_s,
            # Retries are ours (bounded, with backoff, the same for both engines).
            "max_retries": 0,
            "retry_on_timeout": False,
            "verify_certs": self.verify_certs,
        }
        if not self.verify_certs:
            kwargs["ssl_show_warn"] = False
        if self.auth["api_key"]:
            kwargs["api_key"] = self.auth["api_key"]
        elif self.auth["bearer"]:
            kwargs["bearer_auth"] = self.auth["bearer"]
        elif self.auth["username"] is not None or self.auth["password"] is not None:
            kwargs["basic_auth"] = (self.auth["username"] or "", self.auth["password"] or "")
        if self.ca_certs:
            kwargs["ca_certs"] = self.ca_certs
        cls = elasticsearch.AsyncElasticsearch if asynchronous else elasticsearch.Elasticsearch
        return cls(**kwargs)

    def _classify(self, exc: BaseException) -> tuple[str, int | None, str] | None:
        import elastic_transport
        import elasticsearch

        if isinstance(exc, elasticsearch.UnsupportedProductError):
            return (
                "not_engine",
                None,
                "its answers lack 'X-Elastic-Product: Elasticsearch'; for OpenSearch or a "
                "compatible server use collect.backend: opensearch",
            )
        if isinstance(exc, elasticsearch.ApiError):
            body = exc.body if isinstance(exc.body, Mapping) else {"error": exc.body}
            kind, status, detail = by_status(int(exc.meta.status), exc.message, body)
            if status == 406:
                # OpenSearch (and Elasticsearch before 8) refuse the compatible-with=9 media
                # type the 9.x client always sends.
                return (
                    "not_engine",
                    status,
                    f"it refuses the client's compatible-with=9 media type ({status} {detail}); "
                    "for OpenSearch use collect.backend: opensearch",
                )
            return kind, status, detail
        if isinstance(exc, elastic_transport.ConnectionTimeout):
            return "timeout", None, short_reason(exc.message) or "timed out"
        if isinstance(exc, elastic_transport.ConnectionError):
            return "unreachable", None, short_reason(exc.message) or type(exc).__name__
        if isinstance(exc, elastic_transport.TransportError):
            return "protocol", None, f"{type(exc).__name__}: {short_reason(exc.message)}"
        return None

    async def _asearch(
        self, client: Any, body: dict[str, Any], *, index: str | None, scroll: str | None = None
    ) -> Mapping[str, Any]:
        kwargs: dict[str, Any] = {"body": body}
        if index is not None:
            kwargs["index"] = index
        if scroll:
            kwargs["scroll"] = scroll
        resp = await client.search(**kwargs)
        return resp.body

    async def _ascroll(self, client: Any, scroll_id: str) -> Mapping[str, Any]:
        resp = await client.scroll(scroll_id=scroll_id, scroll=self.keep_alive)
        return resp.body

    async def _aclear_scroll(self, client: Any, scroll_id: str) -> None:
        await client.clear_scroll(scroll_id=scroll_id)

    async def _aopen_pit(self, client: Any) -> str:
        resp = await client.open_point_in_time(index=self.index_name, keep_alive=self.keep_alive)
        return str(resp["id"])

    async def _aclose_pit(self, client: Any, pit_id: str) -> None:
        await client.close_point_in_time(id=pit_id)

    def _create(self, client: Any, body: dict[str, Any]) -> None:
        # The 9.x client takes the body's parts as keyword arguments.
        client.indices.create(index=self.index_name, **body)

    def _helpers(self) -> Any:
        from elasticsearch import helpers

        return helpers


__all__ = ["ElasticsearchBackend"]
