"""Checks against a real judge: skipped unless RAGAUDIT_REAL_LLM=1 (they cost money).

The judge is ``RAGAUDIT_REAL_JUDGE`` (any litellm model string, default openai/gpt-4o-mini);
its key comes from the provider's usual environment variable.
"""

from __future__ import annotations

import os

import pytest

from ragaudit.cache import Gateway
from ragaudit.prompts import RELEVANCE, RelevanceInput

pytestmark = pytest.mark.real_llm


async def test_real_judge_marks_an_answering_context_relevant(tmp_path) -> None:
    judge = os.environ.get("RAGAUDIT_REAL_JUDGE", "openai/gpt-4o-mini")
    gateway = Gateway(tmp_path / "cache")
    try:
        out = await gateway.astructured(
            model=judge,
            messages=RELEVANCE.messages(
                RelevanceInput(
                    question="What is the capital of France?",
                    context="Paris is the capital and largest city of France.",
                ),
                "en",
            ),
            schema=RELEVANCE.output_model,
            prompt_version=RELEVANCE.key,
            temperature=0.0,
        )
    finally:
        gateway.close()
    assert out.ok, out.error
    assert out.value.relevant
