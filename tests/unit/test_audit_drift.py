"""The audit's day-after-day statistics: series changes, shift-share, probe, judge check."""

from __future__ import annotations

import numpy as np
import polars as pl
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
    shift_share,
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


def _strata(shares, means, se=0.01):
    return pl.DataFrame(
        {
            "stratum": [f"s{i}" for i in range(len(shares))],
            "share": shares,
            "estimate": means,
            "se": [se] * len(shares),
        }
    )


def test_shift_share_adds_up_and_tells_mix_from_quality():
    before = _strata([0.5, 0.3, 0.2], [0.9, 0.6, 0.3])
    mix_only = shift_share(before, _strata([0.2, 0.3, 0.5], [0.9, 0.6, 0.3]), alpha=0.05)
    assert mix_only.within == pytest.approx(0.0)
    assert mix_only.total == pytest.approx((0.2 * 0.9 + 0.18 + 0.15) - (0.45 + 0.18 + 0.06))
    assert mix_only.mix_moved and not mix_only.within_moved
    quality = shift_share(before, _strata([0.5, 0.3, 0.2], [0.8, 0.5, 0.2]), alpha=0.05)
    assert quality.mix == pytest.approx(0.0)
    assert quality.within == pytest.approx(-0.1)
    assert quality.within_moved and not quality.mix_moved


def test_shift_share_says_what_it_could_not_match():
    before = _strata([0.5, 0.5], [0.9, 0.6])
    after = pl.DataFrame(
        {"stratum": ["s0", "s2"], "share": [0.6, 0.4], "estimate": [0.9, 0.1], "se": [0.01, 0.01]}
    )
    split = shift_share(before, after, alpha=0.05)
    assert split.unmatched_share == pytest.approx((0.5 + 0.4) / 2)
    assert split.total == pytest.approx(split.mix + split.within)


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


def test_attribution_order_and_reasons():
    series = _series(10, drop={(9, "b"): -0.05})
    change = next(
        c
        for c in day_changes(series, "2026-11-10", alpha=0.05)
        if c.moved and c.against == "previous"
    )
    probe = ProbeChange("b", "ndcg@10", 17, -0.05, -0.08, -0.02, 0.001, True)
    engine = attribute(change, Evidence(probe={("b", "ndcg@10"): probe}))
    assert engine.attribution == "engine"
    content = attribute(change, Evidence(probe={("b", "ndcg@10"): probe}, changed_docs={"b": 0.4}))
    assert content.attribution == "content" and len(content.reasons) == 2
    judge = attribute(change, Evidence(judge=JudgeCheck(40, 0.3, 0.7, True)))
    assert judge.attribution == "judge"
    assert attribute(change, Evidence()).attribution == "unexplained"
    mix = shift_share(
        _strata([0.5, 0.3, 0.2], [0.9, 0.6, 0.3]),
        _strata([0.2, 0.3, 0.5], [0.9, 0.6, 0.3]),
        alpha=0.05,
    )
    assert attribute(change, Evidence(mix={("b", "ndcg@10"): mix})).attribution == "mix"


def test_regression_event_names_what_regressed_and_why():
    from ragaudit.audit._drift import REGRESSION_EVENT, regression_event

    series = _series(10, drop={(9, "b"): -0.05})
    changes = [
        attribute(c, Evidence(changed_docs={"b": 0.3}))
        for c in day_changes(series, "2026-11-10", alpha=0.05)
    ]
    event = regression_event("support", "2026-11-10", "/runs/audit-support/2026-11-10", changes)
    assert event is not None
    name, resource, payload = event
    assert name == REGRESSION_EVENT
    assert resource["prefect.resource.id"] == "ragaudit.audit.support"
    assert payload["regressed"] == ["b/ndcg@10"]
    (row,) = payload["changes"]
    assert row["against"] == "baseline" and row["attribution"] == "content"
    quiet = day_changes(_series(10), "2026-11-10", alpha=0.05)
    assert regression_event("support", "2026-11-10", "/x", quiet) is None


def test_the_mix_split_reads_each_strata_se_as_estimated_not_from_its_interval():
    import math

    from scipy import stats

    from ragaudit.audit._drift import DayDesign
    from ragaudit.audit._watch import _strata

    # Two strata of four units each: weights 1, 1, 2, 2 and values 0, 1, 1, 0 in both.
    strata = ["a/head"] * 4 + ["a/tail"] * 4
    sample = pl.DataFrame(
        {
            "unit": [f"u{i}" for i in range(8)],
            "segment": ["a"] * 8,
            "stratum": strata,
            "stratum_requests": [10] * 4 + [30] * 4,
            "pi": [0.5] * 8,
            "weight": [1.0, 1.0, 2.0, 2.0] * 2,
        }
    )
    values = pl.DataFrame(
        {
            "unit": [f"u{i}" for i in range(8)],
            "metric": ["m"] * 8,
            "value": [0.0, 1.0, 1.0, 0.0] * 2,
            "status": ["ok"] * 8,
        }
    )
    got = _strata(DayDesign(sample, values)).sort("stratum")
    se = math.sqrt(4 / 3 * 10 / 144)  # by hand, as test_audit_estimate's one-stratum case
    assert got["se"].to_list() == pytest.approx([se, se])
    # What undoing the t(3) interval at z = 1.96 gave: too wide by t(3) / z.
    assert got["se"][0] < se * stats.t.ppf(0.975, 3) / 1.96 - 0.05


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
    asked: dict[str, list[float]] = {"probe": [], "mix": [], "changes": []}
    for name, key in (
        ("probe_changes", "probe"),
        ("mix_splits", "mix"),
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
    assert asked["mix"] and set(asked["mix"]) == {0.2}


def test_the_mix_split_and_the_probe_widen_as_alpha_falls():
    before = _strata([0.5, 0.3, 0.2], [0.9, 0.6, 0.3])
    after = _strata([0.45, 0.3, 0.25], [0.9, 0.6, 0.3], se=0.2)
    loose, strict = shift_share(before, after, alpha=0.5), shift_share(before, after, alpha=0.001)
    assert loose.mix == strict.mix
    assert strict.mix_ci[1] - strict.mix_ci[0] > 2 * (loose.mix_ci[1] - loose.mix_ci[0])
    rng = np.random.default_rng(5)
    ref = rng.uniform(0.4, 0.9, 30)
    today = ref - 0.02 + rng.normal(0, 0.04, 30)
    at = {a: probe_changes(_probe(today), _probe(ref), alpha=a) for a in (0.5, 1e-6)}
    assert next(p for p in at[0.5] if p.segment == OVERALL).moved
    assert not next(p for p in at[1e-6] if p.segment == OVERALL).moved
