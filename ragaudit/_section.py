"""The base of every config section.

In its own base module so that a section defined beside its package (``_tune_config.py``,
``_ablate_config.py`` …) and ``config.py``, which composes them, can both import it.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from ragaudit.errors import ConfigError
from ragaudit.runlock import check_run_id

_OPERATIONAL = "operational"


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


def operational(default: Any = PydanticUndefined, **kwargs: Any) -> Any:
    """A field that changes how a command is carried out, not what it measures.

    ``Field(default, **kwargs)`` marked so: timeouts, retries, concurrency, where outputs go.
    Two folders whose configs differ only in such fields measured the same thing
    (:func:`measured`), so a nightly keeps its baseline and an audit its series when one is
    changed. The mark sits on the field, beside its documentation, rather than in a list kept
    elsewhere that a new field would be forgotten from.
    """
    extra = dict(kwargs.pop("json_schema_extra", None) or {})
    extra[_OPERATIONAL] = True
    return Field(default, json_schema_extra=extra, **kwargs)


def is_operational(field: FieldInfo) -> bool:
    """Whether ``field`` was declared with :func:`operational`."""
    extra = field.json_schema_extra
    return isinstance(extra, dict) and bool(extra.get(_OPERATIONAL))


def measured(model: BaseModel) -> dict[str, Any]:
    """``model`` as JSON less its operational fields, at every depth of nested sections."""
    data = model.model_dump(mode="json")
    _drop_operational(model, data)
    return data


def _drop_operational(model: BaseModel, data: dict[str, Any]) -> None:
    for name, field in type(model).model_fields.items():
        if is_operational(field):
            data.pop(name, None)
            continue
        value = getattr(model, name)
        if isinstance(value, BaseModel) and isinstance(data.get(name), dict):
            _drop_operational(value, data[name])


__all__ = ["Section", "folder_name", "is_operational", "measured", "operational"]
