"""Personal data out of the audit's texts before anything is written or sent to a judge.

E-mail addresses, phone numbers and payment-card numbers are replaced by default; a team adds
its own patterns (an account number, a ticket id). Every pattern runs on the ``regex`` engine
with a time budget per text, as the user's citation pattern does (``ragaudit/citations.py``):
``re`` cannot be interrupted mid-match, and a catastrophic user pattern would otherwise hold a
day's read for as long as it backtracks. A text whose budget runs out is replaced whole, so a
slow pattern never lets its text through unredacted.
"""

from __future__ import annotations

import time
from collections import Counter, OrderedDict
from collections.abc import Callable

import regex
from pydantic import BaseModel, ConfigDict, Field, field_validator

from ragaudit.errors import ConfigError, clip

# Defaults written so that each character is matched one way only: linear without the budget.
_EMAIL = r"(?<![\w.+-])[\w.+-]{1,64}@[A-Za-z0-9-]{1,63}(?:\.[A-Za-z0-9-]{1,63})+"
# A card number: 13-19 digits, in groups split by single spaces or dashes; kept only when the
# Luhn check passes, so order numbers and timestamps stay.
_CARD = r"(?<![\d-])\d(?:[ -]?\d){12,18}(?![\d-])"
# A phone number: an optional +country code, digits in groups split by spaces, dots, dashes or a
# bracketed area code; kept only with 7 to 15 digits that do not read as a date.
# The lookahead asks for seven phone-like characters first, so the many short numbers of a
# text (counts, years, ids) are passed over without a match to reject.
_PHONE = (
    r"(?<![\w+])(?=[+(\d][\d ().+-]{6})"
    r"(?:\+\d{1,3}[ .-]?)?(?:\(\d{1,5}\)[ .-]?)?\d{2,}(?:[ .-]\d{2,}){0,5}(?![\w])"
)
_DEFAULTS_NEED = regex.compile(r"[@\d]")
Rule = tuple[str | None, regex.Pattern[str], regex.Pattern[str] | None]
_DATE = regex.compile(r"\d{4}[-./]\d{1,2}[-./]\d{1,2}|\d{1,2}[-./]\d{1,2}[-./]\d{4}")

_DEFAULTS = regex.compile(f"(?P<email>{_EMAIL})|(?P<card>{_CARD})|(?P<phone>{_PHONE})")

TIMEOUT_KIND = "timeout"
"""The kind counted when a text's time budget ran out (the whole text was replaced)."""
_CACHE = 65_536  # distinct texts remembered: one document served a thousand times is done once


def _digits(s: str) -> str:
    return "".join(c for c in s if c.isdigit())


def _luhn(digits: str) -> bool:
    total = 0
    for i, c in enumerate(reversed(digits)):
        d = int(c)
        if i % 2:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return total % 10 == 0


def _is_card(s: str) -> bool:
    return _luhn(_digits(s))


def _is_phone(s: str) -> bool:
    n = len(_digits(s))
    if not 7 <= n <= 15 or _DATE.fullmatch(s):
        return False
    # A bare run of digits is a phone only when it is long enough to be one with its area code
    # (a Chinese mobile, a national number); shorter bare numbers are counts, ids and years.
    return n >= 10 or not s.isdigit()


def _phones_within(run: str, counts: Counter[str]) -> str:
    """Phones in a run of digit groups too long to be one (two numbers side by side)."""
    out: list[str] = []
    group: list[str] = []

    def flush() -> None:
        text = " ".join(group)
        if group and _is_phone(text):
            counts["phone"] += 1
            out.append("[phone]")
        elif group:
            out.append(text)
        group.clear()

    for token in run.split(" "):
        if group and len(_digits(" ".join([*group, token]))) > 15:
            flush()
        group.append(token)
    flush()
    return " ".join(out)


# What a default's match must also pass to be replaced (a card's checksum, a phone's length).
_CHECKS: dict[str, Callable[[str], bool]] = {"card": _is_card, "phone": _is_phone}


class RedactPattern(BaseModel):
    """One pattern of the team's own, replaced by ``[<name>]``."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(pattern=r"^[a-z][a-z0-9_]{0,31}$")
    """What it finds (``account``): the placeholder and the count's name."""
    pattern: str = Field(max_length=2000)
    """A ``regex`` pattern; its match is replaced."""


class RedactOptions(BaseModel):
    """``audit.redact``: what is replaced in queries, answers, documents and every other text."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    defaults: bool = True
    """Replace e-mail addresses, phone numbers and payment-card numbers (Luhn-checked)."""
    patterns: tuple[RedactPattern, ...] = ()
    """The team's own patterns, applied after the defaults, each replaced by ``[<name>]``."""
    timeout_s: float = Field(default=0.5, gt=0, le=60)
    """Time budget of all patterns on one text; a text that runs out is replaced whole."""

    @field_validator("patterns")
    @classmethod
    def _compiles(cls, patterns: tuple[RedactPattern, ...]) -> tuple[RedactPattern, ...]:
        for p in patterns:
            try:
                regex.compile(p.pattern)
            except regex.error as exc:
                raise ValueError(f"pattern '{p.name}' ({clip(p.pattern)}): {exc}") from None
        return patterns


class Redactor:
    """Applies :class:`RedactOptions` to texts and counts what it replaced, per kind."""

    def __init__(self, options: RedactOptions) -> None:
        """Compile the patterns once.

        Raises:
            ConfigError: a pattern does not compile (the options model checks it first).
        """
        # (kind, pattern, a character class the text must hold at all); the defaults are one
        # alternation with a group per kind, so a text is scanned once for the three of them.
        rules: list[Rule] = []
        if options.defaults:
            rules.append((None, _DEFAULTS, _DEFAULTS_NEED))
        for p in options.patterns:
            try:
                rules.append((p.name, regex.compile(p.pattern), None))
            except regex.error as exc:
                raise ConfigError(f"audit.redact.patterns '{p.name}': {exc}") from None
        self._rules = rules
        self._timeout = options.timeout_s
        self.counts: Counter[str] = Counter()
        self._cache: OrderedDict[str, tuple[str, Counter[str] | None]] = OrderedDict()

    def __call__(self, text: str | None) -> str | None:
        """``text`` with every match replaced by ``[<kind>]`` (None stays None)."""
        if not text or not self._rules:
            return text
        hit = self._cache.get(text)
        if hit is None:
            hit = self._redact(text)
            self._cache[text] = hit
            if len(self._cache) > _CACHE:
                self._cache.popitem(last=False)
        else:
            self._cache.move_to_end(text)
        if hit[1]:
            self.counts.update(hit[1])
        return hit[0]

    def _redact(self, text: str) -> tuple[str, Counter[str] | None]:
        counts: Counter[str] = Counter()
        deadline = time.monotonic() + self._timeout
        try:
            for name, pattern, needs in self._rules:
                # The defaults cannot match a text without an "@" or a digit: no scan then.
                if needs is not None and needs.search(text) is None:
                    continue

                def replace(m: regex.Match[str], name: str | None = name) -> str:
                    kind = name or m.lastgroup or "match"
                    if name is None and kind in _CHECKS:
                        # A digit run that is no card may still be a phone (15 digits at most).
                        kind = next((k for k in _CHECKS if _CHECKS[k](m.group())), "")
                        if not kind:
                            return _phones_within(m.group(), counts)
                    counts[kind] += 1
                    return f"[{kind}]"

                left = max(deadline - time.monotonic(), 1e-3)
                text = pattern.sub(replace, text, timeout=left)
        except TimeoutError:
            return f"[{TIMEOUT_KIND}]", Counter({TIMEOUT_KIND: 1})
        return text, counts or None


__all__ = ["TIMEOUT_KIND", "RedactOptions", "RedactPattern", "Redactor"]
