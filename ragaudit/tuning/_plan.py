"""Which variants a tune compares: the baseline collect section and its named and swept changes.

Every check of the ``tune`` section that can be made without a search or a judge call is made
here, each failure one message naming the field, so a bad config costs nothing.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from ragaudit.ablation import expand
from ragaudit.cache import canonical_hash
from ragaudit.config import RunConfig, deep_merge, format_validation_error
from ragaudit.errors import ConfigError, clip
from ragaudit.registry import TUNE_SEARCHES
from ragaudit.runfolder import RunsRoot
from ragaudit.search import capabilities
from ragaudit.tuning._search import SearchStrategy, numeric_collect_fields

BASELINE = "baseline"
"""The name of the variant that is the run's own ``collect`` section."""

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._=,+-]{0,99}")
_GRID_VALUE = re.compile(r"[^\s\x00-\x1f\x7f]{1,100}")
"""A swept value as it shows in its variant's name: ``75%`` and ``title^2`` are fine; no space
or control character, as the name is a TREC run file's tag (one whitespace-free column)."""
_PARAM_REF = re.compile(r"params\s*\.\s*([A-Za-z_][A-Za-z0-9_]*)|params\s*\[\s*['\"]([^'\"]+)['\"]")


@dataclass(frozen=True)
class Variant:
    """One collect setting compared by a tune.

    Attributes:
        name: Its name (``baseline``, a ``tune.variants`` key, or ``boost=4,operator=and``).
        config: The run config with this variant's ``collect`` section.
        changes: The collect fields it changes over the baseline (for ``best.yaml``, the report).
        params: Its template parameters (read by the query template as ``params``).
        sweeps: The swept parameters whose chart it belongs to.
    """

    name: str
    config: RunConfig
    changes: dict[str, Any] = field(default_factory=dict)
    params: dict[str, Any] = field(default_factory=dict)
    sweeps: tuple[str, ...] = ()

    @property
    def file_name(self) -> str:
        """The TREC run file of the variant: its name with anything unsafe as ``_``."""
        return "run." + re.sub(r"[^A-Za-z0-9._=,+-]", "_", self.name) + ".txt"


def baseline_params(config: RunConfig) -> dict[str, Any]:
    """The baseline's template parameters: ``tune.baseline_params``, a swept one's first value."""
    tune = config.tune
    out = {name: values[0] for name, values in tune.params.items()}
    for name, rng in tune.ranges.items():
        out.setdefault(name, rng.low)
    out.update(tune.baseline_params)
    return out


def _template_section(backend: str) -> str | None:
    """The collect sub-section holding the backend's query template (None: it has none)."""
    return capabilities(backend).template_section


def _template_of(config: RunConfig) -> Any:
    name = _template_section(config.collect.backend)
    return None if name is None else getattr(config.collect, name).query_template


def _referenced(template: Any) -> set[str]:
    """The template parameters a query template reads (``params.x`` or ``params['x']``)."""
    text = template if isinstance(template, str) else json.dumps(template, ensure_ascii=False)
    return {a or b for a, b in _PARAM_REF.findall(text or "")}


def variant_config(
    config: RunConfig, changes: Mapping[str, Any], params: Mapping[str, Any], where: str
) -> RunConfig:
    """``config`` with its collect section changed and its template parameters set.

    Raises:
        ConfigError: The changed section is not a valid collect section (naming ``where``).
    """
    collect = deep_merge(config.collect.model_dump(mode="json"), changes)
    if params:
        name = _template_section(collect.get("backend", config.collect.backend))
        if name is not None:
            collect[name] = {**collect.get(name, {}), "template_params": dict(params)}
    data = config.model_dump(mode="json")
    data["collect"] = collect
    try:
        return RunConfig.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(format_validation_error(exc, where)) from None


def _name(values: Mapping[str, Any], swept: list[str]) -> str:
    return ",".join(f"{k}={values[k]}" for k in swept)


def plan_variants(config: RunConfig, *, yes: bool = False) -> list[Variant]:
    """The baseline first, then the named variants, then the parameter grid's points.

    Raises:
        ConfigError: A tune name that is a run folder's, an unknown template parameter, a
            parameter the template never reads, a template parameter on a backend without
            templates, a duplicate or unsafe name, a variant that is not a valid collect
            section, nothing to compare, or more variants than ``tune.max_variants`` without
            ``yes``.
    """
    tune = config.tune
    strategy: SearchStrategy = TUNE_SEARCHES.get(tune.search)
    # The tune's outputs (report.html among them) would land in another kind's folder.
    RunsRoot(config.runs_root).claim(tune.name, "tune", "tune.name")
    base_params = baseline_params(config)
    known = set(base_params)
    backend = config.collect.backend
    templated = _template_section(backend) is not None
    if (tune.params or tune.ranges or tune.baseline_params) and not templated:
        raise ConfigError(
            f"tune.params: backend '{backend}' has no query template to read template "
            "parameters; vary its collect fields in tune.variants instead (mode, options, top_n)"
        )
    template = _template_of(config)
    if templated:
        section = _template_section(backend)
        reads = _referenced(template)
        for name in list(tune.params) + list(tune.ranges):
            if name not in reads:
                raise ConfigError(
                    f"tune.params.{name}: the query template (collect.{section}.query_template) "
                    f"never reads params.{name}, so every value would search alike"
                )
        missing = sorted(reads - known)
        if missing:
            raise ConfigError(
                f"collect.{section}.query_template: reads params.{missing[0]}, which neither "
                "tune.params nor tune.baseline_params sets"
            )
    variants = [
        Variant(
            BASELINE,
            variant_config(config, {}, base_params, "tune (baseline)"),
            {},
            dict(base_params),
        )
    ]
    seen = {BASELINE: "the baseline"}

    files = {variants[0].file_name: BASELINE}

    def add(v: Variant, where: str, *, named: bool = True) -> None:
        # A name the config gives is checked here; a grid point's is made of values checked
        # (naming the value) before the grid is expanded.
        if named and not _NAME.fullmatch(v.name):
            raise ConfigError(
                f"{where}: variant name '{clip(v.name, 80)}' must be letters, digits and "
                ". _ = , + - (it names a file)"
            )
        if v.name in seen:
            raise ConfigError(f"{where}: duplicate variant name '{v.name}' (also {seen[v.name]})")
        if v.file_name in files:
            raise ConfigError(
                f"{where}: variants '{clip(v.name, 80)}' and '{clip(files[v.file_name], 80)}' "
                f"would write one run file ({clip(v.file_name, 120)}); rename one"
            )
        seen[v.name] = where
        files[v.file_name] = v.name
        variants.append(v)

    for name, over in tune.variants.items():
        where = f"tune.variants.{name}"
        if not isinstance(over, Mapping) or not over:
            raise ConfigError(f"{where}: give the collect fields it changes (a mapping)")
        changes = {k: v for k, v in over.items() if k != "params"}
        own = dict(over.get("params") or {})
        stray = sorted(set(own) - known)
        if stray:
            raise ConfigError(
                f"{where}.params.{stray[0]}: unknown template parameter "
                f"(known: {', '.join(sorted(known)) or 'none'})"
            )
        if own and not templated:
            raise ConfigError(f"{where}.params: backend '{backend}' has no query template")
        params = {**base_params, **own}
        vconfig = variant_config(config, changes, params, where)
        if vconfig.collect.backend != backend:
            raise ConfigError(
                f"{where}.backend: a tune compares variants of one backend ({backend})"
            )
        reads = _referenced(_template_of(vconfig))
        missing = sorted(reads - set(params))
        if missing:
            raise ConfigError(
                f"{where}: its query template reads params.{missing[0]}, which no parameter sets"
            )
        add(Variant(name, vconfig, changes, params), where)

    if tune.params:
        for name, swept_values in tune.params.items():
            for value in swept_values:
                if not _GRID_VALUE.fullmatch(str(value)):
                    raise ConfigError(
                        f"tune.params.{name}: value '{clip(str(value), 80)}' cannot be part of a "
                        "variant's name (1 to 100 characters, no spaces or control characters)"
                    )
        # Counted before it is built: a grid of 10^5 points would take minutes and gigabytes
        # to expand only to be refused.
        points_count = _points(base_params, tune.params, strategy.grid)
        _check_count(config, len(variants) - 1 + points_count, yes, strategy)
        points = expand(base_params, tune.params, grid=strategy.grid)
        swept = list(tune.params)
        for values, dims in points[1:]:  # the first is the baseline itself
            add(
                Variant(
                    _name(values, swept),
                    variant_config(config, {}, values, "tune.params"),
                    {},
                    dict(values),
                    dims,
                ),
                "tune.params",
                named=False,
            )
        # The baseline is on every sweep's chart.
        variants[0] = Variant(BASELINE, variants[0].config, {}, variants[0].params, tuple(swept))
    if len(variants) < 2 and not strategy.draws:
        raise ConfigError(
            "tune: nothing to compare with the baseline; give tune.variants or tune.params"
        )
    if strategy.draws and not (tune.ranges or tune.params or tune.collect_ranges):
        raise ConfigError(
            f"tune.ranges: search '{tune.search}' needs ranges, collect_ranges or params to "
            "draw from"
        )
    _check_collect_ranges(config, strategy)
    _check_count(config, len(variants), yes, strategy)
    return variants


def _points(base: Mapping[str, Any], sweeps: Mapping[str, list[Any]], grid: bool) -> int:
    """The points :func:`expand` makes of ``sweeps`` around ``base``, the baseline included.

    Counted from the distinct values of each parameter, without building any.
    """
    distinct = {
        name: {canonical_hash(v): v for v in values}.values() for name, values in sweeps.items()
    }
    if grid:
        # The baseline is a grid point when each of its values is among its parameter's.
        in_grid = all(
            canonical_hash(base.get(n)) in {canonical_hash(v) for v in d}
            for n, d in distinct.items()
        )
        return math.prod(len(d) for d in distinct.values()) + (0 if in_grid else 1)
    moved = sum(
        1
        for n, d in distinct.items()
        for v in d
        if canonical_hash(v) != canonical_hash(base.get(n))
    )
    return 1 + moved


def _check_count(config: RunConfig, variants: int, yes: bool, strategy: SearchStrategy) -> None:
    """Refuse more than ``tune.max_variants`` variants (with the trials) without ``yes``."""
    tune = config.tune
    total = variants + (tune.trials if strategy.draws else 0)
    if total > tune.max_variants and not yes:
        raise ConfigError(
            f"tune.max_variants: {total:,} variants, more than {tune.max_variants}; each "
            "searches every question and adds to the pool. Pass --yes, or raise "
            "tune.max_variants"
        )


def judge_alone_notice(config: RunConfig) -> str | None:
    """The line saying a tune grades with the judge alone, when the config asks for more.

    A tune's grades go to the judgment store, keyed by one judge: a jury's majority or repeats'
    aggregate is no single judge's grade, so it could neither be reused across tunes and runs
    nor compared with them. The tune therefore grades with ``models.judge`` once per document
    and says so, rather than silently ignore ``models.jury`` or ``models.judge_repeats``.
    """
    models = config.models
    asked = [
        name
        for name, on in (
            (f"models.jury ({len(models.jury)} judges)", bool(models.jury)),
            (f"models.judge_repeats ({models.judge_repeats})", models.judge_repeats > 1),
        )
        if on
    ]
    if not asked:
        return None
    return (
        f"tune grades with the judge alone ({models.judge_model}, once per document) and "
        f"ignores {' and '.join(asked)}: the judgment store keeps single-judge grades"
    )


_FUSION = ("rrf_k", "vector_weight")
"""Collect fields read only by the local backend's hybrid fusion."""


def _check_collect_ranges(config: RunConfig, strategy: SearchStrategy) -> None:
    """Refuse a collect range no trial could use, before any search or judge call."""
    tune, collect = config.tune, config.collect
    numeric = numeric_collect_fields()
    drawing = [n for n in TUNE_SEARCHES.names() if TUNE_SEARCHES.get(n).draws]
    for name, rng in tune.collect_ranges.items():
        where = f"tune.collect_ranges.{name}"
        if not strategy.draws:
            raise ConfigError(
                f"{where}: ranges are drawn by a search that draws ({', '.join(drawing)}), "
                f"not '{tune.search}' (set tune.search)"
            )
        if name not in numeric:
            raise ConfigError(
                f"{where}: not a numeric collect field (numeric: {', '.join(sorted(numeric))})"
            )
        # Fusion weighs a keyword list against a vector list, so only a backend that embeds
        # (its capabilities say so), in hybrid mode, reads these fields.
        fuses = capabilities(collect.backend).embeds and collect.mode == "hybrid"
        if name in _FUSION and not fuses:
            raise ConfigError(
                f"{where}: only a backend that embeds, in hybrid mode, reads {name} "
                f"(collect.backend is '{collect.backend}', collect.mode '{collect.mode}'), "
                "so every value would search alike"
            )
        for bound in (rng.low, rng.high):
            value = int(bound) if numeric[name] is int else bound
            variant_config(config, {name: value}, {}, where)


def collect_section(variant: Variant) -> dict[str, Any]:
    """The winning collect section, ready to paste (``best.yaml``)."""
    data = variant.config.collect.model_dump(mode="json", exclude_defaults=True)
    return {"collect": data}


def check_backend(config: RunConfig) -> None:
    """Refuse a backend that cannot search (``question_set``): there is nothing to tune."""
    if not capabilities(config.collect.backend).searches:
        raise ConfigError(
            f"collect.backend: '{config.collect.backend}' does not search; tune needs a search "
            "backend (local, elasticsearch, opensearch)"
        )


__all__ = [
    "BASELINE",
    "Variant",
    "baseline_params",
    "check_backend",
    "collect_section",
    "plan_variants",
    "variant_config",
]
