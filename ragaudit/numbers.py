"""Numbers as every output prints them: fixed decimals, no "-0.00".

A score that is zero up to floating-point noise (a cosine of -1e-17) prints as zero in the
console, the report, ``runs`` and ``compare`` alike, never as "-0.000".
"""

from __future__ import annotations

import math

__all__ = ["fixed"]


def fixed(value: float | None, digits: int = 3, *, sign: bool = False, missing: str = "-") -> str:
    """``value`` with ``digits`` decimals (a leading ``+`` when ``sign``); ``missing`` for none.

    Args:
        value: The number; ``None``, NaN and infinities print as ``missing``.
        digits: Decimals shown.
        sign: Print ``+`` before a positive value (a difference); zero is ``0.000``, unsigned.
        missing: The text for a value that is not a finite number.

    Returns:
        The text, never a negative zero.
    """
    if value is None or not math.isfinite(value):
        return missing
    text = f"{value:+.{digits}f}" if sign else f"{value:.{digits}f}"
    if float(text) == 0:
        # -0.0004 rounds to "-0.000": a zero with a sign it does not have.
        return f"{0:.{digits}f}"
    return text
