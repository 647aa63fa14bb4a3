"""One registry for every kind of unit a config names (metrics, backends, sources, orderings).

A unit is registered under a name with a typed options model (a frozen pydantic model whose
fields carry the defaults and their documentation). Built-in units register exactly as a
plugin's do: their modules are named under an entry-point group (``ragaudit.metrics``,
``ragaudit.search_backends``, ``ragaudit.answer_sources``, ``ragaudit.orderings`` in
``[project.entry-points]``) and imported, when a config is validated, by :func:`load_module`,
the same function that imports a module named in ``score.plugins``. Each registry also lists
its built-in modules itself, so that a checkout whose installed metadata predates a group
still finds them.

Nothing here imports the modules it loads: they are named as text, so this base module stays
below the library that registers into it, and a registry costs nothing until it is asked.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable, Mapping
from importlib import metadata
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

T = TypeVar("T")
F = TypeVar("F")


class NoOptions(BaseModel):
    """Options of a unit that takes none."""

    model_config = ConfigDict(frozen=True, extra="forbid")


def load_module(module: str) -> None:
    """Import ``module`` so that it registers its units (a plugin's module or a built-in one).

    Raises:
        ValueError: the module cannot be imported; the message names it.
    """
    try:
        importlib.import_module(module)
    except ImportError as exc:
        raise ValueError(f"plugin module '{module}' cannot be imported: {exc}") from None


class Registry(Generic[T]):
    """Units of one kind by name, each with its options model.

    Args:
        kind: What a unit is, in words (``search backend``); error messages use it.
        group: The entry-point group whose modules register units of this kind.
        builtins: Modules that register the built-in units (also named under ``group``).
    """

    def __init__(self, kind: str, group: str, builtins: tuple[str, ...]) -> None:
        self.kind = kind
        self.group = group
        self.builtins = builtins
        self.units: dict[str, T] = {}
        self.options: dict[str, type[BaseModel]] = {}
        self._loaded = False
        self.section_check: Callable[[dict[str, Any]], Any] | None = None
        """The check of a config section naming several units with their options (the
        metrics' ``check_score``), installed by a built-in module when it is loaded."""

    def add(self, name: str, unit: T, options: type[BaseModel] | None = None) -> None:
        """Register ``unit`` under ``name`` (a later registration of a name replaces it)."""
        self.units[name] = unit
        self.options[name] = options or NoOptions

    def register(self, name: str, *, options: type[BaseModel] | None = None) -> Callable[[F], F]:
        """Decorator: register the decorated factory (or class) under ``name``."""

        def deco(unit: F) -> F:
            self.add(name, unit, options)  # type: ignore[arg-type]
            return unit

        return deco

    def load(self, modules: Iterable[str] = ()) -> Registry[T]:
        """Import the built-in modules and the group's entry points (once), then ``modules``.

        Raises:
            ValueError: a module cannot be imported; the message names it.
        """
        if not self._loaded:
            self._loaded = True
            points = [p.module for p in metadata.entry_points(group=self.group)]
            for module in dict.fromkeys((*self.builtins, *points)):
                load_module(module)
        for module in modules:
            load_module(module)
        return self

    def names(self) -> list[str]:
        """The registered names, every module loaded."""
        return list(self.load().units)

    def get(self, name: str) -> T:
        """The unit registered as ``name``.

        Raises:
            KeyError: no such unit; the message lists the known ones.
        """
        self.load()
        if name not in self.units:
            raise KeyError(f"unknown {self.kind} '{name}' (known: {', '.join(self.units)})")
        return self.units[name]

    def check_section(self, section: dict[str, Any], modules: Iterable[str] = ()) -> Any:
        """``section`` checked by the kind's own section check, every module loaded first.

        Raises:
            ValueError: what the section check found wrong, or a module that cannot be imported.
        """
        self.load(modules)
        if self.section_check is None:
            raise ValueError(f"no {self.kind} module installed a check of its config section")
        return self.section_check(section)

    def check(self, name: str) -> str:
        """``name`` if it is registered (for a config validator).

        Raises:
            ValueError: no such unit; the message lists the known ones.
        """
        try:
            self.get(name)
        except KeyError as exc:
            raise ValueError(exc.args[0]) from None
        return name

    def build_options(self, name: str, given: Mapping[str, Any] | None) -> BaseModel:
        """The options ``name`` is built with: ``given`` validated by its options model.

        Raises:
            ValueError: an unknown option or an invalid value; the message names the unit and
                lists the options it takes.
        """
        self.get(name)
        model = self.options[name]
        try:
            return model.model_validate(dict(given or {}))
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in e['loc']) or 'options'}: {e['msg']}"
                for e in exc.errors()
            )
            known = ", ".join(model.model_fields) or "none"
            raise ValueError(f"{self.kind} '{name}': {problems} (its options: {known})") from None


METRICS: Registry[Any] = Registry("metric", "ragaudit.metrics", ("ragaudit.metrics",))
"""Metrics (``ragaudit.metrics.Metric``), registered with ``ragaudit.metrics.metric``."""
SEARCH_BACKENDS: Registry[Any] = Registry(
    "search backend", "ragaudit.search_backends", ("ragaudit.search",)
)
"""Search backend classes, registered with ``ragaudit.search.register_backend``."""
ANSWER_SOURCES: Registry[Any] = Registry(
    "answer source", "ragaudit.answer_sources", ("ragaudit.answers",)
)
"""Answer source factories, registered with ``ragaudit.answers.register_source``."""
ORDERINGS: Registry[Any] = Registry(
    "ordering strategy", "ragaudit.orderings", ("ragaudit.ordering",)
)
"""Pairwise ordering strategies, registered with ``ragaudit.ordering.strategy``."""

__all__ = [
    "ANSWER_SOURCES",
    "METRICS",
    "ORDERINGS",
    "SEARCH_BACKENDS",
    "NoOptions",
    "Registry",
    "load_module",
]
