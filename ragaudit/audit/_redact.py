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
_PHONE = r"(?<![\w+])(?:\+\d{1,3}[ .-]?)?(?:\(\d{1,5}\)[ .-]?)?\d{2,}(?:[ .-]\d{2,}){0,5}(?![\w])"
_DATE = regex.compile(r"\d{4}[-./]\d{1,2}[-./]\d{1,2}|\d{1,2}[-./]\d{1,2}[-./]\d{4}")

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
        rules: list[tuple[str, regex.Pattern[str], Callable[[str], bool] | None]] = []
        if options.defaults:
            rules += [
                ("email", regex.compile(_EMAIL), None),
                ("card", regex.compile(_CARD), _is_card),
                ("phone", regex.compile(_PHONE), _is_phone),
            ]
        for p in options.patterns:
            try:
                rules.append((p.name, regex.compile(p.pattern), None))
            except regex.error as exc:
                raise ConfigError(f"audit.redact.patterns '{p.name}': {exc}") from None
        self._rules = rules
        self._timeout = options.timeout_s
        self.counts: Counter[str] = Counter()
        self._cache: OrderedDict[str, tuple[str, Counter[str]]] = OrderedDict()

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
        self.counts.update(hit[1])
        return hit[0]

    def _redact(self, text: str) -> tuple[str, Counter[str]]:
        counts: Counter[str] = Counter()
        deadline = time.monotonic() + self._timeout
        try:
            for kind, pattern, keep in self._rules:

                def replace(
                    m: regex.Match[str],
                    kind: str = kind,
                    keep: Callable[[str], bool] | None = keep,
                ) -> str:
                    if keep is not None and not keep(m.group()):
                        return m.group()
                    counts[kind] += 1
                    return f"[{kind}]"

                left = max(deadline - time.monotonic(), 1e-3)
                text = pattern.sub(replace, text, timeout=left)
        except TimeoutError:
            return f"[{TIMEOUT_KIND}]", Counter({TIMEOUT_KIND: 1})
        return text, counts


__all__ = ["TIMEOUT_KIND", "RedactOptions", "RedactPattern", "Redactor"]
