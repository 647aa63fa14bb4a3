"""A scripted judge that lists the fact tokens (``FACT-0042``) it was shown.

Shared by the reference-answer tests and ``bench/bench_ground_truth.py``: a group answer lists
every fact in its contexts, a merge every fact in its partial answers, so a fact missing from
the reference was lost in the merge tree; prompts over the window are recorded.
"""

from __future__ import annotations

import json
import re

import litellm

from ragaudit.cache import count_tokens
from ragaudit.cache._fake import FakeRequest, _last_input
from ragaudit.prompts.reference import UNKNOWN

FACT = re.compile(r"FACT-\d{4}")
FILLER = (
    "the company reports revenue growth across cloud storage network services in several "
    "regions while costs of hardware and staff rose during the year under review"
)
WORDS = FILLER.split()


class FactJudge:
    """Lists facts; honours ``max_tokens``; records prompts over the window."""

    def __init__(self, *, pad_to: float = 0.0, fail_merges: bool = False) -> None:
        self.overflows: list[int] = []
        self.calls = 0
        self.pad_to = pad_to
        self.fail_merges = fail_merges
        self.systems: list[str] = []

    def __call__(self, req: FakeRequest) -> str | None:
        if req.title not in {"GroupAnswer", "MergedAnswer"}:
            return None
        self.calls += 1
        budget = req.params["max_tokens"]
        prompt = litellm.token_counter(model="gpt-4", messages=req.messages)
        if prompt + budget > req.options.window:
            self.overflows.append(prompt + budget)
        self.systems.append(req.messages[1]["content"])
        # The first user message holds the input; a repair request appends another one.
        p = _last_input(next(m["content"] for m in req.messages if m["role"] == "user"))
        if req.title == "GroupAnswer":
            facts = sorted(set(FACT.findall(" ".join(p["contexts"]))))
            lang = "zh" if "不知道" in req.messages[1]["content"] else "en"
            value = {"answerable": bool(facts), "answer": ", ".join(facts) or UNKNOWN[lang]}
            if facts and self.pad_to:  # an answer that fills most of its budget
                filler = " ".join(WORDS) * 40
                room = int(budget * self.pad_to) - count_tokens("gpt-4", json.dumps(value))
                value["answer"] += " " + litellm.decode(
                    model="gpt-4", tokens=litellm.encode(model="gpt-4", text=filler)[: max(0, room)]
                )
        else:
            if self.fail_merges:
                return "I cannot merge these."
            facts = sorted(set(FACT.findall(" ".join(p["partial_answers"]))))
            value = {"answer": ", ".join(facts)}
        # Like a real model the fake provider stops at ``max_tokens``: long JSON is cut off.
        return json.dumps(value, ensure_ascii=False)


__all__ = ["FACT", "FILLER", "WORDS", "FactJudge"]
