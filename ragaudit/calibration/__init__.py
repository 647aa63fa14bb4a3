"""Calibration: measure the metrics themselves against human labels and scenarios of known order."""

# The pairwise calibration asks the judging package's pairwise prompt: its fake answer too.
import ragaudit.judging  # noqa: F401
from ragaudit.calibration._data import (
    WIKIEVAL_FILES,
    Labelled,
    load_halueval,
    load_labels,
    load_wikieval,
    make_sample,
)
from ragaudit.calibration._grades import (
    GRADE_KIND,
    GradeCalibrationResult,
    GradeLabel,
    calibrate_judge_grades,
    load_grade_labels,
)
from ragaudit.calibration._run import (
    BUNDLED,
    Calibration,
    CalibrationInputs,
    bundled_inputs,
    run_calibration,
    scenario_sample,
    score_jobs,
)
from ragaudit.calibration._scenarios import FAMILIES, FAMILY_METRICS, make_scenarios
from ragaudit.calibration._write import calibrate, gather_inputs, metric_deps

__all__ = [
    "BUNDLED",
    "FAMILIES",
    "FAMILY_METRICS",
    "GRADE_KIND",
    "WIKIEVAL_FILES",
    "Calibration",
    "CalibrationInputs",
    "GradeCalibrationResult",
    "GradeLabel",
    "Labelled",
    "bundled_inputs",
    "calibrate",
    "calibrate_judge_grades",
    "gather_inputs",
    "load_grade_labels",
    "load_halueval",
    "load_labels",
    "load_wikieval",
    "make_sample",
    "make_scenarios",
    "metric_deps",
    "run_calibration",
    "score_jobs",
    "scenario_sample",
]
