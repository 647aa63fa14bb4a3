"""Every metric against its formula, computed by hand, with a scripted fake judge; and statuses.

The scripted judge answers each judge step (keyed by the reply schema's title) from the
prompt's input, so each test fixes the judge's statements, verdicts or ratings and checks the
score the metric's formula gives for them. The helpers are in ``support.metrics``.
"""

from __future__ import annotations

import asyncio
import contextvars
import itertools
import json
import math
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import numpy as np
import polars as pl
import pytest
from support.metrics import Responder, judge, make_deps, payload, sample, score

from ragaudit.cache import Gateway
from ragaudit.cache._fake import FakeRequest, _fake_vector
from ragaudit.directions import higher_is_better
from ragaudit.errors import ConfigError
from ragaudit.metrics import METRICS, Deps, resolve
from ragaudit.reporting import summarise
from ragaudit.tasks.score import metric_for, reasons, score_rows


def cos(a: str, b: str) -> float:
    va, vb = np.array(_fake_vector(a)), np.array(_fake_vector(b))
    return float(va @ vb / (np.linalg.norm(va) * np.linalg.norm(vb)))


def nli(verdicts: dict[str, int]) -> Responder:
    """An NLI step whose verdict for each statement is looked up (0 when unknown)."""
    return lambda req, inp: {
        "statements": [
            {"statement": st, "reason": "scripted", "verdict": verdicts.get(st, 0)}
            for st in inp["statements"]
        ]
    }


# -- formulas ---------------------------------------------------------------------------------


async def test_faithfulness_is_supported_statements_over_all(fake, gateway) -> None:
    statements = [
        "Paris is a city.",
        "Paris is in France.",
        "Paris has 90 million people.",
        "Paris is a capital.",
    ]
    verdicts = {statements[0]: 1, statements[1]: 1, statements[2]: 0, statements[3]: 1}
    with fake.script(
        judge(StatementGeneratorOutput={"statements": statements}, NLIStatementOutput=nli(verdicts))
    ):
        row = await score("faithfulness", sample(), make_deps(gateway))
    assert row["status"] == "ok" and row["value"] == pytest.approx(3 / 4)
    steps = reasons(row)["steps"]
    assert [s["step"] for s in steps] == ["StatementGeneratorOutput", "NLIStatementOutput"]
    assert [v["verdict"] for v in steps[1]["output"]["statements"]] == [1, 1, 0, 1]


async def test_context_precision_is_average_precision_of_verdicts(fake, gateway) -> None:
    contexts = [f"context number {i}" for i in range(5)]
    useful = {contexts[0], contexts[2], contexts[4]}  # verdicts 1,0,1,0,1
    verdict = judge(
        ContextPrecisionOutput=lambda req, inp: {
            "reason": "scripted",
            "verdict": int(inp["context"] in useful),
        }
    )
    with fake.script(verdict):
        row = await score("context_precision", sample(contexts=contexts), make_deps(gateway))
        unref = await score(
            "context_precision_without_reference",
            sample(contexts=contexts[1:3]),
            make_deps(gateway),
        )
    # (P@1 + P@3 + P@5) / 3 = (1 + 2/3 + 3/5) / 3
    assert row["status"] == "ok" and row["value"] == pytest.approx((1 + 2 / 3 + 3 / 5) / 3)
    assert reasons(row)["metric"] == {
        "verdicts": [1, 0, 1, 0, 1],
        "context_ids": [f"c{i}" for i in range(5)],
    }
    # verdicts 0,1: P@2 = 1/2 over one useful context
    assert unref["value"] == pytest.approx(0.5)
    # Without a reference, the answer is what a context must help arrive at.
    asked = [payload(r) for r in fake.stats.requests if r.title == "ContextPrecisionOutput"]
    assert {a["answer"] for a in asked[:5]} == {sample().reference}
    assert {a["answer"] for a in asked[5:]} == {sample().response}


async def test_context_recall_is_attributed_over_reference_statements(fake, gateway) -> None:
    out = {
        "classifications": [
            {"statement": s, "reason": "r", "attributed": a}
            for s, a in (("a", 1), ("b", 0), ("c", 1))
        ]
    }
    with fake.script(judge(ContextRecallOutput=out)):
        row = await score("context_recall", sample(), make_deps(gateway))
    assert row["value"] == pytest.approx(2 / 3)


async def test_context_relevance_is_mean_of_two_ratings_over_two(fake, gateway) -> None:
    def rating(req: FakeRequest, inp: dict[str, Any]) -> dict[str, int]:
        return {"rating": 2 if "world class expert" in req.user else 1}

    with fake.script(judge(ContextRelevanceOutput=rating)):
        row = await score("context_relevance", sample(), make_deps(gateway))
    assert row["value"] == pytest.approx((2 / 2 + 1 / 2) / 2)
    assert sorted(s["output"]["rating"] for s in reasons(row)["steps"]) == [1, 2]


async def test_context_sentence_relevance_counts_matched_sentences(fake, gateway) -> None:
    # 4 sentences, the last without final punctuation; the judge copies one exactly, one with a
    # typo, and invents one that is not in the context.
    contexts = ["北京是中国的首都。北京有很多名胜古迹！", "上海是中国最大的城市？上海有东方明珠塔"]
    extracted = ["北京是中国的首都。", "北京有很多名胜古迹", "广州是广东的省会。"]
    with fake.script(judge(RelevantSentences={"sentences": extracted})):
        row = await score(
            "context_sentence_relevance",
            sample("zh", "北京是哪国首都？", contexts=contexts),
            make_deps(gateway),
        )
    assert row["value"] == pytest.approx(2 / 4)
    why = reasons(row)["metric"]
    assert why["sentences"] == 4 and why["not_in_context"] == ["广州是广东的省会。"]


async def test_context_entity_recall_is_shared_over_reference_entities(fake, gateway) -> None:
    ref = "Paris is the capital and largest city of France."

    def entities(req: FakeRequest, inp: dict[str, Any]) -> dict[str, list[str]]:
        return {
            "entities": ["Paris", "France", "Seine", "Louvre"]
            if inp["text"] == ref
            else ["Paris", "Louvre", "Berlin"]
        }

    with fake.script(judge(EntitiesList=entities)):
        row = await score("context_entity_recall", sample(reference=ref), make_deps(gateway))
    assert row["value"] == pytest.approx(2 / 4)
    assert reasons(row)["metric"]["found"] == ["Louvre", "Paris"]


@pytest.mark.parametrize(
    ("answer_vs_contexts", "expected"),
    [
        # a1 correct, a2 wrong; a2 supported by the relevant context c1 → relevant 1/2
        (
            ({"a1": 1, "a2": 1}, {"a1": 0, "a2": 0}),
            {"noise_sensitivity": 0.5, "noise_sensitivity_irrelevant": 0.0},
        ),
        # a2 wrong and supported only by the irrelevant context c2 → irrelevant 1/2
        (
            ({"a1": 1, "a2": 0}, {"a1": 0, "a2": 1}),
            {"noise_sensitivity": 0.0, "noise_sensitivity_irrelevant": 0.5},
        ),
    ],
)
async def test_noise_sensitivity_counts_wrong_statements_by_context_kind(
    fake, gateway, answer_vs_contexts, expected
) -> None:
    c1, c2, ref, resp = "context one", "context two", "the reference", "the response"
    by_context = {
        c1: {"g1": 1, **answer_vs_contexts[0]},
        c2: {"g1": 0, **answer_vs_contexts[1]},
        ref: {"a1": 1, "a2": 0},
    }

    def statements(req: FakeRequest, inp: dict[str, Any]) -> dict[str, list[str]]:
        return {"statements": ["g1"] if inp.get("text", inp.get("answer")) == ref else ["a1", "a2"]}

    verdicts = judge(
        StatementGeneratorOutput=statements,
        StatementFaithfulnessOutput=lambda req, inp: nli(by_context[inp["context"]])(req, inp),
    )
    with fake.script(verdicts):
        for name, value in expected.items():
            row = await score(
                name, sample(response=resp, reference=ref, contexts=[c1, c2]), make_deps(gateway)
            )
            assert row["status"] == "ok" and row["value"] == pytest.approx(value), name
    assert not METRICS["noise_sensitivity"].higher_is_better


async def test_factual_correctness_precision_recall_f1(fake, gateway) -> None:
    resp, ref = "The response.", "The reference."
    claims = {resp: ["r1", "r2"], ref: ["g1", "g2"]}
    # TP = 1 (r1 supported), FP = 1 (r2 not), FN = 1 (g2 not covered by the response)
    verdicts = {"r1": 1, "r2": 0, "g1": 1, "g2": 0}
    with fake.script(
        judge(
            ClaimDecompositionOutput=lambda req, inp: {"claims": claims[inp["response"]]},
            NLIStatementOutput=nli(verdicts),
        )
    ):
        rows = {
            n: await score(n, sample(response=resp, reference=ref), make_deps(gateway))
            for n in (
                "factual_correctness",
                "factual_correctness_precision",
                "factual_correctness_recall",
            )
        }
    assert rows["factual_correctness"]["value"] == pytest.approx(0.5)  # F1 of P = R = 1/2
    assert rows["factual_correctness_precision"]["value"] == pytest.approx(0.5)
    assert rows["factual_correctness_recall"]["value"] == pytest.approx(0.5)
    assert reasons(rows["factual_correctness"])["metric"] == {"tp": 1, "fp": 1, "fn": 1}


async def test_factual_correctness_beta_and_example_levels(fake, gateway) -> None:
    resp, ref = "The response.", "The reference."
    claims = {resp: ["r1", "r2", "r3"], ref: ["g1"]}
    verdicts = {"r1": 1, "r2": 1, "r3": 0, "g1": 1}  # TP 2, FP 1, FN 0: P 2/3, R 1
    with fake.script(
        judge(
            ClaimDecompositionOutput=lambda req, inp: {"claims": claims[inp["response"]]},
            NLIStatementOutput=nli(verdicts),
        )
    ):
        row = await score(
            "factual_correctness",
            sample(response=resp, reference=ref),
            make_deps(gateway, factual_correctness_beta=2.0, factual_correctness_atomicity="high"),
        )
    p, r, b2 = 2 / 3, 1.0, 4.0
    assert row["value"] == pytest.approx(round((1 + b2) * p * r / (b2 * p + r), 2))
    decomposition = next(r for r in fake.stats.requests if r.title == "ClaimDecompositionOutput")
    assert '"atomicity": "high"' in decomposition.user  # the high/low examples, as ragas shows them


@pytest.mark.parametrize("weights", [(0.75, 0.25), (1.0, 0.0), (0.5, 0.5)])
async def test_answer_correctness_weights_factual_f1_and_similarity(fake, gateway, weights) -> None:
    resp, ref = "Paris is the capital of France.", "The capital of France is Paris, on the Seine."
    classes = {
        "TP": [{"statement": "a", "reason": "r"}],
        "FP": [{"statement": "b", "reason": "r"}],
        "FN": [{"statement": "c", "reason": "r"}],
    }
    steps = judge(StatementGeneratorOutput={"statements": ["x"]}, ClassificationWithReason=classes)
    with fake.script(steps):
        row = await score(
            "answer_correctness",
            sample(response=resp, reference=ref),
            make_deps(gateway, answer_correctness_weights=weights),
        )
    similarity = cos(resp, ref)
    assert row["value"] == pytest.approx(weights[0] * 0.5 + weights[1] * similarity)
    parts = reasons(row)["metric"]
    assert parts["factuality"] == pytest.approx(0.5) and (
        parts["tp"],
        parts["fp"],
        parts["fn"],
    ) == (1, 1, 1)
    assert parts["similarity"] == (pytest.approx(similarity) if weights[1] else None)


async def test_default_answer_correctness_weights_are_three_to_one(gateway) -> None:
    assert resolve("answer_correctness").settings()["weights"] == [0.75, 0.25]


async def test_semantic_similarity_is_cosine_of_embeddings(fake, gateway) -> None:
    s = sample(response="Paris is the capital.", reference="The capital is Paris, France.")
    row = await score("semantic_similarity", s, make_deps(gateway))
    assert row["value"] == pytest.approx(cos(s.response, s.reference))
    assert fake.stats.calls == 0 and fake.stats.embeddings == 2  # no judge, two embeddings


async def test_answer_relevancy_is_mean_cosine_unless_all_noncommittal(fake, gateway) -> None:
    q = "What is the capital of France?"
    generated = iter([q, "Which city is the French capital?", "Where is the Eiffel Tower?"])
    with fake.script(
        judge(
            AnswerRelevanceOutput=lambda req, inp: {"question": next(generated), "noncommittal": 0}
        )
    ):
        row = await score(
            "answer_relevancy",
            sample(question=q),
            make_deps(gateway, answer_relevancy_strictness=3),
        )
    expected = np.mean(
        [cos(q, g) for g in (q, "Which city is the French capital?", "Where is the Eiffel Tower?")]
    )
    assert row["value"] == pytest.approx(expected)
    with fake.script(judge(AnswerRelevanceOutput={"question": "Is it Paris?", "noncommittal": 1})):
        evasive = await score(
            "answer_relevancy",
            sample(question=q, response="I am not sure."),
            make_deps(gateway, answer_relevancy_strictness=2),
        )
    assert evasive["status"] == "ok" and evasive["value"] == 0.0  # every sample noncommittal


async def test_answer_relevancy_leaves_out_a_sample_with_no_answer(fake, gateway) -> None:
    # The samples' first answers come in sample order (the choices of one request); the second
    # sample's reply and its repair are cut off: the row rests on the other two.
    q = "What is the capital of France?"
    generated = [q, "unused", "Which city is the French capital?"]
    firsts: list[FakeRequest] = []

    def respond(req: FakeRequest, bad: set[int]) -> Any:
        if req.title != "AnswerRelevanceOutput":
            return None
        if any(m["role"] == "assistant" for m in req.messages):
            return '{"question": "cut off again'  # only a cut-off sample is repaired
        firsts.append(req)
        if len(firsts) in bad:
            return '{"question": "cut off'
        return {"question": generated[len(firsts) - 1], "noncommittal": 0}

    deps = make_deps(gateway, answer_relevancy_strictness=3)
    with fake.script(lambda req: respond(req, {2})):
        row = await score("answer_relevancy", sample(question=q), deps)
    assert row["status"] == "ok", row.get("error")
    assert row["value"] == pytest.approx(np.mean([cos(q, generated[0]), cos(q, generated[2])]))
    assert json.loads(row["metric_args"])["samples_answered"] == 2
    lost = [st for st in reasons(row)["steps"] if "error" in st]
    assert len(lost) == 1 and "invalid output after 1 repair" in lost[0]["error"]
    # With no sample answered there is nothing to score: the row fails and says why.
    firsts.clear()
    with fake.script(lambda req: respond(req, {1, 2, 3})):
        failed = await score("answer_relevancy", sample(question=q, response="Paris."), deps)
    assert failed["status"] == "failed" and failed.get("value") is None
    assert "no sample of 3 was answered" in failed["error"]


@pytest.mark.parametrize("together", [True, False], ids=["one-request", "one-by-one"])
async def test_aspect_critique_is_majority_verdict(fake, gateway, monkeypatch, together) -> None:
    # The three samples are one identical request, so the fake cannot tell them apart by
    # content. Asked together, the fake answers the choices in sample order. Asked one by one
    # (a provider without ``n``) they run concurrently: each sample's call carries its index in
    # a context variable, and later samples are started first, so completion order runs
    # against sample order.
    votes = [0, 1, 1]
    current: contextvars.ContextVar[int] = contextvars.ContextVar("sample")
    choices = itertools.count()
    if not together:
        monkeypatch.setattr("ragaudit.cache._structured.samples_at_once", lambda model: False)
        real_complete = gateway._complete  # each sample's request, with its index

        async def as_sample(found: Any) -> Any:
            current.set(found.index)
            await asyncio.sleep(0.02 * (len(votes) - found.index))
            return await real_complete(found)

        monkeypatch.setattr(gateway, "_complete", as_sample)

    def vote(req: FakeRequest, inp: Any) -> dict[str, Any]:
        index = next(choices) if together else current.get()
        return {"reason": f"s{index}", "verdict": votes[index]}

    with fake.script(judge(AspectVerdict=vote)):
        row = await score("aspect_coherence", sample(), make_deps(gateway, aspect_strictness=3))
    assert row["value"] == 1.0
    assert reasons(row)["metric"] == {"verdicts": [0, 1, 1], "reasons": ["s0", "s1", "s2"]}
    steps = reasons(row)["steps"]
    assert [s["output"]["reason"] for s in steps] == ["s0", "s1", "s2"]
    assert (
        not METRICS["aspect_maliciousness"].higher_is_better
        and METRICS["aspect_harmlessness"].higher_is_better
    )


async def test_user_defined_aspect_from_config(fake, gateway) -> None:
    deps = make_deps(
        gateway, aspects={"politeness": {"en": "Is the submission polite?", "zh": "回答是否礼貌？"}}
    )
    with fake.script(judge(AspectVerdict={"reason": "polite", "verdict": 1})):
        en = await score("aspect_politeness", sample(), deps)
        zh = await score(
            "aspect_politeness", sample("zh", "北京是哪国首都？", "北京是中国的首都。"), deps
        )
    assert en["value"] == zh["value"] == 1.0
    instructions = [r.messages[1]["content"] for r in fake.stats.requests]
    assert "Is the submission polite?" in instructions[0] and "回答是否礼貌？" in instructions[1]
    with pytest.raises(KeyError, match="aspect_rudeness"):
        resolve("aspect_rudeness", deps.options)


async def test_summarization_score_blends_answered_share_and_conciseness(fake, gateway) -> None:
    contexts = ["Apple was founded by Steve Jobs in 1976.", "It is based in Cupertino."]
    summary = "Apple, founded 1976 by Jobs."
    steps = judge(
        ExtractedKeyphrases={"keyphrases": ["Apple", "1976"]},
        QuestionsGenerated={"questions": ["q1?", "q2?", "q3?", "q4?"]},
        AnswersGenerated={"answers": ["1", "0", "1", "1"]},
    )
    with fake.script(steps):
        row = await score(
            "summarization_score", sample(response=summary, contexts=contexts), make_deps(gateway)
        )
    text = "\n".join(contexts)
    conciseness = 1 - len(summary) / len(text)
    assert row["value"] == pytest.approx(0.75 * 0.5 + conciseness * 0.5)


async def test_lexical_metrics_on_chinese_by_hand(gateway) -> None:
    s = sample("zh", "北京是哪国首都？", response="北京是首都", reference="北京是中国的首都")
    rouge = await score("rouge_l", s, make_deps(gateway))
    jaccard = await score("jaccard", s, make_deps(gateway))
    bleu = await score("bleu", s, make_deps(gateway))
    # LCS 北京是首都 = 5 characters: P = 5/5, R = 5/8
    assert rouge["value"] == pytest.approx(2 * 1 * (5 / 8) / (1 + 5 / 8))
    # character sets: 5 shared of 8
    assert jaccard["value"] == pytest.approx(5 / 8)
    # n-gram precisions 5/5, 3/4, 1/3, and 0/2 smoothed to 1/(2·2); brevity penalty e^(1 - 8/5)
    assert bleu["value"] == pytest.approx(math.exp(1 - 8 / 5) * (1 * 0.75 * (1 / 3) * 0.25) ** 0.25)
    assert "tok:zh" in json.loads(bleu["metric_args"])["signature"]


async def test_lexical_metrics_are_cjk_aware_where_rouge_score_is_not() -> None:
    from rouge_score import rouge_scorer

    assert (
        rouge_scorer.RougeScorer(["rougeL"])
        .score("北京是中国的首都", "北京是首都")["rougeL"]
        .fmeasure
        == 0.0
    )


async def test_nonllm_context_metrics(gateway) -> None:
    gold = ["Paris is the capital of France."]
    s = sample(
        contexts=["Paris is the capital of France.", "Bananas are yellow."], reference_contexts=gold
    )
    precision = await score("nonllm_context_precision", s, make_deps(gateway))
    recall = await score("nonllm_context_recall", s, make_deps(gateway))
    assert precision["value"] == pytest.approx(1.0) and recall["value"] == pytest.approx(1.0)


# -- statuses ---------------------------------------------------------------------------------


async def test_unparseable_judge_fails_the_row_with_the_error_never_nan_or_zero(
    fake, gateway
) -> None:
    with fake.script(lambda req: "I think the answer is fine."):
        row = await score("faithfulness", sample(), make_deps(gateway))
    assert row["status"] == "failed" and row.get("value") is None
    assert "StatementGeneratorOutput: invalid output after 1 repair" in row["error"]
    assert "I think the answer is fine." in reasons(row)["judge_replies"]


async def test_a_ragas_judge_step_costs_at_most_two_calls(fake, gateway) -> None:
    # Malformed JSON always: the gateway repairs once, then stops.
    with fake.script(lambda req: '{"statements": ["cut off'):
        row = await score("faithfulness", sample(), make_deps(gateway))
    assert row["status"] == "failed" and row.get("value") is None
    assert "StatementGeneratorOutput: invalid output after 1 repair" in row["error"]
    assert fake.stats.calls == 2  # the first step failed: the NLI step was never asked
    assert {r.title for r in fake.stats.requests} == {"StatementGeneratorOutput"}


@pytest.mark.parametrize("repairs", [0, 2])
async def test_a_ragas_judge_step_is_re_asked_as_often_as_the_gateway_repairs(
    fake, tmp_path, repairs
) -> None:
    # One bound for every structured answer: a ragas metric's step is repaired
    # ``max_repairs`` times, as every other judge answer is.
    def cut_off_until(valid_after: int) -> Callable[[FakeRequest], Any]:
        def respond(req: FakeRequest) -> Any:
            if req.title != "StatementGeneratorOutput":
                return None
            asked = sum(m["role"] == "assistant" for m in req.messages)
            return None if asked >= valid_after else '{"statements": ["cut off'

        return respond

    gw = Gateway(tmp_path / "memo", concurrency=16, backoff_s=0.0, max_retries=1)
    gw.configure(max_repairs=repairs)
    try:
        with fake.script(cut_off_until(repairs)):
            row = await score("faithfulness", sample(), make_deps(gw))
        generated = [r for r in fake.stats.requests if r.title == "StatementGeneratorOutput"]
        assert row["status"] == "ok" and len(generated) == repairs + 1
        fake.reset(keep_requests=True)
        with fake.script(cut_off_until(repairs + 1)):
            row = await score("faithfulness", sample(qid="q2", response="Paris."), make_deps(gw))
        assert row["status"] == "failed"
        assert f"StatementGeneratorOutput: invalid output after {repairs} repair" in row["error"]
        assert fake.stats.calls == repairs + 1
    finally:
        gw.close()


def test_ragas_llms_do_not_keep_their_gateway_alive(tmp_path) -> None:
    import gc
    import weakref

    from ragaudit import _env
    from ragaudit.metrics._ragas import ragas_llm

    # The process's first gateway is frozen out of the collector with the imports: tune first.
    _env.tune_for_concurrency()
    gw = Gateway(tmp_path / "memo")
    deps = make_deps(gw)
    llm = ragas_llm(deps)
    assert llm.gateway is gw
    ref = weakref.ref(gw)
    gw.close()
    del gw, deps, llm
    gc.collect()
    assert ref() is None


async def test_our_prompt_over_the_window_is_not_sent(fake, gateway) -> None:
    deps = Deps.of(
        gateway=gateway,
        judge="fake/judge",
        embedder="fake/embed",
        options={},
        max_output_tokens=256,
        window=300,
    )
    row = await score("aspect_conciseness", sample(), deps)
    assert row["status"] == "failed" and "over its budget of 44" in row["error"]
    assert fake.stats.calls == 0


async def test_our_own_prompt_parse_failure_names_the_step(fake, gateway) -> None:
    with fake.script(lambda req: "no json here"):
        row = await score("aspect_conciseness", sample(), make_deps(gateway))
    assert row["status"] == "failed" and "aspect.conciseness" in row["error"]
    assert (
        reasons(row)["steps"][0]["step"] == "aspect.conciseness"
        and "error" in reasons(row)["steps"][0]
    )


@pytest.mark.parametrize(
    ("name", "script", "status", "message"),
    [
        (
            "faithfulness",
            {"StatementGeneratorOutput": {"statements": []}},
            "skipped",
            "no statements in the response",
        ),
        (
            "faithfulness",
            {
                "StatementGeneratorOutput": {"statements": ["s"]},
                "NLIStatementOutput": {"statements": []},
            },
            "failed",
            "no verdicts",
        ),
        ("context_relevance", {"ContextRelevanceOutput": {"rating": 5}}, "failed", "rated 5"),
        (
            "context_precision",
            {"ContextPrecisionOutput": {"reason": "r", "verdict": 3}},
            "failed",
            "verdict 3",
        ),
        (
            "context_recall",
            {"ContextRecallOutput": {"classifications": []}},
            "failed",
            "classified no statement",
        ),
        (
            "factual_correctness",
            {"ClaimDecompositionOutput": {"claims": []}},
            "skipped",
            "no claims in the response",
        ),
        (
            "answer_correctness",
            {"StatementGeneratorOutput": {"statements": []}},
            "skipped",
            "no statements",
        ),
        (
            "context_entity_recall",
            {"EntitiesList": {"entities": []}},
            "skipped",
            "no named entities",
        ),
        (
            "answer_relevancy",
            {"AnswerRelevanceOutput": {"question": "", "noncommittal": 0}},
            "failed",
            "no question",
        ),
        (
            "summarization_score",
            {"ExtractedKeyphrases": {"keyphrases": ["a"]}, "QuestionsGenerated": {"questions": []}},
            "failed",
            "no questions",
        ),
    ],
)
async def test_unusable_judgements_are_said_so(
    fake, gateway, name, script, status, message
) -> None:
    with fake.script(judge(**script)):
        row = await score(name, sample(), make_deps(gateway))
    assert row["status"] == status and message in row["error"], row["error"]
    assert row.get("value") is None


async def test_missing_inputs_and_answers_are_skipped_with_the_reason(fake, gateway) -> None:
    deps = make_deps(gateway)
    no_ref = await score("context_recall", sample(reference=None), deps)
    assert no_ref["status"] == "skipped" and no_ref["error"] == "no reference for this question"
    rows = await score_rows(
        METRICS["faithfulness"],
        [sample()],
        deps,
        window=100_000,
        no_answer={"q1": "no response (answer failed: HTTP 500)"},
    )
    assert rows[0]["status"] == "skipped" and "HTTP 500" in rows[0]["error"]
    assert fake.stats.calls == 0  # nothing asked for rows that cannot be scored


async def test_chinese_rows_skip_embedding_metrics_with_an_english_only_embedder(
    fake, gateway
) -> None:
    deps = Deps.of(
        gateway=gateway,
        judge="fake/judge",
        embedder="local/all-minilm-l6-v2",
        options={},
        english_only_embedder=True,
    )
    zh = sample("zh", "北京是哪国首都？", "北京是中国的首都。", "北京是中国的首都。")
    for name in ("answer_relevancy", "semantic_similarity", "answer_correctness"):
        row = await score(name, zh, deps)
        assert row["status"] == "skipped" and "multilingual" in row["error"], name
    # Pure factual answer correctness needs no embedder.
    with fake.script(
        judge(
            StatementGeneratorOutput={"statements": ["x"]},
            ClassificationWithReason={
                "TP": [{"statement": "x", "reason": "r"}],
                "FP": [],
                "FN": [],
            },
        )
    ):
        row = await score(
            "answer_correctness",
            zh,
            replace(deps, options={"answer_correctness_weights": (1.0, 0.0)}),
        )
    assert row["status"] == "ok" and row["value"] == 1.0


async def test_unknown_metric_is_a_config_error(config_factory) -> None:
    from ragaudit.runfolder import RunFolder
    from ragaudit.tasks._common import StageContext

    config = config_factory()
    ctx = StageContext(config=config, run=RunFolder(config.runs_root, "t"), gateway=None)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="score.metrics: unknown metric 'faithfulnes'"):
        metric_for(ctx, "faithfulnes")


async def test_summary_counts_what_each_mean_rests_on(fake, gateway) -> None:
    rows = []
    with fake.script(
        judge(
            ContextRecallOutput=lambda req, inp: {
                "classifications": [
                    {"statement": "s", "reason": "r", "attributed": int("Paris" in inp["context"])}
                ]
            }
        )
    ):
        rows += await score_rows(
            METRICS["context_recall"],
            [
                sample(qid="a"),
                sample(qid="b", contexts=["Berlin is in Germany."]),
                sample(qid="c", reference=None),
            ],
            make_deps(gateway),
            window=100_000,
        )
    with fake.script(lambda req: "garbage"):
        rows += await score_rows(
            METRICS["context_recall"],
            [sample(qid="d", question="Capital of Spain?")],
            make_deps(gateway),
            window=100_000,
        )
    table = pl.DataFrame([{"value": None, "error": None, **r} for r in rows])
    summary = summarise(table, {"context_recall": 0.7}, 0)[0]
    assert (summary.n_ok, summary.n_failed, summary.n_skipped) == (2, 1, 1)
    assert summary.mean == pytest.approx(0.5) and summary.flagged


async def test_every_registered_metric_lists_inputs_and_needs() -> None:
    names = set(METRICS)
    spec = {
        "faithfulness",
        "answer_relevancy",
        "context_precision",
        "context_precision_without_reference",
        "context_recall",
        "nonllm_context_recall",
        "nonllm_context_precision",
        "context_relevance",
        "context_entity_recall",
        "noise_sensitivity",
        "factual_correctness",
        "factual_correctness_precision",
        "factual_correctness_recall",
        "semantic_similarity",
        "answer_correctness",
        "aspect_harmlessness",
        "aspect_maliciousness",
        "aspect_coherence",
        "aspect_correctness",
        "aspect_conciseness",
        "summarization_score",
        "rouge_l",
        "bleu",
        "jaccard",
    }
    assert spec <= names
    for m in METRICS.values():
        assert m.inputs and m.description, m.name
        assert set(m.inputs) <= {
            "question",
            "response",
            "reference",
            "contexts",
            "reference_contexts",
        }
    assert (
        METRICS["semantic_similarity"].needs_embeddings
        and not METRICS["semantic_similarity"].needs_llm
    )
    assert not METRICS["bleu"].needs_llm and METRICS["faithfulness"].needs_llm


def test_metrics_command_lists_every_metric() -> None:
    from typer.testing import CliRunner

    from ragaudit.cli import app

    result = CliRunner().invoke(app, ["metrics"], env={"COLUMNS": "250"})
    assert result.exit_code == 0
    for name in METRICS:
        assert name in result.output, name


def test_the_registry_takes_every_direction_from_the_declared_data() -> None:
    """Reports read ``ragaudit.directions`` without the scorers: it must say what they say."""
    assert {n: m.higher_is_better for n, m in METRICS.items()} == {
        n: higher_is_better(n) for n in METRICS
    }
    options = {"aspects": {"politeness": "Is it polite?", "maliciousness": "Does it deceive?"}}
    assert resolve("aspect_politeness", options).higher_is_better is higher_is_better(
        "aspect_politeness"
    )
    # Redefining a built-in aspect's question keeps its direction.
    assert resolve("aspect_maliciousness", options).higher_is_better is False
    assert not higher_is_better("aspect_maliciousness") and higher_is_better("metric_of_the_future")


def test_lower_is_better_metrics_are_flagged_above_their_threshold() -> None:
    table = pl.DataFrame(
        {
            "metric": ["noise_sensitivity"] * 2 + ["faithfulness"] * 2,
            "value": [0.4, 0.6, 0.4, 0.6],
            "status": ["ok"] * 4,
            "question_id": ["a", "b", "a", "b"],
        }
    )
    lower = frozenset(n for n, m in METRICS.items() if not m.higher_is_better)
    assert {"noise_sensitivity", "noise_sensitivity_irrelevant", "aspect_maliciousness"} <= lower
    up = {m: m not in lower for m in ("noise_sensitivity", "faithfulness")}
    rows = {
        r.metric: r
        for r in summarise(table, {"noise_sensitivity": 0.3, "faithfulness": 0.9}, 0, up)
    }
    assert rows["noise_sensitivity"].flagged and rows["faithfulness"].flagged
    rows = {
        r.metric: r
        for r in summarise(table, {"noise_sensitivity": 0.6, "faithfulness": 0.4}, 0, up)
    }
    assert not rows["noise_sensitivity"].flagged and not rows["faithfulness"].flagged


async def test_provider_failure_after_retries_fails_the_row_naming_it(fake, gateway) -> None:
    deps = Deps.of(
        gateway=gateway, judge="fake/judge?errors=1.0", embedder="fake/embed", options={}
    )
    row = await score("faithfulness", sample(), deps)
    assert row["status"] == "failed" and "RateLimitError" in row["error"]
    assert row.get("value") is None
    assert fake.stats.errors == 2  # the first try and the gateway's one retry
