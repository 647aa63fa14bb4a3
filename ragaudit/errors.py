"""The errors ragaudit raises on purpose: each carries one message meant for the user."""

from __future__ import annotations


class RagauditError(Exception):
    """Base class: the message is complete and safe to print without a traceback."""


class InputError(RagauditError):
    """A question set, corpus or other input file is malformed."""


class ConfigError(RagauditError):
    """The configuration is invalid; the message names the field."""


class StageError(RagauditError):
    """A stage cannot run, e.g. its upstream table is missing."""


__all__ = ["ConfigError", "InputError", "RagauditError", "StageError"]
