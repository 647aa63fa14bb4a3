"""Every figure's statistics in one room, under everything that computes or reports.

Resampling and tests (:mod:`._resample`, :mod:`._tests`): the one call of scipy's bootstrap,
paired and two-level tests of a change, their power, the adjustment across what was tested, and
the one rule of a change beyond noise (:func:`beyond_noise`: p below α and the interval
excludes the null). Agreement (:mod:`._agreement`, :mod:`._figures`, :mod:`._grades`): one
Cohen's κ, one Krippendorff's α, figures of a judge against labels with intervals, per-grade
confusion and the engine's NDCG under grades. Prediction-powered inference (:mod:`._ppi`).
Survey statistics (:mod:`._survey`, ADR 21): the one samplics loader, design-based means and
PPI under a sampling design with one interval rule, the z-test of two designs' estimates, a
baseline's variance, Kish's effective sample size.

This package imports nothing of ragaudit but base modules (``ranking`` for NDCG): features
(compare, tune, battles, ablation, calibration, PPI, the judge's noise, the audit) import it, and
``reporting`` only presents what it computes. Heavy libraries (scipy, ppi_py, samplics) are imported
inside the functions that need them.
"""

from ragaudit.stats._agreement import (
    Agreement,
    Level,
    agreement,
    cluster_jackknife_weights,
    jackknife_interval,
    kappa,
    kappa_of_counts,
    krippendorff_alpha,
    pair_alpha,
)
from ragaudit.stats._figures import (
    GRADES,
    METRIC_CUT,
    Figure,
    alignment_figures,
    auc_score,
    balanced_accuracy,
    detector_figures,
    grade_agreement,
    preference_credit,
    rater_agreement,
    score_agreement,
    share_ci,
    share_figure,
)
from ragaudit.stats._grades import (
    NDCG_GAINS,
    ConfusionCell,
    DesignAgreement,
    GradeCalibration,
    GradeConfusion,
    Share,
    calibrate_grades,
    calibrated_grades,
    design_grade_agreement,
    engine_ndcg,
    grade_confusion,
    share,
)
from ragaudit.stats._ppi import (
    PPI_NOISE,
    Corrected,
    corrected_mean,
    design_corrected_mean,
    labels_to_halve,
    ppi_paired_test,
)
from ragaudit.stats._ratio import ratio_values
from ragaudit.stats._resample import CONFIDENCE, Interval, bootstrap, bootstrap_ci
from ragaudit.stats._survey import (
    CERTAIN,
    Design,
    DesignEstimate,
    FirstPhase,
    Spread,
    ZTest,
    baseline_variance,
    design_interval,
    design_mean,
    design_ppi,
    hajek_scores,
    kish_ess,
    skew_corrected_interval,
    spread,
    variance_strata,
    z_quantile,
    z_test,
)
from ragaudit.stats._tests import (
    MetricChange,
    PairedTest,
    Power,
    adjust,
    beyond_noise,
    decide,
    paired_test,
    power,
    two_level_test,
)

__all__ = [
    "CERTAIN",
    "CONFIDENCE",
    "GRADES",
    "METRIC_CUT",
    "NDCG_GAINS",
    "PPI_NOISE",
    "Agreement",
    "ConfusionCell",
    "Corrected",
    "Design",
    "DesignAgreement",
    "DesignEstimate",
    "Figure",
    "FirstPhase",
    "GradeCalibration",
    "GradeConfusion",
    "Interval",
    "Level",
    "MetricChange",
    "PairedTest",
    "Power",
    "Share",
    "Spread",
    "ZTest",
    "adjust",
    "agreement",
    "alignment_figures",
    "auc_score",
    "balanced_accuracy",
    "baseline_variance",
    "beyond_noise",
    "bootstrap",
    "bootstrap_ci",
    "calibrate_grades",
    "calibrated_grades",
    "cluster_jackknife_weights",
    "corrected_mean",
    "decide",
    "design_corrected_mean",
    "design_grade_agreement",
    "design_interval",
    "design_mean",
    "design_ppi",
    "detector_figures",
    "engine_ndcg",
    "grade_agreement",
    "grade_confusion",
    "hajek_scores",
    "jackknife_interval",
    "kappa",
    "kappa_of_counts",
    "kish_ess",
    "krippendorff_alpha",
    "labels_to_halve",
    "pair_alpha",
    "paired_test",
    "power",
    "ppi_paired_test",
    "preference_credit",
    "rater_agreement",
    "ratio_values",
    "score_agreement",
    "share",
    "share_ci",
    "share_figure",
    "skew_corrected_interval",
    "spread",
    "two_level_test",
    "variance_strata",
    "z_quantile",
    "z_test",
]
