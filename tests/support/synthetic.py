"""A generated English question set of any size, for scale tests and benchmarks."""

from __future__ import annotations

import json
import random
from pathlib import Path

_WORDS = [
    "river",
    "bank",
    "loan",
    "water",
    "interest",
    "rate",
    "flood",
    "town",
    "bridge",
    "stone",
    "market",
    "price",
    "grain",
    "winter",
    "harvest",
    "mill",
    "road",
    "north",
    "south",
    "ledger",
    "coin",
    "tax",
    "guild",
    "port",
    "ship",
    "storm",
    "harbour",
    "salt",
    "wool",
]


def _sentence(rng: random.Random, n: int = 12) -> str:
    return " ".join(rng.choice(_WORDS) for _ in range(n)).capitalize() + "."


def write_questions(path: Path, n: int, candidates: int, seed: int = 0) -> Path:
    """``n`` questions, each with ``candidates`` retrieved contexts, an answer and a reference.

    The contexts ride in the question set (``retrieved_contexts``), so collect needs no search
    index; two of them per question are the gold contexts.
    """
    rng = random.Random(seed)
    with open(path, "w", encoding="utf-8") as fh:
        for i in range(n):
            contexts = [_sentence(rng) + " " + _sentence(rng) for _ in range(candidates)]
            row = {
                "question_id": f"q{i:05d}",
                "question": f"What happened to the {rng.choice(_WORDS)} {i}?",
                "response": _sentence(rng) + " " + _sentence(rng),
                "reference": _sentence(rng),
                "retrieved_contexts": contexts,
                "reference_contexts": contexts[:2],
            }
            fh.write(json.dumps(row) + "\n")
    return path


__all__ = ["write_questions"]
