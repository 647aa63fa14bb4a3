"""Plumbing: WikiEval's human labels flow through the judged metrics; samples really sample; k fits
the judge's window."""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import replace
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from support.metrics import judge, make_deps, sample, score
from support.paths import REPO_ROOT

from ragaudit.cache import Gateway, canonical_json
from ragaudit.lang import sentences
from ragaudit.metrics import METRICS, Deps, Sample
from ragaudit.tasks.score import MESSAGE_OVERHEAD_TOKENS, fit_k, prompt_tokens, reasons, score_rows

WIKIEVAL = REPO_ROOT.parent / "shared" / "data" / "wikieval"


def wikieval(name: str) -> pl.DataFrame:
    if not (WIKIEVAL / f"{name}.csv").is_file():
        pytest.skip(f"{WIKIEVAL} not present")
    return pl.read_csv(WIKIEVAL / f"{name}.csv").with_row_index("row")


def agreement(rows: list[dict[str, Any]], table: pl.DataFrame) -> float:
    """Share of questions whose label-1 variant scores above its label-0 variant."""
    value = {r["question_id"]: r["value"] for r in rows}
    pairs: dict[str, dict[int, float]] = defaultdict(dict)
    for r in table.iter_rows(named=True):
        pairs[r["question"]][r["label"]] = value[f"r{r['row']}"]
    assert len(pairs) == table.height // 2 and all(len(p) == 2 for p in pairs.values())
    return sum(p[1] > p[0] for p in pairs.values()) / len(pairs)


def wiki_deps(gw: Gateway) -> Deps:
    # WikiEval's longest answers and contexts have ~40 sentences: the judge's verdicts on them
    # need more than the default 1,024 output tokens, and the fake cuts a reply at its budget.
    deps = make_deps(gw)
    return replace(deps, llm=replace(deps.llm, max_tokens=4096))


async def run(metric: str, samples: list[Sample], deps: Deps) -> list[dict[str, Any]]:
    rows = await score_rows(METRICS[metric], samples, deps, window=1_000_000, limit=64)
    assert {r["status"] for r in rows} == {"ok"}, [r["error"] for r in rows if r["status"] != "ok"][
        :3
    ]
    return rows


async def test_wikieval_faithfulness_follows_the_labels(fake, gateway) -> None:  # noqa: F811
    ff = wikieval("ff")
    label_of = {tuple(sentences(r["answer"])): r["label"] for r in ff.iter_rows(named=True)}
    steps = judge(
        StatementGeneratorOutput=lambda req, inp: {"statements": sentences(inp["answer"])},
        NLIStatementOutput=lambda req, inp: {
            "statements": [
                {
                    "statement": s,
                    "reason": "human label",
                    "verdict": label_of[tuple(inp["statements"])],
                }
                for s in inp["statements"]
            ]
        },
    )
    samples = [
        sample(
            question=r["question"],
            response=r["answer"],
            contexts=[r["context"]],
            qid=f"r{r['row']}",
        )
        for r in ff.iter_rows(named=True)
    ]
    with fake.script(steps):
        rows = await run("faithfulness", samples, wiki_deps(gateway))
    assert agreement(rows, ff) == 1.0


async def test_wikieval_answer_relevancy_follows_the_labels(fake, gateway) -> None:  # noqa: F811
    ar = wikieval("ar")
    source = {r["answer"]: r for r in ar.iter_rows(named=True)}

    def regenerate(req: Any, inp: dict[str, Any]) -> dict[str, Any]:
        row = source[inp["response"]]
        # A relevant answer leads back to its question; an irrelevant one to one about itself.
        question = row["question"] if row["label"] else f"What is said here: {row['answer'][:60]}"
        return {"question": question, "noncommittal": 0}

    samples = [
        sample(question=r["question"], response=r["answer"], qid=f"r{r['row']}")
        for r in ar.iter_rows(named=True)
    ]
    with fake.script(judge(AnswerRelevanceOutput=regenerate)):
        rows = await run(
            "answer_relevancy", samples, make_deps(gateway, answer_relevancy_strictness=2)
        )
    assert agreement(rows, ar) == 1.0


async def test_wikieval_context_relevance_follows_the_labels(fake, gateway) -> None:  # noqa: F811
    cr = wikieval("cr")
    label = {(r["question"], r["context"]): r["label"] for r in cr.iter_rows(named=True)}
    steps = judge(
        ContextRelevanceOutput=lambda req, inp: {
            "rating": 2 * label[(inp["user_input"], inp["context"])]
        },
        RelevantSentences=lambda req, inp: {
            "sentences": sentences(inp["context"])
            if label[(inp["question"], inp["context"])]
            else []
        },
    )
    samples = [
        sample(question=r["question"], contexts=[r["context"]], qid=f"r{r['row']}")
        for r in cr.iter_rows(named=True)
    ]
    with fake.script(steps):
        for metric in ("context_relevance", "context_sentence_relevance"):
            rows = await run(metric, samples, wiki_deps(gateway))
            assert agreement(rows, cr) == 1.0, metric


# -- samples ----------------------------------------------------------------------------------


async def test_answer_relevancy_samples_are_one_request_and_replay(fake, tmp_path: Path) -> None:
    produced = iter(
        ["Where is Paris?", "What is the capital of France?", "Which country has Paris as capital?"]
    )
    script = judge(
        AnswerRelevanceOutput=lambda req, inp: {"question": next(produced), "noncommittal": 0}
    )
    deps_options = {"answer_relevancy_strictness": 3}
    first_gw = Gateway(tmp_path / "memo", backoff_s=0.0)
    with fake.script(script):
        first = await score("answer_relevancy", sample(), make_deps(first_gw, **deps_options))
    first_gw.close()
    asked = [r for r in fake.stats.requests if r.title == "AnswerRelevanceOutput"]
    assert len(asked) == 1 and fake.stats.calls == 1  # one provider call for the samples ...
    assert asked[0].params.get("n") == 3  # ... asking for three choices
    assert asked[0].params.get("temperature") == 0.3  # sampled, not greedy
    questions = [s["output"]["question"] for s in reasons(first)["steps"]]
    assert len(set(questions)) == 3
    assert [s.get("sample", 0) for s in reasons(first)["steps"]] == [0, 1, 2]

    second_gw = Gateway(
        tmp_path / "memo", backoff_s=0.0
    )  # a re-run: a new process on the same memo
    again = await score("answer_relevancy", sample(), make_deps(second_gw, **deps_options))
    second_gw.close()
    assert fake.stats.calls == 1  # nothing new asked
    assert again["value"] == first["value"]
    assert [s["output"]["question"] for s in reasons(again)["steps"]] == questions
    keys = [c.key_hash for c in second_gw.log.rows() if c.kind == "completion"]
    assert len(set(keys)) == 3  # each sample its own memo entry: the index is in its key


async def test_two_items_asking_the_same_prompt_share_one_answer(fake, gateway) -> None:  # noqa: F811
    # The sample index counts repeats within one row only: two questions with the same answer
    # text ask the same prompt once, not twice (one after the other: the gateway does not merge
    # identical calls in flight).
    rows = await score_rows(
        METRICS["aspect_coherence"],
        [sample(qid="a"), sample(qid="b")],
        make_deps(gateway),
        window=100_000,
        limit=1,
    )
    assert [r["status"] for r in rows] == ["ok", "ok"] and fake.stats.calls == 1


# -- k and the window -------------------------------------------------------------------------


def sent_tokens(req: Any) -> int:
    """The request as the gateway counts it: its messages, and the schema of ``response_format``."""
    fmt = req.params.get("response_format") or {}
    schema = [canonical_json(fmt["json_schema"]["schema"])] if "json_schema" in fmt else []
    return sum(
        prompt_tokens("fake/judge", m["content"]) + MESSAGE_OVERHEAD_TOKENS for m in req.messages
    ) + sum(prompt_tokens("fake/judge", text) for text in schema)


def long_contexts(n: int) -> list[str]:
    return [
        f"第{i}段。" + "这是一段关于北京历史和文化的较长说明，包含许多细节。" * 12 for i in range(n)
    ]


async def test_k_shrinks_until_a_joined_prompt_fits(fake, gateway) -> None:  # noqa: F811
    contexts = long_contexts(10)
    deps = Deps.of(
        gateway=gateway,
        judge="fake/judge",
        embedder="fake/embed",
        options={},
        max_output_tokens=300,
    )
    s = sample("zh", "北京的历史有多长？", "很长。", "北京有三千多年的建城史。", contexts=contexts)
    window = 3000
    row = await score("context_recall", s, deps, window=window)
    k = row["k_used"]
    assert row["status"] == "ok" and 1 <= k < 10
    [req] = [r for r in fake.stats.requests if r.title == "ContextRecallOutput"]
    text = req.user
    assert (
        all(c[:4] in text for c in contexts[:k]) and contexts[k][:4] not in text
    )  # exactly the top k
    used = sent_tokens(req)
    assert used + deps.max_output_tokens <= window  # what was sent fits ...
    grown = used + prompt_tokens("fake/judge", json.dumps(contexts[k], ensure_ascii=False)[1:-1])
    assert grown + deps.max_output_tokens > window  # ... and one more context would not
    measured = json.loads(row["metric_args"])["fit"]
    assert (
        abs(measured["prompt_tokens"] - used) <= 0.02 * used
    )  # the measurement is the request's size
    assert measured["window"] == window and measured["k_max"] == 10


async def test_k_for_one_context_per_prompt_stops_at_the_first_that_does_not_fit(
    fake,
    gateway,  # noqa: F811
) -> None:
    contexts = long_contexts(3)
    contexts.insert(2, "巨大的上下文。" * 600)  # cannot fit alone: k stops before it
    deps = Deps.of(
        gateway=gateway,
        judge="fake/judge",
        embedder="fake/embed",
        options={},
        max_output_tokens=300,
    )
    s = sample("zh", "北京的历史有多长？", "很长。", "北京有三千多年的建城史。", contexts=contexts)
    row = await score("context_precision", s, deps, window=3000)
    assert row["status"] == "ok" and row["k_used"] == 2
    asked = [r for r in fake.stats.requests if r.title == "ContextPrecisionOutput"]
    assert len(asked) == 2 and all(sent_tokens(r) + 300 <= 3000 for r in asked)


async def test_no_room_for_one_context_is_skipped_without_calls(fake, gateway) -> None:  # noqa: F811
    deps = Deps.of(
        gateway=gateway,
        judge="fake/judge",
        embedder="fake/embed",
        options={},
        max_output_tokens=300,
    )
    row = await score("faithfulness", sample(contexts=["word " * 4000]), deps, window=3000)
    assert (
        row["status"] == "skipped"
        and "cannot hold the prompt with even one context" in row["error"]
    )
    assert row["k_used"] == 0 and fake.stats.calls == 0


async def test_metrics_without_contexts_in_their_prompts_keep_every_context(gateway) -> None:  # noqa: F811
    deps = make_deps(gateway)
    s = sample(contexts=long_contexts(4))
    assert fit_k(METRICS["answer_relevancy"], s, deps, 10)[0] == 4
    row = await score(
        "nonllm_context_recall",
        sample(contexts=long_contexts(4), reference_contexts=["x"]),
        deps,
        window=10,
    )
    assert row["k_used"] == 4
    assert (await score("bleu", s, deps))["k_used"] is None  # reads no contexts at all
