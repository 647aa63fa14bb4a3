"""Population estimates from the day's sample: what an average request of yesterday got.

Each metric's figure, overall and per segment, is a design-weighted mean over requests
(Hájek: ``sum(w y) / sum(w)`` over the drawn units with an ok value, ``w = count / pi`` the
requests a unit represents) with the interval rule of the judge's design-based means
(:func:`ragaudit.stats.design_mean`, ADR 21): Taylor-linearised over the strata as drawn,
each unit its own primary sampling unit, Student t on (units − strata) degrees of freedom. A
unit whose metric failed or is undefined (a list with a failed grade, nDCG of a list graded
all 0) is outside the metric's domain: it neither counts as 0 nor leaves the design.

Two adjustments make the textbook formula fit a Poisson sample with certainty units
(:func:`ragaudit.stats.variance_strata`): units taken with certainty (``pi = 1``) form one
stratum of their own with no sampling variance, and a stratum where only one uncertain unit
was drawn is pooled with another (its spread is unknown alone). Within a stratum the units are
treated as drawn with replacement, which overstates the variance where a stratum's sampling
fraction is large.

Also reported: the standard error ``se`` (a later test reads it rather than undoing the
interval), ``n`` (units with an ok value), ``requests`` (the requests they represent) and
Kish's effective sample size ``(sum w)^2 / sum w^2``.

Where people gave their own value of some drawn units' metrics (``labels``), the
prediction-powered figure stands beside the judge's (:func:`ragaudit.stats.design_ppi`): the
judge's weighted mean plus the weighted mean of people minus judge over the labelled units,
its variance over the day's design and, where the day took its units whole, over the labelled
subsample itself (``ppi_se``; ``ppi_n`` the units labelled).
"""

from __future__ import annotations

import numpy as np
import polars as pl

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

ALL = "(all)"
"""The segment name of the estimate over every segment."""
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


def _design(part: pl.DataFrame, across_segments: bool) -> Design:
    """The drawn units' design: each unit its own PSU in its (pooled) stratum, certainty apart."""
    vstrata = variance_strata(
        part["stratum"].to_list(),
        part["segment"].to_list(),
        (part["pi"] >= 1.0).to_list(),
        across_segments=across_segments,
    )
    fpc = {s: 0.0 if s == CERTAIN else 1.0 for s in set(vstrata)}
    return Design.of(part["unit"].to_list(), vstrata, fpc)


def _ppi(
    judge: np.ndarray,
    judge_ok: np.ndarray,
    human: np.ndarray,
    labelled: np.ndarray,
    weight: np.ndarray,
    design: Design,
) -> DesignEstimate:
    """The prediction-powered mean of the labelled units (:func:`ragaudit.stats.design_ppi`).

    The judge's Hájek mean over the ok units plus the people-minus-judge Hájek mean over the
    labelled ones, both with the design weights. The labelled units are a random subsample of
    the drawn ones (the labelling queue's permanent random order): a second phase, drawn
    without replacement from the drawn units with a value.
    """
    both = labelled & judge_ok
    theta, z = hajek_scores(judge, weight, judge_ok)
    at = np.flatnonzero(both)
    whole = design.whole()
    drawn_whole = int((judge_ok & whole).sum())
    labelled_whole = int((both & whole).sum())
    fpc = 1.0 - labelled_whole / drawn_whole if drawn_whole else 1.0
    second = Design.of(design.psus[at].tolist(), fpc={"": fpc})
    return design_ppi(
        theta,
        (human - judge)[at],
        weight[at],
        second,
        first=FirstPhase(z, design, at),
    )


def _key(values: pl.DataFrame) -> str:
    """The column ``values`` names a drawn unit by: ``unit``, else ``request_id``."""
    for key in ("unit", "request_id"):
        if key in values.columns:
            return key
    raise ValueError(f"values: no 'unit' or 'request_id' column (columns: {values.columns})")


def _ok_values(values: pl.DataFrame, key: str) -> pl.DataFrame:
    value = pl.col("value").cast(pl.Float64)
    ok = (pl.col("status") == "ok") & value.is_not_null() & value.is_finite()
    return values.select(
        pl.col(key).cast(pl.String),
        pl.col("metric").cast(pl.String),
        pl.when(ok).then(value).otherwise(None).alias("value"),
    )


def estimate(
    values: pl.DataFrame,
    sample: pl.DataFrame,
    *,
    labels: pl.DataFrame | None = None,
) -> pl.DataFrame:
    """Per metric, overall and per segment: the Hájek mean, its 95 % interval, n, requests, ESS.

    Args:
        values: One row per drawn unit × metric: ``unit`` (or ``request_id``, the unit's
            representative request), ``metric``, ``value``, ``status`` (only ``ok`` rows with
            a finite value count; a drawn unit with no row for a metric is outside that
            metric's domain, as a failed one is).
        sample: The day's draw (:func:`ragaudit.audit.draw_sample`, schema ``AUDIT_SAMPLE``).
        labels: People's values of drawn units' metrics, the same columns as ``values``
            without ``status`` (a person's nDCG@k from their grades of every served document
            in the top k, a person's faithfulness verdict ...; several rows of one unit and
            metric are averaged). Where at least two units of a cell are labelled, the
            prediction-powered (PPI) mean and interval fill the ``ppi_*`` columns; else null.

    Returns:
        Rows of schema ``AUDIT_ESTIMATES``: segment ``(all)`` first, then each segment, per
        metric in the order the metrics first appear in ``values``.
    """
    rows: list[dict[str, object]] = []
    key = _key(values)
    ok_values = _ok_values(values, key)
    if ok_values.select(key, "metric").is_duplicated().any():
        raise ValueError(f"values: more than one row for a {key} and metric")
    human = (
        labels.filter(pl.col("value").is_not_null() & pl.col("value").cast(pl.Float64).is_finite())
        .group_by(pl.col(_key(labels)).cast(pl.String).alias(key), pl.col("metric").cast(pl.String))
        .agg(pl.col("value").cast(pl.Float64).mean().alias("human"))
        if labels is not None and not labels.is_empty()
        else pl.DataFrame(schema={key: pl.String, "metric": pl.String, "human": pl.Float64})
    )
    metrics = list(dict.fromkeys(ok_values["metric"].to_list()))
    segments = sorted(set(sample["segment"].to_list()))
    for metric in metrics:
        joined = sample.join(
            ok_values.filter(pl.col("metric") == metric).select(key, "value"),
            on=key,
            how="left",
        ).join(human.filter(pl.col("metric") == metric).select(key, "human"), on=key, how="left")
        for segment in [ALL, *segments]:
            part = joined if segment == ALL else joined.filter(pl.col("segment") == segment)
            rows.append({"segment": segment, "metric": metric, **_figures(part, segment == ALL)})
    if not rows:
        return pl.DataFrame(schema={c: _DTYPES[c] for c in ESTIMATE_COLUMNS})
    return pl.DataFrame(rows, schema={c: _DTYPES[c] for c in ESTIMATE_COLUMNS}, orient="row")


def _figures(part: pl.DataFrame, across_segments: bool) -> dict[str, object]:
    y = part["value"].fill_null(0.0).to_numpy()
    ok = part["value"].is_not_null().to_numpy()
    weight = part["weight"].to_numpy().astype(float)
    design = _design(part, across_segments)
    judge = design_mean(y, weight, design, skewed=False, ok=ok)
    human = part["human"].fill_null(0.0).to_numpy()
    labelled = part["human"].is_not_null().to_numpy()
    ppi = _ppi(y, ok, human, labelled, weight, design).figures()
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


_DTYPES: dict[str, pl.DataType] = {
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
    "estimate",
]
