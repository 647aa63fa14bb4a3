"""Reports of a run: one model built from the run folder, rendered by every output.

``build_report(run_dir)`` reads the run's Parquet tables and manifest into a :class:`Report`;
the CLI summary, the xlsx export, the HTML page, the Prefect artifacts and ``compare`` render
it, so no figure is computed twice.
"""

import importlib
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ragaudit.errors import StageError
from ragaudit.reporting._artifacts import (
    artifact_key,
    findings_markdown,
    publish_artifacts,
    summary_table,
)
from ragaudit.reporting._breakdowns import (
    breakdown_rows,
    breakdowns,
    split_questions,
)
from ragaudit.reporting._build import (
    NO_PEOPLE,
    PeopleSection,
    build_base,
    build_report,
    directions,
    judge_cost,
    judge_noise,
    ndcg_curve,
    people_section,
    question_set_hash,
    run_folder,
    score_cells,
    with_people,
)
from ragaudit.reporting._calibration import (
    CALIBRATION_META,
    CalibrationFigure,
    CalibrationSection,
    build_calibration,
)
from ragaudit.reporting._calls import failure_reason, read_calls, rollup_calls
from ragaudit.reporting._compare import (
    BreakdownChanges,
    CellChange,
    Comparison,
    Difference,
    QuestionMove,
    compare_reports,
    compare_runs,
    regressions,
)
from ragaudit.reporting._model import (
    AgreementRow,
    Breakdown,
    ContextRow,
    ConversationRow,
    GradeNoiseRow,
    MetricSummary,
    NdcgPoint,
    QuestionRow,
    ReferenceRow,
    Report,
    ScoreCell,
    StageCalls,
    TurnRow,
    WorstQuestion,
)
from ragaudit.reporting._runs import (
    CorrectedMean,
    RunOverview,
    corrected_text,
    list_runs,
    run_overview,
    runs_table,
    trend,
)
from ragaudit.reporting._summary import summarise, worst_questions
from ragaudit.reporting._templates import template_env

# The charts (altair, vl-convert) and the workbook (xlsxwriter) are slow to import: they are
# imported when first asked for, so a command or page that only lists or compares runs
# (``runs``, ``compare``, ``view``'s first page) never pays for them.
_LAZY = {
    "_charts": ("Figure", "calibration_figures", "chart_svg", "configure_chart", "figures"),
    "_html": (
        "REPORT_FILE",
        "fill_people",
        "render_calibration_html",
        "render_compare_html",
        "render_frame",
        "render_html",
        "stamp_completion",
        "write_calibration_html",
        "write_compare_html",
        "write_html",
    ),
    "_trend": ("audit_series_chart", "trend_chart"),
    "_xlsx": (
        "CALIBRATION_XLSX",
        "text_workbook",
        "write_calibration_xlsx",
        "write_compare_xlsx",
        "write_xlsx",
    ),
}
_LAZY_NAMES = {name: module for module, names in _LAZY.items() for name in names}

if TYPE_CHECKING:
    from ragaudit.reporting._charts import (
        Figure,
        calibration_figures,
        chart_svg,
        configure_chart,
        figures,
    )
    from ragaudit.reporting._html import (
        REPORT_FILE,
        fill_people,
        render_calibration_html,
        render_compare_html,
        render_frame,
        render_html,
        stamp_completion,
        write_calibration_html,
        write_compare_html,
        write_html,
    )
    from ragaudit.reporting._trend import audit_series_chart, trend_chart
    from ragaudit.reporting._xlsx import (
        CALIBRATION_XLSX,
        text_workbook,
        write_calibration_xlsx,
        write_compare_xlsx,
        write_xlsx,
    )


def __getattr__(name: str) -> Any:
    module = _LAZY_NAMES.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def write_calibration_report(run_dir: Path | str) -> tuple[Path, Path]:
    """``report.html`` and ``calibration.xlsx`` of a calibration run folder."""
    from ragaudit.reporting._html import write_calibration_html
    from ragaudit.reporting._xlsx import write_calibration_xlsx

    section = build_calibration(run_dir)
    if section is None:
        raise StageError(f"{run_dir}: not a calibration run folder (no calibration.parquet)")
    return write_calibration_html(section), write_calibration_xlsx(section)


__all__ = [
    "Breakdown",
    "BreakdownChanges",
    "CellChange",
    "ConversationRow",
    "TurnRow",
    "breakdown_rows",
    "breakdowns",
    "split_questions",
    "NO_PEOPLE",
    "PeopleSection",
    "build_base",
    "fill_people",
    "people_section",
    "render_frame",
    "with_people",
    "AgreementRow",
    "CALIBRATION_META",
    "CALIBRATION_XLSX",
    "calibration_figures",
    "render_calibration_html",
    "write_calibration_html",
    "write_calibration_xlsx",
    "write_calibration_report",
    "CalibrationFigure",
    "CalibrationSection",
    "build_calibration",
    "Comparison",
    "ContextRow",
    "CorrectedMean",
    "GradeNoiseRow",
    "Difference",
    "Figure",
    "MetricSummary",
    "NdcgPoint",
    "QuestionMove",
    "QuestionRow",
    "REPORT_FILE",
    "ReferenceRow",
    "Report",
    "RunOverview",
    "ScoreCell",
    "StageCalls",
    "WorstQuestion",
    "artifact_key",
    "chart_svg",
    "configure_chart",
    "build_report",
    "compare_reports",
    "compare_runs",
    "corrected_text",
    "directions",
    "failure_reason",
    "figures",
    "findings_markdown",
    "list_runs",
    "runs_table",
    "stamp_completion",
    "ndcg_curve",
    "regressions",
    "publish_artifacts",
    "question_set_hash",
    "read_calls",
    "render_compare_html",
    "render_html",
    "rollup_calls",
    "run_folder",
    "run_overview",
    "summarise",
    "template_env",
    "judge_cost",
    "judge_noise",
    "score_cells",
    "summary_table",
    "trend",
    "audit_series_chart",
    "trend_chart",
    "worst_questions",
    "write_compare_html",
    "write_html",
    "text_workbook",
    "write_compare_xlsx",
    "write_xlsx",
]
