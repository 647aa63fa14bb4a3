"""Sections beside their packages, composed without loading them; one rule for a run's id."""

from __future__ import annotations

import json
import subprocess
import sys

from ragaudit.ablation import AblateConfig
from ragaudit.config import RunConfig, load_config
from ragaudit.registry import HEAD_METHODS, TUNE_METRICS, TUNE_SEARCHES
from ragaudit.tuning import TuneConfig

_LOAD = """
import json, sys
from ragaudit.config import load_config
load_config(None, {"tune": {"depth": 3}, "ablate": {"name": "a"}}, environ={})
print(json.dumps(sorted(m for m in sys.modules if m.startswith("ragaudit."))))
"""


def test_the_sections_are_the_models_their_packages_export() -> None:
    config = load_config(None, {"tune": {"depth": 3}, "nightly": {"on_regression": "name"}})
    assert type(config.tune) is TuneConfig and type(config.ablate) is AblateConfig
    assert config.tune.depth == 3 and config.nightly.on_regression == "name"
    assert RunConfig.model_validate_json(config.model_dump_json()) == config


def test_a_config_loads_without_the_packages_of_its_sections() -> None:
    # What placing the sections beside their packages buys: loading a config never runs the
    # tuning or ablation package (the gateway, litellm, polars), as before they moved.
    done = subprocess.run(
        [sys.executable, "-c", _LOAD], capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr[-2000:]
    loaded = json.loads(done.stdout.splitlines()[-1])
    assert "ragaudit._tune_config" in loaded and "ragaudit._ablate_config" in loaded
    assert not {"ragaudit.tuning", "ragaudit.ablation", "ragaudit.cache"} & set(loaded)


def test_a_run_gets_its_id_in_one_place() -> None:
    assert RunConfig().resolved_run_id("given") == "given"
    named = RunConfig(run_id="named")
    assert named.resolved_run_id() == "named" and named.resolved_run_id("given") == "given"
    assert RunConfig().resolved_run_id(prefix="calibrate").startswith("calibrate-")


def test_declared_builtin_names_are_what_their_modules_register() -> None:
    # A config naming a declared built-in is checked without importing its module; the
    # declaration must not drift from the registrations.
    for registry in (HEAD_METHODS, TUNE_SEARCHES, TUNE_METRICS):
        registry.load()
        builtin = {n for n, m in registry.modules.items() if m.startswith("ragaudit.")}
        assert set(registry.declared) == builtin, registry.kind


def test_a_stored_config_validates_without_the_packages_that_use_it() -> None:
    # A report or the viewer validates every run's stored config: that loads no gateway.
    done = subprocess.run(
        [sys.executable, "-c", _STORED], capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr[-2000:]
    loaded = set(json.loads(done.stdout.splitlines()[-1]))
    assert not {"ragaudit.tuning", "ragaudit.judging", "ragaudit.cache"} & loaded


_STORED = """
import json, sys
from ragaudit.config import RunConfig
RunConfig.model_validate(RunConfig().model_dump(mode="json"))
print(json.dumps(sorted(m for m in sys.modules if m.startswith("ragaudit."))))
"""
