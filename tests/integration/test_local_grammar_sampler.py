"""The offline judge's grammar samplers pick the tokens llama-cpp-python's own chain picks.

Real Gemma on llama.cpp, greedy: ``GreedyGrammar`` (the best token first, the grammar over the
whole vocabulary only when it refuses it) and ``LazyGrammar`` (the top tokens first) against
the stock chain (penalties, the grammar over every token, greedy). Slow: ``pytest -m slow``.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterator
from typing import Any, Literal

import pytest
from pydantic import BaseModel

import ragaudit  # noqa: F401 - the offline environment before llama_cpp and litellm load
from ragaudit.cache import _llama_patches as patches
from ragaudit.cache import _local
from ragaudit.cache._gbnf import schema_grammars

pytestmark = pytest.mark.slow

llama_cpp = pytest.importorskip("llama_cpp")


class Verdict(BaseModel):
    supported: bool
    reason: str


class Statements(BaseModel):
    statements: list[str]
    verdict: Literal[0, 1]


PASSAGE_EN = (
    "Paris is the capital and largest city of France. It lies on the Seine and had about "
    "2.1 million residents in 2020."
)
PASSAGE_ZH = "北京是中华人民共和国的首都，位于华北平原北部，是全国的政治和文化中心。"
REQUESTS = [
    (
        Verdict,
        [
            {"role": "system", "content": "Judge whether the answer is supported."},
            {"role": "user", "content": f"Passage: {PASSAGE_EN}\nAnswer: Paris is in France."},
        ],
    ),
    (
        Statements,
        [
            {"role": "system", "content": "把答案拆成陈述，并判断是否被文段支持。"},
            {"role": "user", "content": f"文段：{PASSAGE_ZH}\n答案：北京是中国的首都。"},
        ],
    ),
]


@pytest.fixture(scope="module")
def llm() -> Iterator[Any]:
    """The provider's own loaded model (patched as the provider patches it), cache off."""
    model = _local.LOCAL.llama.run(lambda m: m)
    saved_cache, saved_init = model.cache, model._init_sampler
    model.set_cache(None)  # every answer from a cold prompt: the same numerics for each chain
    yield model
    model.set_cache(saved_cache)
    model._init_sampler = saved_init


def _answer(llm: Any, init: Any, schema: type[BaseModel], messages: list[dict]) -> list[int]:
    """The greedy tokens for one request under ``init`` (an ``_init_sampler``)."""
    gbnf = schema_grammars(json.dumps(schema.model_json_schema()))[0]
    prompt = _local.build_prompt(messages, json_answer=True)
    tokens = llm.tokenize(prompt.encode("utf-8"), add_bos=True, special=True)
    llm._init_sampler = init
    llm.reset()
    grammar = llama_cpp.LlamaGrammar.from_string(gbnf, verbose=False)
    out: list[int] = []
    for token in llm.generate(tokens, temp=0.0, repeat_penalty=1.0, grammar=grammar):
        if llama_cpp.llama_vocab_is_eog(llm._model.vocab, token) or len(out) >= 48:
            break
        out.append(token)
    return out


def test_greedy_grammar_picks_the_stock_chains_tokens(
    llm: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    stock = functools.partial(llama_cpp.Llama._init_sampler, llm)
    lazy = patches.init_sampler(llm, stock)
    made: list[patches.GreedyGrammar] = []

    def checked(**kw: Any) -> Any:
        sampler = patches.GreedyGrammar.for_model(llm, kw["grammar"]._grammar)
        made.append(sampler)
        return sampler

    for schema, messages in REQUESTS:
        want = _answer(llm, stock, schema, messages)
        assert len(want) > 5
        assert _answer(llm, checked, schema, messages) == want
        # LazyGrammar, the previous default, sits in a chain whose greedy step is llama.cpp's.
        with monkeypatch.context() as m:
            m.setattr(patches, "GREEDY_CHECK", False)
            assert _answer(llm, lazy, schema, messages) == want
    # Both branches ran: the best token allowed, and refused (the whole-vocabulary check).
    assert all(s.steps > s.refusals > 0 for s in made)


def test_the_provider_uses_greedy_grammar_for_greedy_requests_only(llm: Any) -> None:
    init = patches.init_sampler(llm, functools.partial(llama_cpp.Llama._init_sampler, llm))
    grammar = llama_cpp.LlamaGrammar.from_string(
        schema_grammars(json.dumps(Verdict.model_json_schema()))[0], verbose=False
    )
    assert isinstance(init(grammar=grammar, temp=0.0), patches.GreedyGrammar)
    # Sampling, or penalties that change the logits first: the chain with LazyGrammar.
    for kw in ({"temp": 0.7}, {"temp": 0.0, "frequency_penalty": 0.5}):
        chain = init(grammar=grammar, **kw)
        assert not isinstance(chain, patches.GreedyGrammar)
        assert any(isinstance(s, patches.LazyGrammar) for _, s in chain.custom_samplers)
        chain.close()
