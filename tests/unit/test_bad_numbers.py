"""Bad numbers are refused before anything runs: ``.inf``/``.nan`` in any float field, an
integer range with fractional bounds, a grid too large (counted, never built), grid values that
cannot name a variant (naming the value), and a string path to ``load_config``."""

from __future__ import annotations

import math
import tracemalloc
import types
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from ragaudit.ablation import expand
from ragaudit.config import RunConfig, load_config
from ragaudit.errors import ConfigError
from ragaudit.tuning import plan_variants

TEMPLATE = {"query": {"match": {"text": {"query": "{{ question }}", "boost": "{{ params.b }}"}}}}


def _float_fields(
    model: type[BaseModel], prefix: tuple[str, ...] = ()
) -> Iterator[tuple[str, ...]]:
    """Dotted paths of every float field of ``model`` and its sections (a mapping: key ``x``)."""
    for name, info in model.model_fields.items():
        path = (*prefix, name)
        kinds = [info.annotation]
        if typing.get_origin(info.annotation) in (typing.Union, types.UnionType):
            kinds = [a for a in typing.get_args(info.annotation) if a is not type(None)]
        for kind in kinds:
            if kind is float:
                yield path
            elif isinstance(kind, type) and issubclass(kind, BaseModel):
                yield from _float_fields(kind, path)
            elif typing.get_origin(kind) is dict:
                value = typing.get_args(kind)[1]
                if value is float:
                    yield (*path, "x")
                elif isinstance(value, type) and issubclass(value, BaseModel):
                    yield from _float_fields(value, (*path, "x"))


FLOAT_FIELDS = sorted(set(_float_fields(RunConfig)))


def _nested(path: tuple[str, ...], value: Any) -> dict[str, Any]:
    out: dict[str, Any] = {path[-1]: value}
    for part in reversed(path[:-1]):
        out = {part: out}
    return out


def test_the_float_fields_are_found() -> None:
    dotted = {".".join(p) for p in FLOAT_FIELDS}
    assert {"models.timeout_s", "tune.ranges.x.high", "report.alpha"} <= dotted
    assert len(dotted) > 15


@pytest.mark.parametrize("bad", [math.inf, -math.inf, math.nan], ids=["inf", "-inf", "nan"])
@pytest.mark.parametrize("path", FLOAT_FIELDS, ids=[".".join(p) for p in FLOAT_FIELDS])
def test_a_non_finite_float_is_refused_at_load_naming_its_field(
    path: tuple[str, ...], bad: float
) -> None:
    with pytest.raises(ConfigError) as info:
        load_config(None, _nested(path, bad), environ={})
    assert f"{'.'.join(path)}: Input should be a finite number" in str(info.value)


def test_inf_from_the_environment_and_a_yaml_file_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"models\.timeout_s: Input should be a finite"):
        load_config(None, environ={"RAGAUDIT_MODELS__TIMEOUT_S": "inf"})
    path = tmp_path / "c.yaml"
    path.write_text("tune:\n  ranges:\n    b: {low: 1, high: .inf}\n", encoding="utf-8")
    # A str path is a path (it raised AttributeError).
    with pytest.raises(ConfigError, match=r"tune\.ranges\.b\.high: Input should be a finite"):
        load_config(str(path))


def test_load_config_takes_a_str_path(tmp_path: Path) -> None:
    path = tmp_path / "x.yaml"
    path.write_text("limit: 3\n", encoding="utf-8")
    assert load_config(str(path), environ={}).limit == 3


def test_an_integer_range_with_fractional_bounds_is_refused_at_load() -> None:
    rng = {"low": 0.5, "high": 8, "log": True, "integer": True}
    with pytest.raises(ConfigError, match=r"tune\.ranges\.b: .*whole-number bounds \(low 0\.5"):
        load_config(None, {"tune": {"ranges": {"b": rng}}}, environ={})


def _tune(tmp_path: Path, tune: dict[str, Any]) -> RunConfig:
    collect = {"backend": "opensearch", "opensearch": {"query_template": TEMPLATE}}
    return load_config(
        None,
        {"runs_root": str(tmp_path / "runs"), "collect": collect, "tune": tune},
        environ={},
    )


@pytest.mark.parametrize("points", [10**4, 10**5])
def test_a_huge_grid_is_counted_and_refused_before_it_is_built(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, points: int
) -> None:
    template = {"query": {"match": {"text": {"query": "{{ question }}"}}}}
    params = {f"p{k}": list(range(10)) for k in range(round(math.log10(points)))}
    for name in params:  # the template reads every parameter
        template["query"]["match"]["text"][name] = "{{ params." + name + " }}"
    collect = {"backend": "opensearch", "opensearch": {"query_template": template}}
    config = load_config(
        None,
        {"runs_root": str(tmp_path), "collect": collect, "tune": {"params": params}},
        environ={},
    )

    def never(*args: Any, **kw: Any) -> Any:
        raise AssertionError("the grid was expanded before it was counted")

    monkeypatch.setattr("ragaudit.tuning._plan.expand", never)
    tracemalloc.start()
    try:
        with pytest.raises(ConfigError) as info:
            plan_variants(config)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert str(info.value).startswith(f"tune.max_variants: {points:,} variants, more than 50")
    assert peak < 5_000_000  # a built grid of 10^4 points took hundreds of megabytes


@pytest.mark.parametrize("grid", [True, False], ids=["grid", "one_at_a_time"])
@pytest.mark.parametrize(
    ("base", "sweeps"),
    [
        ({"a": 1, "b": "x"}, {"a": [1, 2, 3], "b": ["x", "y"]}),
        ({"a": 9, "b": "x"}, {"a": [1, 2, 3], "b": ["x", "y"]}),
        ({"a": 1, "b": "z"}, {"a": [1, 1, 2], "b": ["x", "y", "x"]}),
        ({"a": 1.0, "b": "x", "c": 0}, {"a": [1, 2], "b": ["x"], "c": [0, 1]}),
    ],
)
def test_the_count_is_what_the_expansion_makes(
    base: dict[str, Any], sweeps: dict[str, list[Any]], grid: bool
) -> None:
    from ragaudit.tuning._plan import _points

    assert _points(base, sweeps, grid) == len(expand(base, sweeps, grid=grid))


def test_grid_values_name_their_variants_or_are_refused_naming_the_value(tmp_path: Path) -> None:
    fine = plan_variants(_tune(tmp_path, {"params": {"b": ["75%", "title^2", 8]}}))
    assert [v.name for v in fine] == ["baseline", "b=title^2", "b=8"]
    assert {v.file_name for v in fine} == {"run.baseline.txt", "run.b=title_2.txt", "run.b=8.txt"}
    with pytest.raises(ConfigError) as info:
        plan_variants(_tune(tmp_path, {"params": {"b": [1, "two words"]}}))
    assert str(info.value).startswith("tune.params.b: value 'two words' cannot be part of")
    assert "variant name" not in str(info.value)
    # Two values one file name would hold: refused naming both variants.
    with pytest.raises(ConfigError, match=r"variants 'b=a_b' and 'b=a\^b' would write one run"):
        plan_variants(_tune(tmp_path, {"params": {"b": [1, "a^b", "a_b"]}}))
