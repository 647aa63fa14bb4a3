"""The day's draw: which requests of production traffic are graded, and what each stands for.

The design (ADR 0013) in five steps:

1. **Units.** Queries are normalised (NFKC, lower case, runs of white space to one space,
   trimmed) and deduplicated per segment: a unit is one (segment, normalised query) with the
   number of requests that asked it that day (``count``). Its id (``unit``) is a hash of the
   two, without salt, so the same query has the same id every day and in every audit.
2. **Strata** = segment × frequency band: ``head`` (``count >= bands.head``), ``torso``
   (``>= bands.torso``), ``tail``.
3. **Allocation.** The day's budget (``sample`` units, or ``max_judge_tokens`` over the
   tokens one request's grading costs, the smaller of the two) is spread over strata in
   proportion to their requests, after at least two expected draws per stratum (so each
   stratum can say how much it varies). Within a stratum a unit's inclusion probability is
   proportional to its requests, ``pi = min(1, lambda_h * count)``: the most asked queries
   are taken with certainty and every drawn request stands for about as many requests as any
   other.
4. **The draw** is a Poisson sample with permanent random numbers: each unit has
   ``u = hash(salt, unit)`` in [0, 1) and is drawn when ``u < pi``. The salt is the audit's
   name, so a query drawn once is drawn again every day it recurs at the same rate (its
   grades are then reused from the judgment store), while another audit draws independently.
5. **The representative request** of a drawn unit is the one of its requests with the smallest
   ``hash(salt, request_id)``: deterministic, and the same whatever order the log was read in.

Every drawn unit keeps its inclusion probability ``pi`` and its weight ``count / pi``: the
requests it represents. The sample size is random (a Poisson sample); its expectation is the
budget.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence

import polars as pl
from pydantic import BaseModel, ConfigDict, Field, model_validator

from ragaudit.errors import ConfigError

BANDS = ("head", "torso", "tail")
MIN_PER_STRATUM = 2.0
"""Expected draws every stratum gets before the rest is spread by requests (fewer when the
stratum has fewer units): one unit alone cannot tell how much its stratum varies."""
_U_DIGITS = 13  # hex digits of the hash read as u: 52 bits, exact in a float64
UNIT_ID_VERSION = "u1"
"""Prefix of a unit id; bumped if what goes into it changes, so days stay comparable."""


class Bands(BaseModel):
    """Frequency-band thresholds in requests a day."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    head: int = Field(default=10, ge=2)
    """A query asked at least this many times a day is in the head band."""
    torso: int = Field(default=2, ge=2)
    """A query asked at least this many times (and fewer than ``head``) is torso; fewer, tail."""

    @model_validator(mode="after")
    def _ordered(self) -> Bands:
        if self.torso > self.head:
            raise ValueError(f"bands: torso ({self.torso}) must not exceed head ({self.head})")
        return self


class SampleOptions(BaseModel):
    """How much of the day's traffic is graded, and how it is stratified."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    sample: int | None = Field(default=400, ge=1)
    """Requests to grade a day (the expected size of the draw; each is one distinct query of
    its segment). None: no cap by count (then ``max_judge_tokens`` caps, or every query is
    taken)."""
    max_judge_tokens: int | None = Field(default=None, ge=1)
    """Judge tokens a day at most, counted as if no grade were reused from the judgment store;
    with ``sample`` too, the smaller of the two caps holds."""
    bands: Bands = Field(default_factory=Bands)
    """Frequency bands of a query by its requests that day (head / torso / tail)."""
    k: int = Field(default=10, ge=1, le=100)
    """Served documents graded per drawn request (the top k)."""


def normalised_query(column: str = "query") -> pl.Expr:
    """A query column normalised: NFKC, lower case, white space collapsed and trimmed."""
    return (
        pl.col(column)
        .str.normalize("NFKC")
        .str.to_lowercase()
        .str.replace_all(r"\s+", " ")
        .str.strip_chars()
    )


def normalise_query(text: str) -> str:
    """One query normalised as :func:`normalised_query` does a column (one mechanism)."""
    return str(pl.DataFrame({"query": [text]}).select(normalised_query()).item())


def _digest(first: str, second: str) -> str:
    # Length-prefixed, so no two (first, second) pairs share a text; this runs once per unit
    # and per request of a drawn unit (10^5 a day), where canonical JSON would cost seconds.
    return hashlib.sha256(f"{len(first)}:{first}{second}".encode()).hexdigest()


def unit_id(segment: str, query_norm: str) -> str:
    """The unit's id: a versioned hash of its segment and normalised query (no salt)."""
    return f"{UNIT_ID_VERSION}:{_digest(segment, query_norm)[:32]}"


def permanent_random(salt: str, key: str) -> float:
    """The permanent random number of ``key`` under ``salt``: uniform in [0, 1), stable."""
    return int(_digest(salt, key)[:_U_DIGITS], 16) / 16**_U_DIGITS


def budget_units(opts: SampleOptions, tokens_per_request: float | None) -> int | None:
    """The expected number of draws the options allow (None: no cap).

    Raises:
        ConfigError: ``max_judge_tokens`` is set but the cost of one request is unknown.
    """
    caps: list[int] = []
    if opts.sample is not None:
        caps.append(opts.sample)
    if opts.max_judge_tokens is not None:
        if tokens_per_request is None or not tokens_per_request > 0:
            raise ConfigError(
                "audit.max_judge_tokens is set but the judge tokens one request costs are "
                f"unknown (tokens_per_request={tokens_per_request!r})"
            )
        caps.append(max(1, math.floor(opts.max_judge_tokens / tokens_per_request)))
    return min(caps) if caps else None


def _band(bands: Bands) -> pl.Expr:
    count = pl.col("count")
    return (
        pl.when(count >= bands.head)
        .then(pl.lit("head"))
        .when(count >= bands.torso)
        .then(pl.lit("torso"))
        .otherwise(pl.lit("tail"))
    )


def _allocate(units: Sequence[int], requests: Sequence[int], n: float) -> list[float]:
    """Expected draws per stratum: a floor of :data:`MIN_PER_STRATUM`, the rest by requests.

    No stratum gets more than its units; what a full stratum cannot take goes to the others.
    """
    alloc = [min(float(u), MIN_PER_STRATUM) for u in units]
    open_ = [a < u for a, u in zip(alloc, units, strict=True)]
    rest = n - sum(alloc)
    while rest > 1e-9 and any(open_):
        weight = sum(r for r, o in zip(requests, open_, strict=True) if o)
        spill = 0.0
        for h, (u, r) in enumerate(zip(units, requests, strict=True)):
            if not open_[h]:
                continue
            want = alloc[h] + rest * r / weight
            if want >= u:
                spill += want - u
                alloc[h], open_[h] = float(u), False
            else:
                alloc[h] = want
        rest = spill
    return alloc


def _pps(counts: Sequence[int], n: float) -> list[float]:
    """Inclusion probabilities proportional to ``counts``, capped at 1, summing to ``n``."""
    if n >= len(counts):
        return [1.0] * len(counts)
    order = sorted(range(len(counts)), key=lambda i: -counts[i])
    certain = 0
    remaining = float(sum(counts))
    # The largest units become certain one by one while lambda * count would pass 1.
    while certain < len(order):
        lam = (n - certain) / remaining
        top = order[certain]
        if lam * counts[top] < 1.0:
            break
        remaining -= counts[top]
        certain += 1
    pi = [0.0] * len(counts)
    lam = (n - certain) / remaining if remaining > 0 else 0.0
    for rank, i in enumerate(order):
        pi[i] = 1.0 if rank < certain else min(1.0, lam * counts[i])
    return pi


def _asked(requests: pl.LazyFrame) -> pl.DataFrame:
    """Each request's id, segment and normalised query (normalised once for the whole draw)."""
    return requests.select(
        pl.col("request_id").cast(pl.String),
        pl.col("segment").cast(pl.String),
        normalised_query().alias("query_norm"),
    ).collect()


def units_of_day(requests: pl.LazyFrame, bands: Bands) -> pl.DataFrame:
    """The day's units: segment, normalised query, requests, band, stratum and its size."""
    return _units(_asked(requests), bands)


def _units(asked: pl.DataFrame, bands: Bands) -> pl.DataFrame:
    units = (
        asked.group_by("segment", "query_norm")
        .agg(pl.len().cast(pl.Int64).alias("count"))
        .sort("segment", "query_norm")
    )
    ids = [unit_id(s, q) for s, q in units.select("segment", "query_norm").iter_rows()]
    return (
        units.with_columns(pl.Series("unit", ids, dtype=pl.String), _band(bands).alias("band"))
        .with_columns(pl.format("{}/{}", "segment", "band").alias("stratum"))
        .with_columns(
            pl.len().over("stratum").cast(pl.Int64).alias("stratum_units"),
            pl.col("count").sum().over("stratum").cast(pl.Int64).alias("stratum_requests"),
        )
    )


def inclusion_probabilities(units: pl.DataFrame, n: int | None) -> pl.DataFrame:
    """``units`` (from :func:`units_of_day`) with each one's inclusion probability ``pi``."""
    strata = (
        units.group_by("stratum")
        .agg(pl.col("stratum_units").first(), pl.col("stratum_requests").first())
        .sort("stratum")
    )
    names = strata["stratum"].to_list()
    if n is None or n >= units.height:
        expected = [float(u) for u in strata["stratum_units"]]
    else:
        expected = _allocate(
            strata["stratum_units"].to_list(), strata["stratum_requests"].to_list(), n
        )
    parts = []
    for name, n_h in zip(names, expected, strict=True):
        part = units.filter(pl.col("stratum") == name)
        pi = _pps(part["count"].to_list(), n_h)
        parts.append(part.with_columns(pl.Series("pi", pi, dtype=pl.Float64)))
    if not parts:
        return units.with_columns(pl.lit(None, dtype=pl.Float64).alias("pi"))
    return pl.concat(parts)


def draw_sample(
    requests: pl.LazyFrame,
    opts: SampleOptions,
    *,
    salt: str,
    tokens_per_request: float | None = None,
) -> pl.DataFrame:
    """The day's sample: one row per drawn unit (schema ``AUDIT_SAMPLE``).

    Args:
        requests: The day's requests (``request_id``, ``segment``, ``query`` at least).
        opts: The budget and the bands.
        salt: The permanent random numbers' salt: the audit's name.
        tokens_per_request: Judge tokens one drawn request costs to grade (its top k), needed
            when ``opts.max_judge_tokens`` is set.

    Returns:
        ``unit``, ``request_id`` (the request drawn to represent it), ``segment``, ``band``,
        ``stratum``, ``query_norm``, ``count``, ``stratum_units``, ``stratum_requests``, ``pi``,
        ``weight`` (``count / pi``), sorted by stratum then unit.
    """
    n = budget_units(opts, tokens_per_request)
    asked = _asked(requests)
    units = inclusion_probabilities(_units(asked, opts.bands), n)
    u = [permanent_random(salt, unit) for unit in units["unit"]]
    drawn = units.filter(pl.Series(u) < pl.col("pi"))
    reps = _representatives(asked, drawn, salt)
    return (
        drawn.join(reps, on=["segment", "query_norm"], how="left")
        .with_columns((pl.col("count") / pl.col("pi")).alias("weight"))
        .select(SAMPLE_COLUMNS)
        .sort("stratum", "unit")
    )


SAMPLE_COLUMNS = (
    "unit",
    "request_id",
    "segment",
    "band",
    "stratum",
    "query_norm",
    "count",
    "stratum_units",
    "stratum_requests",
    "pi",
    "weight",
)


def _representatives(asked: pl.DataFrame, drawn: pl.DataFrame, salt: str) -> pl.DataFrame:
    """The request of each drawn unit with the smallest ``hash(salt, request_id)``."""
    theirs = asked.join(drawn.select("segment", "query_norm"), on=["segment", "query_norm"])
    rank = [permanent_random(salt, r) for r in theirs["request_id"]]
    return (
        theirs.with_columns(pl.Series("_u", rank, dtype=pl.Float64))
        .sort("_u", "request_id")
        .group_by("segment", "query_norm", maintain_order=True)
        .first()
        .select("segment", "query_norm", pl.col("request_id").cast(pl.String))
    )


__all__ = [
    "BANDS",
    "MIN_PER_STRATUM",
    "SAMPLE_COLUMNS",
    "Bands",
    "SampleOptions",
    "budget_units",
    "draw_sample",
    "inclusion_probabilities",
    "normalise_query",
    "normalised_query",
    "permanent_random",
    "unit_id",
    "units_of_day",
]
