"""GreedyGrammar picks the best allowed token, asking the grammar about few tokens first.

llama.cpp's own sampler calls, with a stand-in grammar (a Python sampler that refuses every
token outside a set) instead of a model: the pick equals the brute-force one, ties included.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable, Iterator

import numpy as np
import pytest

from ragaudit.cache._llama_patches import REFUSED_STAGES, GreedyGrammar

llama_cpp = pytest.importorskip("llama_cpp")

N_VOCAB = 10_000


class AllowOnly:
    """A llama.cpp sampler that refuses the tokens outside ``allowed``; records what it saw."""

    def __init__(self, allowed: set[int]) -> None:
        self.allowed = np.array(sorted(allowed), dtype=np.int32)
        self.sizes: list[int] = []
        self.accepted: list[int] = []
        self._apply = llama_cpp.llama_sampler_i_apply(self.apply)
        self._accept = llama_cpp.llama_sampler_i_accept(self.accept)
        self._iface = llama_cpp.llama_sampler_i()
        self._iface.apply = self._apply
        self._iface.accept = self._accept
        self.sampler = llama_cpp.llama_sampler()
        self.sampler.iface = ctypes.pointer(self._iface)
        self.sampler.ctx = None

    def apply(self, _sampler: object, cur_p: object) -> None:
        array = cur_p.contents  # type: ignore[attr-defined]
        data = np.ctypeslib.as_array(array.data, shape=(int(array.size),))
        self.sizes.append(int(array.size))
        logits = data["logit"]
        logits[~np.isin(data["id"], self.allowed)] = -np.inf

    def accept(self, _sampler: object, token: int) -> None:
        self.accepted.append(token)


Make = Callable[[set[int]], tuple[GreedyGrammar, "AllowOnly"]]


@pytest.fixture
def make() -> Iterator[Make]:
    made: list[GreedyGrammar] = []

    def build(allowed: set[int]) -> tuple[GreedyGrammar, AllowOnly]:
        grammar = AllowOnly(allowed)
        sampler = GreedyGrammar(ctypes.pointer(grammar.sampler), N_VOCAB)
        sampler._keep = grammar  # type: ignore[attr-defined]  # the callbacks stay alive
        made.append(sampler)
        return sampler, grammar

    yield build
    for sampler in made:
        sampler.grammar = None  # Python owns the stand-in: llama.cpp must not free it


def brute_force(logits: np.ndarray, allowed: set[int]) -> int:
    masked = np.full_like(logits, -np.inf)
    ids = sorted(allowed)
    masked[ids] = logits[ids]
    return int(masked.argmax())  # the first best id, as llama.cpp's greedy sampler picks


def ranked(logits: np.ndarray, rank: int) -> int:
    return int(np.argsort(-logits, kind="stable")[rank])


@pytest.mark.parametrize(
    ("rank", "sizes"),
    [
        (0, [1]),  # the best token is allowed: one check
        (10, [1, REFUSED_STAGES[0]]),
        (1_000, [1, REFUSED_STAGES[0], REFUSED_STAGES[1]]),
        (9_000, [1, REFUSED_STAGES[0], REFUSED_STAGES[1], N_VOCAB]),
    ],
)
def test_the_best_allowed_token_from_the_smallest_set_that_holds_one(
    make: Make, rank: int, sizes: list[int]
) -> None:
    logits = np.random.default_rng(rank).standard_normal(N_VOCAB).astype(np.float32)
    allowed = {ranked(logits, rank), ranked(logits, min(rank + 50, N_VOCAB - 1))}
    sampler, grammar = make(allowed)
    assert sampler.pick(logits) == brute_force(logits, allowed) == ranked(logits, rank)
    assert grammar.sizes == sizes
    assert grammar.accepted == [ranked(logits, rank)]
    assert (sampler.steps, sampler.refusals) == (1, int(rank > 0))


def test_ties_go_to_the_lowest_allowed_id_even_across_the_cut(make: Make) -> None:
    logits = np.zeros(N_VOCAB, dtype=np.float32)
    logits[:100] = 5.0  # 100 ties above everything: the first 64 cut through them
    allowed = {70, 80, 9_999}
    sampler, _ = make(allowed)
    assert sampler.pick(logits) == brute_force(logits, allowed) == 70


def test_nothing_allowed_gives_the_first_id_as_llama_cpp_does(make: Make) -> None:
    logits = np.random.default_rng(1).standard_normal(N_VOCAB).astype(np.float32)
    sampler, grammar = make(set())
    assert sampler.pick(logits) == 0
    assert grammar.sizes[-1] == N_VOCAB
