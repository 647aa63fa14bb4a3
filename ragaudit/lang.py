"""Language detection and CJK-aware text splitting shared by prompts and metrics."""

from __future__ import annotations

import re

_CJK = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
_LATIN_WORD = re.compile(r"[A-Za-z0-9]+(?:['’][A-Za-z]+)?")
_TOKEN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]|[A-Za-z0-9]+")

# A sentence ends at a run of Chinese or Latin end marks (。！？!? and the ellipses …… / ...),
# together with the closing quotes and brackets that follow it (“他说：‘好。’”), or at a line
# break. A Latin full stop ends a sentence only when whitespace, a CJK character or the end of
# the text follows, so 3.14, e.g. and www.example.com stay whole. The semicolon does not end a
# sentence: in Chinese it joins the clauses of one sentence.
_CLOSERS = "\"'”’」』）)】》〉]"
_CLOSE = "[" + re.escape(_CLOSERS) + "]*"
_FULL_STOP = r"(?<![.])\.(?=" + _CLOSE + r"(?:\s|[\u3400-\u9fff]|$))"
_END = re.compile(r"(?:[。！？!?]+|…+|\.{3,}|" + _FULL_STOP + ")" + _CLOSE + r"|\n+")
_WORDLIKE = re.compile(r"\w")
# Latin abbreviations whose full stop is not a sentence end when a word follows.
_ABBREVIATIONS = frozenset(
    {
        "mr",
        "mrs",
        "ms",
        "dr",
        "prof",
        "sr",
        "jr",
        "st",
        "vs",
        "etc",
        "e.g",
        "i.e",
        "no",
        "fig",
        "inc",
        "ltd",
        "co",
        "corp",
        "jan",
        "feb",
        "mar",
        "apr",
        "jun",
        "jul",
        "aug",
        "sep",
        "sept",
        "oct",
        "nov",
        "dec",
        "u.s",
        "u.k",
    }
)
_LAST_WORD = re.compile(r"([A-Za-z][A-Za-z.]*)\.$")


def detect_language(text: str) -> str:
    """``zh`` when CJK characters make up a fifth of the letters, else ``en``."""
    cjk = len(_CJK.findall(text))
    latin = sum(len(w) for w in _LATIN_WORD.findall(text))
    # A CJK character carries about a word; weigh Latin letters down to words.
    return "zh" if cjk and cjk >= 0.2 * (cjk + latin / 5) else "en"


def tokens(text: str) -> list[str]:
    """Lower-cased tokens: each CJK character alone, Latin words and numbers whole."""
    return [t.lower() for t in _TOKEN.findall(text)]


def token_share(part: str, whole: str) -> float:
    """Share of ``part``'s distinct :func:`tokens` found in ``whole`` (0 when ``part`` has none).

    The offline fake judges' one measure of how much a text says about another.
    """
    mine = set(tokens(part))
    return len(mine & set(tokens(whole))) / len(mine) if mine else 0.0


def count_tokens(text: str) -> int:
    """How many :func:`tokens` ``text`` has, without lower-casing them.

    The fake provider counts every prompt it answers. ``findall`` builds its list in C, faster
    than counting ``finditer``'s matches in a generator or ``len(tokens(text))``.
    """
    return len(_TOKEN.findall(text))


def _is_abbreviation(piece: str) -> bool:
    """Whether ``piece`` ends in an abbreviation's or an initial's full stop (``Dr.``, ``J.``)."""
    found = _LAST_WORD.search(piece)
    if not found:
        return False
    word = found.group(1).lower()
    return word in _ABBREVIATIONS or (len(word) == 1 and found.group(1).isupper())


def sentences(text: str) -> list[str]:
    """Sentences of Chinese, English or mixed text.

    Splits after 。！？!? (and their full-width and repeated forms), ellipses, a full stop
    followed by a space, a CJK character or the end, and at line breaks; closing quotes stay
    with their sentence. Text without final punctuation is the last sentence. Pieces without a
    letter, digit or CJK character are dropped.
    """
    out: list[str] = []
    pending = ""
    start = 0
    text = text or ""
    for match in _END.finditer(text):
        piece = pending + text[start : match.end()]
        start = match.end()
        mark = match.group()
        if (
            mark.startswith(".")
            and not mark.startswith("...")
            and _is_abbreviation(piece.rstrip(_CLOSERS).rstrip())
        ):
            pending = piece
            continue
        pending = ""
        if _WORDLIKE.search(piece):
            out.append(piece.strip())
    tail = (pending + text[start:]).strip()
    if _WORDLIKE.search(tail):
        out.append(tail)
    return out


__all__ = ["count_tokens", "detect_language", "sentences", "token_share", "tokens"]
