"""One registry for every kind of unit a config names.

Metrics, search backends, answer sources, orderings, head methods, tune search strategies, tune
metrics and the audit's log readers: a unit is registered under a name with a typed options model
(a frozen pydantic model whose fields carry the defaults and their documentation). Built-in units
register exactly as a plugin's do: their modules are named under an entry-point group
(``ragaudit.metrics`` …, in ``[project.entry-points]``) and imported, when a registry is first
asked, by :func:`load_module`, the same function that imports a module named in ``plugins``. Each
registry also lists its built-in modules itself, so that a checkout whose installed metadata
predates a group still finds them.

Plugins load only when allow-listed (``plugins:`` in the config, or ``RAGAUDIT_PLUGINS``, as
simonw/llm's ``LLM_LOAD_PLUGINS``): an installed package that names modules under a
``ragaudit.*`` group is never imported unless named, so one broken package in the environment
cannot fail every run, and the tests load the built-ins only whatever is installed. The units
of an installed package are namespaced ``<package>/<name>`` (inspect_ai's ``registry_name``);
a module named directly registers plain names, and a name already taken by another module is
refused, naming both modules: a plugin never replaces a built-in silently.

What a metric is besides its scorer travels with its registration too (:class:`MetricInfo`:
which way is better, its range, its label, its default threshold, its place in lists), held
here beside the unit, so that a report, the config's default thresholds and a chart read it
from the registration alone, the way inspect_ai's ``RegistryInfo`` sits on the registered
object.

Nothing here imports the modules it loads: they are named as text, so this base module stays
below the library that registers into it, and a registry costs nothing until it is asked.
"""

from __future__ import annotations

import importlib
import math
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from importlib import metadata
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

T = TypeVar("T")
F = TypeVar("F")


class NoOptions(BaseModel):
    """Options of a unit that takes none."""

    model_config = ConfigDict(frozen=True, extra="forbid")


class NameClash(ValueError):
    """A unit registered under a name another module's unit already holds."""


@dataclass(frozen=True)
class MetricInfo:
    """What a metric (or any figure a report shows) is, declared where it is registered.

    Raises:
        ValueError: a range that is empty or not ordered, or a threshold outside the range.
    """

    higher_is_better: bool = True
    """Whether a larger value is the better one (compare's verdicts, flags, worst rows)."""
    range: tuple[float, float] = (0.0, 1.0)
    """The values it can take, ``(low, high)`` (``math.inf`` for no bound): the charts' axes
    and colours, and the bounds of a design-corrected (PPI) figure."""
    label: str = ""
    """How reports name it ("" : by its registered name)."""
    threshold: float | None = None
    """The default of ``report.thresholds`` for it: a mean on the wrong side is flagged
    (None: not flagged unless a config sets one)."""
    order: int | None = None
    """Its place in lists (``ragaudit metrics``, the default thresholds), smallest first;
    None: after every metric that declares one, in the order registered."""

    def __post_init__(self) -> None:
        low, high = self.range
        if not low < high:
            raise ValueError(f"a metric's range is (low, high) with low < high, got {self.range}")
        if self.threshold is not None and not low <= self.threshold <= high:
            raise ValueError(f"threshold {self.threshold} lies outside the range {self.range}")

    @property
    def bounded(self) -> bool:
        """Whether both ends of the range are finite (a chart can be drawn to them)."""
        return all(math.isfinite(v) for v in self.range)

    @property
    def rank(self) -> float:
        """The sort key of :attr:`order` (undeclared last)."""
        return math.inf if self.order is None else float(self.order)


_REGISTRIES: list[Registry[Any]] = []
_namespace: str | None = None
"""The installed package whose entry points are being imported: its units are ``<it>/<name>``."""
_loaded_packages: set[str] = set()

BUILTIN_PACKAGE = "ragaudit"


def _builtin(module: str) -> bool:
    return module == BUILTIN_PACKAGE or module.startswith(f"{BUILTIN_PACKAGE}.")


def package_key(name: str) -> str:
    """A distribution's name as pip compares names (PEP 503: ``Ragaudit_Foo``, ``ragaudit-foo``)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def load_module(module: str) -> None:
    """Import ``module`` so that it registers its units (a plugin's module or a built-in one).

    Raises:
        NameClash: the module registers a name another module's unit holds; names both.
        ValueError: the module cannot be imported, or fails on import; the message names it.
    """
    try:
        importlib.import_module(module)
    except NameClash:
        raise
    except ImportError as exc:
        raise ValueError(f"plugin module '{module}' cannot be imported: {exc}") from None
    except Exception as exc:  # a plugin's own bug: one message naming it, no traceback
        raise ValueError(
            f"plugin module '{module}' failed on import: {type(exc).__name__}: {exc}"
        ) from None


def registries() -> list[Registry[Any]]:
    """Every registry, in the order they were made (``ragaudit plugins`` lists them all)."""
    return list(_REGISTRIES)


def installed_plugins() -> dict[str, list[metadata.EntryPoint]]:
    """Installed packages (other than ragaudit) naming modules under a ragaudit group, by name.

    Listed, never imported: only :func:`load_plugins` imports the ones allow-listed.
    """
    found: dict[str, list[metadata.EntryPoint]] = {}
    for registry in _REGISTRIES:
        for point in metadata.entry_points(group=registry.group):
            dist = package_key(point.dist.name) if point.dist is not None else ""
            if dist and dist != BUILTIN_PACKAGE:
                found.setdefault(dist, []).append(point)
    return found


def load_plugins(names: Iterable[str]) -> None:
    """Load the allow-listed plugins: each an installed package or a module.

    An installed package's modules (its ``ragaudit.*`` entry points) are imported with its
    units namespaced ``<package>/<name>``; any other name is a module, imported as it is.

    Raises:
        NameClash: a plugin registers a name another module's unit holds; names both.
        ValueError: a plugin cannot be imported or fails on import; the message names it.
    """
    global _namespace
    installed: dict[str, list[metadata.EntryPoint]] | None = None
    for name in names:
        key = package_key(name)
        if key in _loaded_packages:
            continue
        if installed is None:
            installed = installed_plugins()
        if key not in installed:
            load_module(name)
            continue
        for point in installed[key]:
            _namespace = key
            try:
                load_module(point.module)
            except ValueError as exc:
                raise ValueError(f"plugin package '{key}': {exc}") from None
            finally:
                _namespace = None
        _loaded_packages.add(key)


class Registry(Generic[T]):
    """Units of one kind by name, each with its options model.

    Args:
        kind: What a unit is, in words (``search backend``); error messages use it.
        group: The entry-point group whose modules register units of this kind.
        builtins: Modules that register the built-in units (also named under ``group``).
        declared: The names the built-in modules register, where importing those modules is
            costly (a package that loads the gateway): a config naming one is checked without
            importing anything. A test holds them equal to what the modules register.
    """

    def __init__(
        self, kind: str, group: str, builtins: tuple[str, ...], declared: tuple[str, ...] = ()
    ) -> None:
        self.kind = kind
        self.group = group
        self.builtins = builtins
        self.declared = declared
        self.units: dict[str, T] = {}
        """The units by name, in the order their registrations declare (``MetricInfo.order``)."""
        self.options: dict[str, type[BaseModel]] = {}
        self.modules: dict[str, str] = {}
        """The module that registered each unit (named when another module claims its name)."""
        self.info: dict[str, MetricInfo] = {}
        """What each unit that declared it is (:class:`MetricInfo`: metrics, tune metrics)."""
        self._loaded = False
        self.section_check: Callable[[dict[str, Any]], Any] | None = None
        """The check of a config section naming several units with their options (the
        metrics' ``check_score``), installed by a built-in module when it is loaded."""

        _REGISTRIES.append(self)

    def add(
        self,
        name: str,
        unit: T,
        options: type[BaseModel] | None = None,
        *,
        module: str = "",
        info: MetricInfo | None = None,
    ) -> str:
        """Register ``unit`` under ``name`` (``<package>/<name>`` from an installed package).

        ``module`` is the module registering it (the unit's own ``__module__`` when not given);
        ``info`` what the unit is (a metric's direction, range, label, threshold, order).
        The same module registering a name again (a reload) replaces its unit.

        Returns:
            The name it is registered under.

        Raises:
            NameClash: another module's unit holds the name; the message names both modules.
        """
        module = module or str(getattr(unit, "__module__", "") or "?")
        name = self.qualify(name, module)
        holder = self.modules.get(name)
        if holder is not None and holder != module:
            raise NameClash(
                f"{self.kind} '{name}' of module '{module}' clashes with the one of module "
                f"'{holder}': a plugin cannot replace a registered unit; give it another name"
            )
        self.units[name] = unit
        self.options[name] = options or NoOptions
        self.modules[name] = module
        if info is None:
            self.info.pop(name, None)
        else:
            self.info[name] = info
            if info.order is not None:
                self._in_order()
        return name

    def _in_order(self) -> None:
        """Units in their declared order (a stable sort: ties, and the undeclared, as added)."""
        ranked = sorted(self.units.items(), key=lambda item: self._rank(item[0]))
        self.units.clear()
        self.units.update(ranked)

    def _rank(self, name: str) -> float:
        info = self.info.get(name)
        return math.inf if info is None else info.rank

    def qualify(self, name: str, module: str) -> str:
        """The name a unit of ``module`` registered now as ``name`` gets.

        ``<package>/<name>`` while an installed package's modules are imported; a built-in
        module imported on the way (the package's own ``import ragaudit.metrics``) keeps its
        plain names.
        """
        if _namespace is None or _builtin(module) or name.startswith(f"{_namespace}/"):
            return name
        return f"{_namespace}/{name}"

    def register(
        self,
        name: str,
        *,
        options: type[BaseModel] | None = None,
        info: MetricInfo | None = None,
    ) -> Callable[[F], F]:
        """Decorator: register the decorated factory (or class) under ``name``."""

        def deco(unit: F) -> F:
            self.add(name, unit, options, info=info)  # type: ignore[arg-type]
            return unit

        return deco

    def load(self, plugins: Iterable[str] = ()) -> Registry[T]:
        """Import the built-in modules (once), then the allow-listed ``plugins``.

        The built-ins are this registry's own list and ragaudit's entry points of its group;
        other packages' entry points load only when allow-listed (:func:`load_plugins`).

        Raises:
            ValueError: a module cannot be imported; the message names it.
        """
        if not self._loaded:
            self._loaded = True
            points = [
                p.module
                for p in metadata.entry_points(group=self.group)
                if p.dist is not None and package_key(p.dist.name) == BUILTIN_PACKAGE
            ]
            for module in dict.fromkeys((*self.builtins, *points)):
                load_module(module)
        load_plugins(plugins)
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

    def info_of(self, name: str) -> MetricInfo | None:
        """What the unit ``name`` declared itself to be (None: not registered, or nothing declared).

        The built-in modules are loaded first, so the answer never depends on what was
        imported before; a plugin's unit is known once a config allow-listing it has loaded.
        """
        self.load()
        return self.info.get(name)

    def declared_info(self, plugins: Iterable[str] = ()) -> dict[str, MetricInfo]:
        """What the units of the built-in modules and of ``plugins`` declared, in list order.

        Units that another plugin, loaded earlier in this process, registered are left out: a
        config's defaults (``report.thresholds``) depend only on what the config names.
        """
        plugins = tuple(plugins)
        self.load(plugins)
        packages = {package_key(p) for p in plugins}

        def named(unit: str) -> bool:
            module = self.modules.get(unit, "")
            return (
                _builtin(module)
                or any(module == p or module.startswith(f"{p}.") for p in plugins)
                or ("/" in unit and unit.split("/", 1)[0] in packages)
            )

        found = [(n, i) for n, i in self.info.items() if named(n)]
        return dict(sorted(found, key=lambda item: item[1].rank))

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
        if name in self.declared:
            return name
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

# These three kinds' built-ins live in packages that load the gateway (litellm): their names are
# declared, so that loading a config (or a run's manifest, for a report) imports none of them.
HEAD_METHODS: Registry[Any] = Registry(
    "head method", "ragaudit.head_methods", ("ragaudit.judging._head",), ("setwise", "window")
)
"""Head ordering methods (``sort.head_method``), registered with
``ragaudit.judging.head_method``."""
TUNE_SEARCHES: Registry[Any] = Registry(
    "tune search strategy",
    "ragaudit.tune_searches",
    ("ragaudit.tuning._search",),
    ("grid", "ofat", "optuna"),
)
"""How a tune finds its variants (``tune.search``), registered with
``ragaudit.tuning.search_strategy``."""
TUNE_METRICS: Registry[Any] = Registry(
    "tune metric",
    "ragaudit.tune_metrics",
    ("ragaudit.tuning._metrics",),
    ("ndcg", "precision", "recall", "mrr"),
)
"""Metrics of a tune's variants at its depth (``tune.metrics``), registered with
``ragaudit.tuning.tune_metric``."""
READERS: Registry[Any] = Registry(
    "audit reader",
    "ragaudit.audit_readers",
    ("ragaudit.audit._jsonlog", "ragaudit.audit._otlp", "ragaudit.audit._ubi"),
)
"""Log formats an audit reads a day from (``audit.source.format``), registered with
``ragaudit.audit.reader``."""

JUDGMENT_FORMATS: Registry[Any] = Registry(
    "judgment format", "ragaudit.judgment_formats", ("ragaudit.judgments",)
)
"""Formats ``ragaudit judgments`` imports and exports (``ragaudit.judgments.JudgmentFormat``),
registered with ``ragaudit.judgments.register_format``."""

FOLDER_KINDS: Registry[Any] = Registry(
    "folder kind", "ragaudit.folder_kinds", ("ragaudit.runfolder",)
)
"""Kinds of folder under a runs root (``ragaudit.runfolder.FolderKind``): runs, tunes, audit
days …, registered with ``FOLDER_KINDS.add``."""

__all__ = [
    "ANSWER_SOURCES",
    "FOLDER_KINDS",
    "BUILTIN_PACKAGE",
    "HEAD_METHODS",
    "JUDGMENT_FORMATS",
    "METRICS",
    "ORDERINGS",
    "READERS",
    "SEARCH_BACKENDS",
    "TUNE_METRICS",
    "TUNE_SEARCHES",
    "MetricInfo",
    "NameClash",
    "NoOptions",
    "Registry",
    "installed_plugins",
    "load_module",
    "load_plugins",
    "package_key",
    "registries",
]
