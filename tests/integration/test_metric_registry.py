"""One home per metric: a plugin module adds a metric; unknown names and options fail at load."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from support.runs import make_config
from typer.testing import CliRunner

import ragaudit.metrics
from ragaudit.cli import app
from ragaudit.config import RunConfig, default_thresholds, load_config
from ragaudit.directions import about, shown
from ragaudit.errors import ConfigError
from ragaudit.metrics import METRICS, resolve
from ragaudit.registry import METRICS as REGISTRY
from ragaudit.runfolder import RunFolder

PLUGINS = Path(__file__).resolve().parents[1] / "support" / "plugins"

TOY = '''
"""A toy metric in one module: the judge says whether the answer is polite, times a scale."""

from pydantic import BaseModel, Field

from ragaudit.cache import FakeRequest, register_fake_answer
from ragaudit.metrics import Options, Outcome, ask, metric, own_window
from ragaudit.prompts import Prompt


class PoliteInput(BaseModel):
    """The question and the answer."""

    question: str
    response: str


class PoliteVerdict(BaseModel):
    """1 when the answer is polite, else 0."""

    verdict: int = Field(ge=0, le=1)


POLITE = Prompt(
    name="toy.polite",
    version="1",
    input_model=PoliteInput,
    output_model=PoliteVerdict,
    instruction={
        "en": "Is the answer polite? 1 yes, 0 no.",
        "zh": "回答是否礼貌？是为 1，否为 0。",
    },
)


@register_fake_answer("PoliteVerdict")
def _fake(req: FakeRequest) -> dict:
    return {"verdict": 1}


class PoliteOptions(Options):
    """Options of the toy metric."""

    scale: float = Field(default=1.0, gt=0)
    """What a polite answer scores."""


def _input(s):
    return PoliteInput(question=s.question, response=s.response or "")


def _cost(s, deps, opts, sheet):
    system, user, *_ = own_window(POLITE, _input(s), s.language, "joined").messages
    sheet.tally("verdict", "completion", 1, sheet.chat_tokens(system, user), 3, "verdict_tokens")


@metric(
    "toy_politeness",
    inputs=("question", "response"),
    llm=True,
    options=PoliteOptions,
    cost=_cost,
)
async def toy_politeness(s, deps, opts):
    """Whether the judge finds the answer polite, times a scale."""
    out = await ask(deps, POLITE, _input(s), s.language)
    return Outcome(opts.scale * out.verdict, args={"scale": opts.scale})
'''


@pytest.fixture
def toy_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A module on sys.path that registers ``toy_politeness``; unregistered afterwards."""
    name = "ragaudit_toy_metric_plugin"
    plugins = tmp_path / "plugins"
    plugins.mkdir()
    (plugins / f"{name}.py").write_text(textwrap.dedent(TOY), encoding="utf-8")
    monkeypatch.syspath_prepend(str(plugins))
    yield name
    METRICS.pop("toy_politeness", None)
    sys.modules.pop(name, None)


def _write(config: RunConfig, path: Path) -> Path:
    path.write_text(config.model_dump_json(), encoding="utf-8")
    return path


def _toy_config(tmp_path: Path, plugin: str) -> tuple[RunConfig, Path]:
    config = make_config(
        tmp_path,
        score__metrics=["rouge_l", {"toy_politeness": {"scale": 0.5}}],
        score__plugins=[plugin],
    )
    return config, _write(config, tmp_path / "config.json")


def test_a_metric_in_one_plugin_module_is_in_the_dry_run(tmp_path, fake, toy_module) -> None:
    config, path = _toy_config(tmp_path, toy_module)
    assert config.score.metric_options == {"toy_politeness": {"scale": 0.5}}
    dry = CliRunner().invoke(app, ["run", "--config", str(path), "--dry-run"])
    assert dry.exit_code == 0, dry.output
    assert "toy_politeness" in dry.output.replace("\n", "")
    assert fake.stats.calls == 0  # the dry run called nothing


def test_a_metric_in_one_plugin_module_runs_and_is_reported(tmp_path, toy_module) -> None:
    config, path = _toy_config(tmp_path, toy_module)
    # A fresh process: the plugin is imported because the config names it, nothing else.
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path / "plugins"), *sys.path])}
    result = subprocess.run(
        [sys.executable, "-m", "ragaudit", "run", "--config", str(path), "--run-id", "toy"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    run = RunFolder(config.runs_root, "toy")
    summary = pl.from_arrow(run.read("summary"))
    toy = summary.filter(pl.col("metric") == "toy_politeness").to_dicts()
    assert len(toy) == 1 and toy[0]["n_ok"] == 5 and toy[0]["mean"] == pytest.approx(0.5)
    scores = pl.from_arrow(run.read("scores")).filter(pl.col("metric") == "toy_politeness")
    assert {json.loads(a)["scale"] for a in scores["metric_args"]} == {0.5}
    assert "toy_politeness" in (run.path / "report.html").read_text(encoding="utf-8")
    manifest = json.loads(run.manifest_path.read_text(encoding="utf-8"))
    assert manifest["config"]["score"]["metric_options"]["toy_politeness"] == {"scale": 0.5}


def test_a_misspelt_metric_fails_at_load_naming_the_known_ones(tmp_path, fake) -> None:
    with pytest.raises(ConfigError) as caught:
        make_config(tmp_path, score__metrics=["faithfullness", "rouge_l"])
    message = str(caught.value)
    assert "unknown metric 'faithfullness'" in message
    assert all(name in message for name in ("faithfulness", "answer_relevancy", "rouge_l"))
    assert fake.stats.calls == 0


def test_the_cli_rejects_a_misspelt_metric_before_any_stage(tmp_path, fake) -> None:
    base = json.loads(make_config(tmp_path).model_dump_json())
    base["score"]["metrics"] = ["faithfullness"]
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(base), encoding="utf-8")
    for extra in ([], ["--dry-run"]):
        result = CliRunner().invoke(app, ["run", "--config", str(path), "--run-id", "x", *extra])
        assert result.exit_code != 0
        assert "unknown metric 'faithfullness'" in result.output
        assert "Traceback" not in result.output
    assert fake.stats.calls == 0
    assert not (tmp_path / "runs" / "x").exists()


@pytest.mark.parametrize(
    ("entry", "expected"),
    [
        ({"answer_relevancy": {"strictnes": 2}}, "metric 'answer_relevancy': strictnes"),
        ({"answer_relevancy": {"strictness": 0}}, "metric 'answer_relevancy': strictness"),
        ({"faithfulness": {"strictness": 2}}, "metric 'faithfulness': strictness"),
        ({"aspect_coherence": {"weights": [1, 0]}}, "metric 'aspect_coherence': weights"),
    ],
)
def test_an_unknown_or_invalid_option_fails_at_load(tmp_path, entry, expected) -> None:
    with pytest.raises(ConfigError) as caught:
        make_config(tmp_path, score__metrics=["rouge_l", entry])
    assert expected in str(caught.value)


def test_options_for_an_unlisted_metric_fail_at_load(tmp_path) -> None:
    with pytest.raises(ConfigError, match="options given for answer_correctness"):
        make_config(
            tmp_path,
            score__metrics=["rouge_l"],
            score__metric_options={"answer_correctness": {"beta": 2.0}},
        )


def test_old_flat_option_keys_set_the_options_of_the_listed_metrics(tmp_path) -> None:
    config = make_config(
        tmp_path,
        score__metrics=["answer_relevancy", "aspect_coherence", "factual_correctness_recall"],
        score__answer_relevancy_strictness=5,
        score__aspect_strictness=3,
        score__factual_correctness_beta=2.0,
    )
    assert config.score.metric_options == {
        "answer_relevancy": {"strictness": 5},
        "aspect_coherence": {"strictness": 3},
        "factual_correctness_recall": {"beta": 2.0, "atomicity": "low", "coverage": "low"},
    }
    built = resolve("answer_relevancy", config.score.model_dump())
    assert built.options is not None and built.settings() == {"strictness": 5}


def test_a_metric_entry_overrides_an_old_flat_key(tmp_path) -> None:
    config = make_config(
        tmp_path,
        score__metrics=[{"answer_relevancy": {"strictness": 4}}],
        score__answer_relevancy_strictness=7,
    )
    assert config.score.metric_options == {"answer_relevancy": {"strictness": 4}}


def test_the_loaded_config_round_trips(tmp_path) -> None:
    config = make_config(tmp_path, score__metrics=["faithfulness", {"aspect_coherence": {}}])
    again = load_config(None, json.loads(config.model_dump_json()), environ={})
    assert again.score == config.score
    assert again.score.metric_options == {"aspect_coherence": {"strictness": 1}}


def test_a_user_aspect_takes_options_and_an_undefined_one_is_unknown(tmp_path) -> None:
    config = make_config(
        tmp_path,
        score__aspects={"rudeness": "Is the answer rude?"},
        score__metrics=[{"aspect_rudeness": {"strictness": 3}}],
    )
    assert config.score.metric_options == {"aspect_rudeness": {"strictness": 3}}
    with pytest.raises(ConfigError, match="unknown metric 'aspect_politeness'"):
        make_config(tmp_path, score__metrics=["aspect_politeness"])


def test_every_registered_metric_has_documented_frozen_options() -> None:
    for m in METRICS.values():
        model = m.options_model
        assert model.model_config.get("frozen") and model.model_config.get("extra") == "forbid"
        for name, info in model.model_fields.items():
            assert info.description or _field_doc(model, name), f"{m.name}.{name} undocumented"


def _field_doc(model: Any, name: str) -> str | None:
    # Field docstrings (the attribute docstrings under each field) are read from the source.
    import inspect

    source = inspect.getsource(model)
    lines = source.splitlines()
    for i, line in enumerate(lines):
        if line.strip().startswith(f"{name}:") and i + 1 < len(lines):
            return lines[i + 1].strip() if lines[i + 1].strip().startswith('"""') else None
    return None


def test_the_metrics_package_installs_the_registry_check() -> None:
    from ragaudit.registry import METRICS as REGISTRY

    assert REGISTRY.section_check is ragaudit.metrics.check_score
    assert REGISTRY.units is METRICS


@pytest.fixture
def words_plugin(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """The test plugin ``answer_words`` importable; its metric unregistered afterwards."""
    monkeypatch.syspath_prepend(str(PLUGINS))
    yield "answer_words"
    for table in (REGISTRY.units, REGISTRY.options, REGISTRY.modules, REGISTRY.info):
        table.pop("answer_words", None)
    sys.modules.pop("answer_words", None)


def test_a_plugin_metric_declares_what_its_values_mean_as_a_built_in_does(
    tmp_path, words_plugin
) -> None:
    builtin = default_thresholds()
    config = make_config(
        tmp_path, score__metrics=["rouge_l", words_plugin], score__plugins=[words_plugin]
    )
    # Its declared threshold joins the default thresholds of a config naming the plugin ...
    assert config.report.thresholds == {**builtin, "answer_words": 25.0}
    # ... and of no other, whatever this process has loaded.
    assert make_config(tmp_path).report.thresholds == builtin
    # A config's own thresholds replace the defaults, the plugin's too.
    given = make_config(
        tmp_path,
        score__metrics=[words_plugin],
        score__plugins=[words_plugin],
        report__thresholds={"answer_words": 40.0},
    )
    assert given.report.thresholds == {"answer_words": 40.0}
    info = about("answer_words")
    assert not info.higher_is_better and info.range == (0.0, math.inf) and info.order == 1000
    assert shown("answer_words") == "answer length (words) (lower is better)"
    assert list(METRICS)[-1] == "answer_words"  # order 1000: after every built-in


def test_a_plugin_metrics_declaration_reaches_the_run_and_its_report(
    tmp_path, words_plugin
) -> None:
    config = make_config(tmp_path, score__metrics=[words_plugin], score__plugins=[words_plugin])
    path = _write(config, tmp_path / "config.json")
    # A fresh process: the plugin is imported because the config names it, nothing else.
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(PLUGINS), *sys.path])}
    result = subprocess.run(
        [sys.executable, "-m", "ragaudit", "run", "--config", str(path), "--run-id", "words"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    run = RunFolder(config.runs_root, "words")
    (row,) = (
        pl.from_arrow(run.read("summary")).filter(pl.col("metric") == "answer_words").to_dicts()
    )
    # Three Chinese answers are one "word" each, two English ones 80 and 58: a mean of 28.2
    # words, above the declared 25, flagged because shorter is better.
    assert row["mean"] == pytest.approx(28.2) and row["threshold"] == 25.0 and row["flagged"]
    assert "ABOVE THRESHOLD" in result.stdout
    page = (run.path / "report.html").read_text(encoding="utf-8")
    assert "answer length (words)" in page  # the charts name it by its label
