"""Citation support: ALCE citation recall and precision, TREC weighted support, uncited share.

The response's sentences and their citations come from the answer source (``citations``) or
from markers in the text (``score.citation_pattern``), mapped to the retrieved contexts. Each
cited sentence is judged against its cited contexts together and against each one alone; ALCE's
irrelevant-citation test also asks, where it matters, whether the other citations support the
sentence without one. The five metrics share those verdicts (the memo answers the repeats). An
answer that cites nothing is skipped with that reason.
"""

from __future__ import annotations

import asyncio
from typing import Any

from ragaudit.citations import (
    DEFAULT_PATTERN,
    CitedSentence,
    SentenceSupport,
    citation_scores,
    from_structured,
    parse_citations,
)
from ragaudit.metrics._base import Deps, Outcome, Sample, Skip, metric
from ragaudit.metrics._judge import ask
from ragaudit.prompts.citation_support import CITATION_SUPPORT, SupportInput


def cited_sentences(s: Sample, deps: Deps) -> list[CitedSentence]:
    """The response's sentences with their cited context ids; :class:`Skip` when none cites."""
    response = s.response or ""
    if s.citations is not None:
        try:
            cited = from_structured(response, s.citations)
        except ValueError as exc:
            raise Skip(f"citations do not match the answer: {exc}") from None
    else:
        pattern = deps.option("citation_pattern", DEFAULT_PATTERN)
        # A source that lists what it cites numbers its own list, even an empty one (it cites
        # nothing): only an answer with no such list numbers the retrieved contexts.
        ids = s.context_ids if s.citation_ids is None else s.citation_ids
        cited = parse_citations(response, ids, pattern)
    # A cited document the score stage did not keep cannot be judged: it supports nothing.
    for c in cited:
        c.unknown += [i for i in c.cited if i not in s.context_ids]
        c.cited = [i for i in c.cited if i in s.context_ids]
    if not any(c.n_citations for c in cited):
        raise Skip("the answer cites no context")
    return cited


async def judged_support(
    s: Sample, deps: Deps
) -> tuple[list[CitedSentence], list[SentenceSupport | None]]:
    """Each sentence's citations and support verdicts (None for an uncited sentence)."""
    cited = cited_sentences(s, deps)
    texts = dict(zip(s.context_ids, s.contexts, strict=True))
    asked: dict[tuple[str, tuple[str, ...]], asyncio.Task[str]] = {}

    def verdict(sentence: str, ids: list[str]) -> asyncio.Task[str]:
        # One call per distinct (sentence, contexts): a single citation's joint and lone
        # verdicts, and ALCE's leave-one-out of two citations, are the same question.
        key = (sentence, tuple(ids))
        if key not in asked:
            inp = SupportInput(sentence=sentence, contexts=[texts[i] for i in ids])
            asked[key] = asyncio.ensure_future(_support(deps, inp, s.language))
        return asked[key]

    async def one(c: CitedSentence) -> SentenceSupport | None:
        if not c.cited:
            return None
        joint = verdict(c.text, c.cited)
        each = {i: verdict(c.text, [i]) for i in c.cited}
        sup = SentenceSupport(await joint, {i: await t for i, t in each.items()})
        if sup.joint == "full" and c.n_citations > 1:
            for i in c.cited:
                rest = [j for j in c.cited if j != i]
                if sup.each[i] != "full" and rest:
                    sup.without[i] = await verdict(c.text, rest)
        return sup

    try:
        support = list(await asyncio.gather(*(one(c) for c in cited)))
    finally:
        for task in asked.values():
            task.cancel()
    return cited, support


async def _support(deps: Deps, inp: SupportInput, language: str) -> str:
    return (await ask(deps, CITATION_SUPPORT, inp, language)).support


def _reason(cited: list[CitedSentence], support: list[SentenceSupport | None]) -> dict[str, Any]:
    return {
        "sentences": [
            {
                "sentence": c.text,
                "cited": c.cited,
                "unknown_citations": c.unknown,
                "support": None if sup is None else sup.joint,
                "each": None if sup is None else sup.each,
                "without": None if sup is None or not sup.without else sup.without,
            }
            for c, sup in zip(cited, support, strict=True)
        ]
    }


async def _score(name: str, s: Sample, deps: Deps) -> Outcome:
    cited, support = await judged_support(s, deps)
    value = citation_scores(cited, support)[name]
    return Outcome(value, _reason(cited, support), {"sentences": len(cited)})


_INPUTS = ("response", "contexts")


@metric("citation_recall", inputs=_INPUTS, llm=True, order=220)
async def citation_recall(s: Sample, deps: Deps) -> Outcome:
    """Share of sentences fully supported by their cited contexts together (ALCE)."""
    return await _score("citation_recall", s, deps)


@metric("citation_precision", inputs=_INPUTS, llm=True, order=230)
async def citation_precision(s: Sample, deps: Deps) -> Outcome:
    """Share of citations that are relevant, with ALCE's irrelevant-citation test."""
    return await _score("citation_precision", s, deps)


@metric("citation_support_precision", inputs=_INPUTS, llm=True, order=240)
async def citation_support_precision(s: Sample, deps: Deps) -> Outcome:
    """Mean support of each cited context for its sentence, partial = 0.5 (TREC weighted)."""
    return await _score("citation_support_precision", s, deps)


@metric("citation_support_recall", inputs=_INPUTS, llm=True, order=250)
async def citation_support_recall(s: Sample, deps: Deps) -> Outcome:
    """Per sentence the best support of its citations, over all sentences (TREC weighted)."""
    return await _score("citation_support_recall", s, deps)


@metric("citation_uncited_share", inputs=("response",), order=260, higher_is_better=False)
async def citation_uncited_share(s: Sample, deps: Deps) -> Outcome:
    """Share of the answer's sentences that cite no context (lower is better)."""
    cited = cited_sentences(s, deps)
    value = citation_scores(cited, [None] * len(cited))["citation_uncited_share"]
    uncited = [c.text for c in cited if not c.n_citations]
    return Outcome(value, {"uncited": uncited}, {"sentences": len(cited)})


__all__ = [
    "citation_precision",
    "citation_recall",
    "citation_support_precision",
    "citation_support_recall",
    "citation_uncited_share",
    "cited_sentences",
    "judged_support",
]
