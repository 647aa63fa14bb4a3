"""The ``local/…`` provider end to end through litellm: real llama.cpp and e5 models.

Slow (model loads, ~10-20 s in all on an idle 2-core machine): run with ``pytest -m slow``.
"""

from __future__ import annotations

import json
from enum import StrEnum
from typing import Literal

import litellm
import numpy as np
import pytest
from pydantic import BaseModel, Field

import ragaudit  # noqa: F401 - applies the offline environment before litellm is used
from ragaudit.cache import _local, _local_embed

pytestmark = pytest.mark.slow

COMPLETION = _local.COMPLETION_MODEL
# The offline default embedder (MiniLM is no longer installed by the offline extra).
EMBEDDING = _local_embed.EMBEDDING_MODEL


@pytest.fixture(scope="module", autouse=True)
def _registered() -> None:
    """Register the project's providers; fall back to ``local`` alone if ``fake`` is broken."""
    from ragaudit.cache import providers

    try:
        providers.register_all()
    except Exception:  # noqa: BLE001 - the fake provider is not what this module tests
        from litellm.utils import custom_llm_setup

        entries = [e for e in (litellm.custom_provider_map or []) if e["provider"] != "local"]
        entries.append(
            {"provider": "local", "custom_handler": _local_embed.LocalRouter(_local.LOCAL)}
        )
        litellm.custom_provider_map = entries
        custom_llm_setup()


class Relevance(BaseModel):
    relevant: bool
    reason: str


class Grade(StrEnum):
    yes = "yes"
    no = "no"
    partly = "partly"


class Claim(BaseModel):
    statement: str = Field(max_length=60)
    verdict: Literal[0, 1]
    grade: Grade


class Claims(BaseModel):
    """Nested model: ``$defs``/``$ref``, an enum, Literal ints, ``maxLength``, a bounded int."""

    claims: list[Claim]
    score: int = Field(ge=0, le=3)


QUESTION = (
    "Question: What is the capital of France?\n"
    "Passage: Paris is the capital and largest city of France."
)


async def test_json_schema_completion_parses() -> None:
    response = await litellm.acompletion(
        model=COMPLETION,
        messages=[
            {"role": "system", "content": "Judge whether the passage is relevant to the question."},
            {"role": "user", "content": QUESTION},
        ],
        response_format={
            "type": "json_schema",
            "json_schema": {"name": "Relevance", "schema": Relevance.model_json_schema()},
        },
        max_tokens=128,
    )
    content = response.choices[0].message.content
    Relevance.model_validate_json(content)
    assert response.model == COMPLETION
    assert response.usage.prompt_tokens > 10
    assert 0 < response.usage.completion_tokens <= 128
    assert response.choices[0].finish_reason == "stop"


async def test_nested_pydantic_schema_parses() -> None:
    response = await litellm.acompletion(
        model=COMPLETION,
        messages=[{"role": "user", "content": "List the claims in: Paris is in France."}],
        response_format={
            "type": "json_schema",
            "json_schema": {"name": "Claims", "schema": Claims.model_json_schema()},
        },
        max_tokens=512,
    )
    parsed = Claims.model_validate_json(response.choices[0].message.content)
    # The grammar caps lists so that a rambling base model still finishes in time.
    assert len(parsed.claims) <= _local.MAX_ARRAY_ITEMS


async def test_instructor_json_mode_parses() -> None:
    """ragas drives litellm through instructor's JSON mode: the schema is in the system text."""
    instructor = pytest.importorskip("instructor")
    client = instructor.from_litellm(litellm.acompletion, mode=instructor.Mode.JSON)
    value = await client.chat.completions.create(
        model=COMPLETION,
        response_model=Claims,
        messages=[{"role": "user", "content": "List the claims in: Paris is in France."}],
        max_retries=0,  # parse on the first answer, no re-ask
        max_tokens=512,
    )
    assert isinstance(value, Claims)


async def test_raw_json_object_with_schema_in_system_message() -> None:
    system = (
        "Judge the passage. Answer in json that matches the following json_schema:\n\n"
        + json.dumps(Relevance.model_json_schema(), indent=2)
        + "\n\nMake sure to return an instance of the JSON, not the schema itself"
    )
    response = await litellm.acompletion(
        model=COMPLETION,
        messages=[{"role": "system", "content": system}, {"role": "user", "content": QUESTION}],
        response_format={"type": "json_object"},
        max_tokens=128,
    )
    Relevance.model_validate_json(response.choices[0].message.content)


async def test_embeddings_have_384_dims_and_rank_similar_closer() -> None:
    response = await litellm.aembedding(
        model=EMBEDDING,
        input=[
            "The cat sat on the mat.",
            "A cat was sitting on a rug.",
            "Quarterly revenue rose by eight percent.",
        ],
    )
    vectors = np.array([item["embedding"] for item in response.data])
    assert vectors.shape == (3, 384)
    assert [item["index"] for item in response.data] == [0, 1, 2]
    assert response.usage.prompt_tokens > 0
    similar, unrelated = vectors[0] @ vectors[1], vectors[0] @ vectors[2]  # unit vectors
    # e5's cosines sit high for any pair of sentences: the gap, not the level, tells.
    assert similar > unrelated + 0.1


async def test_unknown_local_model_is_a_bad_request_naming_the_known_ones() -> None:
    with pytest.raises(litellm.BadRequestError, match="local/gemma-3-270m"):
        await litellm.acompletion(model="local/nope", messages=[{"role": "user", "content": "hi"}])
    with pytest.raises(litellm.BadRequestError, match="local/all-minilm-l6-v2"):
        await litellm.aembedding(model="local/gemma-3-270m", input=["hi"])
