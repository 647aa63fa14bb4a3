"""The ``audit:`` section: composed from the readers' and the sampler's options, checked at load."""

from __future__ import annotations

from pathlib import Path

import pytest

from ragaudit._audit_config import reference_free
from ragaudit.audit import AuditSection, SampleOptions, audit_section
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
        ({"name": "../escape"}, "audit.name: run id"),
        ({"sample": 0}, "audit.sample: "),
        ({"colour": "red"}, "audit.colour: Extra inputs"),
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
    from ragaudit._audit_config import DEFAULT_METRICS, reference_free
    from ragaudit.directions import higher_is_better
    from ragaudit.metrics import resolve

    assert "aspect_refusal" in DEFAULT_METRICS
    assert reference_free("aspect_refusal")
    metric = resolve("aspect_refusal", {})
    assert set(metric.inputs) == {"question", "response"}
    assert not higher_is_better("aspect_refusal")


_FIELDS = {"request_id": "id", "query": "request.q", "docs": "retrieval.hits"}


def _source(**source: object) -> dict[str, object]:
    return load_config(None, {"audit": {**SECTION, "source": source}}).audit.source.model_dump(
        mode="json"
    )


def test_a_source_of_an_earlier_config_loads_as_its_readers_options() -> None:
    from ragaudit.audit import FieldPaths

    path = "logs/{day}/*.jsonl"
    # source.fields (the log formats') and source.ubi (UBI's) as configs wrote them before.
    new = _source(format="jsonl", path=path, options={"fields": _FIELDS})
    assert _source(format="jsonl", path=path, fields=_FIELDS) == new
    assert new["options"] == {"fields": FieldPaths(**_FIELDS).model_dump()}
    ubi = {"hosts": ["http://engine:9200"], "queries_index": "q"}
    assert _source(format="ubi", ubi=ubi) == _source(format="ubi", options=ubi)
    # A stored day's config holds both, defaults included: the format not taking one ignores it.
    stored = {"fields": FieldPaths().model_dump(), "ubi": {"hosts": ["http://x:9200"]}}
    assert _source(format="otlp", path=path, **stored)["options"] == {}
    assert _source(format="jsonl", path=path, **stored) == _source(format="jsonl", path=path)
    with pytest.raises(ConfigError, match="in source.options only, not also in source.fields"):
        _source(format="jsonl", path=path, fields=_FIELDS, options={"fields": _FIELDS})


@pytest.mark.parametrize(
    ("source", "message"),
    [
        (
            {"format": "csvx", "path": "x"},
            r"source.format: .*unknown audit reader 'csvx' \(known: jsonl, parquet, otlp, ubi",
        ),
        (
            {"format": "ubi", "options": {"hosts": ["h"], "timout_s": 1}},
            r"audit reader 'ubi': timout_s: Extra inputs .*\(its options: hosts, queries_index",
        ),
        ({"format": "otlp", "options": {"fields": {}}}, "reads files: set source.path"),
        ({"format": "otlp", "path": "x", "options": {"x": 1}}, r"\(its options: none\)"),
        ({"path": "x", "options": {"fields": {"query": "a.["}}}, "query: 'a.\\[' is not JMESPath"),
        ({"path": "x", "timezone": "Europe/Nowhere"}, "not a time zone"),
        ({"path": "x", "timezone": "America"}, "not a time zone"),
        ({"path": "x", "max_record_bytes": 0}, "max_record_bytes"),
    ],
)
def test_a_bad_source_is_refused_at_load_naming_the_reader(source: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load_config(None, {"audit": {**SECTION, "source": source}})


def test_min_change_has_defaults_per_metric_family_and_takes_the_given_over_them() -> None:
    section = audit_section(load_config(None, {"audit": SECTION}))
    assert section.min_change_of("ndcg@10") == 0.02 and section.min_change_of("ndcg@5") == 0.02
    assert section.min_change_of("dcg@10") == 0.1
    assert section.min_change_of("relevant share") == 0.02
    assert section.min_change_of("faithfulness") == 0.02  # "*": every other metric
    given = {**SECTION, "min_change": {"ndcg@10": 0.05, "faithfulness": 0.0}}
    section = audit_section(load_config(None, {"audit": given}))
    assert section.min_change_of("ndcg@10") == 0.05 and section.min_change_of("ndcg@5") == 0.02
    assert section.min_change_of("faithfulness") == 0.0
    assert section.min_change_of("precision@10") == 0.02  # the defaults the file left alone
    with pytest.raises(ConfigError, match="audit.min_change: .*finite number >= 0"):
        load_config(None, {"audit": {**SECTION, "min_change": {"ndcg@k": -0.1}}})


def test_the_alarm_settings_start_no_new_series() -> None:
    from ragaudit.audit._day import identity_of_day

    before = load_config(None, {"audit": SECTION})
    after = load_config(
        None,
        {"audit": {**SECTION, "min_change": {"*": 0.05}, "on_regression": "fail"}},
    )
    assert identity_of_day(before) == identity_of_day(after)
    other = load_config(None, {"audit": {**SECTION, "sample": 60}})
    assert identity_of_day(other) != identity_of_day(before)
