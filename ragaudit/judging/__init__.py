"""Judging candidates: graded relevance, then an order where it counts.

Library functions with explicit arguments (a :class:`Judge`: gateway, model, window): the
``sort`` stage (``ragaudit.tasks.sort``) adapts the run folder's tables to them. The judgment
store (:class:`JudgmentStore`, :func:`grade_through_store`) keeps every single-judge grade
across runs, tunes and audits; :func:`ordering_baseline` finds the previous run's heads.
"""

from ragaudit.judging import _fake  # noqa: F401  (the fake judge's answers)
from ragaudit.judging._baseline import (
    OrderingBaseline,
    config_signature,
    ordering_baseline,
    stored_signature,
)
from ragaudit.judging._grades import Graded, grade_candidates, plan_grades
from ragaudit.judging._head import (
    HEAD_METHODS,
    HeadMethod,
    SetJudge,
    head_method,
    setwise_calls,
    setwise_heap,
    sliding_window,
    window_calls,
)
from ragaudit.judging._incremental import (
    HeadSource,
    Placement,
    PreviousHead,
    head_signature,
    incremental_head,
)
from ragaudit.judging._judge import (
    CountingJudge,
    Judge,
    PlannedRequest,
    Spend,
    gather_limited,
    parsed,
    shown_order,
)
from ragaudit.judging._jury import (
    GradeAggregate,
    GradeSample,
    combined_grade,
    grade_noise,
    grade_plan,
    sample_judges,
)
from ragaudit.judging._order import (
    Ordered,
    OrderOptions,
    PlannedCalls,
    by_grade,
    head_pool,
    order_one,
    order_questions,
    plan_order,
)
from ragaudit.judging._pairwise import PairwiseJudge
from ragaudit.judging._runs import config_grader, import_run_grades, single_judge
from ragaudit.judging._store import (
    ROLES,
    SOURCE_KINDS,
    STATES,
    STORE_DIR,
    Grader,
    JudgmentStore,
    StoredGrade,
    StoreError,
    StoreGrading,
    grade_key,
    grade_through_store,
    label_key,
    lookup_pairs,
    pair_key,
    prompt_tokens,
    ref_key,
    text_hash,
)

__all__ = [
    "HEAD_METHODS",
    "ROLES",
    "SOURCE_KINDS",
    "STATES",
    "STORE_DIR",
    "Grader",
    "JudgmentStore",
    "OrderingBaseline",
    "StoreError",
    "StoreGrading",
    "StoredGrade",
    "config_signature",
    "grade_key",
    "grade_through_store",
    "label_key",
    "lookup_pairs",
    "pair_key",
    "prompt_tokens",
    "ref_key",
    "config_grader",
    "import_run_grades",
    "ordering_baseline",
    "single_judge",
    "stored_signature",
    "text_hash",
    "HeadMethod",
    "CountingJudge",
    "GradeAggregate",
    "GradeSample",
    "Graded",
    "HeadSource",
    "Judge",
    "OrderOptions",
    "Ordered",
    "PlannedCalls",
    "PairwiseJudge",
    "Placement",
    "PreviousHead",
    "PlannedRequest",
    "SetJudge",
    "Spend",
    "by_grade",
    "combined_grade",
    "gather_limited",
    "grade_candidates",
    "grade_noise",
    "grade_plan",
    "head_pool",
    "head_method",
    "head_signature",
    "incremental_head",
    "order_one",
    "order_questions",
    "plan_order",
    "parsed",
    "plan_grades",
    "sample_judges",
    "setwise_calls",
    "setwise_heap",
    "shown_order",
    "sliding_window",
    "window_calls",
]
