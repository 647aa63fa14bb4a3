"""Replacements for two llama-cpp-python 0.3.36 defaults that dominated a local call's cost.

Grammar checks over Gemma's whole 262k-token vocabulary at every step (:class:`GreedyGrammar`
asks about the best token alone first, :class:`LazyGrammar` about the likeliest tokens first;
same tokens out), and a 537 MB logits copy on every prefix-cache save (:func:`slim_state`
leaves it out).
Both lean on llama-cpp-python internals; :func:`patch` applies them only where those exist.
"""

from __future__ import annotations

import contextlib
import functools
import os
from collections.abc import Callable, Iterator
from typing import Any

# Grammar enforcement checks this many likeliest tokens before the whole vocabulary (see
# `LazyGrammar`); RAGAUDIT_LOCAL_LAZY_GRAMMAR=0 switches back to llama-cpp-python's own.
GRAMMAR_TOP_K = 64
LAZY_GRAMMAR = os.environ.get("RAGAUDIT_LOCAL_LAZY_GRAMMAR", "1") != "0"
# Greedy decoding under a grammar asks about the best token alone first (`GreedyGrammar`);
# RAGAUDIT_LOCAL_GREEDY_CHECK=0 keeps `LazyGrammar` for it too (to compare them).
GREEDY_CHECK = os.environ.get("RAGAUDIT_LOCAL_GREEDY_CHECK", "1") != "0"
# When the grammar refuses the best token, it is asked about this many best tokens, then
# the whole vocabulary (see `GreedyGrammar._best_allowed`).
REFUSED_STAGES = (64, 4096)
# llama.cpp's extra CPU buffer types (AMX tiles, weight repacking); see `without_extra_buffers`.
# Unset: kept unless the build has AMX kernels; "1" keeps them, "0" leaves them out.
EXTRA_BUFFERS_ENV = os.environ.get("RAGAUDIT_LOCAL_EXTRA_BUFFERS", "")


def build_has_amx() -> bool:
    """Whether llama.cpp was compiled with AMX kernels (a native build on a CPU reporting AMX)."""
    import llama_cpp

    return "AMX_INT8 = 1" in llama_cpp.llama_print_system_info().decode("utf-8", "replace")


def extra_buffers_wanted() -> bool:
    """Whether the judge loads with llama.cpp's extra CPU buffer types (see below)."""
    if EXTRA_BUFFERS_ENV in ("0", "1"):
        return EXTRA_BUFFERS_ENV == "1"
    return not build_has_amx()


@contextlib.contextmanager
def without_extra_buffers() -> Iterator[None]:
    """Models loaded in this block keep their weights in llama.cpp's plain CPU buffers.

    Only where the build has AMX kernels (:func:`extra_buffers_wanted`). A native build from
    source on a CPU that reports AMX compiles ggml's AMX kernels and uses them through an extra
    buffer type; where the kernel does not hand the process AMX tile state (these machines), the
    first tile instruction kills the process with SIGILL ("Illegal instruction"), judge and run
    with it. Leaving the extra buffer types out avoids that but also loses weight repacking,
    which made the judge's calls much slower; so ``make install`` builds without AMX kernels,
    and on such a build this block changes nothing. ``RAGAUDIT_LOCAL_EXTRA_BUFFERS=1`` keeps
    llama.cpp's default on any build, ``=0`` leaves the extra buffers out on any build.
    """
    import llama_cpp.llama_cpp as raw

    default = raw.llama_model_default_params
    if extra_buffers_wanted() or not hasattr(default(), "use_extra_bufts"):
        yield
        return

    def params() -> Any:
        out = default()
        out.use_extra_bufts = False
        return out

    raw.llama_model_default_params = params
    try:
        yield
    finally:
        raw.llama_model_default_params = default


class LazyGrammar:
    """A llama.cpp sampler that enforces a grammar by checking the likeliest tokens first.

    llama-cpp-python applies a grammar to every token of the vocabulary at every step. Gemma
    has 262,144 tokens, so that check cost more per generated token than the decoding
    itself. Like llama.cpp's own ``common_sampler``, this sampler first asks the
    grammar about the ``GRAMMAR_TOP_K`` highest-logit tokens only and masks everything else;
    only when none of them is allowed does it check the whole vocabulary. For greedy decoding
    the result is identical (the best allowed token is among the checked ones whenever any
    is); for sampling it restricts choices to allowed tokens among the top ones.
    """

    def __init__(self, llm: Any, gbnf: str) -> None:
        import ctypes

        import llama_cpp
        import numpy as np

        self._np = np
        self._cpp = llama_cpp
        self.grammar = llama_cpp.llama_sampler_init_grammar(
            llm._model.vocab, gbnf.encode("utf-8"), b"root"
        )
        if not self.grammar:
            raise ValueError("llama.cpp rejected the grammar")
        self._small = (llama_cpp.llama_token_data * GRAMMAR_TOP_K)()
        self._small_view = np.ctypeslib.as_array(self._small)
        self._small_ptr = ctypes.cast(self._small, ctypes.POINTER(llama_cpp.llama_token_data))
        # Keep the callbacks referenced: llama.cpp holds bare function pointers to them.
        self._apply_cb = llama_cpp.llama_sampler_i_apply(self._apply)
        self._accept_cb = llama_cpp.llama_sampler_i_accept(self._accept)
        self._iface = llama_cpp.llama_sampler_i()
        self._iface.apply = self._apply_cb
        self._iface.accept = self._accept_cb
        self.sampler = llama_cpp.llama_sampler()
        self.sampler.iface = ctypes.pointer(self._iface)
        self.sampler.ctx = None

    def get_sampler(self) -> Any:
        """The pointer to add to a sampler chain."""
        import ctypes

        return ctypes.pointer(self.sampler)

    def free(self) -> None:
        """Free the wrapped grammar sampler (the chain does not own it)."""
        if self.grammar:
            self._cpp.llama_sampler_free(self.grammar)
            self.grammar = None

    def _apply(self, _sampler: Any, cur_p: Any) -> None:
        # An exception must not escape into C: on any problem, fall back to the full check,
        # which is always correct (an unmasked disallowed token would abort the process).
        try:
            if self._apply_top(cur_p):
                return
        except Exception:  # noqa: BLE001
            pass
        self._cpp.llama_sampler_apply(self.grammar, cur_p)

    def _apply_top(self, cur_p: Any) -> bool:
        import ctypes

        np = self._np
        array = cur_p.contents
        size = int(array.size)
        if size <= GRAMMAR_TOP_K:
            return False
        data = np.ctypeslib.as_array(array.data, shape=(size,))
        logits = data["logit"]
        top = np.argpartition(logits, -GRAMMAR_TOP_K)[-GRAMMAR_TOP_K:]
        small = self._small_view
        small["id"] = data["id"][top]
        small["logit"] = logits[top]
        small["p"] = 0.0
        probe = self._cpp.llama_token_data_array(
            data=self._small_ptr, size=GRAMMAR_TOP_K, selected=-1, sorted=False
        )
        self._cpp.llama_sampler_apply(self.grammar, ctypes.byref(probe))
        allowed = np.isfinite(small["logit"])
        if not allowed.any():
            return False
        keep = top[allowed]
        kept = logits[keep].copy()
        logits[:] = -np.inf
        logits[keep] = kept
        return True

    def _accept(self, _sampler: Any, token: int) -> None:
        self._cpp.llama_sampler_accept(self.grammar, token)


class GreedyGrammar:
    """Greedy decoding under a grammar that asks the grammar about the best token alone first.

    llama.cpp's own ``common_sampler`` does this; llama-cpp-python's sampler chain instead
    applies the grammar before picking (to Gemma's whole vocabulary, or through
    :class:`LazyGrammar`'s Python callback to its top tokens). Here, at every step: the best
    token by logit; if the grammar allows it, that is the token; otherwise the best token the
    grammar allows among ever larger sets of the best tokens (:meth:`_best_allowed`). Whether
    the grammar allows a token does not depend on the other candidates, so this is the token
    the stock chain (grammar, then greedy) picks, ties included (the first best id in both).
    No Python runs inside llama.cpp's sampling. It is a duck-typed ``LlamaSampler``:
    ``Llama.sample`` calls only :meth:`sample`.
    """

    def __init__(self, grammar: Any, n_vocab: int) -> None:
        """Wrap a llama.cpp grammar sampler (now owned by this object) over ``n_vocab`` ids."""
        import ctypes

        import llama_cpp
        import numpy as np

        self._np = np
        self._cpp = llama_cpp
        self._n_vocab = n_vocab
        self.grammar = grammar
        self._one = (llama_cpp.llama_token_data * 1)()
        self._one_array = llama_cpp.llama_token_data_array(
            data=ctypes.cast(self._one, ctypes.POINTER(llama_cpp.llama_token_data)),
            size=1,
            selected=-1,
            sorted=False,
        )
        # Candidates for the grammar, allocated on the first refusal (3 MB for Gemma).
        self._all: Any = None
        self._all_view: Any = None
        self._all_array: Any = None
        # Steps, and steps where the grammar refused the best token (read by bench/tests).
        self.steps = 0
        self.refusals = 0

    @classmethod
    def for_model(cls, llm: Any, gbnf: str) -> GreedyGrammar:
        """The sampler for a loaded ``Llama`` and a GBNF grammar (root rule ``root``)."""
        import llama_cpp

        grammar = llama_cpp.llama_sampler_init_grammar(
            llm._model.vocab, gbnf.encode("utf-8"), b"root"
        )
        if not grammar:
            raise ValueError("llama.cpp rejected the grammar")
        return cls(grammar, int(llm._n_vocab))

    def sample(self, ctx: Any, idx: int = -1) -> int:
        """The next token from the logits of output ``idx``, accepted by the grammar."""
        pointer = self._cpp.llama_get_logits_ith(ctx.ctx, idx)
        return self.pick(self._np.ctypeslib.as_array(pointer, shape=(self._n_vocab,)))

    def pick(self, logits: Any) -> int:
        """The best token of ``logits`` that the grammar allows; the grammar accepts it."""
        import ctypes

        cpp = self._cpp
        token = int(logits.argmax())
        self._one[0] = cpp.llama_token_data(token, float(logits[token]), 0.0)
        cpp.llama_sampler_apply(self.grammar, ctypes.byref(self._one_array))
        self.steps += 1
        if self._one[0].logit == float("-inf"):
            self.refusals += 1
            token = self._best_allowed(logits)
        cpp.llama_sampler_accept(self.grammar, token)
        return token

    def _best_allowed(self, logits: Any) -> int:
        """The best token the grammar allows, asking it about the best few first.

        The grammar is applied to the tokens whose logit reaches the 64th, then the 4,096th
        best (ties with it included), and to the whole vocabulary only when none of those is
        allowed: the best allowed token is in the first set that holds any allowed token.
        """
        np = self._np
        n = self._n_vocab
        stages = [k for k in REFUSED_STAGES if k < n]
        order = np.argpartition(logits, [n - k for k in reversed(stages)])
        for k in stages:
            token = self._best_of(np.flatnonzero(logits >= logits[order[n - k]]), logits)
            if token is not None:
                return token
        token = self._best_of(np.arange(n), logits, last=True)
        assert token is not None
        return token

    def _best_of(self, ids: Any, logits: Any, *, last: bool = False) -> int | None:
        """The best of ``ids`` (ascending) that the grammar allows; None if it allows none.

        ``last``: return the first id even when none is allowed, as llama.cpp's greedy
        sampler does when every logit is minus infinity.
        """
        import ctypes

        np = self._np
        cpp = self._cpp
        if self._all is None:
            self._all = (cpp.llama_token_data * self._n_vocab)()
            self._all_view = np.ctypeslib.as_array(self._all)
            self._all_array = cpp.llama_token_data_array(
                data=ctypes.cast(self._all, ctypes.POINTER(cpp.llama_token_data)),
                size=0,
                selected=-1,
                sorted=False,
            )
        size = len(ids)
        view = self._all_view[:size]
        view["id"] = ids
        view["logit"] = logits[ids]
        view["p"] = 0.0
        self._all_array.size = size
        self._all_array.selected = -1
        cpp.llama_sampler_apply(self.grammar, ctypes.byref(self._all_array))
        # The first best, as llama.cpp's greedy sampler picks: the lowest id among ties.
        best = int(view["logit"].argmax())
        if not last and view["logit"][best] == float("-inf"):
            return None
        return int(ids[best])

    def close(self) -> None:
        """Free the grammar sampler."""
        if self.grammar:
            self._cpp.llama_sampler_free(self.grammar)
            self.grammar = None

    def __del__(self) -> None:
        # Llama replaces its sampler at every generate() without closing the old one.
        with contextlib.suppress(Exception):
            self.close()


def _no_penalties(kw: dict[str, Any]) -> bool:
    """Whether llama.cpp's penalties sampler would leave the logits as they are."""
    return (
        kw.get("repeat_penalty", 1.0) == 1.0
        and kw.get("frequency_penalty", 0.0) == 0.0
        and kw.get("presence_penalty", 0.0) == 0.0
    )


def init_sampler(llm: Any, original: Callable[..., Any]) -> Callable[..., Any]:
    """A replacement for ``Llama._init_sampler`` for grammars.

    Greedy decoding without penalties gets :class:`GreedyGrammar`; any other grammar request
    a chain that starts with :class:`LazyGrammar`.
    """
    from llama_cpp import _internals

    def init_sampler(**kw: Any) -> Any:
        grammar = kw.get("grammar")
        if grammar is None or kw.get("logits_processor") is not None or kw.get("mirostat_mode"):
            return original(**kw)
        if GREEDY_CHECK and kw.get("temp", 0.0) == 0.0 and _no_penalties(kw):
            return GreedyGrammar.for_model(llm, grammar._grammar)
        chain = _internals.LlamaSampler()
        lazy = LazyGrammar(llm, grammar._grammar)
        llama_cpp = lazy._cpp
        llama_cpp.llama_sampler_chain_add(chain.sampler, lazy.get_sampler())
        # The chain must not free our Python-owned sampler: it is registered as custom, which
        # LlamaSampler removes from the chain before freeing it.
        index = llama_cpp.llama_sampler_chain_n(chain.sampler) - 1
        chain.custom_samplers.append((index, lazy))  # type: ignore[arg-type]  # duck-typed
        chain._exit_stack.callback(lazy.free)
        chain.add_penalties(
            n_vocab=llm._n_vocab,
            penalty_last_n=llm.last_n_tokens_size,
            penalty_repeat=kw.get("repeat_penalty", 1.0),
            penalty_freq=kw.get("frequency_penalty", 0.0),
            penalty_present=kw.get("presence_penalty", 0.0),
        )
        temp = kw.get("temp", 0.0)
        if temp == 0.0:
            chain.add_greedy()
        else:
            chain.add_top_k(kw.get("top_k", 40))
            chain.add_typical(kw.get("typical_p", 1.0), 1)
            chain.add_top_p(kw.get("top_p", 0.95), 1)
            chain.add_min_p(kw.get("min_p", 0.05), 1)
            chain.add_temp(temp)
            chain.add_dist(llm._seed)
        return chain

    return init_sampler


def slim_state(llm: Any) -> None:
    """Make the prefix cache store only llama.cpp's state, not llama-cpp-python's logits copy.

    ``Llama.save_state`` also copies the ``scores`` buffer: up to ``n_batch`` rows of the
    262,144-entry vocabulary, 537 MB for a prompt of 512 tokens or more. Copying it dominated
    a call's cost, and ``LlamaRAMCache`` does not count it against its capacity, so memory would
    grow by half a gigabyte per cached prompt. Those logits are only read for ``logprobs`` (which
    needs ``logits_all=True``, not used here), so the replacement leaves them out.
    """
    import ctypes

    import llama_cpp
    import numpy as np
    from llama_cpp.llama import LlamaState

    no_scores = np.empty((0, 0), dtype=np.single)

    def save_state() -> LlamaState:
        size = int(llama_cpp.llama_state_get_size(llm._ctx.ctx))
        buffer = (ctypes.c_uint8 * size)()
        used = int(llama_cpp.llama_state_get_data(llm._ctx.ctx, buffer, size))
        if used > size:
            raise RuntimeError("Failed to copy llama state data")
        return LlamaState(
            input_ids=llm.input_ids.copy(),
            scores=no_scores,
            n_tokens=llm.n_tokens,
            llama_state=ctypes.string_at(buffer, used),
            llama_state_size=used,
            seed=llm._seed,
        )

    def load_state(state: LlamaState) -> None:
        llm.input_ids = state.input_ids.copy()
        llm.n_tokens = state.n_tokens
        llm._requires_eval = True
        llm._seed = state.seed
        size = state.llama_state_size
        buffer = (ctypes.c_uint8 * size).from_buffer_copy(state.llama_state)
        if llama_cpp.llama_state_set_data(llm._ctx.ctx, buffer, size) != size:
            raise RuntimeError("Failed to set llama state data")

    llm.save_state = save_state
    llm.load_state = load_state


@contextlib.contextmanager
def quiet_fd2() -> Iterator[None]:
    """Send the process's file descriptor 2 to /dev/null for the block (C-level writes too)."""
    saved = os.dup(2)
    try:
        with open(os.devnull, "wb") as null:
            os.dup2(null.fileno(), 2)
            yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


@functools.lru_cache(maxsize=256)
def grammar_is_valid(llm: Any, gbnf: str) -> bool:
    """Whether llama.cpp parses ``gbnf`` (on failure it returns no sampler; using that crashes).

    Call with the model lock held.
    """
    import llama_cpp

    # A rejected grammar is expected here (we fall back), but llama.cpp prints the whole
    # grammar to the stderr file descriptor; silence that for the few microseconds of the
    # check (the same redirection llama-cpp-python uses while loading with verbose=False).
    try:
        from llama_cpp._utils import suppress_stdout_stderr

        quiet: Any = suppress_stdout_stderr(disable=False)
    except ImportError:
        quiet = contextlib.nullcontext()
    with quiet:
        sampler = llama_cpp.llama_sampler_init_grammar(
            llm._model.vocab, gbnf.encode("utf-8"), b"root"
        )
    if not sampler:
        return False
    llama_cpp.llama_sampler_free(sampler)
    return True


def patch(llm: Any, cache_bytes: int) -> None:
    """Apply both speed-ups to a loaded ``Llama`` where its internals allow.

    Both lean on llama-cpp-python internals (checked against 0.3.36); on a version without
    them it runs stock: slower grammars, and no RAM cache (its stock state copy is the 537 MB
    problem described in :func:`slim_state`).
    """
    import llama_cpp

    internals_ok = all(hasattr(llm, name) for name in ("_ctx", "_model", "_init_sampler", "_seed"))
    if internals_ok and hasattr(llm, "_requires_eval"):
        slim_state(llm)
        llm.set_cache(llama_cpp.LlamaRAMCache(capacity_bytes=cache_bytes))
    if internals_ok and LAZY_GRAMMAR:
        llm._init_sampler = init_sampler(llm, llm._init_sampler)


__all__ = [
    "GRAMMAR_TOP_K",
    "GREEDY_CHECK",
    "LAZY_GRAMMAR",
    "REFUSED_STAGES",
    "GreedyGrammar",
    "LazyGrammar",
    "build_has_amx",
    "extra_buffers_wanted",
    "grammar_is_valid",
    "init_sampler",
    "patch",
    "quiet_fd2",
    "slim_state",
    "without_extra_buffers",
]
