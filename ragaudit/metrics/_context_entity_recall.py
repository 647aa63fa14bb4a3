"""Context entity recall: the share of the reference's named entities found in the contexts."""

from __future__ import annotations

import asyncio

from ragaudit.metrics._base import Deps, Outcome, Sample, Skip, Window, metric


def _window(s: Sample, deps: Deps) -> Window:
    from ragas.metrics.collections.context_entity_recall.util import (
        ExtractEntitiesInput,
        ExtractEntitiesPrompt,
    )

    from ragaudit.metrics._ragas import prompt_for, ragas_window
    from ragaudit.prompts.entities import ENTITIES

    prompt = prompt_for(ExtractEntitiesPrompt(), ENTITIES, s.language)
    return ragas_window(prompt, ExtractEntitiesInput(text=""), "joined")


@metric(
    "context_entity_recall", inputs=("contexts", "reference"), llm=True, window=_window, order=100
)
async def context_entity_recall(s: Sample, deps: Deps) -> Outcome:
    """Share of the reference's named entities the retrieved contexts mention (|CN∩GN| / |GN|)."""
    from ragas.metrics import collections as rc

    from ragaudit.metrics._ragas import localise, ragas_llm
    from ragaudit.prompts.entities import ENTITIES

    m = localise(
        rc.ContextEntityRecall(llm=ragas_llm(deps, s.language)), s.language, prompt=ENTITIES
    )
    reference, found = await asyncio.gather(
        m._extract_entities(s.reference or ""), m._extract_entities("\n".join(s.contexts))
    )
    if not set(reference):
        # ragas scores this 0, but a reference without entities says nothing about the contexts.
        raise Skip("the judge found no named entities in the reference")
    both = sorted(set(reference) & set(found))
    return Outcome(
        len(both) / len(set(reference)),
        {"reference_entities": sorted(set(reference)), "found": both},
    )


__all__ = ["context_entity_recall"]
