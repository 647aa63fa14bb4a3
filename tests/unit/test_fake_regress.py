"""The fake judge's ``regress`` option: one metric's replies turned against the answer."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from pydantic import BaseModel

from ragaudit.cache import Gateway
from ragaudit.cache._fake import FakeOptions


class _Verdict(BaseModel):
    statement: str
    verdict: int


class RegressProbeVerdicts(BaseModel):
    statements: list[_Verdict]


def _verdicts(gateway: Gateway, model: str, stage: str, n: int) -> list[int]:
    async def ask(i: int) -> int:
        judged = await gateway.astructured(
            model=model,
            messages=[{"role": "user", "content": f"{stage}: is statement {i} supported?"}],
            schema=RegressProbeVerdicts,
            prompt_version="regress-probe@1",
        )
        assert judged.value is not None, judged
        return judged.value.statements[0].verdict

    async def ask_all() -> list[int]:
        with gateway.scope(stage):
            return [await ask(i) for i in range(n)]

    return asyncio.run(ask_all())


@pytest.fixture
def gateway(tmp_path: Path):
    gw = Gateway(tmp_path / "cache", backoff_s=0.0, max_retries=0)
    yield gw
    gw.close()


def test_the_regressed_metric_alone_gets_worse_verdicts(gateway: Gateway) -> None:
    model = "fake/judge?regress=faithfulness:1"
    assert _verdicts(gateway, "fake/judge", "score:faithfulness", 5) == [1] * 5
    assert _verdicts(gateway, model, "score:faithfulness", 5) == [0] * 5
    assert _verdicts(gateway, model, "score:faithfulness@b0002", 5) == [0] * 5
    assert _verdicts(gateway, model, "score:context_recall", 5) == [1] * 5
    assert _verdicts(gateway, model, "sort", 5) == [1] * 5


def test_a_share_worsens_about_that_share_of_replies(gateway: Gateway) -> None:
    got = _verdicts(gateway, "fake/judge?regress=faithfulness:0.3", "score:faithfulness", 200)
    worse = got.count(0) / len(got)
    assert 0.2 < worse < 0.4, worse


def test_the_option_names_metrics_and_shares() -> None:
    _, opts = FakeOptions.parse("fake/judge?regress=faithfulness:0.3,answer_relevancy:0.5")
    assert opts.regressed("score:answer_relevancy") == 0.5
    assert opts.regressed("score:faithfulness") == 0.3
    assert opts.regressed("score:rouge_l") == 0.0
