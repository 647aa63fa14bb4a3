"""Context relevance: do the retrieved contexts hold what the question needs?

``context_relevance`` is ragas's: two judges rate the contexts 0/1/2 and the score is their mean
over 2. ``context_sentence_relevance`` is the RAGAS paper's (Es et al., 2023): the judge copies
out the helpful sentences and the score is their share of the contexts' sentences, counted with
a splitter that knows 。！？ and text without final punctuation.
"""

from __future__ import annotations

import asyncio
from functools import cache
from typing import cast

from rapidfuzz import fuzz

from ragaudit.lang import sentences, tokens
from ragaudit.metrics._base import Deps, JudgeError, Outcome, Sample, Window, metric
from ragaudit.metrics._judge import ask, own_window

# An extracted sentence counts when it equals a context sentence up to spacing and punctuation,
# or nearly (the judge may fix a typo): rapidfuzz ratio out of 100.
MATCH_RATIO = 90.0


@cache
def _context_relevance_class() -> type:
    """The class scoring two-judge context relevance (ragas's, extended), made on first use."""
    from ragas.metrics import collections as rc
    from ragas.metrics.collections.context_relevance.util import (
        ContextRelevanceInput,
        ContextRelevanceOutput,
    )
    from ragas.metrics.result import MetricResult

    class _ContextRelevance(rc.ContextRelevance):
        """ragas's two-judge context relevance, both judges asked at once.

        ragas retries a judge five times and silently averages over the one that answered; here a
        judge that gives no valid rating fails the row, with what it said.
        """

        # ragas's ascore takes **kwargs; this one names the inputs it needs.
        async def ascore(self, user_input: str, retrieved_contexts: list[str]) -> MetricResult:  # type: ignore[override]
            context = "\n".join(retrieved_contexts)
            # ragas's edge cases: a context that only repeats the question is not relevant.
            if not context.strip() or context.strip() in user_input.strip():
                return MetricResult(value=0.0)
            ratings = await asyncio.gather(
                *(
                    self._rate(p, user_input, context)
                    for p in (self.judge1_prompt, self.judge2_prompt)
                )
            )
            return MetricResult(value=(ratings[0] / 2.0 + ratings[1] / 2.0) / 2.0)

        async def _rate(self, prompt: object, user_input: str, context: str) -> int:
            data = ContextRelevanceInput(user_input=user_input, context=context)
            # ragas's InstructorTypeVar is no TypeVar to mypy; the reply is the model asked for.
            out = cast(
                ContextRelevanceOutput,
                await self.llm.agenerate(prompt.to_string(data), ContextRelevanceOutput),  # type: ignore[attr-defined]
            )
            if out.rating not in (0, 1, 2):
                raise JudgeError(
                    f"a context relevance judge rated {out.rating!r}; expected 0, 1 or 2"
                )
            return out.rating

    return _ContextRelevance


def _window(s: Sample, deps: Deps) -> Window:
    from ragas.metrics.collections.context_relevance.util import (
        ContextRelevanceInput,
        ContextRelevanceJudge1Prompt,
        ContextRelevanceJudge2Prompt,
    )

    from ragaudit.metrics._ragas import prompt_for, ragas_window
    from ragaudit.prompts.context_relevance import (
        CONTEXT_RELEVANCE_JUDGE1,
        CONTEXT_RELEVANCE_JUDGE2,
    )

    data = ContextRelevanceInput(user_input=s.question, context="")
    windows = [
        ragas_window(
            prompt_for(ContextRelevanceJudge1Prompt(), CONTEXT_RELEVANCE_JUDGE1, s.language),
            data,
            "joined",
        ),
        ragas_window(
            prompt_for(ContextRelevanceJudge2Prompt(), CONTEXT_RELEVANCE_JUDGE2, s.language),
            data,
            "joined",
        ),
    ]
    return max(windows, key=lambda w: sum(len(m) for m in w.messages))


@metric("context_relevance", inputs=("question", "contexts"), llm=True, window=_window, order=80)
async def context_relevance(s: Sample, deps: Deps) -> Outcome:
    """Two judges rate how far the retrieved contexts hold what the question needs (0, 1, 2)."""
    from ragaudit.metrics._ragas import localise, ragas_llm
    from ragaudit.prompts.context_relevance import (
        CONTEXT_RELEVANCE_JUDGE1,
        CONTEXT_RELEVANCE_JUDGE2,
    )

    m = localise(
        _context_relevance_class()(llm=ragas_llm(deps, s.language)),
        s.language,
        judge1_prompt=CONTEXT_RELEVANCE_JUDGE1,
        judge2_prompt=CONTEXT_RELEVANCE_JUDGE2,
    )
    result = await m.ascore(user_input=s.question, retrieved_contexts=s.contexts)
    return Outcome(result.value)


def _key(text: str) -> str:
    return "".join(tokens(text))


def match_sentences(
    extracted: list[str], context_sentences: list[str]
) -> tuple[set[int], list[str]]:
    """Which context sentences the extracted ones match, and the extracted ones matching none.

    The second list is text the judge did not copy from the context; it does not count.
    """
    keys = [_key(c) for c in context_sentences]
    matched: set[int] = set()
    strays: list[str] = []
    for piece in extracted:
        key = _key(piece)
        if not key:
            continue
        hits = [i for i, k in enumerate(keys) if k == key]
        if not hits:
            best = max(range(len(keys)), key=lambda i: fuzz.ratio(key, keys[i]), default=None)
            if best is not None and fuzz.ratio(key, keys[best]) >= MATCH_RATIO:
                hits = [best]
        if hits:
            matched.update(hits)
        else:
            strays.append(piece)
    return matched, strays


def _sentence_window(s: Sample, deps: Deps) -> Window:
    from ragaudit.prompts.context_relevance import SENTENCE_EXTRACTION, SentenceExtractionInput

    return own_window(
        SENTENCE_EXTRACTION,
        SentenceExtractionInput(question=s.question, context=""),
        s.language,
        "joined",
    )


@metric(
    "context_sentence_relevance",
    inputs=("question", "contexts"),
    llm=True,
    window=_sentence_window,
    order=90,
)
async def context_sentence_relevance(s: Sample, deps: Deps) -> Outcome:
    """Share of the contexts' sentences the judge extracts as helpful (the RAGAS paper's form)."""
    from ragaudit.prompts.context_relevance import SENTENCE_EXTRACTION, SentenceExtractionInput

    context = "\n".join(s.contexts)
    whole = sentences(context)
    out = await ask(
        deps,
        SENTENCE_EXTRACTION,
        SentenceExtractionInput(question=s.question, context=context),
        s.language,
    )
    extracted = [piece for item in out.sentences for piece in sentences(item)]
    matched, strays = match_sentences(extracted, whole)
    reason = {
        "sentences": len(whole),
        "relevant": [whole[i] for i in sorted(matched)],
        "not_in_context": strays,
    }
    return Outcome(len(matched) / len(whole), reason, {"match_ratio": MATCH_RATIO})


__all__ = ["MATCH_RATIO", "context_relevance", "context_sentence_relevance", "match_sentences"]
