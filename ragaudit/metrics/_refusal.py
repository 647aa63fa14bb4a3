"""Refusal precision and recall: does the system decline exactly the turns it cannot answer?

Both read the turn's answerability label and the judge's refusal check of the answer (the one
conditioning asks too, so a run asking both pays one call per answer). A decline is the check's
``yes`` (a partial decline that answers the rest is not one, as in MTRAG's conditioning).

- ``refusal_recall``: one row per ``unanswerable`` turn, 1 when its answer declines; the mean is
  the share of unanswerable turns declined, its n those turns.
- ``refusal_precision``: one row per declining answer on a turn that should be answered or
  declined (``answerable``, ``partial``, ``unanswerable``), 1 when the turn is unanswerable; the
  mean is the share of declines that were right, its n the declines.

Every other row is skipped with the reason (a turn that is not unanswerable, an answer that
does not decline, a turn labelled underspecified or conversational, whose right answer is not a
plain decline), so the report's mean, n and interval are the precision's and the recall's.
"""

from __future__ import annotations

from ragaudit.metrics._answerability import SETTLED_BY_CHECK, refusal_check_cost
from ragaudit.metrics._base import CostSheet, Deps, JudgeError, Outcome, Sample, Skip, metric

_INPUTS = ("question", "response")


def _label(s: Sample) -> str:
    """The turn's label; a Skip without one, a JudgeError when the judge failed to give it."""
    if s.answerability is not None:
        return s.answerability
    if s.answerability_error is not None:
        raise JudgeError(f"the turn's answerability could not be judged: {s.answerability_error}")
    raise Skip(
        "the turn has no answerability label (the set gives none and the ground_truth stage "
        "judged none: ground_truth.answerability)"
    )


async def _declines(s: Sample, deps: Deps) -> tuple[bool, dict[str, str | None]]:
    from ragaudit.metrics._answerability_judge import check_answer

    verdict = await check_answer(s, deps)
    reason = {
        "label": s.answerability,
        "source": s.answerability_source,
        "refusal": verdict.refusal,
        "clarification": verdict.clarification,
        "why": verdict.reason,
    }
    return verdict.refusal == "yes", reason


def _cost(s: Sample, deps: Deps, sheet: CostSheet) -> None:
    if s.answerability is not None:
        refusal_check_cost(s, deps, sheet)


# Neither declares a default threshold: how many unanswerable turns a system must decline, and
# how many answerable ones it may, is a team's trade-off to set in report.thresholds.
@metric(
    "refusal_recall",
    inputs=_INPUTS,
    llm=True,
    cost=_cost,
    order=172,
    label="refusal recall",
)
async def refusal_recall(s: Sample, deps: Deps) -> Outcome:
    """Share of unanswerable turns whose answer declines (n: the unanswerable turns)."""
    label = _label(s)
    if label != "unanswerable":
        raise Skip(f"not an unanswerable turn (labelled {label})")
    declined, reason = await _declines(s, deps)
    return Outcome(1.0 if declined else 0.0, reason)


@metric(
    "refusal_precision",
    inputs=_INPUTS,
    llm=True,
    cost=_cost,
    order=174,
    label="refusal precision",
)
async def refusal_precision(s: Sample, deps: Deps) -> Outcome:
    """Share of declining answers given on unanswerable turns (n: the declines)."""
    label = _label(s)
    if label in SETTLED_BY_CHECK - {"unanswerable"}:
        raise Skip(f"a turn labelled {label}: its right answer is not a plain decline")
    declined, reason = await _declines(s, deps)
    if not declined:
        raise Skip(f"the answer does not decline (refusal: {reason['refusal']})")
    return Outcome(1.0 if label == "unanswerable" else 0.0, reason)


__all__ = ["refusal_precision", "refusal_recall"]
