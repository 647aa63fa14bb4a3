"""Token counts: kept counts give exactly the figures a fresh count gives, and each text is
tokenized once."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import litellm
import pytest
import tiktoken

from ragaudit.cache import Gateway, count_prompt, count_text, forget_counts
from ragaudit.cache import _tokens as tokens
from ragaudit.metrics import METRICS, Deps, Sample


def sample(n: int, language: str) -> Sample:
    zh = language == "zh"
    return Sample(
        f"q{n}",
        f"第{n}个问题：北京是哪个国家的首都？" if zh else f"Question {n}: the capital of France?",
        language,
        f"北京是中国的首都（{n}）。" if zh else f"Paris is the capital of France ({n}).",
        f"北京是中华人民共和国的首都（{n}）。" if zh else f"The capital is Paris ({n}).",
        ["北京是首都。", "第二段。"] if zh else ["Paris is the capital.", "Second part."],
        ["c0", "c1"],
        None,
        None,
    )


def window_texts(tmp_path: Path) -> list[str]:
    """Every text the score stage fits: each windowed metric's request, in both languages."""
    gateway = Gateway(tmp_path / "memo")
    deps = Deps.of(gateway=gateway, judge="fake/judge", embedder="fake/embed", options={})
    texts = [
        text
        for n, language in enumerate(("en", "zh", "en", "zh"))
        for m in METRICS.values()
        if m.window is not None
        for text in m.window(sample(n, language), deps).messages
    ]
    gateway.close()
    return texts


def whole(text: str, encoding: str = "cl100k_base") -> int:
    return len(tiktoken.get_encoding(encoding).encode(text, disallowed_special=()))


def test_a_text_counted_line_by_line_is_its_whole_count(tmp_path: Path) -> None:
    forget_counts()
    texts = window_texts(tmp_path)
    assert len(texts) > 20 and any("\n" in t for t in texts)
    for text in texts:
        assert count_text("fake/judge", text) == whole(text)
    # Kept counts give the same figures the second time.
    assert [count_text("fake/judge", t) for t in texts] == [whole(t) for t in texts]


@pytest.mark.parametrize("encoding", ["cl100k_base", "o200k_base"])
def test_cutting_after_a_line_break_before_a_letter_never_changes_a_count(encoding: str) -> None:
    # The rule count_text rests on, for both tiktoken pre-tokenizers in use: many random texts
    # built from the characters that make pieces join (line breaks, spaces, punctuation,
    # digits, contractions, CJK, slashes).
    alphabet = [*"ab Z1.,:;!?'\"{}[]-_/\\\n\r\t  北京é’“”", "'s", "'ll", "\n\n", " \n", "\r\n"]
    rng = random.Random(7)
    for _ in range(20_000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 30)))
        parts = list(tokens._lines(text))
        assert "".join(parts) == text
        assert sum(whole(p, encoding) for p in parts) == whole(text, encoding), repr(text)


def test_a_prompt_s_lines_are_tokenized_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    forget_counts()
    first, second = (
        METRICS["faithfulness"].window(sample(n, "en"), deps).messages[1]
        for n, deps in (
            (1, Deps.of(Gateway(tmp_path / "m"), "fake/judge", "fake/embed", {})),
            (2, Deps.of(Gateway(tmp_path / "m"), "fake/judge", "fake/embed", {})),
        )
    )
    count_text("fake/judge", first)
    expected = whole(second)
    encoding = tokens._cl100k()
    encoded: list[str] = []
    real = encoding.encode

    def spy(text: str, **kwargs: Any) -> list[int]:
        encoded.append(text)
        return real(text, **kwargs)

    monkeypatch.setattr(encoding, "encode", spy)
    assert count_text("fake/judge", second) == expected
    # Only the lines the second row changed were tokenized: not its instruction or examples.
    assert encoded and sum(map(len, encoded)) < len(second) / 4
    assert all("Question 2" in t or "(2)" in t for t in encoded)


@pytest.mark.parametrize("model", ["fake/judge", "gpt-4o-mini"])
def test_a_prompt_s_count_is_litellm_s_and_each_message_is_counted_once(
    model: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    forget_counts()
    tokenizer = "gpt-4" if model.startswith("fake/") else model
    schema = {"role": "system", "content": "Reply with JSON.\n" + '{"type": "object"}' * 20}
    prompts = [
        [schema, {"role": "user", "content": f"Question {n}: 北京是哪个国家的首都？\nAnswer."}]
        for n in range(3)
    ] + [[{"role": "user", "content": "Question 0: 北京是哪个国家的首都？\nAnswer."}]]
    expected = [litellm.token_counter(model=tokenizer, messages=p) for p in prompts]

    counted: list[Any] = []
    real = litellm.token_counter

    def spy(*args: Any, **kwargs: Any) -> int:
        counted.append(kwargs.get("messages"))
        return real(*args, **kwargs)

    monkeypatch.setattr(litellm, "token_counter", spy)
    assert [count_prompt(model, p) for p in prompts] == expected
    # The schema message once, each user message once (and litellm's priming, once ever).
    messages = [m for batch in counted if batch for m in batch]
    assert sorted(m["content"] for m in messages) == sorted(
        {schema["content"], *(p[-1]["content"] for p in prompts)}
    )
    before = len(counted)
    assert [count_prompt(model, p) for p in prompts] == expected  # kept: nothing counted again
    assert len(counted) == before
