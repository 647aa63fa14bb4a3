"""Language detection and CJK-aware text splitting shared by prompts and metrics."""

from __future__ import annotations

import re

_CJK = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
_LATIN_WORD = re.compile(r"[A-Za-z0-9]+(?:['’][A-Za-z]+)?")
_TOKEN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]|[A-Za-z0-9]+")
# Chinese sentence ends (。！？；), English ends followed by space, or line breaks.
_SENTENCE = re.compile(r"(?<=[。！？!?；;])|(?<=[.])\s+|\n+")


def detect_language(text: str) -> str:
    """``zh`` when CJK characters make up a fifth of the letters, else ``en``."""
    cjk = len(_CJK.findall(text))
    latin = sum(len(w) for w in _LATIN_WORD.findall(text))
    # A CJK character carries about a word; weigh Latin letters down to words.
    return "zh" if cjk and cjk >= 0.2 * (cjk + latin / 5) else "en"


def tokens(text: str) -> list[str]:
    """Lower-cased tokens: each CJK character alone, Latin words and numbers whole."""
    return [t.lower() for t in _TOKEN.findall(text)]


def sentences(text: str) -> list[str]:
    """Sentences split on Chinese and English ends; text without final punctuation is kept."""
    parts = (p.strip() for p in _SENTENCE.split(text or ""))
    return [p for p in parts if p]


__all__ = ["detect_language", "sentences", "tokens"]
