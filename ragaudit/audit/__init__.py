"""The production audit: a day of real traffic read, sampled, judged and estimated.

``draw_sample`` draws the day's units (a segment's distinct normalised query) under a budget
with a salted, permanent hash sample; ``list_metrics`` scores one served list from its grades;
``estimate`` turns the sampled values into design-weighted means with 95 % intervals per
segment; ``promote`` writes the worst sampled requests as a question set.
"""

from ragaudit.audit._estimate import ALL, estimate, kish_ess
from ragaudit.audit._listmetrics import list_metrics, metric_names
from ragaudit.audit._promote import promote, write_question_set
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

__all__ = [
    "ALL",
    "Bands",
    "SampleOptions",
    "budget_units",
    "draw_sample",
    "estimate",
    "kish_ess",
    "list_metrics",
    "metric_names",
    "normalise_query",
    "permanent_random",
    "promote",
    "strata_table",
    "unit_id",
    "write_question_set",
]
