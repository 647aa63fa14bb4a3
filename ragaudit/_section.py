"""The base of every config section.

In its own base module so that a section defined beside its package (``_tune_config.py``,
``_ablate_config.py`` …) and ``config.py``, which composes them, can both import it.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Section(BaseModel):
    """A config section: frozen, an unknown field refused naming it."""

    model_config = ConfigDict(frozen=True, extra="forbid")


__all__ = ["Section"]
