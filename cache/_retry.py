"""Which provider failures are worth another try, and how long the provider asked us to wait."""

from __future__ import annotations

import asyncio
import contextlib
import email.utils
import time
from typing import Any

import litellm

from ragaudit.errors import ConfigError

# Failures worth another try: the provider is busy, slow or briefly broken. Anything else
# (bad request, auth, context overflow) fails at once: retrying cannot change the answer.
TRANSIENT_ERRORS: tuple[type[BaseException], ...] = (
    litellm.RateLimitError,
    litellm.APIConnectionError,
    litellm.Timeout,
    litellm.ServiceUnavailableError,
    litellm.InternalServerError,
    asyncio.TimeoutError,
)
MAX_RETRY_AFTER_S = 120.0
# The provider's answers to a request with a rejected key (401 unauthorised, 403 forbidden).
REJECTED = (litellm.AuthenticationError, litellm.PermissionDeniedError)


class KeyRejected(ConfigError):
    """The provider rejected the model's API key: every further request would be refused too."""


def retry_after(exc: BaseException) -> float | None:
    """Seconds the provider asked us to wait, from the exception's response headers."""
    headers: Any = getattr(exc, "litellm_response_headers", None)
    response = getattr(exc, "response", None)
    if headers is None and response is not None:
        headers = getattr(response, "headers", None)
    if not headers:
        return None
    value = headers.get("retry-after-ms")
    if value is not None:
        with contextlib.suppress(ValueError):
            return float(value) / 1000.0
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return float(value)
    except ValueError:
        pass
    try:
        parsed = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        # A header we cannot read must not turn a retryable rate limit into a crash.
        return None
    return max(0.0, parsed.timestamp() - time.time()) if parsed else None


__all__ = ["MAX_RETRY_AFTER_S", "REJECTED", "TRANSIENT_ERRORS", "KeyRejected", "retry_after"]
