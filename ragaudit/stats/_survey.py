"""Survey statistics: figures from a sample drawn under a design, and tests between two designs.

A design says, element by element, which variance stratum it belongs to, which primary
sampling unit (PSU) it came in, and per stratum the share of its PSUs' variance that is
sampling variance (``fpc``: 1 drawn with replacement, 0 taken whole). Every design-based mean
ragaudit reports is a Hájek mean ``Σ w y / Σ w`` and follows one rule (ADR 21):

- its standard error is Taylor-linearised over the design by ``samplics`` (the with-replacement
  "ultimate cluster" variance of the PSU totals, which takes in every later stage and phase
  of a stratum whose PSUs were sampled; Hansen, Hurwitz & Madow 1953). Where a stratum was
  taken whole, its next stage is what varies: the caller makes that stage's units the PSUs
  (:class:`Design`), and a labelled subsample inside it is a second phase of its own
  (:func:`design_ppi`);
- its interval is Student t on the design's degrees of freedom (PSUs − strata)
  (:func:`design_interval`); a mean of people's labels or a PPI correction (a few labelled
  units, residuals mostly 0 with a long tail) has it moved for the skew of the PSU totals by
  Hall's transformation.

A change between two designs' estimates is a z-test on their variances (:func:`z_test`); a
trailing baseline's variance adds the figure's day-to-day spread (:func:`baseline_variance`).
``samplics`` and scipy are imported inside the functions that need them.
"""

from __future__ import annotations

import math
import warnings
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ragaudit.stats._resample import CONFIDENCE

CERTAIN = "(certain)"
"""The variance stratum of units taken with certainty: no sampling variance of their own."""
_ROUNDING = 1e-12
"""A standard error this small relative to the figure is floating-point residue, not spread."""


def samplics() -> Any:
    """The ``samplics`` module, imported quietly (the one place it is imported)."""
    with warnings.catch_warnings():
        # samplics 0.6 says at import that it is archived (its successor is ``svy``); the
        # estimators used here are unchanged and tested against independent computations.
        warnings.simplefilter("ignore", FutureWarning)
        import samplics as module
    return module


def kish_ess(weights: np.ndarray) -> float:
    """Kish's effective sample size of a set of weights: ``(Σ w)² / Σ w²``."""
    w = np.asarray(weights, dtype=float)
    total = float(w.sum())
    return total * total / float((w * w).sum()) if total > 0 else 0.0


def z_quantile(alpha: float) -> float:
    """The normal quantile of a two-sided test at ``alpha`` (1.96 at 0.05)."""
    from scipy import stats

    return float(stats.norm.ppf(1 - alpha / 2))


@dataclass(frozen=True)
class Design:
    """How each element of a sample was drawn, as a Taylor variance reads it.

    ``strata`` None: one stratum. ``fpc`` maps a stratum to the share of its PSUs' spread that
    is sampling variance: 1 (the default) for PSUs drawn with replacement or treated so, 0 for
    a stratum taken whole, ``1 − n/N`` for PSUs drawn without replacement.
    """

    psus: np.ndarray
    strata: np.ndarray | None = None
    fpc: Mapping[str, float] = field(default_factory=dict)

    @classmethod
    def of(
        cls,
        psus: Sequence[Any],
        strata: Sequence[Any] | None = None,
        fpc: Mapping[str, float] | None = None,
    ) -> Design:
        """A design from sequences (the PSUs and strata as strings)."""
        return cls(
            np.asarray(psus, dtype=object).astype(str),
            None if strata is None else np.asarray(strata, dtype=object).astype(str),
            dict(fpc or {}),
        )

    def factor(self, stratum: str) -> float:
        """The stratum's ``fpc`` (1 when not given)."""
        return float(self.fpc.get(stratum, 1.0))

    def factors(self) -> np.ndarray:
        """Each element's stratum ``fpc``."""
        if self.strata is None:
            return np.full(self.psus.size, self.factor(""))
        return np.array([self.factor(s) for s in self.strata], dtype=float)

    def whole(self) -> np.ndarray:
        """Whether each element sits in a stratum taken whole (``fpc`` 0)."""
        return self.factors() == 0.0

    def subset(self, keep: np.ndarray) -> Design:
        """The design of the elements ``keep`` selects."""
        return Design(self.psus[keep], None if self.strata is None else self.strata[keep], self.fpc)


@dataclass(frozen=True)
class Spread:
    """A linearised statistic's sampling variance, its degrees of freedom and third cumulant."""

    variance: float = 0.0
    df: int = 0
    third: float = 0.0
    """The third cumulant of the PSU totals' sum (k-statistics per stratum, 0 where a stratum
    has fewer than three PSUs): what moves the interval for skew."""

    def __add__(self, other: Spread) -> Spread:
        return Spread(self.variance + other.variance, self.df + other.df, self.third + other.third)

    @property
    def skew(self) -> float:
        """The skewness of the statistic (0 without variance)."""
        return self.third / self.variance**1.5 if self.variance > 0 else 0.0


@dataclass(frozen=True)
class DesignEstimate:
    """A design-based figure: point, standard error and interval (None where unknown)."""

    point: float | None
    se: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    df: int | None = None

    def figures(self) -> tuple[float | None, float | None, float | None, float | None]:
        """Point, se, low, high."""
        return self.point, self.se, self.ci_low, self.ci_high


def _third_cumulant(z: np.ndarray, design: Design) -> float:
    """The third cumulant of the sum of the PSU totals of ``z``, stratum by stratum.

    A stratum of n PSUs adds n² Σ d³ / ((n − 1)(n − 2)) (d the totals' deviations from their
    mean, the unbiased k-statistic of a sum of n draws) times c(2c − 1), c its ``fpc`` (a sum
    drawn without replacement skews by (1 − f)(1 − 2f)).
    """
    strata = design.strata if design.strata is not None else np.full(z.size, "")
    third = 0.0
    for h in np.unique(strata):
        mask = strata == h
        c = design.factor(str(h))
        keys, index = np.unique(design.psus[mask], return_inverse=True)
        n = keys.size
        if n < 3 or c == 0.0:
            continue
        totals = np.bincount(index, weights=z[mask], minlength=n)
        d = totals - totals.mean()
        third += c * (2 * c - 1) * n * n * float((d**3).sum()) / ((n - 1) * (n - 2))
    return third


def spread(z: np.ndarray, design: Design, *, skew: bool = True) -> Spread:
    """The sampling variance of ``Σ z`` over the design (a linearised statistic's scores).

    samplics' stratified Taylor variance of a total with unit weights; the scores are shifted
    by 1 (samplics divides by the total, which is 0 for centred scores) and the within-stratum
    deviations cancel the shift. A stratum with one PSU adds nothing (samplics' "skip").
    ``skew`` False: the third cumulant is not computed (a z-test has no use for it).
    """
    z = np.asarray(z, dtype=float)
    if z.size == 0:
        return Spread()
    module = samplics()
    strata = design.strata
    est = module.TaylorEstimator(module.PopParam.total, alpha=1 - CONFIDENCE)
    with warnings.catch_warnings():
        # A lone PSU in a stratum has no spread to measure: samplics' "skip" warns.
        warnings.simplefilter("ignore", RuntimeWarning)
        est.estimate(
            y=z + 1.0,
            samp_weight=np.ones(z.size),
            stratum=None if strata is None else strata.astype(object),
            psu=design.psus.astype(object),
            fpc=_fpc(design),
            single_psu=module.SinglePSUEst.skip,
        )
    se = float(est.stderror)
    third = _third_cumulant(z, design) if skew else 0.0
    return Spread(se * se, int(est.degree_of_freedom), third)


def _fpc(design: Design) -> float | dict[str, float]:
    if design.strata is None:
        return design.factor("")
    return {s: design.factor(s) for s in sorted(set(design.strata.tolist()))}


def hajek_scores(
    y: np.ndarray, weights: np.ndarray, inside: np.ndarray
) -> tuple[float, np.ndarray]:
    """The Hájek mean of ``y`` over the ``inside`` elements and each element's linearised score.

    ``z = w (y − mean) / Σ w`` inside, 0 outside (a domain's units outside it still count as
    PSUs of their strata). NaN and all zeros when nothing is inside.
    """
    w = np.asarray(weights, dtype=float)
    total = float(w[inside].sum())
    if total <= 0:
        return math.nan, np.zeros(w.size)
    mean = float((w[inside] * np.asarray(y, dtype=float)[inside]).sum() / total)
    return mean, np.where(inside, w * (np.asarray(y, dtype=float) - mean) / total, 0.0)


def linearise(
    figures: Callable[[np.ndarray], np.ndarray],
    totals: np.ndarray,
    *,
    scale: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Figures that are smooth functions of estimated totals, and their Jacobian at the totals.

    The Taylor linearisation of any function of totals (Woodruff 1971): with ``J`` the
    Jacobian, an element whose weighted contributions to the totals are the row ``x`` has the
    scores ``J @ x`` (one per figure), and the spread of the scores' sum over the design
    (:func:`spread`) is each figure's sampling variance — as :func:`hajek_scores` gives it for
    the one ratio of a mean. ``figures`` maps totals (first axis) to figures (first axis) and
    broadcasts over the trailing axes; a figure it cannot compute is NaN (its row of the
    Jacobian then too).

    The derivatives are scipy's adaptive central differences
    (:func:`scipy.differentiate.jacobian`) in each total's own ``scale`` (perturbed by a share
    of it), so a count of 10⁵ requests and a share of 10⁻⁵ are both differentiated to full
    precision. The scale is the total's size: the sum of its contributions' absolute values
    (a total of differences can be 0, or a rounding residue of 0, while its parts are not);
    by default the total's own absolute value.

    Returns:
        The figures at ``totals`` and the Jacobian (figures × totals).
    """
    from scipy.differentiate import jacobian

    t = np.asarray(totals, dtype=float)
    size = np.abs(t) if scale is None else np.asarray(scale, dtype=float)
    scale = np.where(size > 0.0, size, 1.0)
    expand = (slice(None),) + (None,) * 8

    def scaled(x: np.ndarray) -> np.ndarray:
        return np.asarray(figures(x * scale[expand[: x.ndim]]), dtype=float)

    with np.errstate(divide="ignore", invalid="ignore"):
        values = np.asarray(figures(t), dtype=float)
        # A derivative that is 0 converges only to rounding (about 10⁻¹¹ of the figure): the
        # absolute tolerance accepts it; the best estimate stands where the steps stopped.
        found = jacobian(
            scaled, t / scale, initial_step=0.01, tolerances={"atol": 1e-10, "rtol": 1e-8}
        )
    jac = np.where(np.isfinite(found.df), found.df, np.nan) / scale
    jac[~np.isfinite(values)] = np.nan
    return values, jac


def design_interval(
    point: float,
    found: Spread,
    *,
    skewed: bool,
    exact: bool = False,
    level: float = CONFIDENCE,
    bounds: tuple[float, float] | None = None,
) -> DesignEstimate:
    """The interval of a design-based mean: Student t on the design's df, moved for skew.

    Moved (``skewed``) when the figure is a mean of people's labels or of label-minus-judge
    residuals; ADR 21 says why those and only those. No variance: a point interval when the
    figure is ``exact`` (everything it stands for was measured), else no interval at all: a
    sample that shows no spread cannot say how much the rest differs, and a point would claim
    it does not.

    Hall's transformation of the Studentized mean ("On the removal of skewness by
    transformation", JRSS B 54): with the statistic's skewness γ (:attr:`Spread.skew`),
    a = γ/3 and b = γ/6, g(t) = t + a·t² + a²·t³/3 + b is monotone and removes the first-order
    skew term of t's distribution, so the interval is point − se·g⁻¹(±q), q the Student t
    quantile. γ = 0 (no third cumulant measured) gives the plain t interval. ``bounds`` keep
    the ends (and the point) inside the figure's range.
    """
    se = math.sqrt(found.variance) if found.variance > 0 else 0.0
    if se <= _ROUNDING * max(1.0, abs(point)):
        se = 0.0  # a spread of rounding errors: values that did not vary
    if se == 0.0 and exact:
        return DesignEstimate(
            _clip(point, bounds), 0.0, _clip(point, bounds), _clip(point, bounds), found.df
        )
    if found.df < 1 or se == 0.0 or not math.isfinite(se):
        return DesignEstimate(_clip(point, bounds), None, None, None, found.df)
    low, high = _hall(point, se, found.skew if skewed else 0.0, found.df, level)
    return DesignEstimate(
        _clip(point, bounds), se, _clip(low, bounds), _clip(high, bounds), found.df
    )


def _hall(point: float, se: float, skew: float, df: int, level: float) -> tuple[float, float]:
    from scipy import stats

    q = float(stats.t.ppf(0.5 + level / 2, df))
    a, b = skew / 3, skew / 6

    def inverse(y: float) -> float:
        # g⁻¹(y) = ((1 + 3a(y − b))^(1/3) − 1) / a: g(t) − b = ((1 + a·t)³ − 1) / (3a).
        return y - b if abs(a) < 1e-12 else (float(np.cbrt(1 + 3 * a * (y - b))) - 1) / a

    return point - se * inverse(q), point - se * inverse(-q)


def skew_corrected_interval(mean: float, se: float, skew: float, n: int) -> tuple[float, float]:
    """A 95 % interval of a mean of ``n`` units whose distribution has skewness ``skew``.

    :func:`design_interval`'s rule for n independent units: the mean's skewness is γ/√n and
    the t quantile is on n − 1 degrees of freedom. Its ends are not symmetric: longer on the
    side of the tail.
    """
    if n < 2 or not math.isfinite(se):
        return math.nan, math.nan
    return _hall(mean, se, skew / math.sqrt(n), n - 1, CONFIDENCE)


def _clip(value: float, bounds: tuple[float, float] | None) -> float:
    return value if bounds is None else min(max(value, bounds[0]), bounds[1])


def design_mean(
    y: np.ndarray,
    weights: np.ndarray,
    design: Design,
    *,
    skewed: bool,
    ok: np.ndarray | None = None,
    level: float = CONFIDENCE,
    bounds: tuple[float, float] | None = None,
) -> DesignEstimate:
    """The Hájek mean of ``y`` over the ``ok`` elements, its se and interval (ADR 21's rule).

    samplics' Taylor estimator of the mean gives the point, the standard error and the
    degrees of freedom; units outside ``ok`` (a failed or undefined value) are a domain, not
    zeros. The interval is :func:`design_interval`'s (``skewed``: a mean of people's labels).
    Every ``ok`` element in a stratum taken whole: the figure is exact (se 0, a point
    interval). Fewer than two ``ok`` elements: the point alone.
    """
    y = np.asarray(y, dtype=float)
    w = np.asarray(weights, dtype=float)
    inside = np.ones(y.size, dtype=bool) if ok is None else np.asarray(ok, dtype=bool)
    if not inside.any():
        return DesignEstimate(None)
    point, z = hajek_scores(y, w, inside)
    if design.whole()[inside].all():
        return DesignEstimate(_clip(point, bounds), 0.0, _clip(point, bounds), _clip(point, bounds))
    if inside.sum() < 2:
        return DesignEstimate(_clip(point, bounds))
    module = samplics()
    strata = design.strata
    est = module.TaylorEstimator(module.PopParam.mean, alpha=1 - level)
    if ok is None:
        est.estimate(
            y=y,
            samp_weight=w,
            stratum=None if strata is None else strata.astype(object),
            psu=design.psus.astype(object),
            fpc=_fpc(design),
            remove_nan=True,
        )
        se = est.stderror
    else:
        # samplics divides by each domain's mean (its coefficient of variation), so a mean of
        # 0 would raise: shift the values to be positive (a shift moves the mean and leaves
        # the variance alone) and give the units outside the domain a positive value too
        # (their values never enter the domain's estimate).
        shift = 1.0 + float(np.abs(y[inside]).max())
        with warnings.catch_warnings():
            # A lone certainty unit is a one-PSU stratum with no variance: samplics' "skip".
            warnings.simplefilter("ignore", RuntimeWarning)
            est.estimate(
                y=np.where(inside, y + shift, 1.0),
                samp_weight=w,
                stratum=None if strata is None else strata.astype(object),
                psu=design.psus.astype(object),
                domain=inside,
                fpc=_fpc(design),
                single_psu=module.SinglePSUEst.skip,
            )
        se = est.stderror.get(True)
    if se is None or not math.isfinite(float(se)):
        return DesignEstimate(_clip(point, bounds))
    found = Spread(float(se) ** 2, int(est.degree_of_freedom), _third_cumulant(z, design))
    return design_interval(point, found, skewed=skewed, level=level, bounds=bounds)


@dataclass(frozen=True)
class FirstPhase:
    """The phase the labelled elements were drawn from, when it was itself a sample.

    ``scores``: the judge's mean's linearised scores over the first phase's elements
    (:func:`hajek_scores`); ``design``: how they were drawn; ``at``: each labelled element's
    index among them.
    """

    scores: np.ndarray
    design: Design
    at: np.ndarray


def design_ppi(
    judge_mean: float,
    residuals: np.ndarray,
    weights: np.ndarray,
    labelled: Design,
    *,
    first: FirstPhase | None = None,
    level: float = CONFIDENCE,
    bounds: tuple[float, float] | None = None,
) -> DesignEstimate:
    """A judge's mean corrected by people's labels of a subsample: design-based PPI (ADR 21).

    The difference estimator (Särndal, Swensson & Wretman 1992, §6.3): the judge's mean over
    the first phase plus the Hájek mean of people's label minus the judge's (``residuals``)
    over the labelled elements, with their design ``weights`` (λ = 1: design-unbiased whatever
    the judge). Its variance has two parts (two-phase sampling, §9.3):

    - the first phase's, over its design, of the judge's scores plus each labelled element's
      share of the correction: in a stratum whose PSUs were sampled it takes in the labelling
      too (the ultimate-cluster rule). None (``first`` None): the judged elements are the whole
      population, the judge's mean is exact;
    - the labelling's own, over the ``labelled`` design, for the labelled elements whose first
      phase stratum was taken whole (in full) or partly (weighted by the share drawn): there
      the labelled subsample is what varies, and a census before it must not hide it.

    The interval follows :func:`design_interval` for a skewed figure (the residuals are mostly
    0 with a long tail); labels that show no spread give the point without an interval.
    Fewer than two labelled elements: None (no correction can be told from one label).
    """
    e = np.asarray(residuals, dtype=float)
    w = np.asarray(weights, dtype=float)
    if e.size < 2 or not math.isfinite(judge_mean):
        return DesignEstimate(None)
    correction, u = hajek_scores(e, w, np.ones(e.size, dtype=bool))
    point = judge_mean + correction
    if first is None:
        second = np.ones(e.size, dtype=bool)
        found = spread(u, labelled)
    else:
        z = np.asarray(first.scores, dtype=float).copy()
        np.add.at(z, first.at, u)
        # The share of the labelling's variance the first phase's term left out: all of it
        # in a stratum taken whole, none in one drawn with replacement, f in between (the
        # later stage's term of a two-stage variance is weighted by the first's sampling
        # fraction; Cochran 1977, 10.4).
        left = 1.0 - first.design.factors()[first.at]
        second = left > 0
        found = spread(z, first.design) + spread(
            u[second] * np.sqrt(left[second]), labelled.subset(second)
        )
    # Exact only when the judge's figure is and every element was labelled.
    exact = (first is None or bool(first.design.whole().all())) and bool(
        labelled.whole()[second].all()
    )
    return design_interval(point, found, skewed=True, exact=exact, level=level, bounds=bounds)


def variance_strata(
    strata: Sequence[str],
    segments: Sequence[str],
    certain: Sequence[bool],
    *,
    across_segments: bool,
    within: Sequence[bool] | None = None,
) -> list[str]:
    """The strata a variance is computed over, from the strata a sample was drawn in.

    Units taken with certainty form one stratum of their own (:data:`CERTAIN`, no sampling
    variance). Rows marked ``within`` are requests sampled inside a certain unit: their stratum
    (as given) is that unit's. A stratum where only one uncertain unit was drawn cannot measure
    its own spread: it is pooled with the largest other uncertain stratum of its segment;
    several lone ones of a segment are pooled together; a segment's only one joins its
    segment's largest ``within`` stratum, else (when the units span segments) the largest
    uncertain stratum of the whole sample. Pooling overstates the variance a little, never
    understates it.

    Args:
        strata: Each unit's sampling stratum (a ``within`` row's: its unit's own).
        segments: Each unit's segment.
        certain: Whether each unit was taken with certainty (and graded whole).
        across_segments: Whether the units span segments (pool a segment's lone unit with the
            largest stratum) or are one segment's (leave it: its spread is unknown).
        within: Whether each row is a request sampled inside a certain unit.
    """
    inside = list(within) if within is not None else [False] * len(strata)
    out = [CERTAIN if c and not w else s for s, c, w in zip(strata, certain, inside, strict=True)]
    sizes = Counter(v for v, w in zip(out, inside, strict=True) if v != CERTAIN and not w)
    lone = {s for s, n in sizes.items() if n == 1}
    if not lone:
        return out
    by_segment: dict[str, list[str]] = {}
    hosts: dict[str, Counter[str]] = {}
    for s, seg, w in zip(out, segments, inside, strict=True):
        if w:
            hosts.setdefault(seg, Counter())[s] += 1
        elif s != CERTAIN and s not in by_segment.setdefault(seg, []):
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
        elif hosts.get(seg):
            host = max(hosts[seg], key=lambda s: (hosts[seg][s], s))
        elif across_segments:
            rest = [s for s in sizes if s not in lone]
            host = max(rest, key=lambda s: (sizes[s], s)) if rest else "(pooled)"
        else:
            host = lone_here[0]
        for s in lone_here:
            target[s] = host
    return [s if w else target.get(s, s) for s, w in zip(out, inside, strict=True)]


@dataclass(frozen=True)
class ZTest:
    """A difference of two estimates tested on their variance (normal)."""

    diff: float
    ci_low: float
    ci_high: float
    p_value: float


def z_test(diff: float, variance: float, *, alpha: float) -> ZTest | None:
    """The z-test of a difference between two designs' estimates, with its 1 − α interval.

    ``variance`` is the difference's (the sum of two independent estimates' variances, or a
    paired difference's own). Variance 0 (both figures exact): the difference is exact, p 1
    when it is 0 and 0 otherwise; a difference or a standard error under 10⁻¹² (a figure's
    rounding) counts as 0. None when a figure is not finite.
    """
    from scipy import stats

    if not (math.isfinite(diff) and math.isfinite(variance)) or variance < 0:
        return None
    # A difference or a spread of rounding errors (two sums of the same values in another
    # order) is none: an exact 0 with a residue of 10⁻¹⁷ would otherwise have p 0.
    diff = 0.0 if abs(diff) <= _ROUNDING else diff
    variance = 0.0 if variance <= _ROUNDING**2 else variance
    half = z_quantile(alpha) * math.sqrt(variance)
    if variance == 0:
        p = 1.0 if diff == 0 else 0.0
    else:
        p = float(2 * stats.norm.sf(abs(diff) / math.sqrt(variance)))
    return ZTest(diff, diff - half, diff + half, p)


def baseline_variance(estimates: np.ndarray, ses: np.ndarray) -> tuple[float, float] | None:
    """The mean of earlier estimates and the variance a new one has around it when nothing moved.

    The mean's own sampling variance (Σ se² / m²) plus the true figure's day-to-day spread (the
    variance of the estimates beyond their mean sampling variance, never negative), so
    ordinary wandering is not a change. None without a finite estimate.
    """
    est = np.asarray(estimates, dtype=float)
    se = np.asarray(ses, dtype=float)
    keep = np.isfinite(est) & np.isfinite(se)
    est, se = est[keep], se[keep]
    m = len(est)
    if m == 0:
        return None
    mean_var = float(np.sum(se**2)) / m**2
    wander = float(np.var(est, ddof=1)) - float(np.mean(se**2)) if m >= 2 else 0.0
    return float(est.mean()), mean_var + max(wander, 0.0)


__all__ = [
    "CERTAIN",
    "Design",
    "DesignEstimate",
    "FirstPhase",
    "Spread",
    "ZTest",
    "baseline_variance",
    "design_interval",
    "design_mean",
    "design_ppi",
    "hajek_scores",
    "kish_ess",
    "linearise",
    "samplics",
    "skew_corrected_interval",
    "spread",
    "variance_strata",
    "z_quantile",
    "z_test",
]
