"""A turn's answerability and the answer metrics conditioned on it, as MTRAG's judge does.

A turn's label (``dataset.ANSWERABILITY``) is read where the question set gives it, else the
ground_truth stage asks the judge for it (``ragaudit.answerability``);
the ground_truth table keeps it with its source. On a labelled turn, an answer metric declared
``conditioned`` is not scored as it is on a lone question: the judge's refusal check of the
answer (``prompts.refusal``: does it decline, does it ask back) decides the value first, by
MTRAG's rule (:func:`answerability_rule`):

- an ``unanswerable`` or ``conversational`` turn: 1 when the answer declines, else 0 (MTRAG
  groups the two: a turn with nothing to look up is met by a decline);
- an ``underspecified`` turn: 1 when the answer asks the user what they mean, else 0;
- an ``answerable`` or ``partial`` turn: 0 when the answer declines (the penalty), else the
  metric's own value (a partial decline keeps it, as MTRAG's "partial" does).

Applied once, by :mod:`ragaudit.scoring`, for every conditioned metric: the scorers know
nothing of it. A turn without a label is scored as it always was.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ragaudit.metrics._base import CostSheet, Deps, JudgeError, Metric, Sample

if TYPE_CHECKING:
    pass

DECLINE_EXPECTED = frozenset({"unanswerable", "conversational"})
"""Labels whose turn is met by declining: there is nothing in the corpus to answer with."""
CLARIFY_EXPECTED = frozenset({"underspecified"})
"""Labels whose turn is met by asking the user what they mean."""
SETTLED_BY_CHECK = DECLINE_EXPECTED | CLARIFY_EXPECTED
"""Labels on which the refusal check alone gives a conditioned value (the metric is not asked)."""


def answerability_rule(
    label: str, refusal: str, clarification: str
) -> tuple[float | None, str | None]:
    """MTRAG's conditioned value of an answer on a ``label`` turn, and why.

    ``refusal`` (yes, partial, no) and ``clarification`` (yes, no) are the refusal check's.
    ``(None, None)``: the metric's own value stands.
    """
    if label in CLARIFY_EXPECTED:
        if clarification == "yes":
            return 1.0, f"asked the user back on a turn labelled {label}: full credit"
        return 0.0, f"did not ask the user back on a turn labelled {label}"
    if label in DECLINE_EXPECTED:
        if refusal == "yes":
            return 1.0, f"declined a turn labelled {label}: full credit"
        return 0.0, f"did not decline a turn labelled {label} (refusal: {refusal})"
    if refusal == "yes":
        return 0.0, f"declined a turn labelled {label}: no credit"
    return None, None


def is_conditioned(m: Metric, s: Sample, deps: Deps) -> bool:
    """Whether ``m``'s row of ``s`` is scored by the answerability rule.

    A conditioned metric, a labelled turn (or one whose label the judge failed to give) and
    ``score.condition_on_answerability`` on.
    """
    labelled = s.answerability is not None or s.answerability_error is not None
    return m.conditioned and labelled and bool(deps.option("condition_on_answerability", True))


def refusal_check_cost(s: Sample, deps: Deps, sheet: CostSheet) -> None:
    """The dry run's count of the refusal check of ``s``'s answer.

    Once per row and judge, whichever metrics ask it (the memo answers the others).
    """
    from ragaudit.metrics._answerability_judge import check_cost as cost

    cost(s, deps, sheet)


@dataclass(frozen=True)
class Conditioning:
    """What the answerability rule made of one row."""

    value: float | None
    """The row's value (None: the metric's own value stands)."""
    why: str | None
    args: dict[str, Any]
    """The label, its source and the refusal check's verdicts (the row's ``metric_args``)."""


async def condition_on_answerability(s: Sample, deps: Deps) -> Conditioning:
    """The refusal check of ``s``'s answer and what the rule makes of it on ``s``'s label.

    Raises:
        JudgeError: the turn has no label because the judge gave none, or the refusal check
            failed; the row fails with it.
    """
    from ragaudit.metrics._answerability_judge import check_answer

    if s.answerability is None:
        raise JudgeError(f"the turn's answerability could not be judged: {s.answerability_error}")
    verdict = await check_answer(s, deps)
    value, why = answerability_rule(s.answerability, verdict.refusal, verdict.clarification)
    args = {
        "label": s.answerability,
        "source": s.answerability_source,
        "refusal": verdict.refusal,
        "clarification": verdict.clarification,
    }
    return Conditioning(value, why, args)


__all__ = [
    "CLARIFY_EXPECTED",
    "DECLINE_EXPECTED",
    "SETTLED_BY_CHECK",
    "Conditioning",
    "answerability_rule",
    "condition_on_answerability",
    "is_conditioned",
    "refusal_check_cost",
]
