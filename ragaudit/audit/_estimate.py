"""Population estimates from the day's sample: what an average request of yesterday got.

Each metric's figure, overall and per segment, is a design-weighted mean over requests
(Hájek: ``sum(w y) / sum(w)`` over the drawn units with an ok value, ``w = count / pi`` the
requests a unit represents). Its 95 % interval is Taylor-linearised over the sample's design
through ``samplics``: strata as drawn, each unit its own primary sampling unit, a Student t
quantile on (units − strata) degrees of freedom. A unit whose metric failed or is undefined
(a list with a failed grade, nDCG of a list graded all 0) is outside the metric's domain: it
neither counts as 0 nor leaves the design (samplics' domain estimation gives it a zero score).

Two adjustments make the textbook formula fit a Poisson sample with certainty units:

- units taken with certainty (``pi = 1``) form one stratum of their own with no sampling
  variance (finite-population correction 0);
- a stratum where only one uncertain unit was drawn cannot measure its own spread: it is
  pooled with the other strata of its segment (and, if it is the segment's only one, with the
  largest stratum of the whole sample when estimating across segments). Pooling strata
  overstates the variance a little, never understates it.

Within a stratum the units are treated as drawn with replacement (no finite-population
correction), which overstates the variance where a stratum's sampling fraction is large.

Also reported: the standard error ``se`` (the interval is ``estimate`` ± t × ``se``, t on the
design's degrees of freedom, so a later test reads ``se`` rather than undoing the interval),
``n`` (units with an ok value), ``requests`` (the requests they represent) and Kish's effective
sample size ``(sum w)^2 / sum w^2``.

Where people gave their own value of some drawn units' metrics (``labels``), the
prediction-powered figure stands beside the judge's: the judge's weighted mean plus the
weighted mean of people minus judge over the labelled units (plain PPI, the same design
weights), its interval linearised over every drawn unit with the same strata (``ppi_se``;
``ppi_n`` the units labelled). It assumes the labelled units are a random subsample of the
drawn ones.
"""

from __future__ import annotations

import math
import warnings
from collections import Counter
from typing import Any

import numpy as np
import polars as pl
from scipy import stats

CONFIDENCE = 0.95
ALL = "(all)"
"""The segment name of the estimate over every segment."""
METHOD = "hajek, taylor linearisation over strata (samplics)"
_CERTAIN = "(certain)"
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


def kish_ess(weights: np.ndarray) -> float:
    """Kish's effective sample size of a set of weights."""
    total = float(weights.sum())
    return total * total / float((weights * weights).sum()) if total > 0 else 0.0


def variance_strata(
    strata: list[str], segments: list[str], certain: list[bool], *, across_segments: bool
) -> list[str]:
    """The strata the variance is computed over (see the module docstring).

    Args:
        strata: Each unit's sampling stratum.
        segments: Each unit's segment.
        certain: Whether each unit was taken with certainty.
        across_segments: Whether the units span segments (pool a segment's lone unit with the
            largest stratum) or are one segment's (leave it: its spread is unknown).
    """
    out = [_CERTAIN if c else s for s, c in zip(strata, certain, strict=True)]
    sizes = Counter(v for v in out if v != _CERTAIN)
    lone = {s for s, n in sizes.items() if n == 1}
    if not lone:
        return out
    by_segment: dict[str, list[str]] = {}
    for s, seg in zip(out, segments, strict=True):
        if s != _CERTAIN and s not in by_segment.setdefault(seg, []):
            by_segment[seg].append(s)
    target: dict[str, str] = {}
    for seg, names in by_segment.items():
        lone_here = [s for s in names if s in lone]
        if not lone_here:
            continue
        others = [s for s in names if s not in lone]
        if others:
            host = max(others, key=lambda s: (sizes[s], s))
        elif len(lone_here) > 1:
            host = f"{seg}/(pooled)"
        elif across_segments:
            rest = [s for s in sizes if s not in lone]
            host = max(rest, key=lambda s: (sizes[s], s)) if rest else "(pooled)"
        else:
            host = lone_here[0]
        for s in lone_here:
            target[s] = host
    return [target.get(s, s) for s in out]


def _samplics() -> Any:
    with warnings.catch_warnings():
        # samplics 0.6 says at import that it is archived (its successor is ``svy``); the
        # estimator is unchanged and tested here against an independent computation.
        warnings.simplefilter("ignore", FutureWarning)
        import samplics
    return samplics


def _linearised_se(z: np.ndarray, vstrata: list[str], units: list[str]) -> tuple[float, int]:
    """The standard error of a statistic from its linearised scores, and its degrees of freedom.

    The same stratified, with-replacement formula as the means: samplics' total of ``z`` with
    unit weights. The scores are shifted by 1 (samplics divides by the total, which is 0
    here); the within-stratum deviations cancel the shift.
    """
    samplics = _samplics()
    est = samplics.TaylorEstimator(samplics.PopParam.total, alpha=1 - CONFIDENCE)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        est.estimate(
            y=z + 1.0,
            samp_weight=np.ones(len(z)),
            stratum=np.asarray(vstrata, dtype=object),
            psu=np.asarray(units, dtype=object),
            fpc={s: 0.0 if s == _CERTAIN else 1.0 for s in sorted(set(vstrata))},
            single_psu=samplics.SinglePSUEst.skip,
        )
    return float(est.stderror), int(est.degree_of_freedom)


Figures = tuple[float | None, float | None, float | None, float | None]
"""A point estimate, its standard error and its 95 % interval (None where unknown)."""


def _ppi(
    judge: np.ndarray,
    judge_ok: np.ndarray,
    human: np.ndarray,
    labelled: np.ndarray,
    weight: np.ndarray,
    vstrata: list[str],
    units: list[str],
) -> Figures:
    """The prediction-powered mean, its se and its interval (None where it cannot be computed).

    The judge's Hájek mean plus the people-minus-judge Hájek mean over the labelled units,
    both with the design weights (plain PPI, no power tuning); the interval linearises the sum
    over every drawn unit, since the labelled units are a subsample of the drawn ones.
    """
    both = labelled & judge_ok
    if both.sum() < 2:
        return None, None, None, None
    wd, wl = weight * judge_ok, weight * both
    theta = float((wd * judge).sum() / wd.sum())
    delta = float((wl * (human - judge)).sum() / wl.sum())
    z = wd * (judge - theta) / wd.sum() + wl * (human - judge - delta) / wl.sum()
    se, df = _linearised_se(np.where(both | judge_ok, z, 0.0), vstrata, units)
    point = theta + delta
    if df < 1 or not math.isfinite(se):
        return point, None, None, None
    half = float(stats.t.ppf(0.5 + CONFIDENCE / 2, df)) * se
    return point, se, point - half, point + half


def _hajek(
    y: np.ndarray,
    ok: np.ndarray,
    weight: np.ndarray,
    vstrata: list[str],
    units: list[str],
) -> Figures:
    """The Hájek mean over the ok units, its se and its interval (None where unknown)."""
    if not ok.any():
        return None, None, None, None
    w_ok = weight[ok]
    point = float((w_ok * y[ok]).sum() / w_ok.sum())
    if all(s == _CERTAIN for s, o in zip(vstrata, ok, strict=True) if o):
        return point, 0.0, point, point  # every unit with a value was taken: a census, no error
    if ok.sum() < 2:
        return point, None, None, None
    samplics = _samplics()
    fpc = {s: 0.0 if s == _CERTAIN else 1.0 for s in sorted(set(vstrata))}
    # samplics divides by each domain's mean (its coefficient of variation), so a mean of 0
    # would raise: shift the values to be positive (a shift moves the mean and the interval
    # by the same amount and leaves the variance alone) and give the units outside the
    # domain a positive value too (their values never enter the domain's estimate).
    shift = 1.0 + float(np.abs(y[ok]).max())
    est = samplics.TaylorEstimator(samplics.PopParam.mean, alpha=1 - CONFIDENCE)
    with warnings.catch_warnings():
        # A lone certainty unit is a one-unit stratum with no variance: samplics' "skip".
        warnings.simplefilter("ignore", RuntimeWarning)
        est.estimate(
            y=np.where(ok, y + shift, 1.0),
            samp_weight=weight,
            stratum=np.asarray(vstrata, dtype=object),
            psu=np.asarray(units, dtype=object),
            domain=ok,
            fpc=fpc,
            single_psu=samplics.SinglePSUEst.skip,
        )
    low, high, se = est.lower_ci.get(True), est.upper_ci.get(True), est.stderror.get(True)
    if any(v is None or not math.isfinite(v) for v in (low, high, se)):
        return point, None, None, None
    return point, float(se), float(low) - shift, float(high) - shift


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
    vstrata = variance_strata(
        part["stratum"].to_list(),
        part["segment"].to_list(),
        (part["pi"] >= 1.0).to_list(),
        across_segments=across_segments,
    )
    units = part["unit"].to_list()
    point, se, low, high = _hajek(y, ok, weight, vstrata, units)
    human = part["human"].fill_null(0.0).to_numpy()
    labelled = part["human"].is_not_null().to_numpy()
    ppi = _ppi(y, ok, human, labelled, weight, vstrata, units)
    return {
        "estimate": point,
        "se": se,
        "ci_low": low,
        "ci_high": high,
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
    "CONFIDENCE",
    "ESTIMATE_COLUMNS",
    "METHOD",
    "estimate",
    "kish_ess",
    "variance_strata",
]
