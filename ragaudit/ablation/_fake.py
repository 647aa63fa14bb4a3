"""The offline fake generator's answer to the reference pipeline's prompt.

Registered with the pipeline that asks it, not beside the prompt: the prompt modules are plain
data that reports import without the gateway.
"""

from __future__ import annotations

from typing import Any

from ragaudit.cache import FakeRequest, register_fake_answer
from ragaudit.lang import sentences, token_share


@register_fake_answer("RagAnswer")
def _fake_rag_answer(req: FakeRequest) -> dict[str, Any]:
    """The retrieved sentences closest to the question, so the answer depends on the retrieval.

    At most two sentences, the ones sharing the largest share of the question's tokens, in the
    order retrieved; "I do not know." when none shares any.
    """
    p = req.payload
    question = p.get("question", "")
    found = []
    for i, c in enumerate(p.get("contexts", [])):
        for s in sentences(c):
            score = token_share(question, s)
            if score > 0:
                found.append((score, i, s))
    best = sorted(found, key=lambda t: (-t[0], t[1]))[:2]
    if not best:
        return {"answer": "I do not know."}
    return {"answer": " ".join(s for _, _, s in sorted(best, key=lambda t: t[1]))[:400]}
