"""What a question sends to the search engine: its query form (``collect.query_form``).

- ``last``: the utterance, as a question set without conversations is searched.
- ``history``: the conversation's user turns, oldest first, then the utterance, one a line (at
  most ``conversation.max_history_turns`` earlier ones, the newest: an embedder that truncates
  a long input keeps its start, so an unbounded history would push the utterance out of it).
- ``rewrite``: the turn as a question that stands alone: the set's ``rewrite`` field where it
  has one, else the judge's model rewrites the turn from its history (the ``rewrite`` prompt,
  through the gateway, memoised like every call). A rewrite the judge cannot give (a failed or
  unparseable answer, a prompt over its window) falls back to the ``history`` form, which holds
  what the rewrite would have named without a model, and the failure is said on the
  question's row (``error``) rather than searched as if nothing happened.

The form decides only what is searched: the judge is still shown the turn in its context
(:func:`ragaudit.conversation.in_context`). A question without a history (and without a given
rewrite) searches its utterance under every form, so a set without conversations searches
exactly as it always did.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, get_args

from ragaudit.cache import FakeRequest, register_fake_answer
from ragaudit.concurrency import gather_limited
from ragaudit.config import QueryForm
from ragaudit.conversation import ConversationConfig, kept_history
from ragaudit.dataset import Question
from ragaudit.judging import Judge
from ragaudit.prompts.rewrite import REWRITE, ConversationTurn, RewriteInput
from ragaudit.secrets import redact

QUERY_FORMS: tuple[str, ...] = get_args(QueryForm)
"""The values of ``collect.query_form``."""

SOURCES = ("utterance", "history", "given", "judge")
"""Where a searched text came from: the turn itself, its user turns joined, the set's
``rewrite`` field, the judge's rewrite."""


@dataclass(frozen=True)
class SearchQuery:
    """The text one question searches, the form asked for and where the text came from.

    Attributes:
        text: What the search backend is sent.
        form: The query form asked for (``collect.query_form``).
        source: One of :data:`SOURCES`; ``history`` under ``rewrite`` is the fallback.
        error: Why the judge's rewrite is missing (then ``source`` is ``history``), or None.
    """

    text: str
    form: str
    source: str
    error: str | None = None


def history_text(q: Question, conversation: ConversationConfig) -> str:
    """The ``history`` form: the kept earlier user turns, oldest first, then the utterance."""
    # No budget: only max_history_turns bounds it (the model names no tokenizer then).
    kept, _ = kept_history(q, conversation, "", None)
    return "\n".join([t.text for t in kept if t.role == "user"] + [q.question])


def needs_judge(q: Question, form: str) -> bool:
    """Whether ``q`` under ``form`` asks the judge for a rewrite."""
    return form == "rewrite" and bool(q.history) and not q.rewrite


def rewrite_input(
    q: Question, conversation: ConversationConfig, model: str, budget: int | None
) -> RewriteInput:
    """The rewrite prompt's input: the history the judge is shown of ``q`` (bounded), the turn."""
    kept, _ = kept_history(q, conversation, model, budget)
    return RewriteInput(
        conversation=[ConversationTurn(role=t.role, text=t.text) for t in kept],
        question=q.question,
    )


def _without_judge(q: Question, form: str, conversation: ConversationConfig) -> SearchQuery | None:
    if form == "rewrite" and q.rewrite:
        return SearchQuery(q.rewrite, form, "given")
    if not q.history or form == "last":
        return SearchQuery(q.question, form, "utterance")
    if form == "history":
        return SearchQuery(history_text(q, conversation), form, "history")
    return None


async def search_queries(
    questions: Sequence[Question],
    form: str,
    conversation: ConversationConfig,
    judge: Judge | None,
    done: Callable[[], None] | None = None,
) -> dict[str, SearchQuery]:
    """Question id → what it searches under ``form``; rewrites asked of ``judge`` concurrently.

    ``judge`` may be None when no question needs it (:func:`needs_judge`); ``done`` is called
    after each rewrite asked (a progress bar). Never raises for the judge: a rewrite it cannot
    give is the ``history`` form with the reason.

    Raises:
        ValueError: ``form`` is not one of :data:`QUERY_FORMS`, or a rewrite is needed and no
            judge was given.
    """
    if form not in QUERY_FORMS:
        raise ValueError(f"query form '{form}' is not one of {', '.join(QUERY_FORMS)}")
    out: dict[str, SearchQuery] = {}
    asked: list[Question] = []
    for q in questions:
        found = _without_judge(q, form, conversation)
        if found is None:
            asked.append(q)
        else:
            out[q.question_id] = found
    if not asked:
        return out
    if judge is None:
        raise ValueError(f"query form 'rewrite': {len(asked)} turns need the judge's rewrite")

    async def rewrite(q: Question) -> SearchQuery:
        inp = rewrite_input(q, conversation, judge.model, judge.budget)
        got = await judge.ask(REWRITE, inp, q.language)
        if done is not None:
            done()
        text = got.value.question.strip() if got.ok and got.value is not None else ""
        if text:
            return SearchQuery(text, form, "judge")
        why = got.error or (f"the judge's answer was {got.status}" if not got.ok else "empty")
        return SearchQuery(
            history_text(q, conversation),
            form,
            "history",
            redact(f"rewrite failed ({why}); searched the history form instead"),
        )

    for q, query in zip(
        asked, await gather_limited(asked, rewrite, limit=judge.in_flight), strict=True
    ):
        out[q.question_id] = query
    return out


@register_fake_answer("StandaloneQuestion")
def _fake_rewrite(req: FakeRequest) -> dict[str, Any]:
    # The offline fake judge names the conversation's first topic after the turn: a rewrite
    # that differs from both the utterance and the history form, and means nothing.
    p = req.payload
    question = str(p.get("question") or "?")
    users = [t.get("text", "") for t in p.get("conversation") or [] if t.get("role") == "user"]
    return {"question": f"{question} ({users[0]})" if users else question}


__all__ = [
    "QUERY_FORMS",
    "SOURCES",
    "SearchQuery",
    "history_text",
    "needs_judge",
    "rewrite_input",
    "search_queries",
]
