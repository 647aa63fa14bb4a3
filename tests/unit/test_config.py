"""Run configuration: files, environment and flags in that order; every error names its field."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from ragaudit.config import (
    OFFLINE_EMBEDDER,
    OFFLINE_JUDGE,
    RunConfig,
    format_validation_error,
    load_config,
    set_path,
)
from ragaudit.errors import ConfigError

YAML = """\
questions: data/my-questions.jsonl
models:
  judge: openai/gpt-4o-mini
  concurrency: 3
score:
  top_k: 5
  metrics: [faithfulness, rouge_l]
report:
  thresholds:
    faithfulness: 0.95
"""

TOML = """\
questions = "data/my-questions.jsonl"

[models]
judge = "openai/gpt-4o-mini"
concurrency = 3

[score]
top_k = 5
metrics = ["faithfulness", "rouge_l"]

[report.thresholds]
faithfulness = 0.95
"""


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def config_error(*args: object, **kwargs: object) -> str:
    with pytest.raises(ConfigError) as info:
        load_config(*args, **kwargs)  # type: ignore[arg-type]
    return str(info.value)


def test_defaults_without_anything() -> None:
    cfg = load_config(None, None, environ={})
    assert cfg == RunConfig()
    assert cfg.models.judge is None and cfg.models.judge_model == OFFLINE_JUDGE
    assert cfg.models.embedder_model == OFFLINE_EMBEDDER
    assert cfg.models.generator_model == OFFLINE_JUDGE
    assert cfg.score.top_k == 10 and cfg.collect.top_n == 200
    assert cfg.report.thresholds["context_recall"] == 0.7


@pytest.mark.parametrize(
    ("name", "text"), [("run.yaml", YAML), ("run.yml", YAML), ("run.toml", TOML)]
)
def test_yaml_and_toml_files(tmp_path: Path, name: str, text: str) -> None:
    cfg = load_config(write(tmp_path, name, text), environ={})
    assert cfg.questions == Path("data/my-questions.jsonl")
    assert cfg.models.judge == "openai/gpt-4o-mini"
    assert cfg.models.generator_model == "openai/gpt-4o-mini"
    assert cfg.models.concurrency == 3
    assert cfg.score.top_k == 5
    assert cfg.score.metrics == ("faithfulness", "rouge_l")
    # A nested mapping in the file replaces the default mapping as a whole.
    assert cfg.report.thresholds == {"faithfulness": 0.95}
    # Untouched fields keep their defaults.
    assert cfg.models.max_retries == 4 and cfg.sort.strategy == "sample"


def test_json_file(tmp_path: Path) -> None:
    cfg = load_config(write(tmp_path, "run.json", '{"score": {"top_k": 2}}'), environ={})
    assert cfg.score.top_k == 2


def test_env_override_is_nested_and_typed() -> None:
    cfg = load_config(
        None,
        environ={
            "RAGAUDIT_MODELS__JUDGE": "ollama/qwen2.5:7b",
            "RAGAUDIT_SCORE__TOP_K": "7",
            "RAGAUDIT_SORT__BOTH_ORDERS": "false",
            "RAGAUDIT_HOME": "/somewhere",
            "OTHER_SCORE__TOP_K": "99",
        },
    )
    assert cfg.models.judge == "ollama/qwen2.5:7b"
    assert cfg.score.top_k == 7
    assert cfg.sort.both_orders is False


def test_env_vars_that_are_not_config_are_left_alone() -> None:
    """A worker's RAGAUDIT_PROJECT_DIR (the deployments' pull step) and a user's credential."""
    cfg = load_config(
        None,
        environ={
            "RAGAUDIT_PROJECT_DIR": "/srv/ragaudit",
            "RAGAUDIT_HOME": "/somewhere",
            "RAGAUDIT_DEBUG": "1",
            "RAGAUDIT_LOCAL_THREADS": "1",
            "RAGAUDIT_QA_KEY": "sk-secret-value",
            "RAGAUDIT_LIMIT": "3",
        },
    )
    assert cfg.limit == 3
    assert cfg == load_config(None, {"limit": 3}, environ={})


def test_env_var_under_an_unknown_section_fails_naming_it_not_its_value() -> None:
    message = config_error(None, environ={"RAGAUDIT_MODLES__JUDGE": "sk-secret-value"})
    assert "RAGAUDIT_MODLES__JUDGE" in message and "'modles' is not a config section" in message
    assert "models" in message  # the sections it could have meant
    assert "sk-secret-value" not in message


def test_environ_defaults_to_the_process_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAGAUDIT_MODELS__JUDGE", "openai/from-env")
    assert load_config(None).models.judge == "openai/from-env"
    assert load_config(None, environ={}).models.judge is None


def test_precedence_flags_over_env_over_file(tmp_path: Path) -> None:
    path = write(tmp_path, "run.yaml", YAML)
    env = {"RAGAUDIT_MODELS__JUDGE": "openai/from-env"}
    flags = {"models": {"judge": "openai/from-flag"}}
    assert load_config(path, environ={}).models.judge == "openai/gpt-4o-mini"
    from_env = load_config(path, environ=env)
    assert from_env.models.judge == "openai/from-env"
    # Merging is per field: the file's other models settings survive the env override.
    assert from_env.models.concurrency == 3
    from_flag = load_config(path, flags, environ=env)
    assert from_flag.models.judge == "openai/from-flag"
    assert from_flag.models.concurrency == 3 and from_flag.score.top_k == 5


def test_set_path_builds_nested_overrides() -> None:
    tree: dict[str, object] = {}
    set_path(tree, "models.judge", "a")
    set_path(tree, "models.concurrency", 2)
    set_path(tree, "limit", 3)
    assert tree == {"models": {"judge": "a", "concurrency": 2}, "limit": 3}
    cfg = load_config(None, tree, environ={})
    assert (cfg.models.judge, cfg.models.concurrency, cfg.limit) == ("a", 2, 3)


def test_unknown_field_names_the_dotted_path(tmp_path: Path) -> None:
    path = write(tmp_path, "run.yaml", "models:\n  judgee: openai/gpt-4o-mini\n")
    message = config_error(path, environ={})
    assert "models.judgee" in message and str(path) in message
    assert "Extra inputs are not permitted" in message


def test_unknown_field_from_env_and_flags() -> None:
    assert "score.topk" in config_error(None, environ={"RAGAUDIT_SCORE__TOPK": "3"})
    assert "sort.strategyy" in config_error(None, {"sort": {"strategyy": "merge"}}, environ={})
    assert "nonsense" in config_error(None, {"nonsense": 1}, environ={})


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"score": {"top_k": "many"}}, "score.top_k"),
        ({"score": {"top_k": 0}}, "score.top_k"),
        ({"models": {"concurrency": 10_000}}, "models.concurrency"),
        ({"models": {"temperature": "hot"}}, "models.temperature"),
        ({"sort": {"strategy": "bubble"}}, "sort.strategy"),
        ({"collect": {"answers": {"source": "http"}}}, "collect.answers.source"),
        ({"models": "gpt"}, "models"),
    ],
)
def test_wrong_value_names_the_field(overrides: dict[str, object], field: str) -> None:
    message = config_error(None, overrides, environ={})
    assert message.startswith(f"config: {field}: ")


def test_every_problem_gets_its_own_line() -> None:
    message = config_error(None, {"score": {"top_k": 0}, "models": {"judgee": "x"}}, environ={})
    lines = message.splitlines()
    assert len(lines) == 2
    assert any("score.top_k" in line for line in lines)
    assert any("models.judgee" in line for line in lines)


def test_format_validation_error_origin() -> None:
    with pytest.raises(ValidationError) as info:
        RunConfig.model_validate({"limit": 0})
    assert format_validation_error(info.value, "config (x.yaml)").startswith(
        "config (x.yaml): limit: "
    )


@pytest.mark.parametrize(
    ("name", "text", "expected"),
    [
        ("bad.yaml", "models: [unclosed\n", "not valid yaml"),
        ("bad.toml", "models = = 1\n", "not valid toml"),
        ("bad.json", "{", "not valid json"),
        ("list.yaml", "- a\n- b\n", "the top level must be a mapping"),
        ("run.ini", "[models]\n", "use .yaml, .yml, .toml or .json"),
    ],
)
def test_unreadable_files(tmp_path: Path, name: str, text: str, expected: str) -> None:
    path = write(tmp_path, name, text)
    message = config_error(path, environ={})
    assert str(path) in message and expected in message


def test_missing_and_non_utf8_files(tmp_path: Path) -> None:
    assert "not found" in config_error(tmp_path / "nope.yaml", environ={})
    latin = tmp_path / "latin.yaml"
    latin.write_bytes("models:\n  judge: café\n".encode("latin-1"))
    assert "not UTF-8" in config_error(latin, environ={})


def test_empty_yaml_file_is_all_defaults(tmp_path: Path) -> None:
    assert load_config(write(tmp_path, "empty.yaml", ""), environ={}) == RunConfig()


def test_config_is_frozen() -> None:
    cfg = load_config(None, {"models": {"judge": "fake/judge"}}, environ={})
    with pytest.raises(ValidationError):
        cfg.models.judge = "other"  # type: ignore[misc]
    with pytest.raises(ValidationError):
        cfg.limit = 3  # type: ignore[misc]
    assert cfg.models.judge == "fake/judge" and cfg.limit is None
    # Changing a copy leaves the original alone.
    other = cfg.model_copy(update={"limit": 3})
    assert other.limit == 3 and cfg.limit is None


def test_round_trip_through_json() -> None:
    cfg = load_config(None, {"models": {"judge": "fake/judge"}, "score": {"top_k": 4}}, environ={})
    assert RunConfig.model_validate_json(cfg.model_dump_json()) == cfg


def test_conftest_factory_builds_a_valid_config(config_factory: object) -> None:
    cfg = config_factory(score__top_k=5)  # type: ignore[operator]
    assert cfg.models.judge == "fake/judge" and cfg.models.embedder == "fake/embed"
    assert cfg.score.top_k == 5 and cfg.models.backoff_s == 0.0


def test_max_repairs_reaches_the_gateway_and_is_operational(config_factory) -> None:
    from ragaudit.reevaluation import config_key
    from ragaudit.tasks._common import hold_gateway

    default, more = config_factory(), config_factory(models__max_repairs=2)
    assert default.models.max_repairs == 1  # one answer + one repair: at most two calls
    with hold_gateway(more) as gateway:
        assert gateway.max_repairs == 2
    with hold_gateway(default) as gateway:
        assert gateway.max_repairs == 1
    # Like retries, repairs decide whether an answer is obtained, not what it says.
    assert config_key(default) == config_key(more)
    with pytest.raises(ConfigError, match="max_repairs"):
        config_factory(models__max_repairs=-1)
