"""A plugin's search backend and answer source, each one module, named in a config and run;
a config naming an unknown unit fails at load naming the known ones, whatever was imported."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import polars as pl
import pytest
from support.runs import make_config

from ragaudit.config import RunConfig
from ragaudit.errors import ConfigError
from ragaudit.registry import ANSWER_SOURCES, SEARCH_BACKENDS
from ragaudit.runfolder import RunFolder

PLUGINS = Path(__file__).resolve().parents[1] / "support" / "plugins"
REPO = Path(__file__).resolve().parents[2]
CORPUS = REPO / "data" / "demo" / "corpus.jsonl"
MODULES = ("keyword_search", "canned_answers")


@pytest.fixture
def plugin_path(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The plugin modules importable; their units unregistered afterwards."""
    monkeypatch.syspath_prepend(str(PLUGINS))
    yield PLUGINS
    for registry, name in ((SEARCH_BACKENDS, "keyword"), (ANSWER_SOURCES, "canned")):
        registry.units.pop(name, None)
        registry.options.pop(name, None)
        registry.modules.pop(name, None)
    for module in MODULES:
        sys.modules.pop(module, None)


def _plugin_config(tmp_path: Path, **overrides: object) -> RunConfig:
    settings: dict[str, object] = {
        "plugins": list(MODULES),
        "limit": 2,
        "collect__backend": "keyword",
        "collect__options": {"corpus": str(CORPUS)},
        "collect__corpus": None,
        "collect__answers__source": "canned",
        "collect__answers__options": {"prefix": "canned: "},
        "score__metrics": ["rouge_l", "nonllm_context_recall"],
    }
    return make_config(tmp_path, **{**settings, **overrides})


def _fresh(tmp_path: Path, args: list[str]) -> subprocess.CompletedProcess[str]:
    """``args`` in a fresh interpreter that can import the plugin modules and nothing more."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(PLUGINS), *sys.path])}
    return subprocess.run(
        [sys.executable, *args], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900
    )


def test_the_plugin_options_are_checked_and_filled_in_at_load(tmp_path, plugin_path) -> None:
    config = _plugin_config(tmp_path)
    assert config.collect.options == {"corpus": str(CORPUS), "min_overlap": 1}
    assert config.collect.answers.options == {"prefix": "canned: "}
    with pytest.raises(ConfigError) as info:
        _plugin_config(tmp_path, collect__options={"corpus": str(CORPUS), "min_overlp": 2})
    message = str(info.value)
    assert message.startswith("config: collect: ") and "search backend 'keyword'" in message
    assert "min_overlp" in message and "its options: corpus, min_overlap" in message


def test_a_plugin_backend_and_answer_source_run_through_ragaudit_run(tmp_path, plugin_path) -> None:
    config = _plugin_config(tmp_path)
    path = tmp_path / "config.json"
    path.write_text(config.model_dump_json(), encoding="utf-8")
    # A fresh process: the plugins are imported because the config names them, nothing else.
    result = _fresh(tmp_path, ["-m", "ragaudit", "run", "--config", str(path), "--run-id", "p"])
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Traceback" not in result.stdout + result.stderr
    run = RunFolder(config.runs_root, "p")

    retrieval = pl.from_arrow(run.read("retrieval"))
    assert retrieval["backend"].to_list() == ["keyword", "keyword"]
    assert set(retrieval["status"]) == {"ok"}
    questions = {
        q["question_id"]: q
        for q in (json.loads(line) for line in (REPO / "data/demo/questions.jsonl").open())
    }
    candidates = pl.from_arrow(run.read("candidates"))
    corpus = {d["id"]: d for d in (json.loads(line) for line in CORPUS.open(encoding="utf-8"))}
    for row in candidates.to_dicts():
        # Every candidate is a corpus document of the question's own collection (the filter).
        doc = corpus[row["context_id"]]
        wanted = questions[row["question_id"]]["filters"]["collection"]
        assert doc["metadata"]["collection"] == wanted
    assert candidates.height > 0

    answers = pl.from_arrow(run.read("answers"))
    assert set(answers["source"]) == {"canned"} and set(answers["status"]) == {"ok"}
    for row in answers.to_dicts():
        reference = questions[row["question_id"]]["reference"]
        assert row["response"] == "canned: " + reference

    scores = pl.from_arrow(run.read("scores"))
    rouge = scores.filter(pl.col("metric") == "rouge_l")
    assert rouge.height == 2 and rouge["value"].is_not_null().all()

    manifest = json.loads(run.manifest_path.read_text(encoding="utf-8"))
    assert manifest["config"]["plugins"] == list(MODULES)
    assert manifest["config"]["collect"]["options"] == {"corpus": str(CORPUS), "min_overlap": 1}
    assert manifest["config"]["collect"]["answers"]["options"] == {"prefix": "canned: "}


_LOAD = """
import importlib, json, sys
for module in json.loads(sys.argv[1]):
    importlib.import_module(module)
from ragaudit.config import load_config
from ragaudit.errors import ConfigError
try:
    load_config(None, json.loads(sys.argv[2]), environ={})
except ConfigError as exc:
    print("ERROR=" + json.dumps(str(exc)))
else:
    print("ERROR=null")
"""


def _load_fresh(tmp_path: Path, imported: list[str], data: dict[str, object]) -> str | None:
    done = _fresh(tmp_path, ["-c", _LOAD, json.dumps(imported), json.dumps(data)])
    assert done.returncode == 0, done.stderr[-3000:]
    (line,) = [x for x in done.stdout.splitlines() if x.startswith("ERROR=")]
    found: str | None = json.loads(line.removeprefix("ERROR="))
    return found


@pytest.mark.parametrize(
    "imported",
    [
        pytest.param([], id="nothing-imported"),
        pytest.param(["ragaudit.metrics", "ragaudit.search", "ragaudit.answers"], id="all"),
        pytest.param(["ragaudit.search._base"], id="search-base-only"),
    ],
)
def test_an_unknown_backend_fails_at_load_naming_the_known_ones(tmp_path, imported) -> None:
    error = _load_fresh(tmp_path, imported, {"collect": {"backend": "elastic"}})
    assert error is not None
    assert error.startswith("config: collect.backend: ")
    assert "unknown search backend 'elastic'" in error
    assert "(known: elasticsearch, local, opensearch, question_set)" in error


def test_a_config_is_valid_whatever_was_imported_first(tmp_path) -> None:
    # Metrics are checked (and their options filled in) with nothing imported before.
    data = {"score": {"metrics": ["rouge_l", {"answer_relevancy": {"strictness": 2}}]}}
    assert _load_fresh(tmp_path, [], data) is None
    error = _load_fresh(tmp_path, [], {"score": {"metrics": ["rouge_lx"]}})
    assert error is not None and "unknown metric 'rouge_lx'" in error


def test_a_plugin_backend_is_known_only_when_its_module_is_named(tmp_path) -> None:
    named = {
        "plugins": ["keyword_search"],
        "collect": {"backend": "keyword", "options": {"corpus": str(CORPUS)}},
    }
    assert _load_fresh(tmp_path, [], named) is None
    error = _load_fresh(tmp_path, [], {"collect": {"backend": "keyword"}})
    assert error is not None and "unknown search backend 'keyword'" in error
