"""Ablation sweeps of a reference RAG pipeline (a side-by-side comparison, 横向评测).

corpus subset → chunks → index → top-k retrieval → an answer from ``models.generator`` → the
evaluate stages, at every point of one-factor sweeps around a baseline (or a full grid); then a
point × metric table, one chart per swept dimension, the best combination with the points
statistically indistinguishable from it, and the questions whose scores swing most.
"""

from ragaudit._ablate_config import DIMENSIONS, AblateConfig, AblationPoint, parse_size
from ragaudit.ablation import _fake  # noqa: F401  (registers the fake generator's answer)
from ragaudit.ablation._charts import dimension_chart, fixed_values
from ragaudit.ablation._pipeline import (
    PIPELINE_FILE,
    Evaluate,
    IndexInfo,
    ablation_dir,
    answer_questions,
    build_index,
    drop_index,
    evaluate_config,
    index_key,
    points_root,
    question_set,
    run_point,
    search_config,
    select_subset,
)
from ragaudit.ablation._plan import (
    PlannedPoint,
    chunk_tokenizer,
    chunking,
    expand,
    index_group,
    plan,
    point_id,
)
from ragaudit.ablation._report import render_html, summary, write_outputs, write_xlsx
from ragaudit.ablation._results import (
    OBJECTIVE,
    Findings,
    PointResult,
    effective_objective,
    findings,
    load_results,
    objective_weights,
    question_objective,
)

__all__ = [
    "DIMENSIONS",
    "AblateConfig",
    "AblationPoint",
    "Evaluate",
    "OBJECTIVE",
    "PIPELINE_FILE",
    "Findings",
    "IndexInfo",
    "PlannedPoint",
    "PointResult",
    "ablation_dir",
    "answer_questions",
    "build_index",
    "chunk_tokenizer",
    "chunking",
    "dimension_chart",
    "drop_index",
    "effective_objective",
    "evaluate_config",
    "expand",
    "findings",
    "fixed_values",
    "index_group",
    "index_key",
    "load_results",
    "objective_weights",
    "parse_size",
    "plan",
    "point_id",
    "points_root",
    "question_objective",
    "question_set",
    "render_html",
    "run_point",
    "search_config",
    "select_subset",
    "summary",
    "write_outputs",
    "write_xlsx",
]
