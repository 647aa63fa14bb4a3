"""Nugget recall: how many of the question's nuggets the answer holds (TREC's AutoNuggetizer).

The answer is judged against the nuggets the ground_truth stage extracted, ten nuggets a call
(the metric's ``batch_size`` option), each ``support``, ``partial_support`` or
``not_support`` with a reason. The four metrics share those verdicts: asking them in one run
sends each batch once, the others are answered by the memo. A question without nuggets, or
without vital nuggets for the vital scores, is skipped with the reason.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from ragaudit.metrics._base import CostSheet, Deps, Options, Outcome, Sample, Skip, metric
from ragaudit.metrics._judge import ask
from ragaudit.prompts.nugget_assignment import ASSIGN, AssignInput, Assignments


def _nuggets(s: Sample) -> list[dict[str, Any]]:
    if s.nuggets is None:
        raise Skip("no nuggets table: run the ground_truth stage with ground_truth.nuggets on")
    if not s.nuggets:
        raise Skip(f"no nuggets for this question ({s.nuggets_note or 'none extracted'})")
    return s.nuggets


def _per_call() -> int:
    # Read when the options are built: ragaudit.nuggets imports the gateway (litellm), which
    # registering the metrics does not need.
    from ragaudit.nuggets import NUGGETS_PER_CALL

    return NUGGETS_PER_CALL


class NuggetOptions(Options):
    """Options of the nugget recall metrics."""

    batch_size: int = Field(default_factory=_per_call, ge=1, le=100)
    """Nuggets judged against the answer in one call. The four metrics send the same
    batches only when they share this value (the memo then answers three of them)."""


async def judged_nuggets(
    s: Sample, deps: Deps, opts: NuggetOptions | None = None
) -> list[dict[str, Any]]:
    """The sample's nuggets, each with the judge's ``verdict`` and ``reason`` on the answer."""
    from ragaudit.nuggets import assign_nuggets

    nuggets = _nuggets(s)

    async def judge(inp: AssignInput) -> Assignments:
        return await ask(deps, ASSIGN, inp, s.language)

    per_call = (opts or NuggetOptions()).batch_size
    return await assign_nuggets(judge, s.question, s.response or "", nuggets, per_call)


def _cost(s: Sample, deps: Deps, opts: NuggetOptions, sheet: CostSheet) -> None:
    """One assignment call per batch of the question's nuggets (the dry run's placeholders)."""
    from ragaudit.cache import structured_messages

    nuggets = [n["text"] for n in (s.nuggets or [])]
    for start in range(0, len(nuggets), opts.batch_size):
        batch = nuggets[start : start + opts.batch_size]
        inp = AssignInput(question=s.question, answer=s.response or "", nuggets=batch)
        messages = structured_messages(
            ASSIGN.output_model, ASSIGN.messages(inp, ASSIGN.language(s.language))
        )
        system = "\n".join(m["content"] for m in messages if m["role"] == "system")
        user = "\n".join(m["content"] for m in messages if m["role"] != "system")
        sheet.tally(
            "assignments",
            "completion",
            1,
            sheet.chat_tokens(system, user),
            len(batch) * sheet.assume.verdict_tokens,
            "verdict_tokens",
        )


async def _score(name: str, s: Sample, deps: Deps, opts: NuggetOptions) -> Outcome:
    from ragaudit.nuggets import nugget_scores

    assigned = await judged_nuggets(s, deps, opts)
    value = nugget_scores(assigned)[name]
    if value is None:
        raise Skip("no vital nuggets for this question")
    missed = [
        {"text": n["text"], "context_ids": n["context_ids"], "verdict": n["verdict"]}
        for n in assigned
        if n["importance"] == "vital" and n["verdict"] != "support"
    ]
    reason: dict[str, Any] = {
        "nuggets": [
            {k: n[k] for k in ("text", "importance", "context_ids", "verdict", "reason")}
            for n in assigned
        ],
        "missed_vital": missed,
    }
    if s.nuggets_note:
        reason["note"] = s.nuggets_note
    return Outcome(value, reason, {"nuggets": len(assigned)})


_INPUTS = ("question", "response")


@metric(
    "nugget_recall_strict_vital",
    inputs=_INPUTS,
    llm=True,
    options=NuggetOptions,
    cost=_cost,
    order=180,
    conditioned=True,
)
async def nugget_recall_strict_vital(s: Sample, deps: Deps, opts: NuggetOptions) -> Outcome:
    """Share of the vital nuggets the answer fully supports (TREC's strict vital recall)."""
    return await _score("nugget_recall_strict_vital", s, deps, opts)


@metric(
    "nugget_recall_vital",
    inputs=_INPUTS,
    llm=True,
    options=NuggetOptions,
    cost=_cost,
    order=190,
    conditioned=True,
)
async def nugget_recall_vital(s: Sample, deps: Deps, opts: NuggetOptions) -> Outcome:
    """Vital nuggets the answer supports, a partly supported one counting half."""
    return await _score("nugget_recall_vital", s, deps, opts)


@metric(
    "nugget_recall_strict_all",
    inputs=_INPUTS,
    llm=True,
    options=NuggetOptions,
    cost=_cost,
    order=200,
    conditioned=True,
)
async def nugget_recall_strict_all(s: Sample, deps: Deps, opts: NuggetOptions) -> Outcome:
    """Share of all nuggets (vital and okay) the answer fully supports."""
    return await _score("nugget_recall_strict_all", s, deps, opts)


@metric(
    "nugget_recall_all",
    inputs=_INPUTS,
    llm=True,
    options=NuggetOptions,
    cost=_cost,
    order=210,
    conditioned=True,
)
async def nugget_recall_all(s: Sample, deps: Deps, opts: NuggetOptions) -> Outcome:
    """All nuggets the answer supports, a partly supported one counting half."""
    return await _score("nugget_recall_all", s, deps, opts)


__all__ = [
    "NuggetOptions",
    "judged_nuggets",
    "nugget_recall_all",
    "nugget_recall_strict_all",
    "nugget_recall_strict_vital",
    "nugget_recall_vital",
]
