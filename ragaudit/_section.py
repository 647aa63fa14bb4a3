"""The base of every config section.

In its own base module so that a section defined beside its package (``_tune_config.py``,
``_ablate_config.py`` …) and ``config.py``, which composes them, can both import it.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Section(BaseModel):
    """A config section: frozen, an unknown field refused naming it."""

    # ``allow_inf_nan``: ``.inf`` and ``.nan`` are floats to YAML and passed every range check
    # (``.inf > 0``), then crashed a run or a tune; every float field of every section refuses
    # them at load, naming the field.
    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)


__all__ = ["Section"]
