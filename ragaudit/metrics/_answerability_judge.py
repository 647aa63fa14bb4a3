"""The judge's answerability calls: a turn's label, an answer's refusal check, and their costs.

Beside them the offline fake judge's answers to both prompts (crude heuristics: overlap with the
passages, a decline or a question-back phrase in the answer), enough to run a conversation set
offline. Imported where a call is made, never when the metrics register: it loads the gateway.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ragaudit.cache import FakeRequest, register_fake_answer, structured_messages
from ragaudit.lang import sentences, token_share, tokens
from ragaudit.metrics._answerability import Labelled
from ragaudit.metrics._base import CostSheet, Deps, Sample
from ragaudit.metrics._judge import ask
from ragaudit.prompts.answerability import ANSWERABILITY_JUDGE, AnswerabilityInput
from ragaudit.prompts.refusal import REFUSAL, RefusalInput, RefusalVerdict
from ragaudit.windowing import fit_text, json_cost

if TYPE_CHECKING:
    from ragaudit.judging import Judge


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


def _check_input(s: Sample) -> RefusalInput:
    return RefusalInput(question=s.question, response=s.response or "")


async def check_answer(s: Sample, deps: Deps) -> RefusalVerdict:
    """Whether ``s``'s answer declines and whether it asks back (traced as ``refusal``).

    One request per answer and judge: every metric that asks it for the same row is answered
    by the memo (or shares the call in flight).

    Raises:
        JudgeError: the judge's answer could not be used.
    """
    verdict: RefusalVerdict = await ask(deps, REFUSAL, _check_input(s), s.language)
    return verdict


def check_cost(s: Sample, deps: Deps, sheet: CostSheet) -> None:
    """The refusal check of one row, counted once whichever metrics ask it (the dry run)."""
    if not sheet.once(f"{REFUSAL.key}:{s.question_id}"):
        return
    messages = structured_messages(
        REFUSAL.output_model, REFUSAL.messages(_check_input(s), REFUSAL.language(s.language))
    )
    system = "\n".join(m["content"] for m in messages if m["role"] == "system")
    user = "\n".join(m["content"] for m in messages if m["role"] != "system")
    tokens_in = sheet.chat_tokens(system, user)
    reply = sheet.assume.verdict_tokens
    sheet.tally("refusal check", "completion", 1, tokens_in, reply, "verdict_tokens")


# -- the offline fake judge's answers ---------------------------------------------------------

_SMALL_TALK = {"thank", "thanks", "you", "very", "much", "hello", "hi", "bye", "goodbye", "ok"}
_SMALL_TALK_ZH = ("谢谢", "多谢", "你好", "再见", "好的")
_DECLINES = (
    "i don't know",
    "i do not know",
    "i don't have",
    "i do not have",
    "cannot answer",
    "can't answer",
    "unable to answer",
    "no information",
    "do not provide",
    "does not provide",
    "不知道",
    "无法回答",
    "没有相关信息",
    "无法确定",
    "没有找到",
)
_ASKS_BACK = ("which", "do you mean", "could you", "please specify", "请问", "您是指", "哪个")


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


@register_fake_answer("RefusalVerdict")
def _fake_refusal(req: FakeRequest) -> dict[str, Any]:
    response = str(req.payload.get("response", ""))
    low = response.lower()
    declines = any(d in low for d in _DECLINES)
    refusal = "no"
    if declines:
        refusal = "yes" if len(sentences(response)) <= 1 else "partial"
    asks = low.rstrip().endswith(("?", "？")) and any(a in low for a in _ASKS_BACK)
    return {
        "reason": "fake: decline and question-back phrases",
        "refusal": refusal,
        "clarification": "yes" if asks else "no",
    }


__all__ = ["ask_label", "check_answer", "check_cost", "fit_passages"]
