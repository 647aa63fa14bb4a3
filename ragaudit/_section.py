"""The base of every config section.

In its own base module so that a section defined beside its package (``_tune_config.py``,
``_ablate_config.py`` …) and ``config.py``, which composes them, can both import it.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from ragaudit.errors import ConfigError
from ragaudit.runlock import check_run_id


class Section(BaseModel):
    """A config section: frozen, an unknown field refused naming it."""

    # ``allow_inf_nan``: ``.inf`` and ``.nan`` are floats to YAML and passed every range check
    # (``.inf > 0``), then crashed a run or a tune; every float field of every section refuses
    # them at load, naming the field.
    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)


def folder_name(value: str) -> str:
    """``value`` when it is a plain folder name (a run id, a tune's or an audit's name).

    A field validator's form of :func:`ragaudit.runlock.check_run_id`: its error becomes the
    ``ValueError`` pydantic reports under the field's name.
    """
    try:
        return check_run_id(value)
    except ConfigError as exc:
        raise ValueError(str(exc)) from None


__all__ = ["Section", "folder_name"]
