"""The offline judge's answers to the nugget and citation prompts, and a planted-truth judge.

The default answers (registered by schema title) are crude token-overlap heuristics, enough to
run the stage and the metrics offline. :class:`PlantedTruth` answers from facts whose wordings
are known, as a judge that reads perfectly would: a test or a demo scripts it into the fake
provider (``FAKE.script(PlantedTruth(...))``) and can compute every score by hand.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from ragaudit.cache import FakeRequest, register_fake_answer
from ragaudit.lang import sentences, token_share, tokens


@register_fake_answer("ExtractedNuggets")
def _extract(req: FakeRequest) -> dict[str, Any]:
    p = req.payload
    question = p.get("question", "")
    out = []
    for k, ctx in enumerate(p.get("contexts", []), start=1):
        first = next(iter(sentences(ctx)), "").strip()
        share = token_share(question, ctx)
        if first and share > 0:
            importance = "vital" if share >= 0.5 else "okay"
            out.append({"text": first[:200], "importance": importance, "sources": [k]})
    return {"nuggets": out}


@register_fake_answer("MergedNuggets")
def _merge(req: FakeRequest) -> dict[str, Any]:
    groups: dict[str, list[int]] = {}
    texts = req.payload.get("nuggets", [])
    for k, text in enumerate(texts, start=1):
        groups.setdefault(" ".join(sorted(set(tokens(text)))), []).append(k)
    return {
        "nuggets": [
            {"text": texts[ks[0] - 1], "importance": "vital", "merged_from": ks}
            for ks in groups.values()
        ]
    }


@register_fake_answer("Assignments")
def _assign(req: FakeRequest) -> dict[str, Any]:
    p = req.payload
    answer = p.get("answer", "")
    out = []
    for k, nugget in enumerate(p.get("nuggets", []), start=1):
        share = token_share(nugget, answer)
        verdict = (
            "support" if share >= 0.8 else "partial_support" if share >= 0.4 else "not_support"
        )
        out.append({"nugget": k, "verdict": verdict, "reason": f"token overlap {share:.2f}"})
    return {"assignments": out}


@register_fake_answer("SupportVerdict")
def _support(req: FakeRequest) -> dict[str, Any]:
    p = req.payload
    share = token_share(p.get("sentence", ""), "\n".join(p.get("contexts", [])))
    level = "full" if share >= 0.8 else "partial" if share >= 0.4 else "none"
    return {"support": level, "reason": f"token overlap {share:.2f}"}


# -- a judge that knows the planted facts ------------------------------------------------------


def _norm(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip().lower()


@dataclass
class PlantedFact:
    """A fact planted in contexts and answers under known wordings.

    Args:
        key: the fact's name (tests and benches refer to it).
        importance: ``vital`` or ``okay``.
        forms: the wordings the contexts use (each one states the whole fact).
        partial_forms: wordings that state only part of the fact (an answer holding one of
            them partly supports the fact; a context holding one partly supports a sentence).
    """

    key: str
    importance: str
    forms: list[str]
    partial_forms: list[str] = field(default_factory=list)


@dataclass
class PlantedTruth:
    """A responder that answers nugget and citation prompts from planted facts.

    A text states a fact when it holds one of the fact's ``forms`` (case and spacing aside),
    partly when it holds one of its ``partial_forms``. Prompts it has no schema for fall
    through to the other responders.
    """

    facts: list[PlantedFact]

    def fact_of(self, text: str) -> PlantedFact | None:
        """The fact ``text`` states in full (the first found), else None."""
        t = _norm(text)
        return next((f for f in self.facts if any(_norm(x) in t for x in f.forms)), None)

    def stated(self, text: str) -> dict[str, str]:
        """Fact key → ``full`` or ``partial`` for every fact ``text`` states."""
        t = _norm(text)
        out: dict[str, str] = {}
        for f in self.facts:
            if any(_norm(x) in t for x in f.forms):
                out[f.key] = "full"
            elif any(_norm(x) in t for x in f.partial_forms):
                out[f.key] = "partial"
        return out

    def __call__(self, req: FakeRequest) -> Any:
        """The answer to ``req`` from the planted facts, or None."""
        p = req.payload
        if req.title == "ExtractedNuggets":
            found: dict[str, dict[str, Any]] = {}
            for k, ctx in enumerate(p.get("contexts", []), start=1):
                for key, level in self.stated(ctx).items():
                    if level != "full":
                        continue
                    fact = next(f for f in self.facts if f.key == key)
                    text = next(x for x in fact.forms if _norm(x) in _norm(ctx))
                    entry = found.setdefault(
                        key, {"text": text, "importance": fact.importance, "sources": []}
                    )
                    entry["sources"].append(k)
            return {"nuggets": list(found.values())}
        if req.title == "MergedNuggets":
            groups: dict[str, list[int]] = {}
            texts = p.get("nuggets", [])
            for k, text in enumerate(texts, start=1):
                known = self.fact_of(text)
                groups.setdefault(known.key if known else f"?{k}", []).append(k)
            out = []
            for key, ks in groups.items():
                planted = next((f for f in self.facts if f.key == key), None)
                importance = planted.importance if planted else "okay"
                out.append({"text": texts[ks[0] - 1], "importance": importance, "merged_from": ks})
            return {"nuggets": out}
        if req.title == "Assignments":
            answer = self.stated(p.get("answer", ""))
            verdicts = {"full": "support", "partial": "partial_support"}
            out = []
            for k, nugget in enumerate(p.get("nuggets", []), start=1):
                known = self.fact_of(nugget)
                said = answer.get(known.key) if known else None
                verdict = verdicts.get(said or "", "not_support")
                out.append({"nugget": k, "verdict": verdict, "reason": "planted truth"})
            return {"assignments": out}
        if req.title == "SupportVerdict":
            claims = self.stated(p.get("sentence", ""))
            held = self.stated("\n".join(p.get("contexts", [])))
            if not claims:
                return {"support": "none", "reason": "planted truth: no known fact"}
            covered = [k for k in claims if held.get(k) == "full"]
            some = [k for k in claims if k in held]
            level = "full" if len(covered) == len(claims) else "partial" if some else "none"
            return {"support": level, "reason": "planted truth"}
        return None


__all__ = ["PlantedFact", "PlantedTruth"]
