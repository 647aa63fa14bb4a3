"""The ``audit:`` section: composed from the readers' and the sampler's options, checked at load."""

from __future__ import annotations

from pathlib import Path

import pytest

from ragaudit.audit import AuditSection, SampleOptions, audit_section, reference_free
from ragaudit.config import RunConfig, load_config
from ragaudit.errors import ConfigError

SECTION = {"name": "support-bot", "source": {"path": "logs/{day}/*.jsonl"}, "sample": 50, "k": 5}


def test_the_section_round_trips_through_the_flows_json() -> None:
    config = load_config(None, {"audit": SECTION})
    section = audit_section(config)
    assert isinstance(section, AuditSection)
    assert section.sampling() == SampleOptions(sample=50, k=5)
    again = RunConfig.model_validate_json(config.model_dump_json())
    assert again == config and isinstance(again.audit, AuditSection)


def test_a_config_without_the_section_is_one_clear_error() -> None:
    with pytest.raises(ConfigError, match="no audit section"):
        audit_section(load_config(None, {}))


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"metrics": ["faithfulness", "context_recall"]}, "context_recall need a reference"),
        ({"metrics": ["no_such_metric"]}, "unknown metric no_such_metric"),
        ({"name": "../escape"}, "audit: name: "),
        ({"sample": 0}, "audit: sample: "),
        ({"colour": "red"}, "audit: colour: Extra inputs"),
    ],
)
def test_bad_sections_are_refused_naming_the_field(change: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load_config(None, {"audit": {**SECTION, **change}})


def test_only_reference_free_metrics_pass() -> None:
    assert reference_free("faithfulness") and reference_free("answer_relevancy")
    assert reference_free("citation_support_recall")
    assert not reference_free("context_recall") and not reference_free("rouge_l")


def test_the_bundled_audit_config_loads() -> None:
    config = load_config(Path(__file__).parents[2] / "data" / "audit" / "audit.yaml")
    assert audit_section(config).segment == "filters.collection"


def test_the_refusal_aspect_is_a_reference_free_default_where_lower_is_better() -> None:
    from ragaudit.audit import DEFAULT_METRICS, reference_free
    from ragaudit.directions import higher_is_better
    from ragaudit.metrics import resolve

    assert "aspect_refusal" in DEFAULT_METRICS
    assert reference_free("aspect_refusal")
    metric = resolve("aspect_refusal", {})
    assert set(metric.inputs) == {"question", "response"}
    assert not higher_is_better("aspect_refusal")
