"""The judge-using algorithms' plans: the requests a run sends, from a judge that calls nothing."""

from __future__ import annotations

from typing import Any

import pytest

from ragaudit.dataset import Question
from ragaudit.judging import CountingJudge, Judge, grade_candidates, plan_grades
from ragaudit.nuggets import NuggetExtractor
from ragaudit.prompts import RELEVANCE, RelevanceInput
from ragaudit.windowing import QuestionJudge

QUESTION = Question(question_id="q", question="Where is the widget made?")
LONG = "\n\n".join(f"Paragraph {i}: the widget factory had a quiet year." for i in range(120))
CANDIDATES = {
    "q": [
        {"context_id": "a", "text": "The widget is made in Turin."},
        {"context_id": "b", "text": "Widgets come in three colours."},
        {"context_id": "c", "text": LONG},  # over the window alone: graded in parts
    ]
}


def user_texts(messages: list[list[dict[str, Any]]]) -> list[str]:
    return sorted(m[-1]["content"] for m in messages)


@pytest.mark.parametrize("per_call", [1, 2])
async def test_the_grading_plan_is_what_grading_sends(fake, gateway, per_call: int) -> None:
    judge = Judge(gateway=gateway, model="fake/judge", window=700, max_tokens=64)
    planned = await plan_grades(judge, {"q": QUESTION}, CANDIDATES, per_call=per_call)
    assert fake.stats.calls == 0  # planning called nothing
    await grade_candidates(judge, {"q": QUESTION}, CANDIDATES, per_call=per_call)
    sent = [r.messages for r in fake.stats.requests]
    # The long candidate was cut into parts in both, the same parts: the plan is the run's.
    assert len(planned) == len(sent) > len(CANDIDATES["q"])
    assert user_texts([r.messages for r in planned]) == user_texts(sent)
    assert {r.max_tokens for r in planned} == {64}


async def test_a_counting_judge_refuses_a_prompt_over_its_budget_as_the_gateway_does() -> None:
    judge = Judge(gateway=None, model="fake/judge", window=700, max_tokens=64)  # type: ignore[arg-type]
    counting = CountingJudge.like(judge, lambda schema: schema(grade=1), [])
    short = await counting.ask(RELEVANCE, RelevanceInput(question="Q?", context="a"), "en")
    long = await counting.ask(RELEVANCE, RelevanceInput(question="Q?", context=LONG), "en")
    assert short.ok and short.value.grade == 1 and short.calls == 1
    assert long.status == "too_long" and long.calls == 0
    assert len(counting.requests) == 1  # only what would be sent is counted


async def test_the_nugget_plan_is_the_extraction_s_map_calls(fake, gateway) -> None:
    judge = Judge(gateway=gateway, model="fake/judge", window=900, max_tokens=64)
    contexts = [(f"c{i}", f"Fact {i}: the widget weighs {i} grams. " * 12) for i in range(8)]
    setup = QuestionJudge(judge, "How heavy is a widget?", "en", answer_tokens=256)
    planned = NuggetExtractor(setup).plan(contexts, "a nugget")
    assert planned is not None and fake.stats.calls == 0
    await NuggetExtractor(setup).run(contexts)
    extracted = [r.messages for r in fake.stats.requests if r.title == "ExtractedNuggets"]
    assert len(planned.answers) == len(extracted) > 1
    assert user_texts(planned.answers) == user_texts(extracted)
