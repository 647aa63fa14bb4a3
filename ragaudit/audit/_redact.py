r"""Personal data out of the audit's texts before anything is written or sent to a judge.

A team's own patterns (an account number, a ticket id) run first, on the text as logged; then
the defaults replace e-mail addresses (internationalised ones too), IBANs (by their mod-97
check, ``python-stdnum``), payment-card numbers and phone numbers. A phone is what Google's
libphonenumber (``phonenumbers``) finds valid and grouped as its country writes it, in the
national formats of ``phone_regions`` or with any +country code: a timestamp, a year range, a
coordinate or an order number is not one, whatever its digits. A card is a Luhn-valid run of a
length and first digits that some card scheme issues, in the groupings cards are printed in:
about one short number in ten passes the Luhn check by chance.

Digits are bounded by digit look-arounds, not ``\w``: CJK characters are ``\w``, and a
Chinese user writes ``手机号13912345678`` with no space. The team's patterns run on the
``regex`` engine with a time budget per text (``re`` cannot be interrupted mid-match, and a
catastrophic user pattern would otherwise hold a day's read for as long as it backtracks); the
defaults are linear, and the phone library is given only short windows of digits, the budget
checked around each. A text whose budget runs out is replaced whole, so a slow pattern never
lets its text through unredacted.
"""

from __future__ import annotations

import functools
import time
from collections import Counter
from collections.abc import Callable

import phonenumbers
import regex
from stdnum import iban as stdnum_iban

from ragaudit._audit_config import DEFAULT_PHONE_REGIONS, RedactOptions, RedactPattern
from ragaudit.errors import ConfigError

# Scripts written without spaces between words: an address glued to them ("联系邮箱a@b.de")
# starts where the script changes, and such a script's address is one of its own script.
_CJK = r"\p{Han}\p{Hiragana}\p{Katakana}\p{Hangul}"
_LOCAL = rf"[[\p{{L}}\p{{M}}\p{{N}}._%+-]--[{_CJK}]]"
_LABEL = rf"[[\p{{L}}\p{{M}}\p{{N}}-]--[{_CJK}]]{{1,63}}"
_TOP = rf"(?:[[\p{{L}}\p{{M}}]--[{_CJK}]]{{2,63}}|xn--[a-z0-9-]{{1,59}})"
# Each character is matched one way only (the look-behind starts a match at the start of its
# run, labels end at a dot), so the pattern is linear without the budget. The top-level domain
# has letters only: "lodash@4.17.21" is a package version, not an address.
_EMAIL = regex.compile(
    rf"(?V1)(?<!{_LOCAL}){_LOCAL}{{1,64}}@(?:{_LABEL}\.)+{_TOP}"
    rf"|(?<![{_CJK}\p{{N}}._-])[{_CJK}\p{{N}}._-]{{1,64}}@(?:[{_CJK}\p{{N}}-]{{1,63}}\.)+[{_CJK}]{{1,63}}"
)
# Two capital letters, two check digits, then up to 30 letters and digits, printed in groups.
_IBAN = regex.compile(r"(?<![A-Z0-9])[A-Z]{2}\d\d(?: ?[A-Z0-9]){11,30}")
# A run of 13-19 digits, or groups split by one kind of separator starting with four digits.
_CARD = regex.compile(r"(?<!\d)(?:\d{13,19}|\d{4}([ -])\d{1,6}(?:\1\d{1,6}){1,3})(?!\d)")
# The card schemes' first digits by number length (ISO/IEC 7812 issuer identification: Visa 4,
# Mastercard 2 and 5, Amex 34/37, Diners 30/36/38/39, JCB 35, Discover and UnionPay 6, Maestro
# 5 and 6, Mir 22, RuPay 6 and 81/82). A Luhn-valid run of another length or start is an order
# number, a millisecond time or an id.
_CARD_STARTS: dict[int, tuple[str, ...]] = {
    13: ("4",),
    14: ("30", "36", "38", "39"),
    15: ("34", "37"),
    16: ("2", "3", "4", "5", "6", "81", "82"),
    17: ("5", "6"),
    18: ("35", "5", "6"),
    19: ("22", "35", "4", "5", "6"),
}
# Where a phone may be: seven or more digits with at most three separators between two of
# them, optionally opened by + or a bracket. The library looks only inside these runs.
_SEP = r"[ \u00a0\u3000().\-/\u2010\u2011\uff0d]"
_PHONE_RUN = regex.compile(rf"(?<!\d)[+\uff0b(]?\d(?:{_SEP}{{0,3}}\d){{6,}}")
_TIME_AFTER = regex.compile(r":\d\d")
_TOKEN = regex.compile(r"\S+")
_PIECE = regex.compile(r"[^/\u2012-\u2015\uff0d]+")  # a word's pieces between slashes and dashes
Group = tuple[int, int, str, bool]  # a piece of a word: start, end, its digits, opens with "+"
Span = tuple[int, int]
_YEAR, _MONTH, _DAY = r"(?:1[6-9]|20)\d\d", r"(?:0?[1-9]|1[0-2])", r"(?:0?[1-9]|[12]\d|3[01])"
_OCTET = r"(?:25[0-5]|2[0-4]\d|1?\d?\d)"
_NOT_PHONE = regex.compile(
    rf"{_YEAR}([-./]){_MONTH}\1{_DAY}|{_DAY}([-./]){_MONTH}\2{_YEAR}|{_MONTH}([-./]){_DAY}\3{_YEAR}"
    rf"|{_OCTET}(?:\.{_OCTET}){{3}}"
)
# The shortest national number; E.164's 15 digits after a three-digit international prefix.
_FEWEST_DIGITS, _MOST_DIGITS = 7, 18
_BARE_TYPES = (
    phonenumbers.PhoneNumberType.MOBILE,
    phonenumbers.PhoneNumberType.FIXED_LINE_OR_MOBILE,
)

"""Countries whose national phone formats are recognised unless ``phone_regions`` says other."""
TIMEOUT_KIND = "timeout"
"""The kind counted when a text's time budget ran out (the whole text was replaced)."""
_CACHE = 65_536  # distinct texts remembered: one document served a thousand times is done once


def _luhn(digits: str) -> bool:
    total = 0
    for i, c in enumerate(reversed(digits)):
        d = int(c)
        if i % 2:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return total % 10 == 0


def _is_card(groups: list[str]) -> bool:
    digits = "".join(groups)
    starts = _CARD_STARTS.get(len(digits))
    if starts is None or not digits.startswith(starts) or not _luhn(digits):
        return False
    # Printed cards group 4-4-4-4(-3), 4-6-5 or 4-6-4: four first, inner groups of four to six.
    return len(groups) == 1 or (len(groups[0]) == 4 and all(4 <= len(g) <= 6 for g in groups[1:-1]))


def _card(m: regex.Match[str], counts: Counter[str]) -> str:
    """The match with its card replaced: the longest run of its groups that is one, if any."""
    text, sep = m.group(), m.group(1)
    groups = text.split(sep) if sep else [text]
    for size in range(len(groups), 0, -1):
        for first in range(len(groups) - size + 1):
            if _is_card(groups[first : first + size]):
                counts["card"] += 1
                join = sep or ""
                return join.join([*groups[:first], "[card]", *groups[first + size :]])
    return text


def _iban(m: regex.Match[str], counts: Counter[str]) -> str:
    """The match with its IBAN replaced: the longest prefix that passes the check, if any."""
    text = m.group()
    for end in range(len(text), 14, -1):
        if text[end - 1] != " " and stdnum_iban.is_valid(text[:end]):
            counts["iban"] += 1
            return "[iban]" + text[end:]
    return text


class Redactor:
    """Applies :class:`RedactOptions` to texts and counts what it replaced, per kind."""

    def __init__(self, options: RedactOptions) -> None:
        """Compile the patterns once.

        Raises:
            ConfigError: a pattern does not compile (the options model checks it first).
        """
        patterns: list[tuple[str, regex.Pattern[str]]] = []
        for p in options.patterns:
            try:
                patterns.append((p.name, regex.compile(p.pattern)))
            except regex.error as exc:
                raise ConfigError(f"audit.redact.patterns '{p.name}': {exc}") from None
        self._patterns = patterns
        self._defaults = options.defaults
        self._plans = [_plan(region) for region in options.phone_regions]
        self._timeout = options.timeout_s
        self.counts: Counter[str] = Counter()
        self._cached = functools.lru_cache(maxsize=_CACHE)(self._redact)

    def __call__(self, text: str | None) -> str | None:
        """``text`` with every match replaced by ``[<kind>]`` (None stays None)."""
        if not text or not (self._patterns or self._defaults):
            return text
        out, counts = self._cached(text)
        if counts:
            self.counts.update(counts)
        return out

    def _redact(self, text: str) -> tuple[str, Counter[str] | None]:
        counts: Counter[str] = Counter()
        deadline = time.monotonic() + self._timeout

        def left() -> float:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError
            return remaining

        def placeholder(kind: str) -> Callable[[regex.Match[str]], str]:
            def replace(_: regex.Match[str]) -> str:
                counts[kind] += 1
                return f"[{kind}]"

            return replace

        try:
            for name, pattern in self._patterns:
                text = pattern.sub(placeholder(name), text, timeout=left())
            if self._defaults:
                text = self._apply_defaults(text, counts, placeholder("email"), left)
        except TimeoutError:
            return f"[{TIMEOUT_KIND}]", Counter({TIMEOUT_KIND: 1})
        return text, counts or None

    def _apply_defaults(
        self,
        text: str,
        counts: Counter[str],
        email: Callable[[regex.Match[str]], str],
        left: Callable[[], float],
    ) -> str:
        """``text`` with the defaults' addresses, IBANs, cards and phones replaced.

        An address goes first (its digits are no phone), then the IBAN and the card whose
        digit groups a phone could otherwise take a part of. The defaults are linear (each
        character is matched one way only), so they run without the engine's timeout, which
        costs more than the scan of a short text; the budget is checked between them and
        around each call to the phone library. Each is tried only where it can match: an
        address needs an "@", a card or a phone seven digits close together.
        """
        if "@" in text and _EMAIL.search(text) is not None:
            text = _EMAIL.sub(email, text)
            left()
        if _IBAN.search(text) is not None:
            text = _IBAN.sub(lambda m: _iban(m, counts), text)
            left()
        if _PHONE_RUN.search(text) is None:
            return text
        text = _CARD.sub(lambda m: _card(m, counts), text)
        left()
        return self._phones(text, counts, left)

    def _phones(self, text: str, counts: Counter[str], left: Callable[[], float]) -> str:
        """``text`` with the phone numbers that the library finds in its digit runs replaced."""
        spans: list[Span] = []
        for run in _PHONE_RUN.finditer(text):
            for part in _parts(text, run.start(), run.end()):
                spans += self._numbers_in(text, part, left)
        for start, end in reversed(spans):
            text = f"{text[:start]}[phone]{text[end:]}"
        if spans:
            counts["phone"] += len(spans)
        return text

    def _numbers_in(self, text: str, groups: list[Group], left: Callable[[], float]) -> list[Span]:
        """The numbers among a part's digit groups, found window by window.

        A window is a span of whole groups with as many digits as one number can have, tried
        longest first from each group on: two numbers side by side ("+1 202-456-1414
        13812345678", "010-62751234/13912345678") are found one after the other, and a number
        before or after a count or a year is found alone. A window goes to the library only
        when its digits could be a number of a region at all (:meth:`_possible`).
        """
        found: list[Span] = []
        i = 0
        while i < len(groups):
            spans: list[Span] = []
            digits = ""
            ends = []
            for j in range(i, len(groups)):
                digits += groups[j][2]
                if len(digits) > _MOST_DIGITS:
                    break
                ends.append((j, digits))
            for j, digits in reversed(ends):
                if len(digits) < _FEWEST_DIGITS:
                    break
                regions = self._possible(groups[i][3], digits)
                if regions:
                    spans = self._match(text, groups[i][0], groups[j][1], regions, left)
                    if spans:
                        break
            if not spans:
                i += 1
                continue
            found += spans
            while i < len(groups) and groups[i][0] < spans[-1][1]:
                i += 1
        return found

    def _possible(self, international: bool, digits: str) -> tuple[str, ...]:
        """The regions in which ``digits`` could be a number, as the library would parse them.

        A number with its +country code is one whatever the region ("ZZ": none is needed);
        otherwise see :func:`_plan`. This costs a regular expression where the library's
        matcher costs a parse and a formatting per candidate, and ordinary text is mostly
        windows that no region can hold.
        """
        if international:
            return ("ZZ",)
        return tuple(
            region
            for region, national, abroad in self._plans
            if national.fullmatch(digits) or abroad.match(digits)
        )

    def _match(
        self, text: str, start: int, end: int, regions: tuple[str, ...], left: Callable[[], float]
    ) -> list[Span]:
        """The numbers the library finds in ``text[start:end]``, read in ``regions``."""
        window = text[start:end]
        found: list[Span] = []
        for region in regions:
            matcher = phonenumbers.PhoneNumberMatcher(
                window, region, leniency=phonenumbers.Leniency.STRICT_GROUPING
            )
            for m in matcher:
                # A number followed by ":58" is a date and hour ("2021.12.29 14:58").
                if _TIME_AFTER.match(text, start + m.end) is None and _written_so(m, region):
                    # "(131 2345 4185)": the library takes the opening bracket, not the closing.
                    opened = m.raw_string.startswith("(") and ")" not in m.raw_string
                    found.append((start + m.start + opened, start + m.end))
            left()
            if found and found[0] == (start, end):
                break
        return _union(found)


def _plan(region: str) -> tuple[str, regex.Pattern[str], regex.Pattern[str]]:
    """A region's test of a window's digits: (region, written at home, dialled abroad).

    At home a number is its trunk prefix and a national number of the region's general
    pattern, or a mobile number alone (what :func:`_written_so` keeps); abroad it is anything
    after the region's international prefix.
    """
    meta = phonenumbers.PhoneMetadata.metadata_for_region(region)
    if meta is None or meta.general_desc is None:  # the library knows every supported region
        raise ConfigError(f"audit.redact.phone_regions: no metadata for '{region}'")
    general = meta.general_desc.national_number_pattern or r"\d+"
    mobile = meta.mobile.national_number_pattern if meta.mobile else None
    home = [f"{meta.national_prefix}(?:{general})"] if meta.national_prefix else [general]
    if mobile:
        home.append(mobile)
    national = regex.compile("|".join(f"(?:{p})" for p in home))
    abroad = regex.compile(f"(?:{meta.international_prefix or '(?!)'})[1-9]")
    return region, national, abroad


def _parts(text: str, start: int, end: int) -> list[list[Group]]:
    """A digit run's pieces (:data:`Group`), split where no number goes across.

    A window of a number starts and ends where the writer put a space, a slash or a dash
    between words ("010-62751234/13912345678", "12345 – 13912345678"), never at a hyphen or
    a dot inside a word: "415-6441708-9362065" is an order number, not a US phone and a rest.
    Dates and IP addresses are nobody's number (the library rejects them too, at the cost of a
    parse per region each); a "+" starts a new number, and so does a lone digit after another:
    a number has one lone digit at most, its country or trunk code ("+81 3 1234 5678",
    "1 800 …"), while a scale or a list counts "0 1 2 3 4 5".
    """
    parts: list[list[Group]] = [[]]
    lone = False
    for token in _TOKEN.finditer(text, start, end):
        word = token.group().strip("()")
        if _NOT_PHONE.fullmatch(word):
            parts.append([])
            lone = False
            continue
        digits = sum(c.isdecimal() for c in word)
        if parts[-1] and (word.startswith(("+", "\uff0b")) or (digits == 1 and lone)):
            parts.append([])
        lone = digits == 1
        for piece in _PIECE.finditer(text, token.start(), token.end()):
            number = "".join(c for c in piece.group() if c.isdecimal())
            if number:
                plus = piece.group().lstrip("(").startswith(("+", "\uff0b"))
                parts[-1].append((piece.start(), piece.end(), _ascii(number), plus))
    return [p for p in parts if sum(len(g[2]) for g in p) >= _FEWEST_DIGITS]


def _ascii(digits: str) -> str:
    return digits if digits.isascii() else "".join(str(int(c)) for c in digits)


def _written_so(m: phonenumbers.PhoneNumberMatch, region: str) -> bool:
    """Whether a number found in ``region``'s national format is written as people write it.

    The library takes a national number without its trunk prefix ("0" in China, Germany, the
    UK, India, Japan) as valid, so a bare epoch time reads as an Indian or Chinese landline and
    a millisecond time as a German pager. Landlines are written with the prefix; only mobile
    numbers (a Chinese 139…, an Indian 98…, any number of the US, which has no separate
    mobile range) go without it.
    """
    raw = m.raw_string.lstrip("(")
    meta = phonenumbers.PhoneMetadata.metadata_for_region(region)
    if raw.startswith(("+", "\uff0b")) or meta is None:
        return True
    if m.number.country_code != meta.country_code:  # dialled abroad: "00 44 …", "011 44 …"
        return True
    prefix = meta.national_prefix
    if prefix and phonenumbers.normalize_digits_only(raw).startswith(prefix):
        return True
    return phonenumbers.number_type(m.number) in _BARE_TYPES


def _union(spans: list[Span]) -> list[Span]:
    """Overlapping spans as one (two countries read the same number, or parts of it)."""
    out: list[Span] = []
    for start, end in sorted(spans):
        if out and start < out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], end))
        else:
            out.append((start, end))
    return out


__all__ = [
    "DEFAULT_PHONE_REGIONS",
    "TIMEOUT_KIND",
    "RedactOptions",
    "RedactPattern",
    "Redactor",
]
