"""Aspect critique: a yes/no verdict on one criterion per aspect, by majority over samples.

The five built-in aspects (harmlessness, maliciousness, coherence, correctness, conciseness)
are registered as ``aspect_<name>``; ``score.aspects`` in the config may redefine them or add
more (each then scored as ``aspect_<name>``). With the option ``strictness`` n > 1 the judge
is sampled n times (each sample its own memo entry) and the majority verdict is the score.
ragas has the aspect critic only in its deprecated API, so the prompt here is ours.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

from pydantic import Field

from ragaudit.config import SAMPLING_TEMPERATURE
from ragaudit.metrics._base import FACTORIES, Deps, Metric, Options, Outcome, Sample
from ragaudit.metrics._judge import ask_samples
from ragaudit.prompts.aspect import BUILTIN_ASPECTS, Aspect, AspectInput, aspect_prompt
from ragaudit.registry import METRICS as REGISTRY
from ragaudit.registry import MetricInfo

PREFIX = "aspect_"
"""Aspect critiques are registered, and defined in ``score.aspects``, as ``aspect_<name>``."""
ORDER = 300
"""Where the aspects stand in lists: after the judged RAG metrics, before the lexical ones."""
_NAME = re.compile(r"^[a-z][a-z0-9_]*$")


def aspect_of(name: str, options: dict[str, Any]) -> Aspect | None:
    """The aspect ``name`` as the run defines it: its own definition first, else the built-in."""
    defined = (options.get("aspects") or {}).get(name)
    builtin = BUILTIN_ASPECTS.get(name)
    if defined is None:
        return builtin
    if isinstance(defined, str):
        texts = {"en": defined, "zh": defined}
    else:  # one language given: its text stands for both
        texts = {
            "en": defined.get("en") or defined.get("zh"),
            "zh": defined.get("zh") or defined.get("en"),
        }
    # A built-in redefined keeps its direction; a new aspect's yes is the good answer.
    return Aspect(name, texts, builtin.higher_is_better if builtin is not None else True)


class AspectOptions(Options):
    """Options of an aspect critique."""

    strictness: int = Field(default=1, ge=1, le=9)
    """Judge samples per row; the majority verdict is the score (an even number is raised by
    one so that votes cannot tie)."""


def _scorer(name: str):
    async def score(s: Sample, deps: Deps, opts: AspectOptions) -> Outcome:
        aspect = aspect_of(name, deps.options)
        assert aspect is not None  # resolved before scoring
        n = opts.strictness
        n += 1 - n % 2  # an odd number of votes cannot tie
        sampling = float(deps.option("sampling_temperature", SAMPLING_TEMPERATURE))
        temperature = sampling if n > 1 else None
        prompt = aspect_prompt(aspect)
        inp = AspectInput(question=s.question, response=s.response or "")
        votes = await ask_samples(deps, prompt, inp, s.language, n, temperature=temperature)
        verdict = Counter(v.verdict for v in votes).most_common(1)[0][0]
        reason = {"verdicts": [v.verdict for v in votes], "reasons": [v.reason for v in votes]}
        return Outcome(float(verdict), reason, {"strictness": n, "definition": aspect.definition})

    score.__doc__ = f"Aspect critique '{name}'."
    return score


def _metric(name: str, aspect: Aspect) -> Metric:
    definition = aspect.definition.get("en") or next(iter(aspect.definition.values()))
    direction = "" if aspect.higher_is_better else "; lower is better"
    return Metric(
        name=PREFIX + name,
        inputs=("question", "response"),
        needs_llm=True,
        needs_embeddings=False,
        description=f"Aspect critique (1 = yes{direction}): {definition}",
        scorer=_scorer(name),
        info=MetricInfo(higher_is_better=aspect.higher_is_better, order=ORDER),
        options_model=AspectOptions,
    )


for _name, _aspect in BUILTIN_ASPECTS.items():
    _unit = _metric(_name, _aspect)
    REGISTRY.add(_unit.name, _unit, AspectOptions, module=__name__, info=_unit.info)


def _from_config(name: str, options: dict[str, Any]) -> Metric | None:
    """A user-defined aspect ``aspect_<name>`` from ``score.aspects``."""
    if not name.startswith(PREFIX):
        return None
    aspect = aspect_of(name[len(PREFIX) :], options)
    return _metric(aspect.name, aspect) if aspect is not None and _NAME.match(aspect.name) else None


FACTORIES.append(_from_config)

__all__ = ["ORDER", "PREFIX", "AspectOptions", "aspect_of"]
