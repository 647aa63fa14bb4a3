"""A judge of known labels for the fake provider: calibration's tests and benchmark script it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ragaudit.cache._fake import FakeRequest, _unit


@dataclass
class Oracle:
    """A responder that answers the judge steps of the calibrated metrics from known labels.

    ``relevant`` maps (question, context) to whether the context helps answer the question;
    ``supported`` maps an answer to whether its contexts support it (faithfulness takes the
    whole answer as its one statement); ``answered`` maps an answer to its question and whether
    it answers it (answer relevancy). ``flip`` is the chance that one verdict is
    turned around, drawn per verdict from ``seed``: a judge of known, independent error.
    Anything it has no label for falls through to the other responders.
    """

    relevant: dict[tuple[str, str], bool] = field(default_factory=dict)
    supported: dict[str, bool] = field(default_factory=dict)
    answered: dict[str, tuple[str, bool]] = field(default_factory=dict)
    flip: float = 0.0
    seed: int = 0

    @classmethod
    def from_calibration(cls, inputs: Any, flip: float = 0.0, seed: int = 0) -> Oracle:
        """The oracle of a calibration's inputs: every label and scenario verdict it holds.

        ``inputs`` is a ``ragaudit.calibration.CalibrationInputs``: its labelled items give
        the verdicts of their metric (a label of at least ½ is good), its scenario rows the
        relevance of each fixed context and of each gold context.
        """
        oracle = cls(flip=flip, seed=seed)
        for item in inputs.labelled:
            s = item.sample
            good = item.label >= 0.5
            if item.metric == "faithfulness":
                oracle.supported[s.response] = good
            elif item.metric == "answer_relevancy":
                oracle.answered[s.response] = (s.question, good)
            elif item.metric == "context_relevance":
                oracle.relevant[(s.question, s.contexts[0])] = good
        for row in inputs.scenarios:
            meta = row.metadata["scenario"]
            for text, rel in zip(row.retrieved_contexts, meta["relevant"], strict=True):
                oracle.relevant[(row.question, text)] = rel
            for g in row.reference_contexts:
                oracle.relevant[(row.question, g)] = True
        return oracle

    def _bit(self, truth: bool, *key: Any) -> bool:
        wrong = self.flip > 0 and _unit("oracle", self.seed, *key) < self.flip
        return truth != wrong

    def _known(self, question: str, text: str) -> list[tuple[str, bool]]:
        """The labelled contexts of ``question`` found in ``text`` (longest first, no overlap)."""
        found = []
        for (q, ctx), rel in self.relevant.items():
            if q == question and ctx and ctx in text:
                found.append((ctx, rel))
        return found

    def __call__(self, req: FakeRequest) -> Any:
        """The labelled answer to ``req``, or None."""
        inp = req.judge_input
        title = req.title
        if title == "StatementGeneratorOutput" and inp.get("answer") in self.supported:
            return {"statements": [inp["answer"]]}
        if title == "NLIStatementOutput" and all(
            s in self.supported for s in inp.get("statements", [])
        ):
            return {
                "statements": [
                    {
                        "statement": s,
                        "reason": "oracle",
                        "verdict": int(self._bit(self.supported[s], s)),
                    }
                    for s in inp["statements"]
                ]
            }
        if title == "AnswerRelevanceOutput" and inp.get("response") in self.answered:
            question, relevant = self.answered[inp["response"]]
            if self._bit(relevant, inp["response"]):
                return {"question": question, "noncommittal": 0}
            return {"question": "unrelated", "noncommittal": 1}
        question = inp.get("question", inp.get("user_input", ""))
        if (
            title == "ContextPrecisionOutput"
            and (question, inp.get("context", "")) in self.relevant
        ):
            truth = self.relevant[(question, inp["context"])]
            return {"reason": "oracle", "verdict": int(self._bit(truth, question, inp["context"]))}
        if title == "RelevanceGrade" and (question, inp.get("context", "")) in self.relevant:
            truth = self.relevant[(question, inp["context"])]
            # A label is yes/no: the grades at the ends of the 0-3 scale.
            grade = 3 if self._bit(truth, question, inp["context"]) else 0
            return {"grade": grade, "reason": "oracle"}
        if title == "PairwisePreference":
            one = self.relevant.get((question, inp.get("context_1", "")))
            two = self.relevant.get((question, inp.get("context_2", "")))
            if one is not None and two is not None and one != two:
                better = 1 if self._bit(one, question, inp["context_1"], inp["context_2"]) else 2
                return {"better": better, "reason": "oracle"}
        if title == "ContextRelevanceOutput":
            known = self._known(question, inp.get("context", ""))
            if known:
                share = sum(r for _, r in known) / len(known)
                rating = min(2, max(0, int(2 * share + 0.5)))
                if self._bit(True, question, inp["context"]) is False:
                    rating = 2 - rating
                return {"rating": rating}
        if title == "ContextRecallOutput":
            gold = [c for (q, c), r in self.relevant.items() if q == question and r]
            if gold:
                return {
                    "classifications": [
                        {
                            "statement": g[:200],
                            "reason": "oracle",
                            "attributed": int(self._bit(g in inp.get("context", ""), question, g)),
                        }
                        for g in gold
                    ]
                }
        return None


__all__ = ["Oracle"]
