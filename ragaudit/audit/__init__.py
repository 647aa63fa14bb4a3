"""The production audit: a day of real traffic read, sampled, judged and estimated.

``read_day`` turns a day's request logs (JSONL or Parquet mapped with JMESPath), OpenTelemetry
trace files or OpenSearch UBI into one redacted ``requests.parquet``; ``resolve_texts`` fills
the texts of documents logged by id and flags those whose content changed since served.
``draw_sample`` draws the day's hash sample by segment and frequency band; ``run_audit_day``
grades the served top-k of each sampled request through the judgment store, scores the answers
with reference-free metrics, estimates every metric per segment with ``estimate`` and writes
``<runs_root>/audit-<name>/<day>/`` with its ``report.html``.
"""

from ragaudit.audit._config import (
    DEFAULT_METRICS,
    REFERENCE_INPUTS,
    AuditSection,
    audit_section,
    reference_free,
)
from ragaudit.audit._content import (
    content_digest,
    resolve_texts,
)
from ragaudit.audit._estimate import (
    ALL,
    estimate,
    kish_ess,
)
from ragaudit.audit._listmetrics import (
    list_metrics,
    metric_names,
)
from ragaudit.audit._promote import (
    promote,
    write_question_set,
)
from ragaudit.audit._redact import (
    RedactOptions,
    Redactor,
    RedactPattern,
)
from ragaudit.audit._report import (
    primary_metric,
    render_report,
    strata_rows,
    write_report,
)
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
    day_done,
    fetch_missing_texts,
    grade_served,
    judgment_store,
    previous_day,
    promote_day,
    run_audit_day,
    sampled_rows,
    samples_of,
    score_answers,
    score_lists,
    served_requests,
    summary,
    values_frame,
)
from ragaudit.audit._sample import (
    Bands,
    SampleOptions,
    budget_units,
    draw_sample,
    normalise_query,
    permanent_random,
    strata_table,
    unit_id,
)
from ragaudit.audit._source import (
    NO_SEGMENT,
    FieldPaths,
    ReadReport,
    SourceOptions,
    UbiSource,
    day_paths,
    read_day,
)

__all__ = [
    "ALL",
    "AuditDay",
    "AuditSection",
    "Bands",
    "DEFAULT_METRICS",
    "DryRun",
    "ESTIMATES",
    "FieldPaths",
    "Grading",
    "KIND",
    "MANIFEST",
    "NO_SEGMENT",
    "REFERENCE_INPUTS",
    "REPORT",
    "REQUESTS",
    "ReadReport",
    "RedactOptions",
    "RedactPattern",
    "Redactor",
    "SAMPLE",
    "SCORES",
    "SampleOptions",
    "Served",
    "SourceOptions",
    "UbiSource",
    "VERDICTS",
    "audit_dir",
    "audit_root",
    "day_done",
    "audit_section",
    "budget_units",
    "content_digest",
    "day_paths",
    "draw_sample",
    "estimate",
    "fetch_missing_texts",
    "grade_served",
    "judgment_store",
    "kish_ess",
    "list_metrics",
    "metric_names",
    "normalise_query",
    "permanent_random",
    "previous_day",
    "primary_metric",
    "promote",
    "promote_day",
    "read_day",
    "reference_free",
    "render_report",
    "resolve_texts",
    "run_audit_day",
    "sampled_rows",
    "samples_of",
    "score_answers",
    "score_lists",
    "served_requests",
    "strata_rows",
    "strata_table",
    "summary",
    "unit_id",
    "values_frame",
    "write_question_set",
    "write_report",
]
