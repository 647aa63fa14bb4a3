"""Generate a question set from corpus chunks through the gateway, each question checked.

For every chunk a single-document question, for pairs of chunks of one collection a question
that needs both, and for every chunk an unanswerable question on its topic. A second judge call
checks each question against its reference contexts (answerable, or for the unanswerable kind
not); a question that fails the check, or nearly repeats a kept one (rapidfuzz ratio), is
dropped. The rows are a question set ``run`` and ``ablate`` read as is.
"""

from __future__ import annotations

import asyncio
import json
import random
from itertools import combinations
from pathlib import Path
from typing import Any

from rapidfuzz import fuzz

from ragaudit.lang import detect_language
from ragaudit.metrics import Deps, JudgeError, ask
from ragaudit.prompts.testset import (
    ANSWERABLE,
    QUESTION_GEN,
    AnswerabilityInput,
    QuestionGenInput,
)
from ragaudit.runfolder import write_bytes

KINDS = ("single_document", "multi_document", "unanswerable")
# Two questions this similar (rapidfuzz ratio out of 100) are one question asked twice.
DUPLICATE_RATIO = 90.0


def _plans(
    corpus: list[dict[str, Any]], kinds: tuple[str, ...], rng: random.Random
) -> list[tuple[str, list[dict[str, Any]]]]:
    plans: list[tuple[str, list[dict[str, Any]]]] = []
    by_collection: dict[Any, list[dict[str, Any]]] = {}
    for chunk in corpus:
        by_collection.setdefault((chunk.get("metadata") or {}).get("collection"), []).append(chunk)
    for chunk in corpus:
        if "single_document" in kinds:
            plans.append(("single_document", [chunk]))
        if "unanswerable" in kinds:
            plans.append(("unanswerable", [chunk]))
    if "multi_document" in kinds:
        for chunks in by_collection.values():
            plans += [("multi_document", list(pair)) for pair in combinations(chunks, 2)]
    rng.shuffle(plans)
    return plans


async def _one(
    deps: Deps, generator: Deps, kind: str, chunks: list[dict[str, Any]]
) -> dict[str, Any] | None:
    texts = [c["text"] for c in chunks]
    lang = detect_language(" ".join(texts))
    try:
        inp = QuestionGenInput.model_validate({"kind": kind, "contexts": texts})
        made = await ask(generator, QUESTION_GEN, inp, lang)
        check = await ask(
            deps, ANSWERABLE, AnswerabilityInput(question=made.question, contexts=texts), lang
        )
    except JudgeError:
        return None
    if check.answerable != (kind != "unanswerable"):
        return None
    collection = (chunks[0].get("metadata") or {}).get("collection")
    return {
        "question": made.question,
        "language": detect_language(made.question),
        "reference": made.reference or None,
        "reference_context_ids": [str(c["id"]) for c in chunks],
        "reference_contexts": texts,
        "filters": {"collection": collection} if collection is not None else {},
        "metadata": {
            "testset": {
                "kind": kind,
                "generator": generator.judge,
                "checked_by": deps.judge,
                "check_reason": check.reason,
            }
        },
    }


async def generate_testset(
    corpus: list[dict[str, Any]],
    deps: Deps,
    *,
    generator: str | None = None,
    size: int = 20,
    kinds: tuple[str, ...] = KINDS,
    seed: int = 0,
    batch: int = 16,
) -> list[dict[str, Any]]:
    """Up to ``size`` checked, distinct questions from corpus rows (``id``, ``text``, ``metadata``).

    ``deps.judge`` checks answerability; ``generator`` (default: the judge) writes the questions.
    Plans are tried in a seeded order, ``batch`` at a time, until ``size`` are kept.
    """
    # The generator model's window is not known here: its prompts are not checked against one.
    gen = Deps.of(
        deps.gateway,
        generator or deps.judge,
        deps.embedder,
        deps.options,
        temperature=deps.temperature,
        max_output_tokens=deps.max_output_tokens,
    )
    plans = _plans(corpus, kinds, random.Random(seed))
    kept: list[dict[str, Any]] = []
    for start in range(0, len(plans), batch):
        if len(kept) >= size:
            break
        found = await asyncio.gather(
            *(_one(deps, gen, k, c) for k, c in plans[start : start + batch])
        )
        for row in found:
            if row is None or len(kept) >= size:
                continue
            if any(fuzz.ratio(row["question"], k["question"]) >= DUPLICATE_RATIO for k in kept):
                continue
            kept.append(row)
    return [{"question_id": f"ts{i:04d}", **row} for i, row in enumerate(kept)]


def write_question_set(rows: list[dict[str, Any]], path: Path | str) -> Path:
    """Write rows as a JSONL question set, atomically."""
    path = Path(path)
    text = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)
    write_bytes(text.encode("utf-8"), path)
    return path


__all__ = ["DUPLICATE_RATIO", "KINDS", "generate_testset", "write_question_set"]
