"""Lexical overlap with the reference: ROUGE-L, BLEU and Jaccard, all CJK-aware.

- ROUGE-L: rouge-score with our tokens (each CJK character alone, Latin words whole, lower
  case); its own tokenizer deletes every non-ASCII character, so Chinese would score 0.
- BLEU: sacreBLEU's sentence BLEU with its ``zh`` tokenizer (every CJK character a token, the
  rest by the standard 13a rules, so English is tokenised exactly as usual) and effective-order
  smoothing, the WMT convention for Chinese; its signature goes with every row. ragas's
  ``BleuScore`` splits both texts on ". " and pairs the pieces by position, which mismatches as
  soon as the sentence counts differ and never splits Chinese.
- Jaccard: |A ∩ B| / |A ∪ B| of the two texts' token sets (the ROUGE tokens).
"""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING

from ragaudit._env import log_to_current_stderr
from ragaudit.lang import tokens
from ragaudit.metrics._base import Deps, Outcome, Sample, Skip, metric

if TYPE_CHECKING:
    from rouge_score.rouge_scorer import RougeScorer
    from sacrebleu.metrics import BLEU

TOKENIZER = "cjk-char+latin-word"


class _CJKTokenizer:
    """Tokens for rouge-score: each CJK character, Latin words and numbers whole, lower case."""

    def tokenize(self, text: str) -> list[str]:
        return tokens(text)


# Built on first use: rouge-score imports nltk, seconds that a run without these metrics
# (or a command that only lists them) should not pay.
@cache
def _rouge() -> RougeScorer:
    from absl import logging as absl_logging
    from rouge_score import rouge_scorer

    # absl's handler holds the stderr of the moment it was imported (``_env`` says why).
    log_to_current_stderr(absl_logging.get_absl_handler().python_handler)
    return rouge_scorer.RougeScorer(["rougeL"], tokenizer=_CJKTokenizer())


@cache
def _bleu() -> BLEU:
    from sacrebleu.metrics import BLEU

    return BLEU(tokenize="zh", effective_order=True)


def _texts(s: Sample) -> tuple[str, str]:
    response, reference = s.response or "", s.reference or ""
    if not tokens(response):
        raise Skip("the response has no words to compare")
    return response, reference


@metric("rouge_l", inputs=("response", "reference"), order=410, conditioned=True)
async def rouge_l(s: Sample, deps: Deps) -> Outcome:
    """ROUGE-L F-measure of the answer against the reference (CJK-aware tokens)."""
    response, reference = _texts(s)
    score = _rouge().score(reference, response)["rougeL"]
    return Outcome(
        score.fmeasure,
        {"precision": score.precision, "recall": score.recall},
        {"tokenizer": TOKENIZER},
    )


@metric("bleu", inputs=("response", "reference"), order=420, conditioned=True)
async def bleu(s: Sample, deps: Deps) -> Outcome:
    """Sentence BLEU of the answer against the reference (sacreBLEU, zh tokenizer), 0–1."""
    response, reference = _texts(s)
    result = _bleu().sentence_score(response, [reference])
    return Outcome(
        result.score / 100.0,
        {"precisions": [p / 100.0 for p in result.precisions], "bp": result.bp},
        {"signature": str(_bleu().get_signature())},
    )


@metric("jaccard", inputs=("response", "reference"), order=430, conditioned=True)
async def jaccard(s: Sample, deps: Deps) -> Outcome:
    """Jaccard similarity of the answer's and the reference's token sets (CJK-aware tokens)."""
    response, reference = _texts(s)
    a, b = set(tokens(response)), set(tokens(reference))
    union = a | b
    return Outcome(
        len(a & b) / len(union),
        {"shared": len(a & b), "union": len(union)},
        {"tokenizer": TOKENIZER},
    )


__all__ = ["TOKENIZER", "bleu", "jaccard", "rouge_l"]
