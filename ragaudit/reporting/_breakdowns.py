"""Every metric split by where its questions stand in their conversations.

Three breakdowns, and only for a question set with conversations: the turn's position (bands
``1``, ``2``, ``3-5``, ``6+``: :func:`ragaudit.dataset.turn_band`), its kind (standalone,
follow-up, clarification) and its answerability (where the set labels it). Where the set gives
no kind, a first turn counts as standalone and a later one as a follow-up; a question alone in a
set with conversations counts as a first turn. Each cell's summary is :func:`summarise`'s over
the cell's questions (the mean with its n and the one bootstrap interval); the report stage
stores them in ``summary.parquet`` as rows of kind ``breakdown``, and every rendering reads them
back from there.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from typing import Any

import polars as pl

from ragaudit.dataset import ANSWERABILITY, TURN_BANDS, TURN_KINDS, Question, exchanges, turn_band
from ragaudit.reporting._model import Breakdown, ConversationRow, MetricSummary, TurnRow
from ragaudit.reporting._summary import summarise

TITLES = {
    "turn_band": "turn position",
    "turn_kind": "standalone / follow-up / clarification",
    "answerability": "answerability",
}
"""Each breakdown's name and title, in the order the reports show them."""

UNLABELLED = "not labelled"
"""The answerability cell of the questions a set that labels some leaves unlabelled."""


def is_turn(q: Question) -> bool:
    """Whether the question set placed ``q`` in a conversation."""
    return q.conversation_id is not None or bool(q.history) or q.turn is not None


def turn_kind(q: Question) -> tuple[str, bool]:
    """``q``'s kind and whether the set gave it (else turn 1 standalone, a later one follow-up)."""
    if q.turn_kind:
        return q.turn_kind, True
    return ("standalone" if (q.turn or 1) <= 1 else "follow-up"), False


def conversation_row(q: Question, stored: str | None) -> ConversationRow | None:
    """``q``'s conversation as its pages show it (None: a lone question).

    ``stored`` is its ``questions`` row's ``conversation`` JSON: the exchanges its judge
    prompts left out (``history_cut``) are recorded there, not in the question.
    """
    if not is_turn(q):
        return None
    cut: int | None = None
    if stored:
        try:
            found = json.loads(stored).get("history_cut")
        except (ValueError, AttributeError):
            found = None
        cut = found if isinstance(found, int) and not isinstance(found, bool) else None
    history = tuple(
        TurnRow(t.role, t.text, i < (cut or 0))
        for i, exchange in enumerate(exchanges(q.history or []))
        for t in exchange
    )
    kind, given = turn_kind(q)
    return ConversationRow(
        conversation_id=q.conversation_id,
        turn=q.turn or 1,
        history=history,
        history_cut=cut,
        turn_kind=kind,
        turn_kind_given=given,
        answerability=q.answerability,
        rewrite=q.rewrite,
    )


def _ordered(found: set[str], vocabulary: Sequence[str]) -> tuple[str, ...]:
    return tuple(v for v in vocabulary if v in found) + tuple(sorted(found - set(vocabulary)))


def split_questions(questions: Sequence[Question]) -> tuple[Breakdown, ...]:
    """The breakdowns of a question set, each question in its cell, without figures yet.

    None (``()``) for a set without conversations; the answerability breakdown only when the
    set labels some of its questions.
    """
    if not any(is_turn(q) for q in questions):
        return ()
    n = len(questions)
    alone = sum(1 for q in questions if not is_turn(q))
    bands = {q.question_id: turn_band(q.turn or 1) or "1" for q in questions}
    kinds = {q.question_id: turn_kind(q) for q in questions}
    guessed = sum(1 for _, given in kinds.values() if not given)
    out = [
        Breakdown(
            "turn_band",
            TITLES["turn_band"],
            _ordered(set(bands.values()), TURN_BANDS),
            bands,
            note=(
                f"{alone} of {n} question(s) stand alone (no conversation): counted as a first turn"
                if alone
                else None
            ),
        ),
        Breakdown(
            "turn_kind",
            TITLES["turn_kind"],
            _ordered({k for k, _ in kinds.values()}, TURN_KINDS),
            {qid: k for qid, (k, _) in kinds.items()},
            note=(
                f"the question set gives no turn_kind for {guessed} of {n} question(s): there a "
                "first turn counts as standalone and a later turn as a follow-up"
                if guessed
                else None
            ),
        ),
    ]
    labelled = sum(1 for q in questions if q.answerability)
    if labelled:
        labels = {q.question_id: q.answerability or UNLABELLED for q in questions}
        out.append(
            Breakdown(
                "answerability",
                TITLES["answerability"],
                _ordered(set(labels.values()), (*ANSWERABILITY, UNLABELLED)),
                labels,
                note=(
                    f"the question set labels {labelled} of {n} question(s); the rest are "
                    f"'{UNLABELLED}'"
                    if labelled < n
                    else None
                ),
            )
        )
    return tuple(out)


def summarise_breakdowns(
    split: Sequence[Breakdown],
    scores: pl.DataFrame,
    thresholds: Mapping[str, float],
    samples: int,
    higher_is_better: Mapping[str, bool] | None = None,
    seed: int = 0,
) -> tuple[Breakdown, ...]:
    """``split``'s breakdowns with every metric's summary in each cell (:func:`summarise`)."""
    out = []
    for b in split:
        found: list[tuple[str, MetricSummary]] = []
        for cell in b.cells:
            ids = [qid for qid, c in b.members.items() if c == cell]
            part = scores.filter(pl.col("question_id").is_in(ids))
            found += [
                (cell, s) for s in summarise(part, thresholds, samples, higher_is_better, seed)
            ]
        out.append(dataclasses.replace(b, summaries=tuple(found)))
    return tuple(out)


def breakdowns(
    questions: Sequence[Question],
    scores: pl.DataFrame,
    thresholds: Mapping[str, float],
    samples: int,
    higher_is_better: Mapping[str, bool] | None = None,
) -> tuple[Breakdown, ...]:
    """Every metric of ``scores`` by each breakdown of ``questions`` (``()``: no conversations)."""
    return summarise_breakdowns(
        split_questions(questions), scores, thresholds, samples, higher_is_better
    )


def breakdown_rows(run_id: str, found: Sequence[Breakdown]) -> list[dict[str, Any]]:
    """``summary.parquet``'s rows of kind ``breakdown`` (schema version 4) of ``found``."""
    return [
        {
            "run_id": run_id,
            "kind": "breakdown",
            "breakdown": b.name,
            "cell": cell,
            **{k: v for k, v in dataclasses.asdict(s).items() if k != "higher_is_better"},
        }
        for b in found
        for cell, s in b.summaries
    ]


# A summary's fields as the table stores them (its direction is the metric's, not stored).
_STORED = {f.name for f in dataclasses.fields(MetricSummary)} - {"higher_is_better"}


def stored_breakdowns(
    split: Sequence[Breakdown], rows: Sequence[Mapping[str, Any]], up: Mapping[str, bool]
) -> tuple[Breakdown, ...] | None:
    """``split`` filled from ``summary.parquet``'s rows; None when they hold none of it.

    A summary the report stage wrote before breakdowns has none: the caller computes them.
    """
    stored = [r for r in rows if r.get("kind") == "breakdown"]
    if not stored:
        return None
    out = []
    for b in split:
        found = tuple(
            (
                r["cell"],
                MetricSummary(
                    **{k: v for k, v in r.items() if k in _STORED},
                    higher_is_better=up.get(r["metric"], True),
                ),
            )
            for r in stored
            if r.get("breakdown") == b.name
        )
        out.append(dataclasses.replace(b, summaries=found))
    return tuple(out)


__all__ = [
    "TITLES",
    "UNLABELLED",
    "breakdown_rows",
    "breakdowns",
    "conversation_row",
    "is_turn",
    "split_questions",
    "stored_breakdowns",
    "summarise_breakdowns",
    "turn_kind",
]
