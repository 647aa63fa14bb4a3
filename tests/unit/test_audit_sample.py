"""The audit's draw: normalisation, strata, the permanent hash sample, allocation, weights."""

from __future__ import annotations

import random

import polars as pl
import pytest

from ragaudit.audit import SampleOptions, draw_sample
from ragaudit.audit._sample import (
    MIN_PER_STRATUM,
    MIN_WITHIN,
    inclusion_probabilities,
    normalise_query,
    permanent_random,
    strata_table,
    units_of_day,
)
from ragaudit.errors import ConfigError
from ragaudit.schemas import AUDIT_SAMPLE


def _traffic(
    counts: dict[tuple[str, str], int], *, prefix: str = "r", seed: int = 0
) -> pl.LazyFrame:
    """Requests asking each (segment, query) ``count`` times, shuffled, with fresh ids."""
    rows = [(segment, query) for (segment, query), n in counts.items() for _ in range(n)]
    random.Random(seed).shuffle(rows)
    return pl.LazyFrame(
        {
            "request_id": [f"{prefix}{i}" for i in range(len(rows))],
            "segment": [s for s, _ in rows],
            "query": [q for _, q in rows],
        }
    )


def _zipf_counts(segments: int = 3, queries: int = 400) -> dict[tuple[str, str], int]:
    """A Zipf-shaped day: a few queries asked hundreds of times, most once."""
    return {
        (f"seg{s}", f"question number {q}"): max(1, int(600 / q))
        for s in range(segments)
        for q in range(1, queries + 1)
    }


def test_normalisation_folds_width_case_and_space() -> None:
    assert normalise_query("  What\u3000is  RAG？\t１２３ ") == "what is rag? 123"
    assert normalise_query("ﬁle") == "file"  # NFKC ligature


def test_units_deduplicate_normalised_queries_with_counts() -> None:
    requests = pl.LazyFrame(
        {
            "request_id": ["a", "b", "c", "d", "e"],
            "segment": ["x", "x", "x", "y", "x"],
            "query": ["Hello  World", "hello world", " HELLO WORLD ", "hello world", "other"],
        }
    )
    units = units_of_day(requests, SampleOptions().bands)
    counts = {(r["segment"], r["query_norm"]): r["count"] for r in units.iter_rows(named=True)}
    # The same query in another segment is another unit.
    assert counts == {("x", "hello world"): 3, ("y", "hello world"): 1, ("x", "other"): 1}
    bands = dict(zip(units["query_norm"] + units["segment"], units["band"], strict=True))
    assert bands == {"hello worldx": "torso", "hello worldy": "tail", "otherx": "tail"}


def test_inclusion_probabilities_spend_the_budget_on_requests_and_follow_them() -> None:
    units = units_of_day(_traffic(_zipf_counts()), SampleOptions().bands)
    with_pi = inclusion_probabilities(units, 60)
    pi, drawn = with_pi["pi"], with_pi["requests_drawn"]
    assert ((pi > 0) & (pi <= 1)).all()
    # The budget counts graded requests: one of each uncertain unit, lambda * count of each
    # certain one (at least two); rounding and that floor add a little.
    expected = float((pi * drawn).sum())
    assert 60.0 <= expected <= 66.0
    assert (drawn.filter(pi < 1) == 1).all()
    certain = with_pi.filter(pl.col("pi") >= 1)
    assert (
        certain["requests_drawn"] >= pl.Series([min(MIN_WITHIN, c) for c in certain["count"]])
    ).all()
    per_stratum = with_pi.group_by("stratum").agg(
        (pl.col("pi") * pl.col("requests_drawn")).sum().alias("expected"),
        pl.col("count").sum().alias("requests"),
    )
    for row in per_stratum.iter_rows(named=True):
        assert row["expected"] >= min(MIN_PER_STRATUM, row["requests"]) - 1e-9
    # Within a stratum every request has about the same chance (a self-weighting design):
    # an uncertain unit's probability is proportional to its requests.
    head = with_pi.filter((pl.col("band") == "head") & (pl.col("pi") < 1))
    ratio = (head["pi"] / head["count"]).to_list()
    assert max(ratio) == pytest.approx(min(ratio))
    # The most asked queries are taken with certainty, several of their requests graded.
    top = with_pi.sort("count", descending=True).row(0, named=True)
    assert top["pi"] == 1.0 and top["requests_drawn"] >= 2


def test_the_hash_sample_is_stable_across_days_and_changes_with_the_salt() -> None:
    opts = SampleOptions(sample=80)
    counts = _zipf_counts()
    day1 = draw_sample(_traffic(counts, prefix="d1-", seed=1), opts, salt="support-bot")
    day2 = draw_sample(_traffic(counts, prefix="d2-", seed=2), opts, salt="support-bot")
    # Same queries at the same rates on another day, other request ids, another order:
    # the same units are drawn with the same probabilities.
    assert day1["unit"].to_list() == day2["unit"].to_list()
    assert day1["pi"].to_list() == day2["pi"].to_list()
    assert set(day1["request_id"].str.slice(0, 3)) == {"d1-"}
    assert set(day2["request_id"].str.slice(0, 3)) == {"d2-"}
    other = draw_sample(_traffic(counts, prefix="d1-", seed=1), opts, salt="another-audit")
    assert set(other["unit"]) != set(day1["unit"])
    # Certainty units are drawn whatever the salt; the rest move.
    certain = set(day1.filter(pl.col("pi") >= 1)["unit"])
    assert certain <= set(other["unit"])


def test_a_query_recurring_at_the_same_rate_is_drawn_again_when_the_rest_changes() -> None:
    opts = SampleOptions(sample=80)
    counts = _zipf_counts()
    day1 = draw_sample(_traffic(counts), opts, salt="s")
    # Day 2: a tail query vanishes and another appears; the other strata are unchanged.
    changed = dict(counts)
    gone = next(key for key, n in counts.items() if n == 1 and key[0] == "seg0")
    del changed[gone]
    changed[("seg0", "a brand new question")] = 1
    day2 = draw_sample(_traffic(changed, seed=5), opts, salt="s")
    untouched = day1.filter(pl.col("segment") != "seg0")
    again = day2.filter(pl.col("segment") != "seg0")
    assert untouched["unit"].to_list() == again["unit"].to_list()


def test_the_representative_request_is_deterministic_and_one_of_the_units() -> None:
    counts = _zipf_counts(segments=1, queries=50)
    opts = SampleOptions(sample=20)
    first = draw_sample(_traffic(counts, seed=1), opts, salt="s")
    # The same requests (same ids) in another order: the same representative.
    requests = _traffic(counts, seed=1).collect()
    shuffled = requests.sample(fraction=1.0, shuffle=True, seed=3).lazy()
    second = draw_sample(shuffled, opts, salt="s")
    assert first["request_id"].to_list() == second["request_id"].to_list()
    asked = requests.with_columns(pl.col("query").str.to_lowercase())
    for row in first.iter_rows(named=True):
        own = asked.filter(pl.col("request_id") == row["request_id"])
        assert own["query"].item() == row["query_norm"]


def test_weights_represent_the_day_and_a_census_has_weight_one() -> None:
    counts = _zipf_counts(segments=2, queries=100)
    everything = draw_sample(_traffic(counts), SampleOptions(sample=None), salt="s")
    # No cap: every request of every query is graded, each standing for itself.
    assert everything.height == sum(counts.values())
    assert (everything["pi"] == 1.0).all() and (everything["pi_within"] == 1.0).all()
    assert (everything["weight"] == 1.0).all()
    drawn = draw_sample(_traffic(counts), SampleOptions(sample=40), salt="s")
    assert (drawn["weight"] == drawn["count"] / (drawn["pi"] * drawn["requests_drawn"])).all()
    assert (drawn["pi_within"] == drawn["requests_drawn"] / drawn["count"]).all()
    # Each drawn unit has its requests_drawn rows, and their weights add up to count / pi.
    per_unit = drawn.group_by("unit").agg(
        pl.len().alias("rows"),
        pl.col("requests_drawn").first(),
        pl.col("weight").sum(),
        (pl.col("count") / pl.col("pi")).first().alias("represented"),
    )
    assert (per_unit["rows"] == per_unit["requests_drawn"]).all()
    assert per_unit["weight"].to_list() == pytest.approx(per_unit["represented"].to_list())
    # The columns and types of sample.parquet, as the schema has them.
    assert drawn.to_arrow().cast(AUDIT_SAMPLE).schema.names == AUDIT_SAMPLE.names
    assert drawn.columns == AUDIT_SAMPLE.names


def test_a_certain_query_grades_its_first_requests_by_permanent_random_number() -> None:
    counts = {("a", "often asked"): 40, ("a", "rare one"): 1, ("a", "rare two"): 1}
    requests = _traffic(counts, seed=2)
    drawn = draw_sample(requests, SampleOptions(sample=8), salt="s")
    often = drawn.filter(pl.col("count") == 40)
    assert often["pi"][0] == 1.0 and often.height == often["requests_drawn"][0] >= 2
    ids = (
        requests.collect()
        .join(often.select("query_norm").unique(), left_on="query", right_on="query_norm")
        .get_column("request_id")
        .to_list()
    )
    ordered = sorted(ids, key=lambda r: (permanent_random("s", r), r))
    assert often["request_id"].to_list() == ordered[: often.height]
    assert often["pi_within"][0] == pytest.approx(often.height / 40)


def test_a_token_budget_caps_the_draw() -> None:
    units = units_of_day(_traffic(_zipf_counts()), SampleOptions().bands)
    from ragaudit.audit._sample import budget_units

    tokens = SampleOptions(sample=None, max_judge_tokens=10_000)
    assert budget_units(tokens, tokens_per_request=400.0) == 25
    # Both caps: the smaller holds.
    assert budget_units(SampleOptions(sample=10, max_judge_tokens=10_000), 400.0) == 10
    drawn_pi = inclusion_probabilities(units, budget_units(tokens, 400.0))
    expected = float((drawn_pi["pi"] * drawn_pi["requests_drawn"]).sum())
    assert 25.0 <= expected <= 28.0
    with pytest.raises(ConfigError, match="max_judge_tokens"):
        budget_units(tokens, tokens_per_request=None)


def test_the_expected_draw_size_is_the_budget() -> None:
    counts = _zipf_counts()
    sizes = [
        draw_sample(_traffic(counts), SampleOptions(sample=60), salt=f"salt{i}").height
        for i in range(40)
    ]
    # A Poisson sample: its size varies, its mean is the budget (sd of the mean < 1.3 here).
    assert abs(sum(sizes) / len(sizes) - 60) < 4


def test_the_strata_table_counts_every_stratum_and_agrees_with_the_draw() -> None:
    counts = _zipf_counts()
    opts = SampleOptions(sample=60)
    strata = strata_table(_traffic(counts), opts, salt="s")
    drawn = draw_sample(_traffic(counts), opts, salt="s")
    assert strata["units"].sum() == len(counts)
    assert strata["requests"].sum() == sum(counts.values())
    assert 60.0 <= strata["expected"].sum() <= 66.0
    assert strata["graded"].sum() == drawn.height
    assert strata["drawn"].sum() == drawn["unit"].n_unique()
    units = drawn.unique("unit")
    per = units.group_by("stratum").agg(pl.len().alias("n"), pl.col("count").sum().alias("r"))
    joined = strata.join(per, on="stratum", how="left").fill_null(0)
    assert (joined["drawn"] == joined["n"]).all()
    assert (joined["drawn_requests"] == joined["r"]).all()
