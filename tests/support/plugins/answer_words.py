"""A metric in one plugin module: the answer's length in words, where shorter is better.

It is what a user's own metric looks like: a scorer registered with what its values mean, as
a built-in declares it — smaller is better, from 0 with no upper bound, flagged above 25 words
unless the config sets its own thresholds, listed after the built-ins, named in reports by its
label.
"""

from __future__ import annotations

import math

from ragaudit.metrics import Deps, Outcome, Sample, metric


@metric(
    "answer_words",
    inputs=("response",),
    higher_is_better=False,
    range=(0.0, math.inf),
    threshold=25.0,
    order=1000,
    label="answer length (words)",
)
async def answer_words(s: Sample, deps: Deps) -> Outcome:
    """Words in the answer."""
    return Outcome(float(len((s.response or "").split())))
