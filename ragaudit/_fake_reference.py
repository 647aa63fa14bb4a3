"""The offline fake judge's answers to the reference-answer prompts (group answer, merge).

Registered with :mod:`ragaudit.reference`, which asks them, not beside the prompts: the prompt
modules are plain data that reports import without the gateway.
"""

from __future__ import annotations

from typing import Any

from ragaudit.cache import FakeRequest, register_fake_answer
from ragaudit.lang import tokens


@register_fake_answer("GroupAnswer")
def _fake_group_answer(req: FakeRequest) -> dict[str, Any]:
    """The first line of every context sharing a token with the question; none: unanswerable."""
    p = req.payload
    asked = set(tokens(p.get("question", "")))
    useful = [c for c in p.get("contexts", []) if asked & set(tokens(c))]
    if not useful:
        return {"answerable": False, "answer": ""}
    return {"answerable": True, "answer": " ".join(c.split("\n")[0][:200] for c in useful)}


@register_fake_answer("MergedAnswer")
def _fake_merge(req: FakeRequest) -> dict[str, Any]:
    """The partial answers joined, each once, in their order."""
    parts = req.payload.get("partial_answers", [])
    return {"answer": " ".join(dict.fromkeys(parts))}
