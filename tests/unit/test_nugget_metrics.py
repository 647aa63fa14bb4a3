"""Nugget and citation metrics on planted facts: every score equals the one worked by hand."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ragaudit.answers import answer_one, make_source
from ragaudit.cache import Gateway
from ragaudit.config import AnswerConfig
from ragaudit.dataset import Question
from ragaudit.metrics import Deps, Sample, resolve
from ragaudit.nuggets import PlantedFact, PlantedTruth
from ragaudit.tasks.score import score_rows


def fact(key: str, importance: str, form: str, partial: str | None = None) -> PlantedFact:
    return PlantedFact(key, importance, [form], [partial] if partial else [])


FACTS = [
    fact("v1", "vital", "the bridge opened in 1932"),
    fact("v2", "vital", "the bridge is 503 metres long", "the bridge is long"),
    fact("v3", "vital", "the bridge carries eight lanes"),
    fact("o1", "okay", "the bridge is painted grey"),
    fact("o2", "okay", "the bridge cost 20 million pounds", "the bridge was expensive"),
    # For the citations: facts stated by the answer's sentences and (some) by the contexts.
    fact("a", "vital", "the arch weighs 52800 tonnes"),
    fact("a2", "vital", "the arch is made of steel"),
    fact("b", "vital", "the pylons are granite"),
    fact("c", "vital", "the deck rests on 48 hangers", "the deck rests on hangers"),
    fact("d", "vital", "the toll was removed in 1970"),
    fact("e", "vital", "the lighting uses LEDs"),
]


@pytest.fixture
def gateway(tmp_path: Path) -> Iterator[Gateway]:
    gw = Gateway(tmp_path / "memo", concurrency=16, backoff_s=0.0, max_retries=1)
    yield gw
    gw.close()


def make_sample(response: str, contexts: list[str] | None = None, **kw: Any) -> Sample:
    contexts = contexts or []
    return Sample(
        "q1",
        "Tell me about the bridge.",
        "en",
        response,
        None,
        contexts,
        [f"c{i}" for i in range(len(contexts))],
        None,
        None,
        **kw,
    )


async def score(name: str, s: Sample, deps: Deps) -> dict[str, Any]:
    return (await score_rows(resolve(name, deps.options), [s], deps, window=100_000))[0]


NUGGETS = [
    {"text": f.forms[0], "importance": f.importance, "context_ids": [f"c{k}"]}
    for k, f in enumerate(FACTS[:5])
]


async def test_nugget_recalls_equal_the_hand_computed_values(fake, gateway) -> None:
    # The answer fully states v1 and o1, partly states v2 and o2, and misses v3.
    answer = (
        "The bridge opened in 1932 and the bridge is long. The bridge is painted grey, and "
        "the bridge was expensive."
    )
    s = make_sample(answer, nuggets=NUGGETS)
    expected = {
        "nugget_recall_strict_vital": 1 / 3,  # v1 of v1, v2, v3
        "nugget_recall_vital": (1 + 0.5) / 3,  # v2 partial
        "nugget_recall_strict_all": 2 / 5,  # v1, o1
        "nugget_recall_all": (1 + 0.5 + 1 + 0.5) / 5,
    }
    two_a_call = {"metric_options": {name: {"batch_size": 2} for name in expected}}
    deps = Deps.of(gateway, "fake/judge", "fake/embed", two_a_call)
    with fake.script(PlantedTruth(FACTS)):
        rows = {name: await score(name, s, deps) for name in expected}
    for name, value in expected.items():
        assert rows[name]["status"] == "ok", rows[name]
        assert rows[name]["value"] == pytest.approx(value), name
    # Five nuggets, two a call: three calls, asked once for all four metrics.
    assert fake.stats.calls == 3
    reason = json.loads(rows["nugget_recall_vital"]["reason"])["metric"]
    missed = {m["text"]: (m["verdict"], m["context_ids"]) for m in reason["missed_vital"]}
    assert missed == {
        "the bridge is 503 metres long": ("partial_support", ["c1"]),
        "the bridge carries eight lanes": ("not_support", ["c2"]),
    }


async def test_questions_without_nuggets_are_skipped_with_the_reason(fake, gateway) -> None:
    deps = Deps.of(gateway, "fake/judge", "fake/embed", {})
    none = await score("nugget_recall_all", make_sample("An answer."), deps)
    assert none["status"] == "skipped" and "no nuggets table" in none["error"]
    empty = make_sample("An answer.", nuggets=[], nuggets_note="no relevant context")
    row = await score("nugget_recall_all", empty, deps)
    assert row["status"] == "skipped" and "no relevant context" in row["error"]
    okay_only = make_sample("An answer.", nuggets=NUGGETS[3:])
    with fake.script(PlantedTruth(FACTS)):
        vital = await score("nugget_recall_vital", okay_only, deps)
        every = await score("nugget_recall_all", okay_only, deps)
    assert vital["status"] == "skipped" and vital["error"] == "no vital nuggets for this question"
    assert (every["status"], every["value"]) == ("ok", 0.0)


CONTEXTS = [
    "Records show the arch weighs 52800 tonnes.",  # c0 → [1]
    "The pylons are granite, quarried nearby.",  # c1 → [2]
    "Engineers noted the arch weighs 52800 tonnes and the arch is made of steel.",  # c2 → [3]
    "Tourists like the view from the top.",  # c3 → [4]: supports nothing
    "As built, the deck rests on hangers.",  # c4 → [5]: part of fact c
]
ANSWER = (
    "The arch weighs 52800 tonnes [1]. "  # supported by its one citation
    "The arch weighs 52800 tonnes and the arch is made of steel [1][3]. "  # [3] alone suffices
    "The pylons are granite [2][4]. "  # [4] is an irrelevant extra citation
    "The deck rests on 48 hangers [5]. "  # partly supported
    "The toll was removed in 1970. "  # uncited
    "The lighting uses LEDs [4]."  # unsupported
)


async def test_citation_metrics_equal_the_hand_computed_values(fake, gateway) -> None:
    s = make_sample(ANSWER, CONTEXTS)
    deps = Deps.of(gateway, "fake/judge", "fake/embed", {})
    # Sentences: 6; citations: 1 + 2 + 2 + 1 + 0 + 1 = 7.
    # ALCE recall: sentences 1-3 are fully supported by their citations together: 3 / 6.
    # ALCE precision: s1 [1]; s2 [3] supports alone, [1] alone does not but without it [3]
    # still does → [1] irrelevant; s3 [2] yes, [4] irrelevant; s4 and s6 unsupported → 0.
    # TREC pairs: s1 1; s2 [1] 0.5 (one of two facts), [3] 1; s3 1, 0; s4 0.5; s6 0.
    expected = {
        "citation_recall": 3 / 6,
        "citation_precision": 3 / 7,
        "citation_support_precision": (1 + 0.5 + 1 + 1 + 0 + 0.5 + 0) / 7,
        "citation_support_recall": (1 + 1 + 1 + 0.5 + 0 + 0) / 6,
        "citation_uncited_share": 1 / 6,
    }
    deps = Deps.of(gateway, "fake/judge", "fake/embed", {})
    with fake.script(PlantedTruth(FACTS)):
        rows = {name: await score(name, s, deps) for name in expected}
    for name, value in expected.items():
        assert rows[name]["status"] == "ok", rows[name]
        assert rows[name]["value"] == pytest.approx(value), name
    assert not resolve("citation_uncited_share").higher_is_better


async def test_answers_without_citations_are_skipped(fake, gateway) -> None:
    deps = Deps.of(gateway, "fake/judge", "fake/embed", {})
    row = await score("citation_recall", make_sample("No citation here.", CONTEXTS), deps)
    assert (row["status"], row["error"]) == ("skipped", "the answer cites no context")


async def test_structured_citations_and_a_custom_pattern(fake, gateway) -> None:
    deps = Deps.of(gateway, "fake/judge", "fake/embed", {"citation_pattern": r"\(source (\w+)\)"})
    custom = make_sample("The pylons are granite (source c1). The lighting uses LEDs.", CONTEXTS)
    given = make_sample(
        "The pylons are granite. The lighting uses LEDs.", CONTEXTS, citations=[["c1"], []]
    )
    with fake.script(PlantedTruth(FACTS)):
        for s in (custom, given):
            row = await score("citation_recall", s, deps)
            assert (row["status"], row["value"]) == ("ok", 0.5)


def test_the_http_source_maps_a_json_responses_cited_documents() -> None:
    config = AnswerConfig.model_validate(
        {
            "source": "http",
            "http": {
                "url": "http://qa.invalid/json",
                "response": "json",
                "json_path": "answer",
                "citations_path": "references",
                "citation_id_field": "doc_id",
            },
        }
    )
    source = make_source(config)
    raw = json.dumps(
        {"answer": "Granite [2]. Tonnes [1].", "references": [{"doc_id": "c0"}, {"doc_id": "c1"}]}
    )
    text = source._extract(raw)  # what a response body becomes
    assert (text, text.citation_ids) == ("Granite [2]. Tonnes [1].", ["c0", "c1"])
    assert source._extract(json.dumps({"answer": "No list."})).citation_ids == []
    # An entry with a null id keeps its place: [3] still names the third entry (c2), not c3.
    held = source._extract(
        json.dumps(
            {
                "answer": "x",
                "references": [{"doc_id": "c0"}, {"doc_id": None}, {"doc_id": "c2"}, {}],
            }
        )
    )
    assert held.citation_ids == ["c0", "", "c2", ""]


async def test_an_empty_reference_list_cites_nothing(fake, gateway) -> None:
    # references: [] with a marker [3]: the answer cites an unknown document, never the third
    # retrieved context.
    deps = Deps.of(gateway, "fake/judge", "fake/embed", {})
    with fake.script(PlantedTruth(FACTS)):
        rows = [
            await score(m, make_sample(STEEL, CONTEXTS, citation_ids=[]), deps)
            for m in ("citation_recall", "citation_precision")
        ]
    assert [(r["status"], r["value"]) for r in rows] == [("ok", 0.0), ("ok", 0.0)]
    # The same marker without a list of the source's own numbers the retrieved contexts.
    with fake.script(PlantedTruth(FACTS)):
        numbered = await score("citation_recall", make_sample(STEEL, CONTEXTS), deps)
    assert (numbered["status"], numbered["value"]) == ("ok", 1.0)


async def test_a_null_reference_id_keeps_the_later_markers_in_place(fake, gateway) -> None:
    # The second entry had no id: [3] is still c2, which states the sentence.
    deps = Deps.of(gateway, "fake/judge", "fake/embed", {})
    sample = make_sample(STEEL, CONTEXTS, citation_ids=["c0", "", "c2"])
    with fake.script(PlantedTruth(FACTS)):
        row = await score("citation_recall", sample, deps)
    assert (row["status"], row["value"]) == ("ok", 1.0)


STEEL = "The arch is made of steel [3]."


async def test_markers_point_into_the_sources_cited_documents(fake, gateway) -> None:
    # The service numbers its own reference list: [1] is c2 here, not the first context.
    s = make_sample("The arch is made of steel [1].", CONTEXTS, citation_ids=["c2", "c9"])
    deps = Deps.of(gateway, "fake/judge", "fake/embed", {})
    with fake.script(PlantedTruth(FACTS)):
        row = await score("citation_recall", s, deps)
        far = await score(
            "citation_precision",
            make_sample("Granite [2].", CONTEXTS, citation_ids=["c2", "c9"]),
            deps,
        )
    assert (row["status"], row["value"]) == ("ok", 1.0)
    # c9 is not among the scored contexts: a citation that can support nothing.
    assert (far["status"], far["value"]) == ("ok", 0.0)


async def test_a_question_sets_citations_field_reaches_the_answer() -> None:
    source = make_source(AnswerConfig.model_validate({"source": "column"}))
    question = Question(
        question_id="q1",
        question="Q?",
        response="Granite [1].",
        metadata={"citations": ["c1", "c4"]},
    )
    row = await answer_one(source, question, AnswerConfig.model_validate({"source": "column"}), "r")
    assert (row["response"], row["citation_ids"]) == ("Granite [1].", ["c1", "c4"])
