"""The errors ragaudit raises on purpose: each carries one message meant for the user.

Every error says whether running the same work again may succeed (``retryable``): a bad input
or config gives the same result however often it runs, so the flow retries a stage only on an
error that says it is transient (or on an unexpected exception, which may be infrastructure).
"""

from __future__ import annotations


class RagauditError(Exception):
    """Base class: the message is complete and safe to print without a traceback.

    Attributes:
        retryable: Whether another attempt at the same work may succeed. False for the errors
            the user must fix (input, config, a missing upstream table).
    """

    retryable: bool = False


class InputError(RagauditError):
    """A question set, corpus or other input file is malformed."""


class NoTraffic(InputError):
    """A day of traffic has nothing to read (no log file, or files without a request).

    Not a failure of the day: its logs may still arrive, so the day stays to be audited.
    """


class ConfigError(RagauditError):
    """The configuration is invalid; the message names the field."""


class StageError(RagauditError):
    """A stage cannot run, e.g. its upstream table is missing."""


class TransientError(RagauditError):
    """Infrastructure trouble that may clear by itself (a service down for a moment)."""

    retryable = True


def is_retryable(exc: BaseException | None) -> bool:
    """Whether a stage that raised ``exc`` is worth running again.

    Our own errors say so themselves (``retryable``); anything else is unexpected and may come
    from the infrastructure (a dropped connection, a full disk freed meanwhile), so it is
    retried once.
    """
    if exc is None:
        return True
    return bool(getattr(exc, "retryable", True))


def clip(value: object, limit: int = 80) -> str:
    """``value`` as text for an error message, cut to ``limit`` characters.

    A message never echoes a whole parameter: a value may be megabytes long (a 50 MB string
    in a config) or hold control characters that garble a terminal.
    """
    text = value if isinstance(value, str) else repr(value)
    if not text.isprintable():
        text = text.encode("unicode_escape").decode("ascii")
    return text if len(text) <= limit else f"{text[:limit]}… ({len(text):,} characters)"


def os_error_message(exc: OSError, path: object = None) -> str:
    """One line for a failed file operation: the path, the errno's name and what it means.

    A full disk or a read-only folder is the operator's to fix; the line says where and what,
    with no traceback.
    """
    import errno as errno_names

    where = exc.filename if exc.filename is not None else path
    code = errno_names.errorcode.get(exc.errno or 0, str(exc.errno))
    what = exc.strerror or str(exc)
    hint = {
        errno_names.ENOSPC: "; free space there, then re-run to resume",
        errno_names.EDQUOT: "; free space there, then re-run to resume",
        errno_names.EROFS: "; the filesystem is read-only: point the run at a writable folder",
        errno_names.EACCES: "; no permission to write there",
    }.get(exc.errno or 0, "")
    return f"{clip(str(where), 300) if where is not None else 'a file'}: {code} ({what}){hint}"


__all__ = [
    "os_error_message",
    "clip",
    "ConfigError",
    "InputError",
    "NoTraffic",
    "RagauditError",
    "StageError",
    "TransientError",
    "is_retryable",
]
