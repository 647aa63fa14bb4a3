"""Keep secrets out of logs, tables, reports and error messages.

A secret is any value registered here plus the value of every environment variable whose
name looks like a credential. ``redact`` replaces them with ``***`` wherever text leaves the
process; the log filter applies it to every record.
"""

from __future__ import annotations

import base64
import logging
import os
import re
from urllib.parse import parse_qsl, urlsplit

_SECRET_NAME = re.compile(r"(KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|AUTH)", re.IGNORECASE)
# A variable that names a place holds a path, not a credential, whatever its name contains:
# ``TIKTOKEN_CACHE_DIR`` (set by ragaudit itself) would otherwise turn a site-packages path into
# ``***`` in every traceback, and have every table scanned for it on its way to disk.
_LOCATION_NAME = re.compile(r"_(DIR|PATH|HOME|FILE)$", re.IGNORECASE)
_registered: set[str] = set()
# Short values ("1", "true") would redact half of every message; real credentials are longer.
_MIN_LEN = 6


def _b64(text: str) -> str:
    return base64.b64encode(text.encode("utf-8")).decode("ascii")


def register(value: str | None) -> None:
    """Treat ``value`` as a secret from now on, and its base64 form too.

    A server that echoes a header it was sent (``Authorization: ApiKey …``) sends back the
    base64 a client may have made of the value.
    """
    if value and len(value) >= _MIN_LEN:
        _registered.add(value)
        _registered.add(_b64(value))


def register_basic_auth(username: str | None, password: str | None) -> None:
    """Register a basic-auth password and the base64 ``user:password`` of its header.

    A search server or proxy that echoes the ``Authorization`` header it refused would
    otherwise put the credential, merely encoded, on the console and into the run folder.
    """
    register(password)
    if password:
        _registered.add(_b64(f"{username or ''}:{password}"))


def known_secrets() -> set[str]:
    """Return the registered secrets plus credential-like environment values."""
    found = set(_registered)
    for name, value in os.environ.items():
        if (
            _SECRET_NAME.search(name)
            and not _LOCATION_NAME.search(name)
            and value
            and len(value) >= _MIN_LEN
        ):
            found.update((value, _b64(value)))
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


def resolve_secret(env: str | None = None, block: str | None = None, *, field: str) -> str | None:
    """Read a credential by reference and register it, so it is redacted from then on.

    Configuration only ever holds the *name* of an environment variable or of a Prefect
    ``Secret`` block; the value lives in memory only, for as long as a client needs it.

    Args:
        env: Name of the environment variable holding the value.
        block: Name of the Prefect Secret block holding the value.
        field: Dotted config field the reference came from (named in errors).

    Returns:
        The value, or None when neither reference is given.

    Raises:
        ConfigError: The variable is unset or empty, or the block cannot be loaded; the
            message names the field and the reference, never a value.
    """
    from ragaudit.errors import ConfigError

    if env:
        value = os.environ.get(env)
        if not value:
            raise ConfigError(f"{field}: environment variable {env} is not set")
        register(value)
        return value
    if block:
        try:
            from prefect.blocks.system import Secret

            # _sync: the sync path also works inside a running event loop (collect is async).
            value = Secret.load(block, _sync=True).get()  # type: ignore[call-arg,union-attr]
        except Exception as exc:
            raise ConfigError(
                f"{field}: cannot load Prefect Secret block '{block}' ({type(exc).__name__})"
            ) from None
        if not isinstance(value, str) or not value:
            raise ConfigError(f"{field}: Prefect Secret block '{block}' holds no text value")
        register(value)
        return value
    return None


def url_password(url: str) -> str | None:
    """The password a Redis URL carries (in its user part or as ``?password=``), if any."""
    parts = urlsplit(url)
    if parts.password:
        return parts.password
    for key, value in parse_qsl(parts.query):
        if key.lower() == "password" and value:
            return value
    return None


__all__ = [
    "RedactingFilter",
    "install_log_filter",
    "known_secrets",
    "redact",
    "register",
    "register_basic_auth",
    "resolve_secret",
    "url_password",
]
