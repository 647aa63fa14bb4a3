"""Factual correctness: precision, recall and F1 of the answer's claims against the reference.

ragas's metric: the answer's claims are checked against the reference (TP: supported, FP: not)
and, for recall and F1, the reference's claims against the answer (FN: not covered). Three
registered metrics share the same judge calls (the memo answers the second and third).
"""

from __future__ import annotations

import asyncio
from functools import cache
from typing import Any, Literal

import numpy as np
from pydantic import Field

from ragaudit.metrics._base import Deps, JudgeError, Options, Outcome, Sample, Skip, metric

Mode = Literal["precision", "recall", "f1"]


@cache
def _factual_correctness_class() -> type:
    """The class scoring factual correctness (ragas's, extended), made on first use."""
    from ragas.metrics import collections as rc
    from ragas.metrics.result import MetricResult
    from ragas.metrics.utils import fbeta_score

    class _FactualCorrectness(rc.FactualCorrectness):
        """ragas's factual correctness; an answer without claims is skipped, not scored 0.

        Both texts are decomposed at once, then both checked at once. ``counts`` keeps TP, FP, FN.
        """

        counts: dict[str, int]

        # ragas's ascore takes **kwargs; this one names the inputs it needs.
        async def ascore(self, response: str, reference: str) -> MetricResult:  # type: ignore[override]
            both = self.mode != "precision"
            claims = await asyncio.gather(
                self._decompose_claims(response),
                *([self._decompose_claims(reference)] if both else []),
            )
            if not claims[0]:
                raise Skip("the judge found no claims in the response")
            if both and not claims[1]:
                raise Skip("the judge found no claims in the reference")
            checks = await asyncio.gather(
                self._checked(claims[0], reference),
                *([self._checked(claims[1], response)] if both else []),
            )
            supported = checks[0]
            covered = checks[1] if both else np.array([], dtype=bool)
            tp, fp, fn = int(supported.sum()), int((~supported).sum()), int((~covered).sum())
            self.counts = {"tp": tp, "fp": fp, "fn": fn}
            if self.mode == "precision":
                score = tp / (tp + fp)
            elif self.mode == "recall":
                score = tp / (tp + fn)
            else:
                score = fbeta_score(tp, fp, fn, self.beta)
            return MetricResult(value=float(np.round(score, 2)))

        async def _checked(self, claims: list[str], against: str) -> np.ndarray:
            verdicts = await self._verify_claims(claims, against)
            if len(verdicts.statements) != len(claims):
                raise JudgeError(
                    f"the judge gave {len(verdicts.statements)} verdicts for {len(claims)} claims"
                )
            return np.array([bool(v.verdict) for v in verdicts.statements], dtype=bool)

    return _FactualCorrectness


class FactualCorrectnessOptions(Options):
    """Options of factual correctness (and its precision and recall)."""

    beta: float = Field(default=1.0, gt=0)
    """Beta of the F-score (> 1 favours recall)."""
    atomicity: Literal["low", "high"] = "low"
    """How finely texts are split into claims."""
    coverage: Literal["low", "high"] = "low"
    """How much of a text its claims must cover."""


async def _score(s: Sample, deps: Deps, opts: FactualCorrectnessOptions, mode: Mode) -> Outcome:
    from ragaudit.metrics._ragas import localise, ragas_llm
    from ragaudit.prompts.claims import CLAIMS, matching_examples
    from ragaudit.prompts.statements import NLI_FACTUAL

    args: dict[str, Any] = {
        "mode": mode,
        "beta": float(opts.beta),
        "atomicity": opts.atomicity,
        "coverage": opts.coverage,
    }
    m = _factual_correctness_class()(llm=ragas_llm(deps, s.language), **args)
    localise(
        m, s.language, pick={"prompt": matching_examples}, prompt=CLAIMS, nli_prompt=NLI_FACTUAL
    )
    result = await m.ascore(response=s.response or "", reference=s.reference or "")
    return Outcome(result.value, m.counts, args)


@metric(
    "factual_correctness",
    inputs=("response", "reference"),
    llm=True,
    options=FactualCorrectnessOptions,
    order=130,
    conditioned=True,
)
async def factual_correctness(s: Sample, deps: Deps, opts: FactualCorrectnessOptions) -> Outcome:
    """F-beta (F1 by default) of the answer's claims against the reference's."""
    return await _score(s, deps, opts, "f1")


@metric(
    "factual_correctness_precision",
    inputs=("response", "reference"),
    llm=True,
    options=FactualCorrectnessOptions,
    order=140,
    conditioned=True,
)
async def factual_correctness_precision(
    s: Sample, deps: Deps, opts: FactualCorrectnessOptions
) -> Outcome:
    """Share of the answer's claims that the reference supports (TP / (TP + FP))."""
    return await _score(s, deps, opts, "precision")


@metric(
    "factual_correctness_recall",
    inputs=("response", "reference"),
    llm=True,
    options=FactualCorrectnessOptions,
    order=150,
    conditioned=True,
)
async def factual_correctness_recall(
    s: Sample, deps: Deps, opts: FactualCorrectnessOptions
) -> Outcome:
    """Reference-supported answer claims over those plus missed reference claims (TP/(TP+FN))."""
    return await _score(s, deps, opts, "recall")


__all__ = [
    "FactualCorrectnessOptions",
    "factual_correctness",
    "factual_correctness_precision",
    "factual_correctness_recall",
]
