"""The day's draw: which requests of production traffic are graded, and what each stands for.

The design (ADR 0013, its second stage ADR 0021) in six steps:

1. **Units.** Queries are normalised (NFKC, lower case, runs of white space to one space,
   trimmed) and deduplicated per segment: a unit is one (segment, normalised query) with the
   number of requests that asked it that day (``count``). Its id (``unit``) is a hash of the
   two, without salt, so the same query has the same id every day and in every audit.
2. **Strata** = segment × frequency band: ``head`` (``count >= bands.head``), ``torso``
   (``>= bands.torso``), ``tail``. With ``turn_strata`` × turn band too (``1``, ``2``,
   ``3-5``, ``6+``: the request's place in its session, ``_sessions.py``; requests without a
   session a band of their own), and a unit is then a query asked at one turn band: the same
   words as a first turn and as a follow-up are judged differently (with their histories).
3. **Allocation.** The day's budget of graded requests (``sample``, or ``max_judge_tokens``
   over the tokens one request's grading costs, the smaller of the two) is spread over strata
   in proportion to their requests, after at least two expected requests per stratum (so each
   stratum can say how much it varies). Within a stratum every request has the same chance
   ``lambda = budget / requests`` of being graded (a self-weighting design): a unit's
   inclusion probability is ``pi = min(1, lambda * count)``, and a unit taken with certainty
   has ``lambda * count`` of its requests graded, at least two when it has two.
4. **The draw** is a Poisson sample with permanent random numbers: each unit has
   ``u = hash(salt, unit)`` in [0, 1) and is drawn when ``u < pi``. The salt is the audit's
   name, so a query drawn once is drawn again every day it recurs at the same rate (its
   grades are then reused from the judgment store), while another audit draws independently.
5. **The requests graded** of a drawn unit (the second stage) are its ``requests_drawn``
   requests with the smallest ``hash(salt, request_id)``: a simple random sample of them,
   deterministic whatever order the log was read in. Requests of one query can be served
   different lists (an engine change mid-day, personalisation); grading more than one of a
   query taken with certainty measures how much they differ, which is its estimate's variance.
   An uncertain unit grades one request (its representative): the spread between units takes
   in the spread within them.
6. Each graded request keeps its unit's ``pi``, its chance within the unit ``pi_within``
   (``requests_drawn / count``) and its weight ``1 / (pi * pi_within)``: the requests it
   represents.

The sample size is random (a Poisson sample); its expectation is the budget.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence

import polars as pl

from ragaudit._audit_config import Bands, SampleOptions
from ragaudit.audit._sessions import turn_cells
from ragaudit.errors import ConfigError

BANDS = ("head", "torso", "tail")
MIN_PER_STRATUM = 2.0
"""Expected graded requests every stratum gets before the rest is spread by requests (fewer
when the stratum has fewer requests): one alone cannot tell how much its stratum varies."""
MIN_WITHIN = 2
"""Requests graded of a unit taken with certainty, at least (when it has that many): one alone
cannot tell how much its requests differ."""
_U_DIGITS = 13  # hex digits of the hash read as u: 52 bits, exact in a float64
UNIT_ID_VERSION = "u1"
"""Prefix of a unit id; bumped if what goes into it changes, so days stay comparable."""


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


def unit_id(segment: str, query_norm: str, turn_band: str | None = None) -> str:
    """The unit's id: a versioned hash of its segment and normalised query (no salt).

    With a ``turn_band`` (``turn_strata``) the band is hashed in under a prefix of its own,
    so such a unit is never taken for the query's unit without turns.
    """
    if turn_band is None:
        return f"{UNIT_ID_VERSION}:{_digest(segment, query_norm)[:32]}"
    return f"{UNIT_ID_VERSION}t:{_digest(segment, _digest(turn_band, query_norm))[:32]}"


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

    No stratum gets more than ``units`` (what it can give); what a full stratum cannot take
    goes to the others.
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


def _self_weighting(counts: Sequence[int], n: float) -> tuple[list[float], list[int]]:
    """Each unit's inclusion probability and requests to grade, for ``n`` expected requests.

    Every request has the chance ``lambda = n / requests``: a unit is drawn with
    ``min(1, lambda * count)``; a certain one grades ``lambda * count`` of its requests
    (rounded, at least :data:`MIN_WITHIN`, at most all of them), an uncertain one one.
    """
    total = float(sum(counts))
    lam = n / total if total > 0 else 0.0
    pi = [min(1.0, lam * c) for c in counts]
    within = [
        min(c, max(MIN_WITHIN, round(lam * c))) if p >= 1.0 else 1
        for c, p in zip(counts, pi, strict=True)
    ]
    return pi, within


def _keys(turn_strata: bool) -> list[str]:
    """What tells one unit from another: segment and normalised query, and turn band."""
    return ["segment", "turn_band", "query_norm"] if turn_strata else ["segment", "query_norm"]


def _asked(requests: pl.LazyFrame) -> pl.DataFrame:
    """Each request's id, segment, normalised query (once for the whole draw) and turn.

    ``turn`` and ``history_incomplete`` where the frame has them (``_sessions.session_turns``),
    else null and false; ``turn_band`` from ``turn``.
    """
    names = requests.collect_schema().names()
    turn = pl.col("turn") if "turn" in names else pl.lit(None, dtype=pl.Int64)
    incomplete = (
        pl.col("history_incomplete").fill_null(False)
        if "history_incomplete" in names
        else pl.lit(False)
    )
    return (
        requests.select(
            pl.col("request_id").cast(pl.String),
            pl.col("segment").cast(pl.String),
            normalised_query().alias("query_norm"),
            turn.cast(pl.Int64).alias("turn"),
            incomplete.alias("history_incomplete"),
        )
        .with_columns(turn_cells().alias("turn_band"))
        .collect()
    )


def units_of_day(requests: pl.LazyFrame, bands: Bands, turn_strata: bool = False) -> pl.DataFrame:
    """The day's units: segment, normalised query, requests, band, stratum and its size."""
    return _units(_asked(requests), bands, turn_strata)


def _units(asked: pl.DataFrame, bands: Bands, turn_strata: bool = False) -> pl.DataFrame:
    keys = _keys(turn_strata)
    units = asked.group_by(keys).agg(pl.len().cast(pl.Int64).alias("count")).sort(keys)
    if turn_strata:
        ids = [unit_id(s, q, t) for s, t, q in units.select(keys).iter_rows()]
        stratum = pl.format("{}/{}/turn {}", "segment", "band", "turn_band")
    else:
        ids = [unit_id(s, q) for s, q in units.select(keys).iter_rows()]
        units = units.with_columns(pl.lit(None, dtype=pl.String).alias("turn_band"))
        stratum = pl.format("{}/{}", "segment", "band")
    return (
        units.with_columns(pl.Series("unit", ids, dtype=pl.String), _band(bands).alias("band"))
        .with_columns(stratum.alias("stratum"))
        .with_columns(
            pl.len().over("stratum").cast(pl.Int64).alias("stratum_units"),
            pl.col("count").sum().over("stratum").cast(pl.Int64).alias("stratum_requests"),
        )
    )


def inclusion_probabilities(units: pl.DataFrame, n: int | None) -> pl.DataFrame:
    """``units`` (from :func:`units_of_day`) with ``pi`` and ``requests_drawn`` for each.

    ``n`` is the day's budget of graded requests (None: every request).
    """
    strata = units.group_by("stratum").agg(pl.col("stratum_requests").first()).sort("stratum")
    names = strata["stratum"].to_list()
    requests = strata["stratum_requests"].to_list()
    if n is None or n >= sum(requests):
        expected = [float(r) for r in requests]
    else:
        expected = _allocate(requests, requests, n)
    parts = []
    for name, n_h in zip(names, expected, strict=True):
        part = units.filter(pl.col("stratum") == name)
        pi, within = _self_weighting(part["count"].to_list(), n_h)
        parts.append(
            part.with_columns(
                pl.Series("pi", pi, dtype=pl.Float64),
                pl.Series("requests_drawn", within, dtype=pl.Int64),
            )
        )
    if not parts:
        return units.with_columns(
            pl.lit(None, dtype=pl.Float64).alias("pi"),
            pl.lit(None, dtype=pl.Int64).alias("requests_drawn"),
        )
    return pl.concat(parts)


def draw_sample(
    requests: pl.LazyFrame,
    opts: SampleOptions,
    *,
    salt: str,
    tokens_per_request: float | None = None,
) -> pl.DataFrame:
    """The day's sample: one row per graded request of a drawn unit (schema ``AUDIT_SAMPLE``).

    Args:
        requests: The day's requests (``request_id``, ``segment``, ``query`` at least).
        opts: The budget and the bands.
        salt: The permanent random numbers' salt: the audit's name.
        tokens_per_request: Judge tokens one drawn request costs to grade (its top k), needed
            when ``opts.max_judge_tokens`` is set.

    Returns:
        ``unit``, ``request_id`` (a request graded for it), ``segment``, ``band``,
        ``stratum``, ``query_norm``, ``count``, ``stratum_units``, ``stratum_requests``, ``pi``,
        ``weight`` (``count / (pi * requests_drawn)``), ``requests_drawn``, ``pi_within``
        (``requests_drawn / count``), and the request's ``turn`` and ``history_incomplete``
        (null and false without them), sorted by stratum, unit, then the order the unit's
        requests were drawn in (its first row is its representative).
    """
    asked, units = _design(requests, opts, salt, tokens_per_request)
    drawn = units.filter("drawn")
    graded = _requests_within(asked, drawn, salt, _keys(opts.turn_strata))
    return (
        drawn.join(graded, on=_keys(opts.turn_strata), how="left")
        .with_columns(
            (pl.col("count") / (pl.col("pi") * pl.col("requests_drawn"))).alias("weight"),
            (pl.col("requests_drawn") / pl.col("count")).alias("pi_within"),
        )
        .sort("stratum", "unit", "_rank")
        .select(SAMPLE_COLUMNS)
    )


def strata_table(
    requests: pl.LazyFrame,
    opts: SampleOptions,
    *,
    salt: str,
    tokens_per_request: float | None = None,
) -> pl.DataFrame:
    """Every stratum of the day, drawn from or not (what ``--dry-run`` shows).

    Returns:
        ``stratum``, ``segment``, ``band``, ``turn_band`` (null without ``turn_strata``),
        ``units``, ``requests``, ``expected`` (expected
        graded requests), ``drawn`` (units), ``drawn_requests`` (the requests of the drawn
        units) and ``graded`` (the requests to grade), sorted by stratum. A stratum with no
        draw is unrepresented that day: its segment's estimate stands for its other strata.
    """
    _, units = _design(requests, opts, salt, tokens_per_request)
    return (
        units.group_by("stratum")
        .agg(
            pl.col("segment").first(),
            pl.col("band").first(),
            pl.col("turn_band").first(),
            pl.len().cast(pl.Int64).alias("units"),
            pl.col("count").sum().alias("requests"),
            (pl.col("pi") * pl.col("requests_drawn")).sum().alias("expected"),
            pl.col("drawn").sum().cast(pl.Int64).alias("drawn"),
            pl.col("count").filter("drawn").sum().alias("drawn_requests"),
            pl.col("requests_drawn").filter("drawn").sum().cast(pl.Int64).alias("graded"),
        )
        .sort("stratum")
    )


def _design(
    requests: pl.LazyFrame, opts: SampleOptions, salt: str, tokens_per_request: float | None
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The requests normalised, and every unit with its ``pi`` and whether it is ``drawn``."""
    n = budget_units(opts, tokens_per_request)
    asked = _asked(requests)
    units = inclusion_probabilities(_units(asked, opts.bands, opts.turn_strata), n)
    u = [permanent_random(salt, unit) for unit in units["unit"]]
    return asked, units.with_columns((pl.Series(u, dtype=pl.Float64) < pl.col("pi")).alias("drawn"))


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
    "requests_drawn",
    "pi_within",
    "turn",
    "history_incomplete",
)


def _requests_within(
    asked: pl.DataFrame, drawn: pl.DataFrame, salt: str, keys: list[str]
) -> pl.DataFrame:
    """Each drawn unit's ``requests_drawn`` requests with the smallest ``hash(salt, id)``.

    With their order (``_rank``, 0 for the representative), turn and whether its history is
    whole.
    """
    theirs = asked.join(drawn.select(*keys, "requests_drawn"), on=keys)
    rank = [permanent_random(salt, r) for r in theirs["request_id"]]
    return (
        theirs.with_columns(pl.Series("_u", rank, dtype=pl.Float64))
        .sort("_u", "request_id")
        .with_columns(pl.int_range(pl.len()).over(keys).alias("_rank"))
        .filter(pl.col("_rank") < pl.col("requests_drawn"))
        .select(*keys, pl.col("request_id").cast(pl.String), "_rank", "turn", "history_incomplete")
    )


__all__ = [
    "BANDS",
    "MIN_PER_STRATUM",
    "MIN_WITHIN",
    "SAMPLE_COLUMNS",
    "Bands",
    "SampleOptions",
    "budget_units",
    "draw_sample",
    "inclusion_probabilities",
    "normalise_query",
    "normalised_query",
    "permanent_random",
    "strata_table",
    "unit_id",
    "units_of_day",
]
