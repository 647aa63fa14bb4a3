"""Semantic similarity: the cosine of the answer's and the reference's embeddings.

ragas's ``SemanticSimilarity`` computes the same cosine but embeds with the synchronous
``embed_text``, which would block the event loop every other metric shares; this embeds both
texts in one gateway call instead.
"""

from __future__ import annotations

import numpy as np

from ragaudit.metrics._answer_relevancy import check_embedder
from ragaudit.metrics._base import Deps, JudgeError, Outcome, Sample, metric


def cosine(a: list[float], b: list[float]) -> float:
    """Cosine similarity; an all-zero vector has none and is an error."""
    va, vb = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    norm = float(np.linalg.norm(va) * np.linalg.norm(vb))
    if norm == 0.0:
        raise JudgeError("the embedder returned an all-zero vector")
    return float(va @ vb / norm)


@metric(
    "semantic_similarity",
    inputs=("response", "reference"),
    embeddings=True,
    order=160,
    conditioned=True,
)
async def semantic_similarity(s: Sample, deps: Deps) -> Outcome:
    """Cosine similarity of the answer's and the reference's embeddings."""
    check_embedder(s, deps)
    response, reference = await deps.gateway.aembed(
        [s.response or "", s.reference or ""], model=deps.embedder
    )
    return Outcome(cosine(response, reference), args={"embedder": deps.embedder})


__all__ = ["cosine", "semantic_similarity"]
