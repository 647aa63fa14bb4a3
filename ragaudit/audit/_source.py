"""Placeholder of audit-read's source options (the lead takes audit-read's module at merge).

Only the options model, exactly as the audit contract's YAML shows it, so that
``audit/_config.py`` composes the section before the readers land.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class FieldOptions(_Frozen):
    """A JMESPath expression per normalised field (jsonl/parquet only)."""

    request_id: str | None = None
    """The request's id."""
    time: str | None = None
    """When it was served."""
    session: str | None = None
    """The user's session."""
    query: str | None = None
    """What the user asked."""
    filters: str | None = None
    """The request's filters (an object)."""
    docs: str | None = None
    """The served documents in order, each ``{id, text, score}``."""
    answer: str | None = None
    """The answer served."""
    citations: str | None = None
    """The answer's citations."""
    feedback: str | None = None
    """The user's feedback."""


class UbiOptions(_Frozen):
    """Where OpenSearch User Behavior Insights keeps its queries and events."""

    hosts: tuple[str, ...] = ("http://127.0.0.1:9200",)
    """The cluster's addresses."""
    queries_index: str = "ubi_queries"
    """The index of the queries."""
    events_index: str = "ubi_events"
    """The index of the events (clicks)."""


class SourceOptions(_Frozen):
    """Where a day's traffic is read from."""

    format: Literal["jsonl", "parquet", "otlp", "ubi"] = "jsonl"
    """The log's form."""
    path: str | None = None
    """The day's files: ``{day}`` becomes YYYY-MM-DD, then a glob."""
    fields: FieldOptions = FieldOptions()
    """JMESPath per normalised field."""
    ubi: UbiOptions = UbiOptions()
    """The UBI indices (``format: ubi``)."""


__all__ = ["FieldOptions", "SourceOptions", "UbiOptions"]
