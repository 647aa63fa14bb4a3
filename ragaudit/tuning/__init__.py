"""Tuning the engine against pooled judgments (``ragaudit tune``).

Variants of the collect section (named overrides, a template-parameter grid or one factor at a
time, or Optuna's TPE sampler) each retrieve their top ``depth`` per question; the union is
graded once per document with the sort stage's graded prompt, through a judgment store that no
grade is paid twice for; each variant's metrics get a mean with its interval and a paired test
against the baseline, adjusted across variants; the winner is picked on tuning questions and
recommended only if it beats the baseline beyond noise on held-out ones. Variants may search
other query forms (``collect.query_form``) over one pooled grading of every turn in its
conversation; on conversations their gain is broken down by turn band and turn kind.
"""

from ragaudit._tune_config import TuneConfig, TuneRange
from ragaudit.tuning._metrics import Judged, TuneMetric, tune_metric
from ragaudit.tuning._outputs import (
    BEST,
    POOL_NOTE,
    QRELS,
    REPORT,
    TABLE,
    TURNS,
    calls_line,
    console_lines,
    moves,
    ranked,
    render_html,
    shared_texts,
    summary,
    sweep_chart,
    table_rows,
    turn_rows,
    write_outputs,
)
from ragaudit.tuning._plan import (
    BASELINE,
    Variant,
    baseline_params,
    check_backend,
    collect_section,
    judge_alone_notice,
    plan_variants,
    variant_config,
)
from ragaudit.tuning._pool import (
    GradeReport,
    Pool,
    Retrieved,
    VariantRun,
    grade_pool,
    retrieve,
)
from ragaudit.tuning._run import (
    DryRunLine,
    TuneOutcome,
    dry_run,
    judgment_store,
    run_tune,
    tune_dir,
)
from ragaudit.tuning._search import SearchStrategy, search_strategy
from ragaudit.tuning._stats import (
    Decision,
    TurnGain,
    VariantStats,
    fold_tally,
    holdout_note,
    question_metrics,
    recommend,
    split_questions,
    turn_gains,
)

__all__ = [
    "BASELINE",
    "BEST",
    "POOL_NOTE",
    "QRELS",
    "REPORT",
    "TABLE",
    "TURNS",
    "Decision",
    "DryRunLine",
    "GradeReport",
    "Pool",
    "Retrieved",
    "TuneConfig",
    "TuneMetric",
    "TuneOutcome",
    "TuneRange",
    "TurnGain",
    "Judged",
    "SearchStrategy",
    "Variant",
    "VariantRun",
    "VariantStats",
    "baseline_params",
    "calls_line",
    "check_backend",
    "collect_section",
    "console_lines",
    "ranked",
    "dry_run",
    "fold_tally",
    "grade_pool",
    "holdout_note",
    "judge_alone_notice",
    "judgment_store",
    "moves",
    "plan_variants",
    "question_metrics",
    "recommend",
    "render_html",
    "retrieve",
    "run_tune",
    "search_strategy",
    "tune_metric",
    "shared_texts",
    "split_questions",
    "summary",
    "sweep_chart",
    "table_rows",
    "tune_dir",
    "turn_gains",
    "turn_rows",
    "variant_config",
    "write_outputs",
]
