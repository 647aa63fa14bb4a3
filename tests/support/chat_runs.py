"""Run folders of a conversational question set, tables written by hand (``reporting_runs``).

Each conversation's turns are questions ``c<k>::<turn>`` whose ``questions`` row holds the
conversation as the collect stage writes it: the earlier turns (a user turn and the answer after
it per exchange), and how many exchanges the judge's prompts left out (``history_cut``).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from support.reporting_runs import write_run
from support.viewer_runs import write_summary


def chat_questions(
    conversations: int,
    turns: int,
    *,
    kinds: Callable[[int], str | None] = lambda turn: None,
    answerability: Callable[[int, int], str | None] = lambda k, turn: None,
    cut: Callable[[int], int] = lambda turn: 0,
    said: Callable[[int, int], str] = lambda k, turn: f"turn {turn} of c{k}",
) -> tuple[list[str], dict[str, dict[str, Any]]]:
    """Question ids and their conversations: ``conversations`` × ``turns`` questions.

    ``kinds(turn)``: the turn's ``turn_kind`` (None: not given); ``answerability(k, turn)`` its
    label (None: not labelled); ``cut(turn)``: exchanges its prompts left out; ``said(k, turn)``:
    what the user said at that turn (the history holds the earlier ones, each answered).
    """
    ids: list[str] = []
    found: dict[str, dict[str, Any]] = {}
    for k in range(conversations):
        for turn in range(1, turns + 1):
            qid = f"c{k}::{turn}"
            history = []
            for t in range(1, turn):
                history += [
                    {"role": "user", "text": said(k, t)},
                    {"role": "assistant", "text": f"answer to turn {t} of c{k}"},
                ]
            conversation: dict[str, Any] = {
                "conversation_id": f"c{k}",
                "turn": turn,
                "history_cut": cut(turn),
            }
            if history:
                conversation["history"] = history
            if kinds(turn) is not None:
                conversation["turn_kind"] = kinds(turn)
            if answerability(k, turn) is not None:
                conversation["answerability"] = answerability(k, turn)
            ids.append(qid)
            found[qid] = conversation
    return ids, found


def write_chat_run(
    root: Path,
    run_id: str,
    value: Callable[[str, int, int], float | None],
    metrics: tuple[str, ...] = ("faithfulness", "rouge_l"),
    *,
    conversations: int = 6,
    turns: int = 7,
    summary: bool = True,
    **shape: Any,
) -> Path:
    """A finished run of ``conversations`` × ``turns`` turns scored ``value(metric, k, turn)``.

    With ``summary``, the report stage's ``summary.parquet`` (its breakdown rows included).
    ``shape``: :func:`chat_questions`'s keywords.
    """
    ids, chats = chat_questions(conversations, turns, **shape)
    values = {
        m: [value(m, int(q.split("::")[0][1:]), int(q.split("::")[1])) for q in ids]
        for m in metrics
    }
    path = write_run(root, run_id, values, question_ids=ids, conversations=chats)
    if summary:
        write_summary(path)
    return path


__all__ = ["chat_questions", "write_chat_run"]
