"""Chinese: every judged metric sends Chinese prompts for a Chinese question (checked on the
requests the fake provider received), English ones stay ragas's; sentences split on 。！？."""

from __future__ import annotations

import importlib
from dataclasses import replace
from typing import Any

import pytest
from support.metrics import make_deps, sample, score

from ragaudit.lang import sentences
from ragaudit.metrics import METRICS
from ragaudit.prompts._base import Prompt
from ragaudit.prompts.aspect import BUILTIN_ASPECTS, aspect_prompt

PROMPT_MODULES = (
    "statements",
    "answer_relevancy",
    "context_precision",
    "context_recall",
    "context_relevance",
    "entities",
    "claims",
    "correctness",
    "summary",
    "nuggets",
    "nugget_assignment",
    "citation_support",
    "answerability",
    "refusal",
)


def all_prompts() -> list[Prompt]:
    found = [aspect_prompt(a) for a in BUILTIN_ASPECTS.values()]
    for name in PROMPT_MODULES:
        module = importlib.import_module(f"ragaudit.prompts.{name}")
        found += [v for v in vars(module).values() if isinstance(v, Prompt)]
    return found


INSTRUCTIONS = {lang: {p.instruction[lang] for p in all_prompts()} for lang in ("en", "zh")}

ZH = dict(
    language="zh",
    question="北京是哪个国家的首都？",
    response="北京是中国的首都，也是中国的政治中心。",
    reference="北京是中华人民共和国的首都。",
    contexts=["北京是中华人民共和国的首都，是全国的政治和文化中心。", "上海是中国最大的城市"],
)

LLM_METRICS = [name for name, m in METRICS.items() if m.needs_llm]


def request_text(req: Any) -> str:
    return "\n".join(
        m["content"] if isinstance(m["content"], str) else str(m["content"]) for m in req.messages
    )


def test_every_prompt_has_chinese_and_english() -> None:
    prompts = all_prompts()
    assert len(prompts) >= 20
    for p in prompts:
        assert set(p.instruction) >= {"en", "zh"}, p.name
        assert any("\u4e00" <= ch <= "\u9fff" for ch in p.instruction["zh"]), p.name
        if p.examples.get("en"):
            assert len(p.examples["zh"]) == len(p.examples["en"]), p.name
            for inp, out in p.examples["zh"]:
                assert isinstance(inp, p.input_model) and isinstance(out, p.output_model)


@pytest.mark.parametrize("name", LLM_METRICS)
async def test_chinese_question_gets_chinese_prompts(fake, gateway, name) -> None:  # noqa: F811
    s = sample(**ZH)
    if name.startswith("nugget_"):  # they read the question's nuggets
        s = replace(s, nuggets=[{"text": s.contexts[0], "importance": "vital", "context_ids": []}])
    if name.startswith("citation_"):  # they judge cited sentences
        s = replace(s, response=f"{s.response}[1]")
    if name.startswith("refusal_"):  # they score a declining answer on an unanswerable turn
        s = replace(s, response="抱歉，我不知道。", answerability="unanswerable")
    row = await score(name, s, make_deps(gateway))
    assert row["status"] == "ok", row["error"]
    requests = fake.stats.requests
    assert requests, f"{name} asked the judge nothing"
    for req in requests:
        text = request_text(req)
        assert any(zh in text for zh in INSTRUCTIONS["zh"]), (
            f"{name}: no Chinese instruction in {text[:300]}"
        )
        assert not any(en in text for en in INSTRUCTIONS["en"]), (
            f"{name}: an English instruction in {text[:300]}"
        )
        assert "Now perform the same" not in text and "--------EXAMPLES" not in text
    assert '"prompt_language": "zh"' in row["metric_args"]


@pytest.mark.parametrize(
    "name",
    [
        "faithfulness",
        "noise_sensitivity",
        "factual_correctness",
        "context_relevance",
        "summarization_score",
        "aspect_conciseness",
    ],
)
async def test_english_question_keeps_ragas_prompts(fake, gateway, name) -> None:  # noqa: F811
    row = await score(name, sample(), make_deps(gateway))
    assert row["status"] == "ok", row["error"]
    for req in fake.stats.requests:
        text = request_text(req)
        assert any(en in text for en in INSTRUCTIONS["en"]), text[:300]
        assert not any(zh in text for zh in INSTRUCTIONS["zh"])


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "北京是中国的首都。上海是最大的城市！你去过吗？我没去过",
            ["北京是中国的首都。", "上海是最大的城市！", "你去过吗？", "我没去过"],
        ),
        ("没有任何标点的一段话", ["没有任何标点的一段话"]),
        ("他说：“你好。”然后走了。", ["他说：“你好。”", "然后走了。"]),
        ("真的吗？！是的……结束", ["真的吗？！", "是的……", "结束"]),
        ("价格是3.5元。第一行\n第二行", ["价格是3.5元。", "第一行", "第二行"]),
        ("分号不断句；这是同一句。", ["分号不断句；这是同一句。"]),
        (
            "Dr. Smith lives in the U.S. now. It costs 3.14 dollars! OK",
            ["Dr. Smith lives in the U.S. now.", "It costs 3.14 dollars!", "OK"],
        ),
        ('He said "stop." Then he left', ['He said "stop."', "Then he left"]),
        ("English first. 然后中文。", ["English first.", "然后中文。"]),
        ("", []),
        ("。！", []),
    ],
)
def test_sentences_split_chinese_english_and_unpunctuated_text(
    text: str, expected: list[str]
) -> None:
    assert sentences(text) == expected


def test_prompts_with_their_examples_rendered_once_read_as_before() -> None:
    # Examples are rendered once per choice of examples and kept: factual correctness picks
    # another pair per atomicity and coverage, so a kept block must be the block for its pick;
    # ragas's own (English) prompts keep ragas's rendering word for word.
    from ragas.metrics.collections.faithfulness.util import NLIStatementInput, NLIStatementPrompt

    from ragaudit.metrics._ragas import LocalisedPrompt, prompt_for
    from ragaudit.prompts.claims import CLAIMS, matching_examples
    from ragaudit.prompts.statements import NLI_FAITHFULNESS

    def claims_input(atomicity: str, coverage: str) -> Any:
        return CLAIMS.input_model(response="北京是首都。", atomicity=atomicity, coverage=coverage)

    levels = [("low", "low"), ("high", "high"), ("low", "high"), ("high", "low")]
    prompt = LocalisedPrompt(CLAIMS, "zh", matching_examples)
    first = {lv: prompt.to_string(claims_input(*lv)) for lv in levels}
    again = {
        lv: LocalisedPrompt(CLAIMS, "zh", matching_examples).to_string(claims_input(*lv))
        for lv in reversed(levels)
    }
    assert first == again and len(set(first.values())) == len(levels)
    for (atomicity, coverage), text in first.items():
        shown = {
            o.model_dump_json(indent=4)
            for i, o in CLAIMS.examples["zh"]
            if (i.atomicity, i.coverage) == (atomicity, coverage)
        }
        every = {o.model_dump_json(indent=4) for _, o in CLAIMS.examples["zh"]}
        assert shown and {o for o in every if o in text} == shown

    data = NLIStatementInput(context="Paris is the capital.", statements=["Paris is a city."])
    for _ in range(2):  # the first rendering is kept, the second reads it
        kept = prompt_for(NLIStatementPrompt(), NLI_FAITHFULNESS, "en")
        assert kept.to_string(data) == NLIStatementPrompt().to_string(data)
