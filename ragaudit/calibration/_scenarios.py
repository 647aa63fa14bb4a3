"""Scenario question sets with known expected orders, from any question set with gold relevance.

Four families, each a set of levels of one base question whose scores must come out in a known
order (``rank`` 0 is the best level; levels of equal rank are not compared):

- ``ordering``: the same contexts best (gold first), random, worst (gold last);
- ``mix``: relevant share about 80 %, 50 %, 20 %, irrelevant contexts placed first so that
  rank-aware precision falls with the share;
- ``coverage``: every gold context (complete: one document, or several combined), only some
  (partial), none;
- ``distractor``: the gold context alone against one distractor alone: of the same domain (an
  unjudged candidate of the same question), of another topic (another question's gold), or
  sharing only keywords (another topic's text headed by the question's words).

Each row is a question-set row with fixed ``retrieved_contexts`` (the ``question_set`` search
backend) and its family, level, rank, base question and relevance labels in ``metadata``.
"""

from __future__ import annotations

import random
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from ragaudit.dataset import Question
from ragaudit.lang import tokens

if TYPE_CHECKING:
    from ragaudit.search import Document

FAMILIES = ("ordering", "mix", "coverage", "distractor")
# The metrics whose scores each family's expected order is about.
FAMILY_METRICS: dict[str, tuple[str, ...]] = {
    "ordering": ("context_precision",),
    "mix": ("context_precision",),
    "coverage": ("context_recall",),
    "distractor": ("context_relevance",),
}
MIX_TARGETS = (("80/20", 0.8), ("50/50", 0.5), ("20/80", 0.2))
MAX_CONTEXTS = 5


def _ap(relevant: list[bool]) -> float:
    """Average precision of a relevance list (what an exact judge gives context precision)."""
    hits, total = 0, 0.0
    for i, rel in enumerate(relevant, start=1):
        if rel:
            hits += 1
            total += hits / i
    return total / hits if hits else 0.0


def _row(
    base: Question,
    family: str,
    level: str,
    rank: int,
    contexts: list[tuple[str, bool]],
    gold: list[str],
    extra: dict[str, Any] | None = None,
) -> Question:
    return Question(
        question_id=f"{base.question_id}:{family}:{level}",
        question=base.question,
        language=base.language,
        reference=base.reference,
        response=base.response,
        reference_contexts=gold,
        retrieved_contexts=[text for text, _ in contexts],
        metadata={
            "scenario": {
                "family": family,
                "level": level,
                "rank": rank,
                "base_question_id": base.question_id,
                "relevant": [rel for _, rel in contexts],
                **(extra or {}),
            }
        },
    )


def _ordering(q: Question, gold: list[str], same: list[str], rng: random.Random) -> list[Question]:
    others = same[: max(1, MAX_CONTEXTS - len(gold))]
    if not others:
        return []
    items = [(g, True) for g in gold] + [(o, False) for o in others]
    best, worst = items, [i for i in items if not i[1]] + [i for i in items if i[1]]
    aps = (_ap([r for _, r in best]), _ap([r for _, r in worst]))
    for _ in range(100):
        shuffled = items[:]
        rng.shuffle(shuffled)
        if aps[1] < _ap([r for _, r in shuffled]) < aps[0]:
            break
    else:
        return []  # too few contexts for an order strictly between best and worst
    return [
        _row(q, "ordering", "best", 0, best, gold),
        _row(q, "ordering", "random", 1, shuffled, gold),
        _row(q, "ordering", "worst", 2, worst, gold),
    ]


def _mix(q: Question, gold: list[str], irrelevant: list[str]) -> list[Question]:
    chosen = []
    for name, share in MIX_TARGETS:
        options = [
            (r, i)
            for r in range(1, len(gold) + 1)
            for i in range(1, len(irrelevant) + 1)
            if r + i <= MAX_CONTEXTS
        ]
        if not options:
            return []
        r, i = min(options, key=lambda o: (abs(o[0] / sum(o) - share), -sum(o)))
        chosen.append((name, r, i))
    # Irrelevant contexts first: the exact judge's precision then falls with the share.
    lists = [
        [(x, False) for x in irrelevant[:i]] + [(g, True) for g in gold[:r]] for _, r, i in chosen
    ]
    aps = [_ap([rel for _, rel in c]) for c in lists]
    if not all(a > b for a, b in zip(aps, aps[1:], strict=False)):
        return []  # too little gold to make three distinct mixes
    return [
        _row(q, "mix", name, rank, contexts, gold, {"relevant_share": r / (r + i)})
        for rank, ((name, r, i), contexts) in enumerate(zip(chosen, lists, strict=True))
    ]


def _coverage(q: Question, gold: list[str], irrelevant: list[str]) -> list[Question]:
    if not irrelevant:
        return []
    pad = irrelevant
    complete = "multi_document" if len(gold) > 1 else "single_document"
    levels = [(complete, [(g, True) for g in gold])]
    if len(gold) > 1:
        levels.append(("partial", [(g, True) for g in gold[: len(gold) // 2]]))
    levels.append(("none", []))
    rows = []
    size = len(gold) + 1
    for rank, (name, kept) in enumerate(levels):
        contexts = kept + [(p, False) for p in pad[: size - len(kept)]]
        if len(contexts) < size:
            return []
        rows.append(_row(q, "coverage", name, rank, contexts, gold))
    return rows


def _keyword_only(question: str, text: str) -> str:
    words = [t for t in dict.fromkeys(tokens(question)) if len(t) > 1 or not t.isascii()][:6]
    return f"{' '.join(words)}: {text}"


def _distractor(q: Question, gold: list[str], same: list[str], other: list[str]) -> list[Question]:
    rows = [_row(q, "distractor", "relevant", 0, [(gold[0], True)], gold)]
    if same:
        rows.append(_row(q, "distractor", "same_domain", 1, [(same[0], False)], gold))
    if other:
        rows.append(_row(q, "distractor", "other_topic", 1, [(other[0], False)], gold))
        keyword = _keyword_only(q.question, other[-1])
        rows.append(_row(q, "distractor", "keyword_only", 1, [(keyword, False)], gold))
    return rows if len(rows) > 1 else []


def make_scenarios(
    questions: Iterable[Question],
    corpus: Iterable[Document] = (),
    *,
    families: Iterable[str] = FAMILIES,
    seed: int = 0,
) -> list[Question]:
    """Scenario rows for every question with gold relevance.

    Args:
        questions: the base question set; gold comes from ``reference_contexts`` or from
            ``reference_context_ids`` looked up in ``corpus``.
        corpus: the documents (``ragaudit.search.read_corpus``); the same-domain distractors
            are the texts of the question's collection (``metadata.collection``) that are not
            gold.
        families: which families to build.
        seed: the random order's and the choice of distractors' seed.

    Returns:
        Question-set rows; a family a question's gold cannot support is left out for it.
    """
    docs = {d.id: d for d in corpus}
    rng = random.Random(seed)
    base: list[tuple[Question, list[str], list[str]]] = []
    for q in questions:
        ids = q.reference_context_ids or []
        gold = list(q.reference_contexts or [docs[i].text for i in ids if i in docs])
        collection = q.filters.get("collection")
        same = [
            d.text
            for d in docs.values()
            if collection is not None
            and d.metadata.get("collection") == collection
            and d.id not in ids
            and d.text not in gold
        ]
        if gold:
            base.append((q, gold, same))
    rows: list[Question] = []
    for n, (q, gold, same) in enumerate(base):
        other = [g for m, (_, gs, _) in enumerate(base) if m != n for g in gs][:3]
        irrelevant = same + other
        for family in families:
            if family == "ordering":
                rows += _ordering(q, gold, same or other, rng)
            elif family == "mix":
                rows += _mix(q, gold, irrelevant)
            elif family == "coverage":
                rows += _coverage(q, gold, irrelevant)
            elif family == "distractor":
                rows += _distractor(q, gold, same, other)
            else:
                raise ValueError(
                    f"unknown scenario family {family!r} (known: {', '.join(FAMILIES)})"
                )
    return rows


__all__ = ["FAMILIES", "FAMILY_METRICS", "MIX_TARGETS", "make_scenarios"]
