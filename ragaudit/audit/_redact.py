"""Placeholder of audit-read's redaction options (the lead takes audit-read's module at merge)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class RedactOptions(BaseModel):
    """What is replaced before anything is written or sent to the judge."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    defaults: bool = True
    """E-mail addresses, phone and card numbers."""
    patterns: tuple[str, ...] = ()
    """The user's own patterns."""


__all__ = ["RedactOptions"]
