"""Placeholder of audit-sample's sampling options (the lead takes its module at merge)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Bands(_Frozen):
    """Frequency bands by a query's requests that day."""

    head: int = Field(default=10, ge=1)
    """A query asked at least this often a day is head."""
    torso: int = Field(default=2, ge=1)
    """At least this often (and below head) torso; the rest tail."""


class SampleOptions(_Frozen):
    """How many requests a day are sampled, and how deep each is graded."""

    sample: int = Field(default=400, ge=1)
    """Requests sampled a day."""
    max_judge_tokens: int | None = Field(default=None, ge=1)
    """Judge prompt tokens a day (None: ``sample`` alone bounds the draw)."""
    bands: Bands = Bands()
    """The frequency bands."""
    k: int = Field(default=10, ge=1)
    """The served top-k graded."""


__all__ = ["Bands", "SampleOptions"]
