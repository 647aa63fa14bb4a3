"""Keep secrets out of logs, tables, reports and error messages.

A secret is any value registered here plus the value of every environment variable whose
name looks like a credential. ``redact`` replaces them with ``***`` wherever text leaves the
process; the log filter applies it to every record.
"""

from __future__ import annotations

import logging
import os
import re

_SECRET_NAME = re.compile(r"(KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|AUTH)", re.IGNORECASE)
_registered: set[str] = set()
# Short values ("1", "true") would redact half of every message; real credentials are longer.
_MIN_LEN = 6


def register(value: str | None) -> None:
    """Treat ``value`` as a secret from now on."""
    if value and len(value) >= _MIN_LEN:
        _registered.add(value)


def known_secrets() -> set[str]:
    """Return the registered secrets plus credential-like environment values."""
    found = set(_registered)
    for name, value in os.environ.items():
        if _SECRET_NAME.search(name) and value and len(value) >= _MIN_LEN:
            found.add(value)
    return found


def redact(text: str) -> str:
    """Replace every known secret in ``text`` with ``***``."""
    if not text:
        return text
    for secret in sorted(known_secrets(), key=len, reverse=True):
        if secret in text:
            text = text.replace(secret, "***")
    return text


class RedactingFilter(logging.Filter):
    """A logging filter that redacts secrets from the rendered message."""

    def filter(self, record: logging.LogRecord) -> bool:  # noqa: D102
        try:
            message = record.getMessage()
        except Exception:  # a record whose args do not format is passed on unchanged
            return True
        cleaned = redact(message)
        if cleaned != message:
            record.msg, record.args = cleaned, None
        return True


def install_log_filter() -> None:
    """Attach the redacting filter to the root logger's handlers and to the root logger."""
    flt = RedactingFilter()
    root = logging.getLogger()
    root.addFilter(flt)
    for handler in root.handlers:
        handler.addFilter(flt)


__all__ = ["RedactingFilter", "install_log_filter", "known_secrets", "redact", "register"]
