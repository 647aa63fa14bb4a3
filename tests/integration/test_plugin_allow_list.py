"""Plugins load only when allow-listed, an installed package's units are namespaced, and a
name another module holds is refused naming both modules.

Installed packages are real distributions: a ``.dist-info`` folder (METADATA and
entry_points.txt) on the path of a fresh interpreter, which ``importlib.metadata`` finds as pip
would have left it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import polars as pl
from support.runs import make_config

from ragaudit.runfolder import RunFolder

_CLASHING_METRIC = '''
from ragaudit.metrics import metric
from ragaudit.metrics._base import Outcome


@metric("faithfulness", inputs=("response",))
async def faithfulness(s, deps):
    """The answer's length, under a built-in metric's name."""
    return Outcome(float(len(s.response or "")), {}, {})
'''

_BROKEN = """
raise RuntimeError("this plugin is broken")
"""


def _install(site: Path, package: str, module: str, source: str) -> None:
    """A distribution ``package`` whose one module registers metrics, installed in ``site``."""
    info = site / f"{package.replace('-', '_')}-0.1.dist-info"
    info.mkdir(parents=True, exist_ok=True)
    (info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: {package}\nVersion: 0.1\n", encoding="utf-8"
    )
    (info / "entry_points.txt").write_text(
        f"[ragaudit.metrics]\n{module} = {module}\n", encoding="utf-8"
    )
    (site / f"{module}.py").write_text(source, encoding="utf-8")


def _site(tmp_path: Path) -> Path:
    site = tmp_path / "site"
    _install(site, "ragaudit-extra", "extra_metrics", _CLASHING_METRIC)
    _install(site, "ragaudit-broken", "broken_plugin", _BROKEN)
    # The same scorer as a plain module, named by module in ``plugins``.
    (site / "clash_plugin.py").write_text(_CLASHING_METRIC, encoding="utf-8")
    return site


def _fresh(tmp_path: Path, site: Path, args: list[str]) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), *sys.path])}
    env.pop("RAGAUDIT_PLUGINS", None)
    return subprocess.run(
        [sys.executable, *args], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900
    )


_LOAD = """
import json, sys
from ragaudit.config import load_config
from ragaudit.errors import ConfigError
from ragaudit.registry import METRICS
try:
    config = load_config(None, json.loads(sys.argv[1]), environ=json.loads(sys.argv[2]))
except ConfigError as exc:
    print("OUT=" + json.dumps({"error": str(exc)}))
else:
    print("OUT=" + json.dumps({
        "error": None,
        "metrics": list(config.score.metrics),
        "imported": sorted(m for m in ("extra_metrics", "broken_plugin", "clash_plugin")
                           if m in sys.modules),
        "modules": {n: METRICS.modules[n] for n in config.score.metrics},
    }))
"""


def _load(
    tmp_path: Path, data: dict[str, object], environ: dict[str, str] | None = None
) -> dict[str, object]:
    done = _fresh(
        tmp_path, _site(tmp_path), ["-c", _LOAD, json.dumps(data), json.dumps(environ or {})]
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Traceback" not in done.stdout + done.stderr
    (line,) = [x for x in done.stdout.splitlines() if x.startswith("OUT=")]
    out: dict[str, object] = json.loads(line.removeprefix("OUT="))
    return out


def test_a_plugin_that_registers_faithfulness_is_refused_naming_both_modules(tmp_path) -> None:
    out = _load(tmp_path, {"plugins": ["clash_plugin"], "score": {"metrics": ["faithfulness"]}})
    error = str(out["error"])
    assert error.startswith("config: plugins: ")
    assert "metric 'faithfulness' of module 'clash_plugin' clashes with the one of module " in error
    assert "'ragaudit.metrics._faithfulness'" in error


def test_an_installed_package_loads_only_when_allow_listed_and_is_namespaced(tmp_path) -> None:
    metrics = {"score": {"metrics": ["faithfulness", "ragaudit-extra/faithfulness"]}}
    # Not allow-listed: neither installed plugin is imported, and its unit is unknown.
    out = _load(tmp_path, metrics)
    assert "unknown metric 'ragaudit-extra/faithfulness'" in str(out["error"])
    out = _load(tmp_path, {"score": {"metrics": ["faithfulness"]}})
    assert out["error"] is None and out["imported"] == []
    # Allow-listed, in the config or the environment (pip's spelling of the name or another):
    # its faithfulness is its own, beside the built-in one, which it did not replace.
    for data, environ in (
        ({**metrics, "plugins": ["ragaudit-extra"]}, {}),
        (metrics, {"RAGAUDIT_PLUGINS": "Ragaudit_Extra"}),
    ):
        out = _load(tmp_path, data, environ)
        assert out["error"] is None, out["error"]
        assert out["imported"] == ["extra_metrics"]
        assert out["modules"] == {
            "faithfulness": "ragaudit.metrics._faithfulness",
            "ragaudit-extra/faithfulness": "extra_metrics",
        }


def test_a_broken_plugin_fails_the_load_only_when_allow_listed(tmp_path) -> None:
    out = _load(tmp_path, {"plugins": ["ragaudit-broken"]})
    assert out["error"] == (
        "config: plugins: plugin package 'ragaudit-broken': plugin module "
        "'broken_plugin' failed on import: RuntimeError: this plugin is broken"
    )


def test_a_broken_plugin_outside_the_allow_list_does_not_stop_a_run(tmp_path) -> None:
    config = make_config(tmp_path, limit=2, score__metrics=["rouge_l"], sort__enabled=False)
    path = tmp_path / "config.json"
    path.write_text(config.model_dump_json(), encoding="utf-8")
    site = _site(tmp_path)
    done = _fresh(tmp_path, site, ["-m", "ragaudit", "run", "--config", str(path), "--run-id", "b"])
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Traceback" not in done.stdout + done.stderr
    scores = pl.from_arrow(RunFolder(config.runs_root, "b").read("scores"))
    assert scores.height == 2 and set(scores["metric"]) == {"rouge_l"}
    assert scores["value"].is_not_null().all()
