"""The production audit: a day of real traffic read, sampled, judged and estimated.

``read_day`` turns a day's traffic, read by the registered reader ``audit.source.format`` names
(request logs as JSONL or Parquet mapped with JMESPath, OpenTelemetry trace files, OpenSearch
UBI, or a plugin's: ``reader`` registers one), into one redacted ``requests.parquet``;
``draw_sample`` draws the day's sample by segment and frequency band; ``run_audit_day`` grades
the served top-k of each sampled request through the judgment store, scores the answers with
reference-free metrics, estimates every metric per segment with ``estimate`` (and by turn with
``estimate_turns``: a request of a ``session`` is judged as a turn, with its session's earlier
requests before it, ``_sessions``) and writes ``<runs_root>/audit-<name>/<day>/``, a run of the
audit kind, with its ``report.html``. People
label a day's items in the viewer; their values give the PPI figures.

The face is what the CLI, the flows and the viewer use, and what a plugin's reader is written
with; the rest lives in the private modules (``_day``, ``_reading``, ``_grade``, ``_score``,
``_watch``, ``_drift`` …). Each name is imported when first asked for: a reader's module (which
the registry loads by name when a config names its format) runs this file without loading the
judging gateway, litellm or polars.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ragaudit._audit_config import AuditSection, RedactOptions, SampleOptions, SourceOptions
    from ragaudit.audit._day import (
        check_day,
        check_days,
        day_done,
        planned_cost,
        previous_day,
        run_audit_day,
        summary,
    )
    from ragaudit.audit._drift import emit_regression
    from ragaudit.audit._estimate import estimate, estimate_turns
    from ragaudit.audit._labels import (
        day_items,
        people_estimates,
        read_day_labels,
        read_label_items,
    )
    from ragaudit.audit._listmetrics import list_metrics
    from ragaudit.audit._moves import Move, moves
    from ragaudit.audit._promote import promote_day
    from ragaudit.audit._records import Bad, FieldPaths, Mapper, Partition, Request, reader
    from ragaudit.audit._report import strata_rows
    from ragaudit.audit._sample import draw_sample
    from ragaudit.audit._segments import ALL
    from ragaudit.audit._served import audit_section
    from ragaudit.audit._source import read_day

_FACE = {
    # The config's section and its option models (declared in the base layer).
    "AuditSection": "ragaudit._audit_config",
    "RedactOptions": "ragaudit._audit_config",
    "SampleOptions": "ragaudit._audit_config",
    "SourceOptions": "ragaudit._audit_config",
    # A day: what the CLI and the flow run.
    "audit_section": "ragaudit.audit._served",
    "run_audit_day": "ragaudit.audit._day",
    "check_day": "ragaudit.audit._day",
    "check_days": "ragaudit.audit._day",
    "planned_cost": "ragaudit.audit._day",
    "day_done": "ragaudit.audit._day",
    "previous_day": "ragaudit.audit._day",
    "summary": "ragaudit.audit._day",
    "emit_regression": "ragaudit.audit._drift",
    # A day's moves as lines (one per segment and cause), as the console and the viewer print.
    "Move": "ragaudit.audit._moves",
    "moves": "ragaudit.audit._moves",
    "strata_rows": "ragaudit.audit._report",
    "promote_day": "ragaudit.audit._promote",
    # People's labels, as the viewer shows them.
    "ALL": "ragaudit.audit._segments",
    "people_estimates": "ragaudit.audit._labels",
    "read_label_items": "ragaudit.audit._labels",
    "read_day_labels": "ragaudit.audit._labels",
    "day_items": "ragaudit.audit._labels",
    # The steps, for a library user.
    "read_day": "ragaudit.audit._source",
    "draw_sample": "ragaudit.audit._sample",
    "estimate": "ragaudit.audit._estimate",
    "estimate_turns": "ragaudit.audit._estimate",
    "list_metrics": "ragaudit.audit._listmetrics",
    # What a reader of one's own is written with.
    "reader": "ragaudit.audit._records",
    "Request": "ragaudit.audit._records",
    "Bad": "ragaudit.audit._records",
    "Partition": "ragaudit.audit._records",
    "Mapper": "ragaudit.audit._records",
    "FieldPaths": "ragaudit.audit._records",
}


def __getattr__(name: str) -> Any:
    module = _FACE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


__all__ = [
    "ALL",
    "AuditSection",
    "Bad",
    "FieldPaths",
    "Mapper",
    "Move",
    "Partition",
    "RedactOptions",
    "Request",
    "SampleOptions",
    "SourceOptions",
    "audit_section",
    "check_day",
    "check_days",
    "day_done",
    "day_items",
    "draw_sample",
    "emit_regression",
    "estimate",
    "estimate_turns",
    "list_metrics",
    "moves",
    "planned_cost",
    "people_estimates",
    "previous_day",
    "promote_day",
    "read_day",
    "read_day_labels",
    "read_label_items",
    "reader",
    "run_audit_day",
    "strata_rows",
    "summary",
]
