"""Design-weighted estimates: a hand-checked case, an independent Taylor variance, domains."""

from __future__ import annotations

import math

import numpy as np
import polars as pl
import pytest
from scipy import optimize, stats

from ragaudit.audit import ALL, estimate, list_metrics
from ragaudit.audit._listmetrics import metric_names
from ragaudit.ranking import ndcg_at_k
from ragaudit.schemas import AUDIT_ESTIMATES
from ragaudit.stats import kish_ess, variance_strata


def _sample(
    strata: list[str], weights: list[float], pis: list[float] | None = None
) -> pl.DataFrame:
    n = len(strata)
    return pl.DataFrame(
        {
            "unit": [f"u{i}" for i in range(n)],
            "request_id": [f"r{i}" for i in range(n)],
            "segment": [s.split("/")[0] for s in strata],
            "band": [s.split("/")[1] for s in strata],
            "stratum": strata,
            "count": [1] * n,
            "pi": pis or [0.1] * n,
            "weight": weights,
        }
    )


def _values(values: list[float | None], metric: str = "m") -> pl.DataFrame:
    return pl.DataFrame(
        {
            "request_id": [f"r{i}" for i in range(len(values))],
            "metric": [metric] * len(values),
            "value": values,
            "status": ["ok" if v is not None else "failed" for v in values],
        }
    )


def _taylor(y: np.ndarray, ok: np.ndarray, w: np.ndarray, strata: list[str]) -> tuple[float, float]:
    """The Hájek mean and its linearised variance, stratified, with replacement: by hand."""
    wd = w * ok
    mean = float((wd * y).sum() / wd.sum())
    z = wd * (y - mean) / wd.sum()
    var = 0.0
    for h in set(strata):
        zh = z[[s == h for s in strata]]
        var += len(zh) / (len(zh) - 1) * float(((zh - zh.mean()) ** 2).sum())
    return mean, var


def test_hajek_mean_and_interval_by_hand() -> None:
    # One stratum, four units: weights 1, 1, 2, 2 and values 0, 1, 1, 0.
    sample = _sample(["a/tail"] * 4, [1.0, 1.0, 2.0, 2.0])
    row = (
        estimate(_values([0.0, 1.0, 1.0, 0.0]), sample)
        .filter(pl.col("segment") == ALL)
        .row(0, named=True)
    )
    assert row["estimate"] == pytest.approx(0.5)  # (0 + 1 + 2 + 0) / 6
    # z_i = w_i (y_i - 0.5) / 6 = (-1, 1, 2, -2) / 12: mean 0, sum of squares 10 / 144;
    # variance 4/3 × 10/144, t on 3 degrees of freedom.
    se = math.sqrt(4 / 3 * 10 / 144)
    t = stats.t.ppf(0.975, 3)
    assert row["ci_low"] == pytest.approx(0.5 - t * se)
    assert row["ci_high"] == pytest.approx(0.5 + t * se)
    assert row["n"] == 4
    assert row["requests"] == pytest.approx(6.0)
    assert row["ess"] == pytest.approx(36 / 10)


def test_interval_matches_an_independent_stratified_taylor_variance() -> None:
    rng = np.random.default_rng(4)
    strata = [f"s{h % 2}/{('head', 'torso', 'tail')[h % 3]}" for h in range(6) for _ in range(9)]
    n = len(strata)
    w = rng.uniform(1, 40, n)
    y = rng.uniform(0, 1, n)
    ok = rng.random(n) > 0.15  # some units failed: outside the domain, not zeros
    values = _values([float(v) if o else None for v, o in zip(y, ok, strict=True)])
    out = estimate(values, _sample(strata, list(w)))
    assert out.columns == AUDIT_ESTIMATES.names
    out.to_arrow().cast(AUDIT_ESTIMATES)
    for segment in [ALL, "s0", "s1"]:
        keep = np.array([segment in (ALL, s.split("/")[0]) for s in strata])
        part = [s for s, k in zip(strata, keep, strict=True) if k]
        mean, var = _taylor(y[keep], ok[keep], w[keep], part)
        df = keep.sum() - len(set(part))
        half = stats.t.ppf(0.975, df) * math.sqrt(var)
        row = out.filter(pl.col("segment") == segment).row(0, named=True)
        assert row["estimate"] == pytest.approx(mean)
        assert row["ci_low"] == pytest.approx(mean - half)
        assert row["ci_high"] == pytest.approx(mean + half)
        assert row["n"] == int(ok[keep].sum())
        assert row["ess"] == pytest.approx(kish_ess(w[keep & ok]))


def test_certainty_units_add_no_variance() -> None:
    # Two certain units with very different values, and an uncertain stratum.
    sample = _sample(
        ["a/head", "a/head", "a/tail", "a/tail", "a/tail"],
        [5, 5, 10, 10, 10],
        pis=[1.0, 1.0, 0.1, 0.1, 0.1],
    )
    y = np.array([0.0, 1.0, 0.2, 0.3, 0.4])
    row = estimate(_values(list(y)), sample).row(0, named=True)
    mean = (5 * 0.0 + 5 * 1.0 + 10 * 0.9) / 40
    assert row["estimate"] == pytest.approx(mean)
    # Only the uncertain stratum's three units vary: z = w (y - mean) / sum w over them.
    z = 10 * (y[2:] - mean) / 40
    assert row["se"] == pytest.approx(math.sqrt(3 / 2 * float(((z - z.mean()) ** 2).sum())))
    # An uncertain stratum whose units all agree cannot say how much the others differ: no
    # interval, rather than a point.
    flat = estimate(_values([0.0, 1.0, 0.3, 0.3, 0.3]), sample).row(0, named=True)
    assert flat["estimate"] == pytest.approx((5 * 0.0 + 5 * 1.0 + 30 * 0.3) / 40)
    assert flat["ci_low"] is None and flat["se"] is None
    # One unit, taken with certainty: its value is the figure, without error.
    census = estimate(_values([0.7]), _sample(["a/head"], [3.0], pis=[1.0])).row(0, named=True)
    assert (census["estimate"], census["ci_low"], census["ci_high"]) == pytest.approx((0.7,) * 3)


def test_a_failed_value_is_outside_the_domain_not_a_zero() -> None:
    sample = _sample(["a/tail"] * 4, [1.0] * 4)
    row = estimate(_values([1.0, 1.0, 1.0, None]), sample).row(0, named=True)
    assert row["estimate"] == pytest.approx(1.0)
    assert row["n"] == 3
    assert row["requests"] == pytest.approx(3.0)
    nothing = estimate(_values([None] * 4), sample).row(0, named=True)
    assert nothing["estimate"] is None and nothing["n"] == 0


def test_a_lone_uncertain_unit_is_pooled_with_its_segment() -> None:
    strata = ["a/head", "a/torso", "a/torso", "b/tail", "(c)/tail"]
    pooled = variance_strata(strata, ["a", "a", "a", "b", "(c)"], [False] * 5, across_segments=True)
    assert pooled[:3] == ["a/torso"] * 3
    # b's and (c)'s lone units have no stratum of their own segment to join: the largest.
    assert pooled[3:] == ["a/torso", "a/torso"]
    alone = variance_strata(["b/tail"], ["b"], [False], across_segments=False)
    assert alone == ["b/tail"]
    assert variance_strata(["a/head"], ["a"], [True], across_segments=True) == ["(certain)"]
    # Requests sampled within a certain unit keep its stratum; a segment's only uncertain unit
    # joins it rather than staying alone, but another uncertain stratum comes first.
    within = variance_strata(
        ["(certain)/u1", "(certain)/u1", "a/torso"],
        ["a"] * 3,
        [True, True, False],
        across_segments=False,
        within=[True, True, False],
    )
    assert within == ["(certain)/u1"] * 3
    both = variance_strata(
        ["(certain)/u1", "(certain)/u1", "a/torso", "a/tail", "a/tail"],
        ["a"] * 5,
        [True, True, False, False, False],
        across_segments=False,
        within=[True, True, False, False, False],
    )
    assert both == ["(certain)/u1", "(certain)/u1", "a/tail", "a/tail", "a/tail"]


def test_list_metrics_by_hand_and_against_ranking() -> None:
    out = list_metrics([3, 2, 0, 1], k=4, relevant_grade=2)
    dcg = 3 + 2 / math.log2(3) + 0 + 1 / math.log2(5)
    ideal = 3 + 2 / math.log2(3) + 1 / math.log2(4)
    assert out == {
        "precision@4": 0.5,
        "dcg@4": pytest.approx(dcg),
        "ndcg@4": pytest.approx(dcg / ideal),
        "relevant share": 0.5,
    }
    # The house nDCG with the served list's own grades as the only gains agrees.
    order = ["a", "b", "c", "d"]
    assert out["ndcg@4"] == pytest.approx(
        ndcg_at_k(order, dict(zip(order, [3, 2, 0, 1], strict=True)), 4)
    )


def test_list_metrics_short_lists_failed_grades_and_all_zero() -> None:
    short = list_metrics([2, 0], k=10, relevant_grade=2)
    assert short["precision@10"] == pytest.approx(0.1)  # a short list is penalised
    assert short["relevant share"] == pytest.approx(0.5)  # of what was served
    assert short["ndcg@10"] == pytest.approx(1.0)
    assert list_metrics([3, None, 2], k=3, relevant_grade=2) == dict.fromkeys(metric_names(3))
    # Only the top k count: a failure below k does not matter.
    assert list_metrics([3, 2, None], k=2, relevant_grade=2)["ndcg@2"] == pytest.approx(1.0)
    zero = list_metrics([0, 0, 0], k=3, relevant_grade=2)
    assert zero["ndcg@3"] is None and zero["dcg@3"] == 0.0 and zero["relevant share"] == 0.0
    assert list_metrics([], k=3, relevant_grade=2) == dict.fromkeys(metric_names(3))
    with pytest.raises(ValueError, match="k must be"):
        list_metrics([1], k=0, relevant_grade=2)


def _labels(values: dict[int, float], metric: str = "m") -> pl.DataFrame:
    return pl.DataFrame(
        {
            "request_id": [f"r{i}" for i in values],
            "metric": [metric] * len(values),
            "value": list(values.values()),
        }
    )


def test_ppi_is_null_without_labels_and_equals_the_judge_when_people_agree() -> None:
    rng = np.random.default_rng(1)
    strata = ["a/tail"] * 10 + ["a/head"] * 10
    w = list(rng.uniform(1, 5, 20))
    y = list(rng.uniform(0, 1, 20))
    plain = estimate(_values(y), _sample(strata, w)).row(0, named=True)
    assert plain["ppi_estimate"] is None and plain["ppi_ci_low"] is None
    agree = estimate(
        _values(y), _sample(strata, w), labels=_labels({i: y[i] for i in range(0, 20, 3)})
    )
    row = agree.row(0, named=True)
    assert row["ppi_estimate"] == pytest.approx(row["estimate"])
    # No correction, and the labelled units' share of it adds no variance: the judge's se. The
    # PPI interval is moved for skew (ADR 21), the judge's is not.
    assert row["ppi_se"] == pytest.approx(row["se"])
    assert row["ppi_ci_low"] < row["ppi_estimate"] < row["ppi_ci_high"]
    assert row["estimate"] - row["ci_low"] == pytest.approx(row["ci_high"] - row["estimate"])


def test_ppi_against_an_independent_linearisation() -> None:
    rng = np.random.default_rng(2)
    strata = [f"a/{b}" for b in ("head", "torso", "tail") for _ in range(12)]
    n = len(strata)
    w = rng.uniform(1, 20, n)
    human_all = rng.uniform(0, 1, n)
    judge = np.clip(human_all + 0.2 + rng.normal(0, 0.1, n), 0, 1.5)  # a judge that over-rates
    labelled = rng.random(n) < 0.4
    # Two people on one unit count as their mean.
    people = {i: float(human_all[i]) for i in np.flatnonzero(labelled)}
    labels = _labels(people)
    first = int(np.flatnonzero(labelled)[0])
    extra = pl.DataFrame(
        {"request_id": [f"r{first}"], "metric": ["m"], "value": [people[first] + 0.2]}
    )
    labels = pl.concat([labels, extra])
    human = human_all.copy()
    human[first] += 0.1
    row = estimate(_values(list(judge)), _sample(strata, list(w)), labels=labels).row(0, named=True)

    theta = (w * judge).sum() / w.sum()
    wl = w * labelled
    delta = (wl * (human - judge)).sum() / wl.sum()
    z = w * (judge - theta) / w.sum() + wl * (human - judge - delta) / wl.sum()
    var = third = 0.0
    for h in set(strata):
        zh = z[[s == h for s in strata]]
        m, d = len(zh), zh - zh.mean()
        var += m / (m - 1) * float((d**2).sum())
        third += m * m / ((m - 1) * (m - 2)) * float((d**3).sum())
    # Hall's transformation g(t) = t + a t² + a² t³ / 3 + b, a = γ/3, b = γ/6, inverted by a
    # root finder rather than its closed form.
    gamma = third / var**1.5
    a, b = gamma / 3, gamma / 6
    q = stats.t.ppf(0.975, n - 3)

    def g_inverse(target: float) -> float:
        return optimize.brentq(lambda t: t + a * t * t + a * a * t**3 / 3 + b - target, -50, 50)

    point, se = theta + delta, math.sqrt(var)
    assert row["ppi_estimate"] == pytest.approx(point)
    assert row["ppi_se"] == pytest.approx(se)
    assert row["ppi_ci_low"] == pytest.approx(point - se * g_inverse(q))
    assert row["ppi_ci_high"] == pytest.approx(point - se * g_inverse(-q))
    # The judge alone is off by its bias; the correction moves toward the people's mean.
    people_mean = (w * human).sum() / w.sum()
    assert abs(row["ppi_estimate"] - people_mean) < abs(row["estimate"] - people_mean)


def test_the_standard_error_is_stored_and_the_interval_is_t_times_it() -> None:
    # The hand-checked case above: se = sqrt(4/3 × 10/144), the interval t(3) × se wide.
    sample = _sample(["a/tail"] * 4, [1.0, 1.0, 2.0, 2.0])
    row = estimate(_values([0.0, 1.0, 1.0, 0.0]), sample).row(0, named=True)
    se = math.sqrt(4 / 3 * 10 / 144)
    assert row["se"] == pytest.approx(se)
    assert row["ci_high"] - row["estimate"] == pytest.approx(stats.t.ppf(0.975, 3) * se)
    # Undoing the interval at z = 1.96 would overstate se by t(3) / z, about 1.6 times.
    assert (row["ci_high"] - row["ci_low"]) / (2 * 1.959964) > 1.5 * row["se"]
    census = estimate(_values([0.7]), _sample(["a/head"], [3.0], pis=[1.0])).row(0, named=True)
    assert census["se"] == 0.0


def test_ppi_se_and_the_units_labelled() -> None:
    rng = np.random.default_rng(3)
    strata = ["a/tail"] * 10 + ["a/head"] * 10
    w, y = list(rng.uniform(1, 5, 20)), list(rng.uniform(0, 1, 20))
    plain = estimate(_values(y), _sample(strata, w)).row(0, named=True)
    assert plain["ppi_n"] == 0 and plain["ppi_se"] is None
    given = {i: y[i] for i in range(0, 20, 4)}  # five units, people agreeing with the judge
    row = estimate(_values(y), _sample(strata, w), labels=_labels(given)).row(0, named=True)
    assert row["ppi_n"] == 5
    assert row["ppi_se"] == pytest.approx(row["se"])
    # A labelled unit whose judge value failed is no PPI pair.
    failed = [None if i == 0 else v for i, v in enumerate(y)]
    row = estimate(_values(failed), _sample(strata, w), labels=_labels(given)).row(0, named=True)
    assert row["ppi_n"] == 4


def test_the_ppi_figure_stays_inside_the_metrics_range() -> None:
    # A judge that under-rates a share near 1: people's corrections carry the mean past 1.
    rng = np.random.default_rng(5)
    strata = ["a/tail"] * 12 + ["a/head"] * 12
    w = list(rng.uniform(1, 5, 24))
    judge = list(rng.uniform(0.8, 0.95, 24))
    people = {i: 1.0 for i in range(0, 24, 2)}
    unclipped = estimate(
        _values(judge, metric="m"), _sample(strata, w), labels=_labels(people, metric="m")
    ).row(0, named=True)
    share = estimate(
        _values(judge, metric="relevant share"),
        _sample(strata, w),
        labels=_labels(people, metric="relevant share"),
    ).row(0, named=True)
    # A name nothing declares is not clipped; a declared share is kept inside [0, 1].
    assert unclipped["ppi_ci_high"] > 1.0
    assert share["ppi_ci_high"] <= 1.0 and share["ppi_estimate"] <= 1.0
    assert share["ppi_ci_low"] == pytest.approx(unclipped["ppi_ci_low"])
