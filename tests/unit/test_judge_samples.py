"""Judge repeats: memo keys per repeat, the repeat's temperature, how a row's samples combine."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from ragaudit.cache import Gateway, judge_repeat
from ragaudit.config import load_config
from ragaudit.errors import ConfigError
from ragaudit.scoring import combine_samples


class Verdict(BaseModel):
    verdict: int


MODEL = "fake/judge?wrong=0.5&seed=4"
ASK = {
    "model": MODEL,
    "messages": [{"role": "user", "content": "Is the sky blue?"}],
    "schema": Verdict,
    "prompt_version": "verdict@1",
    "temperature": 0.0,
}


def _ask(gateway: Gateway, repeat: int | None, **extra: Any) -> Any:
    async def go() -> Any:
        if repeat is None:
            return await gateway.astructured(**ASK, **extra)
        with judge_repeat(repeat, 0.7):
            return await gateway.astructured(**ASK, **extra)

    return asyncio.run(go())


def test_repeat_zero_is_the_request_asked_once_and_later_repeats_are_new_samples(
    gateway: Gateway, fake: Any
) -> None:
    _ask(gateway, None)
    assert fake.stats.calls == 1
    _ask(gateway, 0)  # the same memo entry: a run with one repeat pays nothing new
    assert fake.stats.calls == 1
    for r in (1, 2, 3):
        _ask(gateway, r)
    assert fake.stats.calls == 4
    temperatures = [req.params.get("temperature") for req in fake.stats.requests]
    assert temperatures == [0.0, 0.7, 0.7, 0.7]
    for r in (1, 2, 3):  # each repeat has its own entry
        _ask(gateway, r)
    assert fake.stats.calls == 4
    # The noisy fake draws its mistakes per repeat: the repeats do not all agree.
    answers = {_ask(gateway, r).value.verdict for r in range(8)}
    assert answers == {0, 1}


def test_a_metrics_own_samples_stay_apart_from_the_repeats(gateway: Gateway, fake: Any) -> None:
    async def samples(repeat: int) -> None:
        with judge_repeat(repeat, 0.7):
            await gateway.asamples(n=2, **{**ASK, "temperature": 0.3})

    asyncio.run(samples(0))
    asyncio.run(samples(1))
    # Sample 1 of repeat 0 and sample 0 of repeat 1 are different requests: four answers paid.
    answered = sum(max(1, int(req.params.get("n") or 1)) for req in fake.stats.requests)
    assert answered == 4


def _row(status: str, value: float | None = None, judge: str = "j1", **kw: Any) -> dict[str, Any]:
    return {
        "question_id": "q",
        "metric": "m",
        "judge": judge,
        "k_used": 3,
        "value": value,
        "status": status,
        "error": kw.get("error"),
        "metric_args": json.dumps({"prompt_language": "en"}),
        "reason": None,
    }


def test_one_sample_is_the_row_itself() -> None:
    row = _row("ok", 0.5)
    assert combine_samples([row]) == row


@pytest.mark.parametrize(
    ("how", "values", "expected"),
    [
        ("mean", [1.0, 0.0, 0.5], 0.5),
        ("median", [1.0, 0.0, 0.25], 0.25),
        ("majority", [1.0, 0.0, 1.0], 1.0),
        ("majority", [1.0, 0.0, 1.0, 0.0], 0.0),  # a tie goes to the lower value
    ],
)
def test_samples_aggregate_by_the_rule(how: str, values: list[float], expected: float) -> None:
    out = combine_samples([_row("ok", v) for v in values], how)  # type: ignore[arg-type]
    assert out["status"] == "ok" and out["value"] == expected and out["error"] is None
    assert out["samples"] == values and out["sample_judges"] == ["j1"] * len(values)
    assert json.loads(out["metric_args"])["samples"]["aggregate"] == how


def test_a_row_with_some_failed_samples_is_ok_and_says_how_many() -> None:
    parts = [_row("ok", 1.0), _row("failed", error="ValueError: bad JSON"), _row("ok", 0.0, "j2")]
    out = combine_samples(parts)
    assert out["status"] == "ok" and out["value"] == 0.5
    assert out["samples"] == [1.0, None, 0.0] and out["sample_judges"] == ["j1", "j1", "j2"]
    assert out["error"].startswith("1 of 3 judge samples not scored") and "bad JSON" in out["error"]
    assert out["judge"] == "j1, j2"


def test_a_row_fails_only_when_every_sample_failed() -> None:
    out = combine_samples([_row("failed", error="boom"), _row("failed", error="bang")])
    assert out["status"] == "failed" and out["value"] is None
    assert out["samples"] == [None, None] and "every judge sample failed (2)" in out["error"]
    skipped = combine_samples([_row("skipped", error="no reference"), _row("skipped")])
    assert skipped["status"] == "skipped" and skipped["error"] == "no reference"


def test_aggregate_may_name_only_listed_metrics(tmp_path: Path) -> None:
    import ragaudit.metrics  # noqa: F401  (registers the metrics' config check)

    base = {"runs_root": str(tmp_path), "score": {"metrics": ["faithfulness", "rouge_l"]}}
    ok = load_config(
        None, {**base, "score": {**base["score"], "aggregate": {"faithfulness": "median"}}}, {}
    )
    assert ok.score.aggregate == {"faithfulness": "median"}
    with pytest.raises(ConfigError, match="faithfulnes, not in score.metrics"):
        load_config(
            None, {**base, "score": {**base["score"], "aggregate": {"faithfulnes": "median"}}}, {}
        )


def test_a_juror_that_is_the_system_under_test_is_flagged(tmp_path: Path) -> None:
    from ragaudit.manifest import judge_warnings

    base = {
        "runs_root": str(tmp_path),
        "models": {"judge": "openai/gpt-4o", "jury": ["openai/gpt-4o", "qwen2.5:7b"]},
        "collect": {"answers": {"model": "ollama/qwen2.5:7b"}},
    }
    (flag,) = [w for w in judge_warnings(load_config(None, base, {})) if "also a judge" in w]
    assert "qwen2.5:7b" in flag
    base["models"]["jury"] = ["openai/gpt-4o", "anthropic/claude-3-5-haiku"]
    assert not [w for w in judge_warnings(load_config(None, base, {})) if "also a judge" in w]


def test_score_noise_measures_each_judge_and_the_jury() -> None:
    import numpy as np

    from ragaudit.noise import score_noise

    rng = np.random.default_rng(0)
    value = rng.uniform(0, 1, 200)
    steady = value + rng.normal(0, 0.05, (3, 200))  # a judge whose repeats barely differ
    shaky = value + rng.normal(0, 0.5, (3, 200))  # one whose noise swamps the rows
    rows = [([*steady[:, i], *shaky[:, i]], ["steady"] * 3 + ["shaky"] * 3) for i in range(200)]
    found = {(n.kind, n.judge): n.agreement for n in score_noise(rows, resamples=199)}
    assert set(found) == {("self", "steady"), ("self", "shaky"), ("jury", None)}
    # α = var(value) / (var(value) + σ²): 1/12 against 0.0025 and 0.25.
    assert found[("self", "steady")].ci_low <= 0.97 <= found[("self", "steady")].ci_high
    assert found[("self", "shaky")].ci_low <= 0.25 <= found[("self", "shaky")].ci_high
    assert found[("jury", None)].n_raters == 2 and found[("jury", None)].n_items == 200
    # One judge, one sample per row: nothing to measure.
    assert score_noise([([0.5], ["j"]), ([0.7], ["j"])]) == []


def test_a_recheck_asks_the_provider_again_at_the_same_temperature(
    gateway: Gateway, fake: Any
) -> None:
    from ragaudit.cache import judge_recheck

    async def ask(tag: str | None) -> Any:
        if tag is None:
            return await gateway.astructured(**ASK)
        with judge_recheck(tag):
            return await gateway.astructured(**ASK)

    asyncio.run(ask(None))
    asyncio.run(ask(None))
    assert fake.stats.calls == 1
    asyncio.run(ask("2026-11-20"))  # a drift check: the memoised answer is not the answer
    assert fake.stats.calls == 2
    asyncio.run(ask("2026-11-20"))  # the same check resumed: its own answer is memoised
    assert fake.stats.calls == 2
    asyncio.run(ask("2026-11-27"))
    assert fake.stats.calls == 3
    assert {req.params.get("temperature") for req in fake.stats.requests} == {0.0}
