"""The production audit: a day of real traffic read, sampled, judged and estimated.

``run_audit_day`` reads a day's requests (``requests.parquet``), draws the day's sample, grades
the served top-k of each sampled request through the judgment store, scores the answers with
reference-free metrics, estimates every metric per segment and writes the day's folder
``<runs_root>/audit-<name>/<day>/`` with its ``report.html``.
"""

from ragaudit.audit._config import (
    DEFAULT_METRICS,
    REFERENCE_INPUTS,
    AuditSection,
    audit_section,
    reference_free,
)
from ragaudit.audit._redact import RedactOptions
from ragaudit.audit._report import primary_metric, render_report, strata_rows, write_report
from ragaudit.audit._run import (
    ESTIMATES,
    KIND,
    MANIFEST,
    REPORT,
    REQUESTS,
    SAMPLE,
    SCORES,
    VERDICTS,
    AuditDay,
    DryRun,
    Grading,
    Served,
    audit_dir,
    audit_root,
    grade_served,
    judgment_store,
    previous_day,
    promote_day,
    run_audit_day,
    samples_of,
    score_answers,
    score_lists,
    served_requests,
    summary,
    values_frame,
)
from ragaudit.audit._sample import SampleOptions
from ragaudit.audit._source import SourceOptions

__all__ = [
    "DEFAULT_METRICS",
    "ESTIMATES",
    "KIND",
    "MANIFEST",
    "REFERENCE_INPUTS",
    "REPORT",
    "REQUESTS",
    "SAMPLE",
    "SCORES",
    "VERDICTS",
    "AuditDay",
    "AuditSection",
    "DryRun",
    "Grading",
    "RedactOptions",
    "SampleOptions",
    "Served",
    "SourceOptions",
    "audit_dir",
    "audit_root",
    "audit_section",
    "grade_served",
    "judgment_store",
    "previous_day",
    "primary_metric",
    "promote_day",
    "reference_free",
    "render_report",
    "run_audit_day",
    "samples_of",
    "score_answers",
    "score_lists",
    "served_requests",
    "strata_rows",
    "summary",
    "values_frame",
    "write_report",
]
