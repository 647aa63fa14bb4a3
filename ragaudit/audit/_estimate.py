"""Population estimates from the day's sample: what an average request of yesterday got.

Each metric's figure, overall and per segment, is a design-weighted mean over requests
(Hájek: ``sum(w y) / sum(w)`` over the graded requests with an ok value, ``w`` the requests
one represents) with the interval rule of the judge's design-based means
(:func:`ragaudit.stats.design_mean`, ADR 21): Taylor-linearised over the design, Student t on
(PSUs − strata) degrees of freedom. A request whose metric failed or is undefined (a list
with a failed grade, nDCG of a list graded all 0) is outside the metric's domain: it neither
counts as 0 nor leaves the design.

The design (:func:`_design`): an uncertain unit is its stratum's PSU and takes in the spread
between its requests; a stratum where only one uncertain unit was drawn is pooled with another
(:func:`ragaudit.stats.variance_strata`). A unit taken with certainty is a stratum of its own
whose graded requests are its PSUs: requests of one query can be served different lists, and
how much they differ is the estimate's variance. PSUs of both stages are treated as drawn with
replacement, which overstates the variance where a large share was drawn. A unit taken whole
(every request graded) has none.

Also reported: the standard error ``se`` (a later test reads it rather than undoing the
interval), ``n`` (graded requests with an ok value), ``requests`` (the requests they
represent) and Kish's effective sample size ``(sum w)^2 / sum w^2``.

By turn (:func:`estimate_turns`): the same figures of each turn band and turn kind over every
segment, each cell a domain of the one design (its requests' values, the whole sample's
strata and PSUs), not a second estimator.

Where people gave their own value of some graded requests' metrics (``labels``), the
prediction-powered figure stands beside the judge's (:func:`ragaudit.stats.design_ppi`): the
judge's weighted mean plus the weighted mean of people minus judge over the labelled requests,
its variance over the day's design and, where the day took its units whole, over the labelled
subsample itself (``ppi_se``; ``ppi_n`` the requests labelled).
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import polars as pl

from ragaudit.audit._segments import ALL
from ragaudit.audit._sessions import KIND_CELLS, TURN_CELLS, turn_cells, turn_kind
from ragaudit.stats import (
    CERTAIN,
    Design,
    DesignEstimate,
    FirstPhase,
    design_mean,
    design_ppi,
    hajek_scores,
    kish_ess,
    variance_strata,
)

METHOD = "hajek, taylor linearisation over strata, t on the design's df"
ESTIMATE_COLUMNS = (
    "segment",
    "metric",
    "estimate",
    "se",
    "ci_low",
    "ci_high",
    "n",
    "requests",
    "ess",
    "method",
    "ppi_estimate",
    "ppi_se",
    "ppi_ci_low",
    "ppi_ci_high",
    "ppi_n",
)
TURN_ESTIMATE_COLUMNS = (
    "breakdown",
    "cell",
    "metric",
    "estimate",
    "se",
    "ci_low",
    "ci_high",
    "n",
    "incomplete",
    "requests",
    "ess",
    "method",
    "ppi_estimate",
    "ppi_se",
    "ppi_ci_low",
    "ppi_ci_high",
    "ppi_n",
)


def _design(part: pl.DataFrame, across_segments: bool) -> Design:
    """The graded requests' design (ADR 21): where each one's sampling variance comes from.

    A request of an uncertain unit: its unit is its PSU, in the unit's stratum. A request of a
    unit taken with certainty of which some requests were graded: the unit is a stratum of its
    own whose PSUs are those requests. Both stages' PSUs are treated as drawn with replacement
    (no finite-population correction: the variance errs wide where many were drawn). A unit
    taken with certainty and graded whole (or, on days drawn before the second stage, by one
    request): no sampling variance. A lone uncertain unit is pooled with another stratum of its
    segment (:func:`ragaudit.stats.variance_strata`).
    """
    within = sampled_within(part)
    units = part["unit"].to_list()
    strata = [
        f"{CERTAIN}/{u}" if w else s
        for u, s, w in zip(units, part["stratum"].to_list(), within, strict=True)
    ]
    vstrata = variance_strata(
        strata,
        part["segment"].to_list(),
        (part["pi"] >= 1.0).to_list(),
        across_segments=across_segments,
        within=within.tolist(),
    )
    fpc = {s: 0.0 if s == CERTAIN else 1.0 for s in set(vstrata)}
    requests = part["request_id"].to_list() if within.any() else []
    psus = [requests[i] if w else u for i, (u, w) in enumerate(zip(units, within, strict=True))]
    return Design.of(psus, vstrata, fpc)


def sampled_within(sample: pl.DataFrame) -> np.ndarray:
    """Which rows are requests sampled within a unit taken with certainty (their own PSUs).

    None on a day drawn before the second stage (one request a unit, no ``requests_drawn``).
    """
    if "requests_drawn" not in sample.columns:
        return np.zeros(sample.height, dtype=bool)
    drawn = sample["requests_drawn"].fill_null(1).to_numpy()
    certain = (sample["pi"] >= 1.0).to_numpy()
    return certain & (drawn >= 2) & (drawn < sample["count"].to_numpy())


def _ppi(
    judge: np.ndarray,
    judge_ok: np.ndarray,
    human: np.ndarray,
    labelled: np.ndarray,
    weight: np.ndarray,
    design: Design,
    requests: list[str],
) -> DesignEstimate:
    """The prediction-powered mean of the labelled requests (:func:`ragaudit.stats.design_ppi`).

    The judge's Hájek mean over the ok requests plus the people-minus-judge Hájek mean over
    the labelled ones, both with the design weights. The labelled requests are a random
    subsample of the graded ones (the labelling queue's permanent random order): a second
    phase, drawn without replacement from the graded requests with a value.
    """
    both = labelled & judge_ok
    theta, z = hajek_scores(judge, weight, judge_ok)
    at = np.flatnonzero(both)
    below = design.factors() < 1.0  # where the first phase leaves some of the labelling out
    drawn, labels = int((judge_ok & below).sum()), int((both & below).sum())
    second = Design.of([requests[i] for i in at], fpc={"": 1.0 - labels / drawn if drawn else 1.0})
    return design_ppi(
        theta, (human - judge)[at], weight[at], second, first=FirstPhase(z, design, at)
    )


def _key(values: pl.DataFrame) -> str:
    """The column ``values`` names a graded request by: ``request_id``, else ``unit``.

    A day drawn before the second stage graded one request a unit: either names it.
    """
    for key in ("request_id", "unit"):
        if key in values.columns:
            return key
    raise ValueError(f"values: no 'request_id' or 'unit' column (columns: {values.columns})")


def _ok_values(values: pl.DataFrame, key: str) -> pl.DataFrame:
    value = pl.col("value").cast(pl.Float64)
    ok = (pl.col("status") == "ok") & value.is_not_null() & value.is_finite()
    return values.select(
        pl.col(key).cast(pl.String),
        pl.col("metric").cast(pl.String),
        pl.when(ok).then(value).otherwise(None).alias("value"),
    )


def _joined(
    values: pl.DataFrame, sample: pl.DataFrame, labels: pl.DataFrame | None
) -> Iterator[tuple[str, pl.DataFrame]]:
    """Per metric (in the order they first appear), the sample with its ``value`` and ``human``.

    Raises:
        ValueError: ``values`` has more than one row for a request and metric.
    """
    key = _key(values)
    ok_values = _ok_values(values, key)
    if ok_values.select(key, "metric").is_duplicated().any():
        raise ValueError(f"values: more than one row for a {key} and metric")
    human = (
        labels.filter(pl.col("value").is_not_null() & pl.col("value").cast(pl.Float64).is_finite())
        .group_by(
            pl.col(key if key in labels.columns else _key(labels)).cast(pl.String).alias(key),
            pl.col("metric").cast(pl.String),
        )
        .agg(pl.col("value").cast(pl.Float64).mean().alias("human"))
        if labels is not None and not labels.is_empty()
        else pl.DataFrame(schema={key: pl.String, "metric": pl.String, "human": pl.Float64})
    )
    for metric in dict.fromkeys(ok_values["metric"].to_list()):
        yield (
            metric,
            sample.join(
                ok_values.filter(pl.col("metric") == metric).select(key, "value"),
                on=key,
                how="left",
            ).join(
                human.filter(pl.col("metric") == metric).select(key, "human"), on=key, how="left"
            ),
        )


def estimate(
    values: pl.DataFrame,
    sample: pl.DataFrame,
    *,
    labels: pl.DataFrame | None = None,
) -> pl.DataFrame:
    """Per metric, overall and per segment: the Hájek mean, its 95 % interval, n, requests, ESS.

    Args:
        values: One row per graded request × metric: ``request_id`` (or, on a day drawn
            before the second stage, ``unit``), ``metric``, ``value``, ``status`` (only ``ok``
            rows with a finite value count; a graded request with no row for a metric is
            outside that metric's domain, as a failed one is).
        sample: The day's draw (:func:`ragaudit.audit.draw_sample`, schema ``AUDIT_SAMPLE``).
        labels: People's values of graded requests' metrics, the same columns as ``values``
            without ``status`` (a person's nDCG@k from their grades of every served document
            in the top k, a person's faithfulness verdict ...; several rows of one request and
            metric are averaged). Where at least two requests of a cell are labelled, the
            prediction-powered (PPI) mean and interval fill the ``ppi_*`` columns; else null.

    Returns:
        Rows of schema ``AUDIT_ESTIMATES``: segment ``(all)`` first, then each segment, per
        metric in the order the metrics first appear in ``values``.
    """
    rows: list[dict[str, object]] = []
    segments = sorted(set(sample["segment"].to_list()))
    for metric, joined in _joined(values, sample, labels):
        for segment in [ALL, *segments]:
            part = joined if segment == ALL else joined.filter(pl.col("segment") == segment)
            rows.append({"segment": segment, "metric": metric, **_figures(part, segment == ALL)})
    if not rows:
        return pl.DataFrame(schema={c: _DTYPES[c] for c in ESTIMATE_COLUMNS})
    return pl.DataFrame(rows, schema={c: _DTYPES[c] for c in ESTIMATE_COLUMNS}, orient="row")


def _figures(
    part: pl.DataFrame, across_segments: bool, domain: np.ndarray | None = None
) -> dict[str, object]:
    """The figures of ``part``'s requests, or of its ``domain`` within the whole design."""
    y = part["value"].fill_null(0.0).to_numpy()
    ok = part["value"].is_not_null().to_numpy()
    if domain is not None:
        ok = ok & domain
    weight = part["weight"].to_numpy().astype(float)
    design = _design(part, across_segments)
    judge = design_mean(y, weight, design, skewed=False, ok=ok)
    human = part["human"].fill_null(0.0).to_numpy()
    labelled = part["human"].is_not_null().to_numpy()
    requests = part["request_id" if "request_id" in part.columns else "unit"].to_list()
    ppi = _ppi(y, ok, human, labelled, weight, design, requests).figures()
    return {
        "estimate": judge.point,
        "se": judge.se,
        "ci_low": judge.ci_low,
        "ci_high": judge.ci_high,
        "n": int(ok.sum()),
        "requests": float(weight[ok].sum()),
        "ess": kish_ess(weight[ok]),
        "method": METHOD,
        "ppi_estimate": ppi[0],
        "ppi_se": ppi[1],
        "ppi_ci_low": ppi[2],
        "ppi_ci_high": ppi[3],
        "ppi_n": int((labelled & ok).sum()),
    }


def estimate_turns(
    values: pl.DataFrame,
    sample: pl.DataFrame,
    *,
    labels: pl.DataFrame | None = None,
) -> pl.DataFrame:
    """Per metric, over every segment: the figures of each turn band and each turn kind.

    A cell (turn band ``1``, ``2``, ``3-5``, ``6+``; turn kind ``standalone``, ``follow-up``,
    ``(unknown)``; requests without a session in ``(no session)``) is a domain of the day's
    design: its requests' values with the day's weights, strata and PSUs, the rest of the
    sample in the design with no value of the cell (:func:`ragaudit.stats.design_mean`'s
    domain), so its interval is the design's whether turn bands are strata
    (``audit.turn_strata``) or not. ``incomplete``: the cell's requests whose history may miss
    turns (counted in the band of the turns found). A day drawn before sessions were read
    (no ``turn`` column), or with no session sampled, has no rows.

    Args:
        values: As :func:`estimate` reads them.
        sample: The day's draw, with ``turn`` and ``history_incomplete``.
        labels: As :func:`estimate` reads them.

    Returns:
        Rows of schema ``AUDIT_TURN_ESTIMATES``: the turn bands, then the turn kinds, per metric
        in the order the metrics first appear in ``values``.
    """
    schema = {c: _DTYPES[c] for c in TURN_ESTIMATE_COLUMNS}
    if "turn" not in sample.columns or sample["turn"].is_null().all():
        return pl.DataFrame(schema=schema)
    kinds = [
        turn_kind(t, i)
        for t, i in zip(
            sample["turn"].to_list(), sample["history_incomplete"].to_list(), strict=True
        )
    ]
    cells = sample.with_columns(
        turn_cells().alias("_band"),
        pl.Series("_kind", kinds, dtype=pl.String),
        pl.col("history_incomplete").fill_null(False),
    )
    rows: list[dict[str, object]] = []
    for metric, joined in _joined(values, cells, labels):
        incomplete = joined["history_incomplete"].to_numpy()
        ok = joined["value"].is_not_null().to_numpy()
        for breakdown, column, names in (
            ("turn_band", "_band", TURN_CELLS),
            ("turn_kind", "_kind", KIND_CELLS),
        ):
            present = set(joined[column].to_list())
            for cell in (c for c in names if c in present):
                domain = (joined[column] == cell).to_numpy()
                figures = _figures(joined, True, domain)
                rows.append(
                    {
                        "breakdown": breakdown,
                        "cell": cell,
                        "metric": metric,
                        **figures,
                        "incomplete": int((domain & ok & incomplete).sum()),
                    }
                )
    return pl.DataFrame(rows, schema=schema, orient="row") if rows else pl.DataFrame(schema=schema)


_DTYPES: dict[str, pl.DataType] = {
    "breakdown": pl.String(),
    "cell": pl.String(),
    "incomplete": pl.Int64(),
    "segment": pl.String(),
    "metric": pl.String(),
    "estimate": pl.Float64(),
    "se": pl.Float64(),
    "ci_low": pl.Float64(),
    "ci_high": pl.Float64(),
    "n": pl.Int64(),
    "requests": pl.Float64(),
    "ess": pl.Float64(),
    "method": pl.String(),
    "ppi_estimate": pl.Float64(),
    "ppi_se": pl.Float64(),
    "ppi_ci_low": pl.Float64(),
    "ppi_ci_high": pl.Float64(),
    "ppi_n": pl.Int64(),
}

__all__ = [
    "ALL",
    "ESTIMATE_COLUMNS",
    "METHOD",
    "TURN_ESTIMATE_COLUMNS",
    "estimate",
    "estimate_turns",
]
