"""Citations in an answer: which sentence cites which retrieved context, and the scores.

A marker such as ``[1]``, ``[doc3]`` or ``【2】`` (the pattern is configurable; its first
capture group that matched holds one number or id, or several separated by commas) points at
a retrieved context: a number is its 1-based position among the contexts the system was given,
anything else a context id. Markers that begin a sentence are taken as the previous sentence's
(a citation written after the full stop). The scores take support verdicts per sentence:

- ALCE citation recall: the share of sentences whose cited contexts, together, fully support
  them (a sentence without a citation counts 0).
- ALCE citation precision: the share of citations that are relevant. In a fully supported
  sentence with several citations, a citation is irrelevant when it does not support the
  sentence alone and the other citations still support it without it; in a sentence its
  citations do not support, none is relevant.
- TREC weighted support precision: the mean support of each (sentence, citation) pair judged
  alone (full 1, partial 0.5, none 0); weighted support recall: per sentence the best support
  any of its citations gives (0 when uncited), averaged over all sentences.
- The share of sentences that cite nothing.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field

import regex

from ragaudit.config import DEFAULT_CITATION_PATTERN
from ragaudit.lang import sentences

DEFAULT_PATTERN = DEFAULT_CITATION_PATTERN

WEIGHTS = {"full": 1.0, "partial": 0.5, "none": 0.0}
"""TREC's support weights."""


@dataclass
class CitedSentence:
    """One sentence of an answer (markers removed) and the contexts it cites."""

    text: str
    cited: list[str] = field(default_factory=list)
    """Context ids cited, in order, without repeats."""
    unknown: list[str] = field(default_factory=list)
    """Markers that match no retrieved context: citations that can support nothing."""

    @property
    def n_citations(self) -> int:
        """Citations of the sentence, counting those that match no context."""
        return len(self.cited) + len(self.unknown)


PATTERN_SECONDS = 2.0
"""The most one answer's citation parsing may take. The pattern is the user's: a pattern that
backtracks without end would hold the run (and ignore SIGTERM, which Python handles only between
bytecodes) for as long as the match lasts; past the bound the row fails naming the pattern."""


class PatternTimeout(ValueError):
    """The citation pattern did not finish on an answer within :data:`PATTERN_SECONDS`."""


def compile_pattern(pattern: str) -> regex.Pattern[str]:
    """The citation pattern compiled; a ValueError when it has no capture group."""
    compiled = regex.compile(pattern)
    if compiled.groups < 1:
        raise ValueError(f"citation pattern {pattern!r} needs a capture group for the id")
    return compiled


def _resolve(token: str, context_ids: list[str]) -> str | None:
    token = re.sub(r"^doc", "", token.strip(), flags=re.IGNORECASE).strip()
    if token in context_ids:
        return token
    if token.isdigit() and 1 <= int(token) <= len(context_ids):
        return context_ids[int(token) - 1]
    return None


def parse_citations(
    answer: str,
    context_ids: list[str],
    pattern: str = DEFAULT_PATTERN,
    seconds: float = PATTERN_SECONDS,
) -> list[CitedSentence]:
    """The answer's sentences with the contexts each cites (see the module docstring).

    Raises:
        PatternTimeout: the pattern took longer than ``seconds`` on this answer.
    """
    marker = compile_pattern(pattern)
    deadline = time.monotonic() + seconds

    def left() -> float:
        # regex checks its timeout while it runs; every call shares the answer's budget.
        return max(deadline - time.monotonic(), 0.001)

    out: list[CitedSentence] = []
    try:
        for raw in sentences(answer):
            leading: list[str] = []
            # Markers before any text belong to the sentence before (written after its stop).
            while (m := marker.match(raw.lstrip(), timeout=left())) is not None and out:
                leading.append(next(g for g in m.groups() if g is not None))
                raw = raw.lstrip()[m.end() :]
            if leading:
                _add(out[-1], leading, context_ids)
            found = [
                next((g for g in m.groups() if g is not None), "")
                for m in marker.finditer(raw, timeout=left())
            ]
            text = marker.sub("", raw, timeout=left())
            out.extend(_sentence(text, found, context_ids))
    except TimeoutError:
        raise PatternTimeout(
            f"citation pattern {pattern!r} did not finish on this answer within {seconds:g} s "
            "(score.citation_pattern backtracks: rewrite it so each part matches one way)"
        ) from None
    return out


def _sentence(text: str, found: list[str], context_ids: list[str]) -> list[CitedSentence]:
    """The sentence left once its markers are removed (none when only markers were left)."""
    text = re.sub(r"\s+", " ", text).strip()
    text = re.sub(r"\s+([.,;:!?。，；：！？])", r"\1", text)
    if not text:
        return []
    sentence = CitedSentence(text)
    _add(sentence, found, context_ids)
    return [sentence]


def _add(sentence: CitedSentence, tokens: list[str], context_ids: list[str]) -> None:
    for group in tokens:
        for token in re.split(r"[,，]", group):
            if not token.strip():
                continue
            cid = _resolve(token, context_ids)
            if cid is None:
                sentence.unknown.append(token.strip())
            elif cid not in sentence.cited:
                sentence.cited.append(cid)


def from_structured(answer: str, cited: list[list[str]]) -> list[CitedSentence]:
    """Sentences of ``answer`` with the context ids an answer source gave per sentence.

    Raises:
        ValueError: the lists do not match the answer's sentences one to one.
    """
    texts = sentences(answer)
    if len(texts) != len(cited):
        raise ValueError(
            f"the answer has {len(texts)} sentences but its citations list {len(cited)}"
        )
    return [
        CitedSentence(t.strip(), list(dict.fromkeys(c))) for t, c in zip(texts, cited, strict=True)
    ]


@dataclass
class SentenceSupport:
    """The support verdicts of one cited sentence."""

    joint: str
    """The support of all its cited contexts together (``full``, ``partial``, ``none``)."""
    each: dict[str, str]
    """Context id → the support of that context alone."""
    without: dict[str, str] = field(default_factory=dict)
    """Context id → the support of the other cited contexts without it (asked only where
    ALCE's precision test needs it)."""


def citation_scores(
    cited: list[CitedSentence], support: list[SentenceSupport | None]
) -> dict[str, float]:
    """ALCE recall and precision, TREC weighted precision and recall, and the uncited share.

    ``support`` is aligned with ``cited``; None for a sentence that cites no context.
    """
    n = len(cited)
    recall = 0.0
    relevant = 0
    citations = sum(s.n_citations for s in cited)
    pair_weights: list[float] = []
    best: list[float] = []
    for sentence, sup in zip(cited, support, strict=True):
        pair_weights += [0.0] * len(sentence.unknown)
        if sup is None:
            best.append(0.0)
            continue
        weights = [WEIGHTS[sup.each[c]] for c in sentence.cited]
        pair_weights += weights
        best.append(max(weights, default=0.0))
        if sup.joint != "full":
            continue
        recall += 1
        if sentence.n_citations == 1:
            relevant += 1
            continue
        for c in sentence.cited:
            alone = sup.each[c] == "full"
            others_suffice = sup.without.get(c) == "full"
            relevant += 1 if alone or not others_suffice else 0
    return {
        "citation_recall": recall / n if n else 0.0,
        "citation_precision": relevant / citations if citations else 0.0,
        "citation_support_precision": (
            sum(pair_weights) / len(pair_weights) if pair_weights else 0.0
        ),
        "citation_support_recall": sum(best) / n if n else 0.0,
        "citation_uncited_share": (sum(1 for s in cited if not s.n_citations) / n if n else 0.0),
    }


__all__ = [
    "DEFAULT_PATTERN",
    "WEIGHTS",
    "CitedSentence",
    "SentenceSupport",
    "citation_scores",
    "PATTERN_SECONDS",
    "PatternTimeout",
    "compile_pattern",
    "from_structured",
    "parse_citations",
]
