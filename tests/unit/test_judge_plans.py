"""The judge-using algorithms' plans: the requests a run sends, from a judge that calls nothing."""

from __future__ import annotations

from typing import Any

import pytest

from ragaudit.dataset import Question
from ragaudit.judging import (
    CountingJudge,
    Judge,
    OrderOptions,
    grade_candidates,
    plan_grades,
    plan_order,
    sliding_window,
)
from ragaudit.nuggets import NuggetExtractor
from ragaudit.ordering import simulated_comparisons
from ragaudit.prompts import LISTWISE, PAIRWISE, RELEVANCE, RelevanceInput
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


class _CountingSetJudge:
    """A set judge that answers by a fixed true order and counts its calls."""

    def __init__(self, truth: list[str]) -> None:
        self.rank_of = {c: i for i, c in enumerate(truth)}
        self.calls = 0

    async def best(self, ids: list[str]) -> str | None:
        self.calls += 1
        return min(ids, key=self.rank_of.__getitem__)

    async def rank(self, ids: list[str], salt: str = "") -> list[str] | None:
        self.calls += 1
        return sorted(ids, key=self.rank_of.__getitem__)


@pytest.mark.parametrize(("n", "head_k", "window"), [(1, 10, 20), (7, 10, 4), (30, 10, 20)])
async def test_the_window_head_plan_is_what_sliding_window_asks(
    n: int, head_k: int, window: int
) -> None:
    pool = [f"c{i}" for i in range(n)]
    judge = _CountingSetJudge(list(reversed(pool)))
    await sliding_window(pool, judge, head_k, window=window, votes=2)
    options = OrderOptions(order="head", head_k=head_k, window=window, votes=2)
    steps = await plan_order(options, QUESTION, [f"text {c}" for c in pool], lambda p, i: 100)
    assert [s.step for s in steps] == ["head ordering (window)"]
    assert steps[0].calls == judge.calls
    assert steps[0].tokens_in == judge.calls * 100
    assert steps[0].prompt_key == LISTWISE.key


async def test_the_full_order_plan_counts_each_pair_in_both_orders() -> None:
    texts = ["one", "two", "three", "four"]
    seen: list[Any] = []

    def tokens(prompt: Any, inp: Any) -> int:
        seen.append(inp)
        return 10 + len(inp.context_1) + len(inp.context_2)

    both = await plan_order(OrderOptions(order="full", strategy="merge"), QUESTION, texts, tokens)
    one = await plan_order(
        OrderOptions(order="full", strategy="merge", both_orders=False), QUESTION, texts, tokens
    )
    pairs = await simulated_comparisons("merge", 4)
    assert both[0].calls == 2 * pairs and one[0].calls == pairs
    # The empty prompt plus twice the mean context: 10 + 2 * mean(len(text)).
    mean = sum(len(t) for t in texts) / len(texts)
    assert one[0].tokens_in == pytest.approx(pairs * (10 + 2 * mean))
    assert {s.prompt_key for s in both + one} == {PAIRWISE.key}
    assert all(i.question == QUESTION.question for i in seen)


async def test_no_order_plans_no_ordering_call() -> None:
    assert await plan_order(OrderOptions(order="none"), QUESTION, ["a", "b"], lambda p, i: 1) == []
    assert await plan_order(OrderOptions(order="head"), QUESTION, [], lambda p, i: 1) == []
