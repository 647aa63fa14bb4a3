"""The offline fake judge's answers to the judging prompts, from token overlap.

Registered here, with the algorithms that ask these prompts, rather than beside the prompts
themselves: the prompt modules are plain data that reports import without the gateway.
"""

from __future__ import annotations

from typing import Any

from ragaudit.cache import FakeRequest, register_fake_answer
from ragaudit.lang import token_share


def overlap_grade(question: str, text: str) -> tuple[int, float]:
    """The offline fake judge's grade of ``text``: the share of the question's tokens it holds.

    Cut points put a share of 0.3 (the fake judge's old yes/no threshold) at grade 2, so the
    offline demo finds the same candidates relevant as before grades.
    """
    share = token_share(question, text)
    grade = 3 if share >= 0.6 else 2 if share >= 0.3 else 1 if share > 0.1 else 0
    return grade, share


@register_fake_answer("RelevanceGrade")
def _fake_grade(req: FakeRequest) -> dict[str, Any]:
    p = req.payload
    grade, share = overlap_grade(p.get("question", ""), p.get("context", ""))
    return {"grade": grade, "reason": f"token overlap {share:.2f}"}


@register_fake_answer("PairwisePreference")
def _fake_pairwise(req: FakeRequest) -> dict[str, Any]:
    p = req.payload
    q = p.get("question", "")
    a = overlap_grade(q, p.get("context_1", ""))[1]
    b = overlap_grade(q, p.get("context_2", ""))[1]
    # A tie goes to the passage shown first, as the setwise answer's does.
    return {"better": 1 if a >= b else 2, "reason": f"overlap {a:.2f} vs {b:.2f}"}


@register_fake_answer("SetwiseChoice")
def _fake_choice(req: FakeRequest) -> dict[str, Any]:
    p = req.payload
    q = p.get("question", "")
    passages = p.get("passages") or [{"id": 1, "text": ""}]
    # The highest token overlap wins; a tie goes to the passage shown first.
    best = max(passages, key=lambda x: overlap_grade(q, x.get("text", ""))[1])
    return {"best": best.get("id", 1), "reason": "highest token overlap"}


@register_fake_answer("ListwiseRanking")
def _fake_ranking(req: FakeRequest) -> dict[str, Any]:
    p = req.payload
    q = p.get("question", "")
    passages = p.get("passages") or []
    # Highest token overlap first; ties keep the order shown (sorted() is stable).
    ranked = sorted(passages, key=lambda x: -overlap_grade(q, x.get("text", ""))[1])
    return {"ranking": [x.get("id") for x in ranked], "reason": "token overlap"}


@register_fake_answer("BatchRelevanceGrades")
def _fake_grades(req: FakeRequest) -> dict[str, Any]:
    p = req.payload
    q = p.get("question", "")
    out = []
    for x in p.get("passages") or []:
        grade, share = overlap_grade(q, x.get("text", ""))
        out.append({"id": x.get("id"), "grade": grade, "reason": f"token overlap {share:.2f}"})
    return {"grades": out}
