"""Judgments read live from an index.

SRW's ``search-relevance-judgment``, Relevance Studio's ``esrs-judgements`` (with its
``esrs-scenarios`` for the queries' texts).

The index is scrolled through the engine backend's own client (``EngineBackend.scan``), so
hosts, credentials, TLS and error messages are the configured engine's.
"""

from __future__ import annotations

from typing import Any

from ragaudit.judgments._esrs import RelevanceStudio, scenario_texts
from ragaudit.judgments._format import JudgmentFormat, Read


def _documents(backend: Any) -> Any:
    index = backend.index_name
    for hit in backend.scan():
        yield f"{index}/{hit.get('_id')}", {"_id": hit.get("_id"), **(hit.get("_source") or {})}


def read_index(fmt: JudgmentFormat, backend: Any, *, scenarios: Any = None) -> list[Read]:
    """Every judgment document of ``backend``'s index, read by ``fmt``, one read per source.

    SRW keeps each judgment list as a document of its own: each is a source.

    Args:
        fmt: The format the documents are in (``srw``, ``esrs``).
        backend: An engine backend whose ``index_name`` is the judgments' index.
        scenarios: For ``esrs``: a backend on ``esrs-scenarios``, whose documents give each
            scenario's query text.

    Raises:
        InputError: The format is not kept in an index.
        SearchError: The engine cannot be read (unreachable, refused, no such index).
    """
    if scenarios is not None and isinstance(fmt, RelevanceStudio):
        fmt.scenarios = scenario_texts(_documents(scenarios))
    return fmt.read_sources(_documents(backend))


__all__ = ["read_index"]
