"""A turn of a conversation as the judge sees it: the conversation so far, then the turn.

Every judge prompt of a turn carries its history, bounded (``conversation`` section): at most
``max_history_turns`` earlier exchanges and at most ``history_share`` of the judge's prompt
budget, the oldest left out first. :func:`in_context` gives the question every judge prompt is
built from: its text is the conversation so far and the turn, in the question's language, so
each prompt (relevance, order, reference, nuggets, the answer metrics, battles) carries it
without a prompt of its own changing, and every key built from the question's text — the
memo's, the judgment store's — holds the history. A question that stands alone is returned as
it is: its prompts and keys are those of a set without conversations.
"""

from __future__ import annotations

from collections.abc import Sequence

from ragaudit._conversation_config import ConversationConfig
from ragaudit.cache import count_text

# The vocabulary of turns (bands, exchanges) lives with the question set: reports read it
# without this module's token counting (and the gateway it loads).
from ragaudit.dataset import TURN_BANDS, Question, Turn, exchanges, turn_band

_LABELS = {
    "en": {
        "so_far": "The conversation so far (oldest first):",
        "user": "User",
        "assistant": "Assistant",
        "cut": "[{n} earlier exchange(s) left out]",
        "now": "The user's current question:",
    },
    "zh": {
        "so_far": "此前的对话（从早到晚）：",
        "user": "用户",
        "assistant": "助手",
        "cut": "[省略了更早的 {n} 轮对话]",
        "now": "用户当前的问题：",
    },
}


def render(utterance: str, kept: Sequence[Turn], cut: int, language: str) -> str:
    """The question text a turn is judged as: its kept history, what was cut, then the turn."""
    labels = _LABELS.get(language, _LABELS["en"])
    lines = [labels["so_far"]]
    if cut:
        lines.append(labels["cut"].format(n=cut))
    for turn in kept:
        lines.append(f"{labels[turn.role]}: {turn.text}")
    lines += ["", labels["now"], utterance]
    return "\n".join(lines)


def kept_history(
    q: Question, config: ConversationConfig, model: str, budget: int | None
) -> tuple[list[Turn], int]:
    """The earlier turns a judge is shown with ``q``, and how many exchanges were left out.

    At most ``max_history_turns`` exchanges, the newest; then, with the judge's prompt
    ``budget`` known, the oldest left out until the rendered history is within
    ``history_share`` of it.
    """
    parts = exchanges(q.history or [])
    # Never a negative start: parts[5 - 8:] would keep the last 3 of 5, not all 5.
    first = max(0, len(parts) - config.max_history_turns)
    keep = parts[first:] if config.max_history_turns else []
    if budget is not None:
        room = int(budget * config.history_share)
        while keep:
            text = render(
                q.question, [t for e in keep for t in e], len(parts) - len(keep), q.language
            )
            if count_text(model, text) <= room:
                break
            keep = keep[1:]
    return [t for e in keep for t in e], len(parts) - len(keep)


def in_context(q: Question, config: ConversationConfig, model: str, budget: int | None) -> Question:
    """``q`` as every judge prompt is built from it: its text the conversation so far and the turn.

    A question that stands alone (no history), or one whose history is all left out
    (``max_history_turns: 0``), is returned unchanged.
    """
    if not q.history:
        return q
    kept, cut = kept_history(q, config, model, budget)
    if not kept:
        return q
    return q.model_copy(update={"question": render(q.question, kept, cut, q.language)})


def history_cut(q: Question, config: ConversationConfig, model: str, budget: int | None) -> int:
    """How many earlier exchanges of ``q`` its judge prompts leave out (said on its row)."""
    if not q.history:
        return 0
    return kept_history(q, config, model, budget)[1]


__all__ = [
    "TURN_BANDS",
    "ConversationConfig",
    "exchanges",
    "history_cut",
    "in_context",
    "kept_history",
    "render",
    "turn_band",
]
