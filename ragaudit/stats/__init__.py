"""Every figure's statistics in one room, under everything that computes or reports.

Resampling and tests (:mod:`._resample`, :mod:`._tests`): the one call of scipy's bootstrap,
paired and two-level tests of a change, their power, the adjustment across what was tested, and
the one rule of a change beyond noise (:func:`beyond_noise`: p below α and the interval
excludes the null). Agreement (:mod:`._agreement`, :mod:`._figures`, :mod:`._grades`): one
Cohen's κ, one Krippendorff's α, figures of a judge against labels with intervals, per-grade
confusion and the engine's NDCG under grades. Prediction-powered inference (:mod:`._ppi`).

This package imports nothing of ragaudit but base modules (``ranking`` for NDCG): features
(compare, tune, battles, ablation, calibration, PPI, the judge's noise) import it, and
``reporting`` only presents what it computes. Heavy libraries (scipy, ppi_py) are imported
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
    skew_corrected_interval,
)
from ragaudit.stats._ratio import ratio_values
from ragaudit.stats._resample import CONFIDENCE, Interval, bootstrap, bootstrap_ci
from ragaudit.stats._tests import (
    MetricChange,
    PairedTest,
    Power,
    adjust,
    beyond_noise,
    decide,
    detectable,
    paired_test,
    power,
    smallest_p,
    two_level_test,
)

__all__ = [
    "CONFIDENCE",
    "GRADES",
    "METRIC_CUT",
    "NDCG_GAINS",
    "PPI_NOISE",
    "Agreement",
    "ConfusionCell",
    "Corrected",
    "DesignAgreement",
    "Figure",
    "GradeCalibration",
    "GradeConfusion",
    "Interval",
    "Level",
    "MetricChange",
    "PairedTest",
    "Power",
    "Share",
    "adjust",
    "agreement",
    "alignment_figures",
    "auc_score",
    "balanced_accuracy",
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
    "detectable",
    "detector_figures",
    "engine_ndcg",
    "grade_agreement",
    "grade_confusion",
    "kappa",
    "kappa_of_counts",
    "jackknife_interval",
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
    "smallest_p",
    "two_level_test",
]
