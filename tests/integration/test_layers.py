"""The import layers (cli → flows → tasks → library → gateway → base), checked on the real graph.

The contracts live in pyproject.toml (``[tool.importlinter]``); ``make layers`` runs them. Here
they run on this tree, and on a scratch copy with one forbidden import added, to show that
they fail when the graph breaks them.
"""

from __future__ import annotations

import graphlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import grimp
import pytest

ROOT = Path(__file__).resolve().parents[2]
LINT = (
    "import sys; from importlinter.cli import lint_imports_command; "
    "sys.exit(lint_imports_command())"
)


def lint_imports(cwd: Path) -> subprocess.CompletedProcess[str]:
    """Run the contracts of ``cwd``'s pyproject.toml on the ``ragaudit`` found in ``cwd``."""
    # The scratch copy comes first on the path: the editable install's finder only answers
    # for names the path does not hold.
    return subprocess.run(
        [sys.executable, "-c", LINT, "--no-cache", "--no-logo"],
        cwd=cwd,
        env={**os.environ, "PYTHONPATH": str(cwd)},
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_the_tree_keeps_its_layers() -> None:
    done = lint_imports(ROOT)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "cli → flows → tasks → library → gateway → base KEPT" in done.stdout
    assert "no stage imports another KEPT" in done.stdout


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the package (its symlinked cache/, flows/, tasks/ copied as folders)."""
    root = tmp_path_factory.mktemp("layers")
    shutil.copytree(
        ROOT / "ragaudit",
        root / "ragaudit",
        ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "records", "templates"),
    )
    shutil.copy(ROOT / "pyproject.toml", root / "pyproject.toml")
    return root


def _append(path: Path, code: str) -> str:
    before = path.read_text(encoding="utf-8")
    path.write_text(before + code, encoding="utf-8")
    return before


def _lint_with_lazy_import(
    scratch: Path, module: Path, imported: str, name: str
) -> subprocess.CompletedProcess[str]:
    """The contracts on ``scratch`` with ``from imported import name`` inside a function of
    ``module`` (where it runs only when called: still an edge of the graph)."""
    code = f"\n\ndef _lazy():\n    from {imported} import {name}\n\n    return {name}\n"
    before = _append(module, code)
    try:
        return lint_imports(scratch)
    finally:
        module.write_text(before, encoding="utf-8")


def test_a_lazy_upward_import_breaks_the_contract(scratch: Path) -> None:
    keys = scratch / "ragaudit" / "cache" / "_keys.py"
    done = _lint_with_lazy_import(scratch, keys, "ragaudit.tasks", "StageContext")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "ragaudit.cache is not allowed to import ragaudit.tasks" in done.stdout
    assert "ragaudit.cache._keys -> ragaudit.tasks" in done.stdout


def test_a_module_outside_every_layer_breaks_the_contract(scratch: Path) -> None:
    stray = scratch / "ragaudit" / "stray.py"
    stray.write_text('"""A new module nobody placed in a layer."""\n', encoding="utf-8")
    try:
        done = lint_imports(scratch)
    finally:
        stray.unlink()
    assert done.returncode == 1, done.stdout + done.stderr
    assert "ragaudit.stray" in done.stdout


def _private_imports_across_packages() -> set[tuple[str, str]]:
    """(importer, imported) where imported is a private module of a package importer is outside."""
    graph = grimp.build_graph("ragaudit", cache_dir=None)
    found = set()
    for importer in graph.modules:
        for imported in graph.find_modules_directly_imported_by(importer):
            parts = imported.split(".")
            private = next((i for i, p in enumerate(parts) if i and p.startswith("_")), None)
            if private is None:
                continue
            package = ".".join(parts[:private])
            if importer != package and not importer.startswith(package + "."):
                found.add((importer, imported))
    return found


def test_no_package_reaches_into_another_packages_private_modules() -> None:
    # No allow-list: a package's public names are what its __init__ re-exports.
    assert _private_imports_across_packages() == set()


def test_no_import_circle_among_the_packages_of_ragaudit() -> None:
    # Each of ragaudit's modules and packages taken whole, on the graph of imports that run: a
    # type-only import (under TYPE_CHECKING) never executes, so it cannot close a circle.
    graph = grimp.build_graph("ragaudit", cache_dir=None, exclude_type_checking_imports=True)
    parts = sorted(graph.find_children("ragaudit"))
    imports = {
        a: [
            b
            for b in parts
            if b != a and graph.direct_import_exists(importer=a, imported=b, as_packages=True)
        ]
        for a in parts
    }
    try:
        order = tuple(graphlib.TopologicalSorter(imports).static_order())
    except graphlib.CycleError as exc:
        pytest.fail(f"an import circle: {' → '.join(exc.args[1])}")
    assert "ragaudit.stats" in order and "ragaudit.reporting" in order


def test_the_circle_through_reporting_cannot_come_back(scratch: Path) -> None:
    # The circle this contract broke: reporting → ppi → calibration → reporting.
    ppi = scratch / "ragaudit" / "ppi.py"
    done = _lint_with_lazy_import(scratch, ppi, "ragaudit.calibration", "calibrate")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "ragaudit.ppi is not allowed to import ragaudit.calibration" in done.stdout


def test_the_statistics_import_nothing_above_base(scratch: Path) -> None:
    module = scratch / "ragaudit" / "stats" / "_resample.py"
    done = _lint_with_lazy_import(scratch, module, "ragaudit.reporting", "summarise")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "ragaudit.stats is not allowed to import ragaudit.reporting" in done.stdout


def _base_modules() -> list[str]:
    """The base layer's modules as the layers contract lists them (its last layer)."""
    import tomllib

    contract = next(
        c
        for c in tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"][
            "importlinter"
        ]["contracts"]
        if c.get("type") == "layers"
    )
    return [m.strip() for m in contract["layers"][-1].split(":")]


def test_no_base_module_imports_the_library_not_even_lazily() -> None:
    """``importlib``/``__import__`` in a base module hides an edge from import-linter and grimp.

    ``config.py`` once validated its ``audit:`` section by importing ``ragaudit.audit`` at
    validation: an 89-module circle nobody's checker saw. The registry alone loads modules by
    name — plugins and the built-ins registered like them (ADR 19) — and that is its job.
    """
    import re

    lazy = re.compile(r"\bimport_module\b|__import__|\bimportlib\b(?!\.metadata|\.util)")
    found = {}
    for module in _base_modules():
        if module == "registry":
            continue
        path = ROOT / "ragaudit" / f"{module}.py"
        if not path.is_file():
            path = ROOT / "ragaudit" / module / "__init__.py"
        hits = [
            n
            for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
            if lazy.search(line) and not line.lstrip().startswith("#")
        ]
        if hits:
            found[module] = hits
    assert found == {}
    assert "_audit_config" in _base_modules() and "config" in _base_modules()


def test_a_config_with_an_audit_section_loads_no_library_heavyweight(tmp_path: Path) -> None:
    probe = (
        "import sys\n"
        "from ragaudit.config import load_config\n"
        f"load_config({str(ROOT / 'data' / 'audit' / 'audit.yaml')!r})\n"
        "print(sorted(m for m in ('litellm', 'polars', 'ragaudit.cache', 'ragaudit.audit._day')"
        " if m in sys.modules))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == "[]"
