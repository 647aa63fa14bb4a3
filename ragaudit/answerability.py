"""A turn's answerability: read where the question set gives it, else asked of the judge.

Labels (``dataset.ANSWERABILITY``) as MTRAG's judge has them. The ground_truth stage asks the
judge once per turn without a label (:func:`should_judge`, :func:`judge_answerability`), with
the turn in its context and its relevant passages, as many as fit the judge's window; like the
reference answer, the label is a fact of the turn and the corpus, the same for every system. The
answer metrics conditioned on it (``metrics._answerability``) read it from the ground_truth
table. Beside the call, the offline fake judge's answer to its prompt (a crude overlap heuristic,
enough to run a conversation set offline).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ragaudit.cache import FakeRequest, register_fake_answer
from ragaudit.dataset import Question
from ragaudit.judging import Judge
from ragaudit.lang import token_share, tokens
from ragaudit.prompts.answerability import ANSWERABILITY_JUDGE, AnswerabilityInput
from ragaudit.windowing import fit_text, json_cost


def should_judge(q: Question, mode: str) -> bool:
    """Whether the ground_truth stage asks the judge for ``q``'s label under ``mode``.

    Never for a question the set labels; ``auto``: a turn of a conversation; ``judge``: any.
    """
    if q.answerability is not None:
        return False
    return mode == "judge" or (mode == "auto" and q.conversation_id is not None)


@dataclass(frozen=True)
class Labelled:
    """The judge's label of one turn, or why it gave none."""

    label: str | None
    reason: str
    """The judge's reason; without a label, why there is none."""
    passages: int = 0
    """Relevant contexts the judge was shown (as many as fit its window)."""


async def judge_answerability(
    judge: Judge, question: str, language: str, passages: Sequence[str], max_passages: int
) -> Labelled:
    """The turn's label from the judge: ``question`` (in its context) and its relevant passages.

    The first ``max_passages`` passages, most relevant first, as many as fit the judge's window
    (the first cut to fit when even it does not). Never raises for the judge: a failed answer
    is a :class:`Labelled` without a label.
    """
    return await ask_label(judge, question, language, passages[:max_passages])


def fit_passages(judge: Judge, question: str, language: str, passages: Sequence[str]) -> list[str]:
    """The passages, in order, that fit the label prompt in the judge's window with ``question``.

    Stops at the first that does not fit; when even the first does not, its beginning that
    does is shown (a passage's start usually says what it is about).
    """
    if judge.window is None:
        return list(passages)
    empty = AnswerabilityInput(question=question, passages=[])
    room = judge.room(ANSWERABILITY_JUDGE, empty, ANSWERABILITY_JUDGE.language(language))
    shown: list[str] = []
    for text in passages:
        cost = json_cost(judge.model, text)
        if cost > room:
            if not shown and room > 2:
                shown.append(fit_text(text, room, judge.model)[0][0])
            break
        shown.append(text)
        room -= cost
    return shown


async def ask_label(
    judge: Judge, question: str, language: str, passages: Sequence[str]
) -> Labelled:
    """One label call (see :func:`ragaudit.metrics.judge_answerability`)."""
    shown = fit_passages(judge, question, language, passages)
    lang = ANSWERABILITY_JUDGE.language(language)
    judged = await judge.ask(
        ANSWERABILITY_JUDGE, AnswerabilityInput(question=question, passages=shown), lang
    )
    if not judged.ok or judged.value is None:
        why = f"the judge gave no label ({judged.status}: {judged.error})"
        return Labelled(None, why, len(shown))
    return Labelled(judged.value.label, judged.value.reason, len(shown))


# -- the offline fake judge's answer -----------------------------------------------------------

_SMALL_TALK = {"thank", "thanks", "you", "very", "much", "hello", "hi", "bye", "goodbye", "ok"}
_SMALL_TALK_ZH = ("谢谢", "多谢", "你好", "再见", "好的")


def _turn(question: str) -> str:
    """The user's current turn: the last line of a question shown in its context."""
    lines = [line for line in question.splitlines() if line.strip()]
    return lines[-1] if lines else ""


def _small_talk(turn: str) -> bool:
    words = set(tokens(turn))
    if words and words <= _SMALL_TALK:
        return True
    return len(turn) <= 8 and any(w in turn for w in _SMALL_TALK_ZH)


@register_fake_answer("AnswerabilityLabel")
def _fake_label(req: FakeRequest) -> dict[str, Any]:
    p = req.payload
    question = p.get("question", "")
    if _small_talk(_turn(question).lower()):
        return {"reason": "fake: small talk", "label": "conversational"}
    share = max((token_share(question, t) for t in p.get("passages", [])), default=0.0)
    # The fake relevance grade's cut points: 0.3 relevant, above 0.1 some overlap.
    label = "answerable" if share >= 0.3 else "partial" if share > 0.1 else "unanswerable"
    return {"reason": f"fake: token overlap {share:.2f}", "label": label}


__all__ = ["Labelled", "ask_label", "fit_passages", "judge_answerability", "should_judge"]
