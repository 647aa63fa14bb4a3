"""Token counts and context windows: what a judge holds and what a prompt costs in it.

Every token count is made here, by one of two rules with one purpose each:

- What a prompt takes of the judge's window (:func:`count_text`, :func:`count_prompt`):
  litellm's counter on the tokenizer the provider's record names, the same wherever a prompt is
  fitted (the stages) and where it is checked before it is sent (the gateway), so a fitted
  prompt is never refused.
- What the provider will report, and bill (:func:`usage_counter`): the model's own tokenizer
  wherever one is at hand without a call (the fake provider's rule, the local models'
  tokenizers), which is what the dry run estimates cost by.

A prompt is mostly text the process has counted before: the schema message sent with every
call of a schema, a prompt's instruction and examples sent with every row, the messages a
stage counted to fit them and then gave the gateway to check. So counts are kept: a chat
message's count by its content's digest (:func:`count_prompt`), and for the texts the score
stage fits, each line's count (:func:`count_text`), so only what is new is tokenized.
"""

from __future__ import annotations

import functools
import hashlib
import threading
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import litellm
from cachetools import LRUCache

from ragaudit.cache.providers import CL100K, FALLBACK_WINDOW, provider_record

# Counts kept: message counts (a digest key each) and line counts (lines up to this length).
_MESSAGE_COUNTS = 4096
_LINE_COUNTS = 4096
_MAX_KEPT_LINE = 2000


def context_window(model: str, configured: int | None = None) -> int:
    """Tokens the model holds (prompt + answer): configured, else its provider's record says."""
    if configured:
        return configured
    return provider_record(model).window(model)


def _cl100k_model(model: str) -> bool:
    return _tokenizer(model) == CL100K


def _tokenizer(model: str) -> str:
    """The model name litellm's counter should see for ``model`` (its provider's record says)."""
    return provider_record(model).tokenizer(model)


def encoding_name(model: str) -> str:
    """The tiktoken encoding litellm's counter uses for ``model`` (cl100k if it cannot map it)."""
    import tiktoken

    try:
        return tiktoken.encoding_name_for_model(_tokenizer(model))
    except KeyError:
        return "cl100k_base"


def count_tokens(model: str, text: str) -> int:
    """Tokens of ``text`` for ``model``: an OpenAI model's own encoding, else tiktoken's cl100k."""
    try:
        return int(litellm.token_counter(model=_tokenizer(model), text=text))
    except Exception:
        return len(text)


# -- a text, line by line -------------------------------------------------------------------


# tiktoken's pre-tokenizer (cl100k and o200k alike) never lets a piece run from a line break
# into a letter: a piece holding a line break ends with it. So a text's tokens are exactly the
# sum of its parts' when it is cut after every line break that a letter follows.
def _lines(text: str) -> list[str]:
    out: list[str] = []
    start, find, end = 0, text.find, len(text) - 1
    cut = find("\n")
    while cut >= 0:
        if cut < end and text[cut + 1].isalpha():
            out.append(text[start : cut + 1])
            start = cut + 1
        cut = find("\n", cut + 1)
    out.append(text[start:])
    return out


@lru_cache(maxsize=1)
def _cl100k() -> Any:
    import tiktoken

    return tiktoken.get_encoding("cl100k_base")


def _cl100k_count(text: str) -> int:
    return len(_cl100k().encode(text, disallowed_special=()))


_cl100k_line = lru_cache(maxsize=_LINE_COUNTS)(_cl100k_count)


def count_text(model: str, text: str) -> int:
    """Tokens of ``text`` for ``model``, as a prompt's text: tiktoken's whole-text count.

    For our own providers (cl100k, without litellm's per-call overhead and chunking) the text
    is counted line by line and each line's count kept, which is exact (see ``_lines``): a
    prompt's instruction and examples are tokenized once per process, not once per row.
    Other models are counted as :func:`count_tokens` counts them.
    """
    if not _cl100k_model(model):
        return count_tokens(model, text)
    return sum(
        _cl100k_line(line) if len(line) <= _MAX_KEPT_LINE else _cl100k_count(line)
        for line in _lines(text)
    )


# -- chat messages ---------------------------------------------------------------------------


# Least recently used out first; the lock makes a get (which reorders) safe across threads.
_message_counts: LRUCache[tuple[str, str, bytes], int] = LRUCache(_MESSAGE_COUNTS)
_message_counts_lock = threading.Lock()


@lru_cache(maxsize=64)
def _priming(tokenizer: str) -> int:
    # The tokens litellm adds once per prompt (the reply's priming), whatever its messages.
    return int(litellm.token_counter(model=tokenizer, messages=[]))


def _message_tokens(tokenizer: str, role: str, content: str) -> int:
    digest = hashlib.blake2b(content.encode("utf-8", "surrogatepass"), digest_size=16).digest()
    key = (tokenizer, role, digest)
    with _message_counts_lock:
        found = _message_counts.get(key)
    if found is None:
        found = int(
            litellm.token_counter(model=tokenizer, messages=[{"role": role, "content": content}])
        ) - _priming(tokenizer)
        with _message_counts_lock:
            _message_counts[key] = found
    return found


def count_prompt(model: str, messages: list[dict[str, Any]]) -> int:
    """Tokens of chat ``messages`` as litellm counts them for ``model`` (framing included).

    litellm counts a prompt as its messages' counts plus a fixed priming, so each plain text
    message (a role and a string content) is counted once per process and its count kept: the
    schema message every call of a schema carries, a prompt a stage counted to fit it and the
    gateway then checks, the first prompt inside its repair.
    """
    tokenizer = _tokenizer(model)
    try:
        if all(
            len(m) == 2 and isinstance(m.get("role"), str) and isinstance(m.get("content"), str)
            for m in messages
        ):
            return _priming(tokenizer) + sum(
                _message_tokens(tokenizer, m["role"], m["content"]) for m in messages
            )
        return int(litellm.token_counter(model=tokenizer, messages=messages))
    except Exception:  # no tokenizer for this model: characters over-count, the safe side
        return sum(len(str(m.get("content") or "")) + 4 for m in messages)


def forget_counts() -> None:
    """Drop every kept count (a benchmark measuring a fresh process's work calls this)."""
    with _message_counts_lock:
        _message_counts.clear()
    _cl100k_line.cache_clear()


# -- as the provider reports them ------------------------------------------------------------


@dataclass(frozen=True)
class Counter:
    """How one model's tokens are counted as its provider will report them."""

    rule: str
    """What counts, printed with the estimate (``tiktoken o200k_base``, ``Gemma's own ...``)."""
    prompt: Callable[[list[dict[str, Any]]], int]
    """Prompt tokens of chat messages."""
    text: Callable[[str], int]
    """Tokens of a reply or of one embedded text."""


def _litellm_counter(model: str, why: str = "") -> Counter:
    return Counter(
        f"tiktoken {encoding_name(model)}{why}",
        functools.partial(count_prompt, model),
        functools.partial(count_tokens, model),
    )


@functools.lru_cache(maxsize=64)
def usage_counter(model: str) -> Counter:
    """How ``model``'s provider will count its tokens: its own tokenizer wherever one is at hand.

    ``fake/...``: the fake provider's own rule. ``local/...``: the local provider's own
    tokenizers over the prompt it builds (Gemma's vocabulary read from the same GGUF file the
    provider loads, without its weights; e5's or MiniLM's tokenizer); if their files are
    missing, cl100k, said so in the rule. Anything else: litellm's counter, which uses an
    OpenAI model's own tiktoken encoding (o200k for gpt-4o, gpt-4.1, the o-series) and cl100k
    for a model it cannot map — an approximation for other providers' models, whose tokenizers
    are not at hand.
    """
    own = provider_record(model).own_counter
    if own is not None:
        try:
            return Counter(*own(model))
        except Exception as exc:  # no GGUF or tokenizer files: the offline extra is missing
            return _litellm_counter(model, f" (the local tokenizer is unavailable: {exc})")
    return _litellm_counter(model)


__all__ = [
    "FALLBACK_WINDOW",
    "Counter",
    "context_window",
    "count_prompt",
    "count_text",
    "count_tokens",
    "encoding_name",
    "forget_counts",
    "usage_counter",
]
