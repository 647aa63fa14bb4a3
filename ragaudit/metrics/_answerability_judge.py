"""The judge's refusal check of an answer (does it decline, does it ask back) and its cost.

Beside it the offline fake judge's answer to its prompt (a crude heuristic: a decline or a
question-back phrase in the answer), enough to run a conversation set offline (the turn's label
is asked in ``ragaudit.answerability``). Imported where a call is made, never when the metrics
register: it loads the gateway.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ragaudit.cache import FakeRequest, register_fake_answer, structured_messages
from ragaudit.lang import sentences
from ragaudit.metrics._base import CostSheet, Deps, Sample
from ragaudit.metrics._judge import ask
from ragaudit.prompts.refusal import REFUSAL, RefusalInput, RefusalVerdict

if TYPE_CHECKING:
    pass


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


__all__ = ["check_answer", "check_cost"]
