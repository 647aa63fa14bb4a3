"""Judging candidates: graded relevance, then an order where it counts.

Library functions with explicit arguments (a :class:`Judge`: gateway, model, window): the
``sort`` stage (``ragaudit.tasks.sort``) adapts the run folder's tables to them.
"""

from ragaudit.judging import _fake  # noqa: F401  (the fake judge's answers)
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

__all__ = [
    "HEAD_METHODS",
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
