"""The audit's day-after-day statistics: series changes, shift-share, probe, judge check."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import polars as pl
import pyarrow.parquet as pq
import pytest

from ragaudit.audit._drift import (
    OVERALL,
    SERIES_SCHEMA,
    Evidence,
    JudgeCheck,
    ProbeChange,
    attribute,
    baseline,
    day_changes,
    judge_check,
    probe_changes,
    series_signature,
)

SEGMENTS = ["a", "b", "c"]


def _series(days: int, *, drop: dict[tuple[int, str], float] | None = None, seed: int = 0):
    """Daily estimates of two metrics per segment around fixed truths, se 0.01."""
    rng = np.random.default_rng(seed)
    rows = []
    truth = {"ndcg@10": 0.70, "relevant_share": 0.40}
    for d in range(days):
        for seg in [*SEGMENTS, OVERALL]:
            for metric, mu in truth.items():
                shift = (drop or {}).get((d, seg), 0.0) if metric == "ndcg@10" else 0.0
                se = 0.01
                est = mu + shift + rng.normal(0, se)
                rows.append(
                    {
                        "series": "s1:x",
                        "day": f"2026-11-{d + 1:02d}",
                        "segment": seg,
                        "metric": metric,
                        "estimate": est,
                        "se": se,
                        "ci_low": est - 1.96 * se,
                        "ci_high": est + 1.96 * se,
                        "n": 300,
                        "requests": 10_000.0,
                    }
                )
    return pl.DataFrame(rows, schema=SERIES_SCHEMA)


def test_signature_changes_with_the_instrument():
    a = series_signature({"judge": "fake/judge", "prompts": {"grade": "v3"}, "sample": 400})
    assert a == series_signature({"sample": 400, "prompts": {"grade": "v3"}, "judge": "fake/judge"})
    assert a != series_signature(
        {"judge": "fake/judge2", "prompts": {"grade": "v3"}, "sample": 400}
    )


def test_a_planted_drop_moves_only_its_segment():
    series = _series(10, drop={(9, "b"): -0.05})
    changes = day_changes(series, "2026-11-10", alpha=0.05)
    moved = {(c.segment, c.metric, c.against) for c in changes if c.moved}
    assert ("b", "ndcg@10", "previous") in moved
    assert ("b", "ndcg@10", "baseline") in moved
    assert {seg for seg, _, _ in moved} == {"b"}
    drop = next(c for c in changes if c.moved and c.against == "baseline")
    assert drop.regressed
    assert drop.ci_high < 0
    assert drop.reference_days == tuple(f"2026-11-{d:02d}" for d in range(3, 10))


def test_stable_days_raise_few_false_alarms():
    # 40 series of 10 stable days: the share of (day, segment, metric) cells flagged against
    # the baseline stays near α's order (BH across 8 cells per day; the test is conservative).
    flagged = cells = 0
    for seed in range(40):
        series = _series(10, seed=seed)
        for d in range(8, 11):
            changes = [
                c
                for c in day_changes(series, f"2026-11-{d:02d}", alpha=0.05)
                if c.against == "baseline"
            ]
            cells += len(changes)
            flagged += sum(c.moved for c in changes)
    assert cells == 40 * 3 * 8
    assert flagged / cells <= 0.05


def test_first_day_has_nothing_to_compare():
    assert day_changes(_series(1), "2026-11-01", alpha=0.05) == []


def test_baseline_adds_day_to_day_spread():
    quiet = pl.DataFrame({"estimate": [0.5, 0.5, 0.5], "se": [0.01] * 3})
    wandering = pl.DataFrame({"estimate": [0.45, 0.55, 0.5], "se": [0.01] * 3})
    m_quiet, v_quiet = baseline(quiet)
    m_wander, v_wander = baseline(wandering)
    assert m_quiet == pytest.approx(0.5) and m_wander == pytest.approx(0.5)
    assert v_quiet == pytest.approx(3 * 0.01**2 / 9)
    assert v_wander == pytest.approx(3 * 0.01**2 / 9 + (0.0025 - 0.0001))


def _probe(values, segment="a", metric="ndcg@10"):
    return pl.DataFrame(
        {
            "probe": [f"p{i}" for i in range(len(values))],
            "segment": [segment] * len(values),
            "metric": [metric] * len(values),
            "value": values,
        }
    )


def test_probe_moves_when_the_engine_does():
    rng = np.random.default_rng(3)
    ref = rng.uniform(0.4, 0.9, 40)
    same = probe_changes(_probe(ref), _probe(ref), alpha=0.05)
    assert all(not p.moved for p in same)
    worse = probe_changes(_probe(ref - 0.05), _probe(ref), alpha=0.05)
    overall = next(p for p in worse if p.segment == OVERALL)
    assert overall.moved and overall.diff == pytest.approx(-0.05)
    assert overall.n == 40


def test_judge_check_flags_a_judge_that_changed():
    stored = [0, 1, 2, 3] * 10
    assert not judge_check(stored, stored).drifted
    assert judge_check(stored, stored).kappa == pytest.approx(1.0)
    shuffled = [3, 0, 1, 2] * 10
    check = judge_check(stored, shuffled)
    assert check.drifted and check.n == 40


def test_attribution_without_the_draws_falls_back_on_the_other_evidence():
    # Without the days' draws a change is not split: its cause comes from the judge check, the
    # segment's rewritten documents and the probe, in that order, else it is unexplained.
    series = _series(10, drop={(9, "b"): -0.05})
    change = next(
        c
        for c in day_changes(series, "2026-11-10", alpha=0.05)
        if c.moved and c.against == "previous"
    )
    assert not change.parts
    probe = ProbeChange("b", "ndcg@10", 17, -0.05, -0.08, -0.02, 0.001, True)
    engine = attribute(change, Evidence(probe={("b", "ndcg@10"): probe}))
    assert engine.attribution == "engine" and engine.kind == "alarm"
    content = attribute(change, Evidence(probe={("b", "ndcg@10"): probe}, changed_docs={"b": 0.4}))
    assert content.attribution == "content" and len(content.reasons) == 1
    judge = attribute(change, Evidence(judge=JudgeCheck(40, 0.3, 0.7, True)))
    assert judge.attribution == "judge" and judge.kind == "alarm"
    assert attribute(change, Evidence()).attribution == "unexplained"


def test_regression_event_names_the_alarm_lines():
    from ragaudit.audit._drift import REGRESSION_EVENT, regression_event

    series = _series(10, drop={(9, "b"): -0.05})
    changes = [
        attribute(c, Evidence(changed_docs={"b": 0.3}))
        for c in day_changes(series, "2026-11-10", alpha=0.05, min_change=lambda m: 0.02)
    ]
    event = regression_event("support", "2026-11-10", "/runs/audit-support/2026-11-10", changes)
    assert event is not None
    name, resource, payload = event
    assert name == REGRESSION_EVENT
    assert resource["prefect.resource.id"] == "ragaudit.audit.support"
    assert payload["regressed"] == ["b/ndcg@10"]
    # Both comparisons moved: one line for the segment and its cause, naming both.
    (line,) = payload["alarms"]
    assert line["segment"] == "b" and line["cause"] == "content"
    assert line["against"] == ["previous", "baseline"]
    assert "against the day before" in line["text"] and "against the trailing week" in line["text"]
    assert {r["against"] for r in payload["changes"]} == {"previous", "baseline"}
    quiet = day_changes(_series(10), "2026-11-10", alpha=0.05)
    assert regression_event("support", "2026-11-10", "/x", quiet) is None


def _audited_day(folder, values, series: str, config=None) -> None:
    """A finished day's folder: its draw, scores, estimates, probe and manifest.

    With ``config``, the manifest holds it as an audited day's does (its series is read from it).
    """
    import json

    from ragaudit.audit import estimate

    sample = pl.DataFrame(
        {
            "unit": [f"u{i}" for i in range(8)],
            "request_id": [f"r{i}" for i in range(8)],
            "segment": ["a"] * 4 + ["b"] * 4,
            "band": ["tail"] * 8,
            "stratum": ["a/tail"] * 4 + ["b/tail"] * 4,
            "count": [1] * 8,
            "stratum_units": [8] * 8,
            "stratum_requests": [8] * 8,
            "pi": [0.5] * 8,
            "weight": [2.0] * 8,
        }
    )
    scores = pl.DataFrame(
        {
            "request_id": [f"r{i}" for i in range(8)],
            "unit": [f"u{i}" for i in range(8)],
            "metric": ["ndcg@3"] * 8,
            "value": values,
            "status": ["ok"] * 8,
        }
    )
    folder.mkdir(parents=True)
    sample.write_parquet(folder / "sample.parquet")
    scores.write_parquet(folder / "scores.parquet")
    estimate(scores, sample).write_parquet(folder / "estimates.parquet")
    probe = scores.join(sample.select("unit", "segment"), on="unit").select(
        pl.col("unit").alias("probe"), "segment", "metric", "value"
    )
    probe.write_parquet(folder / "probe.parquet")
    manifest = {"kind": "audit", "status": "completed", "series": series}
    if config is not None:
        from ragaudit.audit._watch import instrument_extra

        manifest["config"] = json.loads(config.model_dump_json())
        manifest["instrument_extra"] = instrument_extra()
    (folder / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")


def test_every_test_of_a_day_runs_at_the_configs_alpha(tmp_path, monkeypatch):
    import datetime as dt

    import yaml
    from support.audit_days import audit_config

    from ragaudit.audit import _watch
    from ragaudit.audit._served import AuditDay
    from ragaudit.config import load_config

    path = audit_config(tmp_path, tmp_path / "corpus.jsonl")
    raw = yaml.safe_load(path.read_text("utf-8"))
    path.write_text(yaml.safe_dump({**raw, "report": {"alpha": 0.2}}), encoding="utf-8")
    config = load_config(path)
    series = _watch.day_series(config)
    root = tmp_path / "runs" / "audit-bot"
    _audited_day(root / "2026-11-01", [0.9, 0.8, 0.7, 0.9, 0.6, 0.5, 0.7, 0.6], series, config)
    today = root / "2026-11-02"
    _audited_day(today, [0.7, 0.6, 0.5, 0.7, 0.6, 0.5, 0.7, 0.6], series, config)
    asked: dict[str, list[float]] = {"probe": [], "changes": []}
    for name, key in (
        ("probe_changes", "probe"),
        ("day_changes", "changes"),
    ):
        real = getattr(_watch, name)

        def spy(*args, _real=real, _key=key, **kwargs):
            asked[_key].append(kwargs.get("alpha", 0.05))
            return _real(*args, **kwargs)

        monkeypatch.setattr(_watch, name, spy)
    day = AuditDay(
        config, dt.date(2026, 11, 2), today, None, pl.read_parquet(today / "sample.parquet")
    )
    watch = _watch.Watch(series=series, first_day="2026-11-01")
    watch.probe = pl.read_parquet(today / "probe.parquet")
    _watch.compare_day(day, watch)
    assert asked["changes"] == [0.2]
    assert asked["probe"] and set(asked["probe"]) == {0.2}
    written = pl.read_parquet(today / "changes.parquet")
    metadata = pq.read_schema(today / "changes.parquet").metadata
    assert metadata[b"table"] == b"audit_changes" and metadata[b"schema_version"] == b"2"
    # The days' queries unknown (no requests.parquet): only the mix between segments, which
    # needs none, is told apart.
    assert set(written["part"]) == {"total", "between"}


def test_the_probe_narrows_as_alpha_rises():
    rng = np.random.default_rng(5)
    ref = rng.uniform(0.4, 0.9, 30)
    today = ref - 0.02 + rng.normal(0, 0.04, 30)
    at = {a: probe_changes(_probe(today), _probe(ref), alpha=a) for a in (0.5, 1e-6)}
    assert next(p for p in at[0.5] if p.segment == OVERALL).moved
    assert not next(p for p in at[1e-6] if p.segment == OVERALL).moved


def _moved(diff, *, segment="b", metric="ndcg@10", against="previous", parts=(), least=0.02):
    from ragaudit.audit._drift import Change

    return Change(
        segment=segment,
        metric=metric,
        against=against,
        reference_days=("2026-11-09",),
        estimate=0.7 + diff,
        reference=0.7,
        diff=diff,
        ci_low=diff - 0.01,
        ci_high=diff + 0.01,
        p_value=1e-4,
        p_adjusted=1e-4,
        moved=True,
        min_change=least,
        parts=tuple(parts),
    )


def _part(name, diff, moved=True, behind=()):
    from ragaudit.audit._drift import Part

    return Part(
        part=name,
        diff=diff,
        se=0.004,
        ci_low=diff - 0.008,
        ci_high=diff + 0.008,
        p_value=1e-4,
        p_adjusted=1e-4,
        moved=moved,
        small=moved and abs(diff) < 0.02,
        behind=behind,
    )


def test_the_alarm_rule_is_beyond_noise_and_at_least_the_minimum():
    from ragaudit.audit._drift import alarms, regression_event

    at = attribute(_moved(-0.02), Evidence())
    assert not at.small and at.regressed and at.kind == "alarm"
    (line,) = alarms([at], "2026-11-10")
    assert line.cause == "unexplained" and line.metrics[0].diff == -0.02
    under = attribute(_moved(-0.0199), Evidence())
    assert under.small and not under.regressed and under.kind == "small"
    assert alarms([under], "2026-11-10") == []
    assert regression_event("a", "2026-11-10", "/x", [under]) is None
    # The same rule on a part: an engine move at the minimum alarms, under it is small.
    engine = attribute(_moved(-0.03, parts=[_part("engine", -0.02)]), Evidence())
    assert [m.cause for m in alarms([engine], "d")] == ["engine"]
    little = attribute(_moved(-0.03, parts=[_part("engine", -0.0199)]), Evidence())
    assert alarms([little], "d") == [] and little.parts[0].kind == "small"


def test_the_traffics_own_moves_are_said_and_never_alarm():
    from ragaudit.audit._drift import alarms, change_rows
    from ragaudit.audit._moves import moves

    change = _moved(-0.05, parts=[_part("within", -0.03), _part("new", -0.02)])
    said = attribute(change, Evidence())
    assert said.attribution == "mix within, new queries"
    assert alarms([said], "d") == []
    lines = moves(change_rows([said]), "d")
    assert {(m.cause, m.kind) for m in lines} == {
        ("mix within", "traffic"),
        ("new queries", "traffic"),
    }
    # A change no part explains whose recurring queries' lists are shown to have moved by less
    # than the minimum is the traffic's too.
    bounded = replace(_moved(-0.05), paired_ci=(-0.01, 0.012))
    assert attribute(bounded, Evidence()).kind == "traffic"
    assert attribute(replace(_moved(-0.05), paired_ci=(-0.03, 0.01)), Evidence()).kind == "alarm"


def test_one_line_per_segment_and_cause_naming_every_metric_and_reference():
    from ragaudit.audit._drift import alarms, change_rows
    from ragaudit.audit._moves import moves

    changes = [
        attribute(
            _moved(diff, metric=metric, against=against, parts=[_part("engine", diff)]),
            Evidence(),
        )
        for metric, diff in (("ndcg@10", -0.05), ("relevant share", -0.04))
        for against in ("previous", "baseline")
    ]
    overall = attribute(
        _moved(
            -0.02,
            segment=OVERALL,
            parts=[_part("engine", -0.02, behind=(("b", -0.015), ("c", -0.005)))],
        ),
        Evidence(),
    )
    lines = moves(change_rows([*changes, overall]), "2026-11-10")
    assert [(m.segment, m.cause, m.kind) for m in lines] == [
        ("b", "engine", "alarm"),
        (OVERALL, "engine", "alarm"),
    ]
    segment = lines[0]
    assert segment.against == ("previous", "baseline")
    assert {(m.metric, m.against) for m in segment.metrics} == {
        (metric, against)
        for metric in ("ndcg@10", "relevant share")
        for against in ("previous", "baseline")
    }
    text = segment.text()
    assert text.startswith("b regressed, engine: NDCG@10 -0.050")
    assert "against the day before" in text and "against the trailing week" in text
    assert "relevant share -0.040" in text
    assert lines[1].behind == ("b -0.015", "c -0.005") and "from b -0.015" in lines[1].text()
    assert len(alarms([*changes, overall], "2026-11-10")) == 2


def test_a_changes_table_before_the_split_is_read_as_its_whole_changes():
    from ragaudit.audit._moves import moves

    old = [
        {
            "segment": "b",
            "metric": "ndcg@10",
            "against": "previous",
            "diff": -0.05,
            "ci_low": -0.07,
            "ci_high": -0.03,
            "moved": True,
            "regressed": True,
            "attribution": "engine",
            "reasons": ["probe moved"],
        },
        {
            "segment": "b",
            "metric": "ndcg@10",
            "against": "baseline",
            "diff": -0.01,
            "ci_low": -0.03,
            "ci_high": 0.01,
            "moved": False,
            "regressed": False,
        },
    ]
    (line,) = moves(old, "2026-11-10")
    assert (line.segment, line.cause, line.kind) == ("b", "engine", "alarm")
    assert line.reasons == ("probe moved",)
