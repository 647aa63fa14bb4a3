"""The sections defined beside their packages: resolved by module name, base-safe, one rule
for a run's id."""

from __future__ import annotations

import tomllib

import grimp
from support.paths import REPO_ROOT

from ragaudit.ablation import AblateConfig
from ragaudit.config import RunConfig, _SectionDefault, load_config
from ragaudit.tuning import TuneConfig


def _sections() -> dict[str, str]:
    return {
        name: info.default_factory.module
        for name, info in RunConfig.model_fields.items()
        if isinstance(info.default_factory, _SectionDefault)
    }


def _base_modules() -> set[str]:
    settings = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    [layers] = [c for c in settings["tool"]["importlinter"]["contracts"] if c["id"] == "layers"]
    return {f"ragaudit.{m.strip()}" for m in layers["layers"][-1].split(":")}


def test_the_sections_resolve_to_the_models_beside_their_packages() -> None:
    assert {"tune", "ablate", "nightly"} <= set(_sections())
    config = RunConfig()
    assert type(config.tune) is TuneConfig and type(config.ablate) is AblateConfig
    assert type(config.nightly).__module__ == _sections()["nightly"]
    loaded = load_config(None, {"tune": {"depth": 3}, "nightly": {"on_regression": "name"}})
    assert loaded.tune.depth == 3 and loaded.nightly.on_regression == "name"
    assert RunConfig.model_validate_json(loaded.model_dump_json()) == loaded


def test_a_section_module_imports_nothing_above_the_base_layer() -> None:
    # What lets the config name them without importing the library (config.section).
    graph = grimp.build_graph("ragaudit", include_external_packages=False)
    base = _base_modules()
    for module in _sections().values():
        imported = graph.find_modules_directly_imported_by(module)
        assert imported <= base, f"{module} imports {sorted(imported - base)}"


def test_a_run_gets_its_id_in_one_place() -> None:
    assert RunConfig().resolved_run_id("given") == "given"
    named = RunConfig(run_id="named")
    assert named.resolved_run_id() == "named" and named.resolved_run_id("given") == "given"
    fresh = RunConfig().resolved_run_id(prefix="calibrate")
    assert fresh.startswith("calibrate-")
