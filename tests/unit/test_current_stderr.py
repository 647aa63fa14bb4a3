"""A library's log handler built while ``sys.stderr`` was replaced never writes to a dead stream."""

from __future__ import annotations

import io
import logging
import sys

from ragaudit._env import log_to_current_stderr


def test_a_handler_built_on_a_stream_since_closed_writes_to_the_current_one() -> None:
    replaced = io.StringIO()
    real = sys.stderr
    sys.stderr = replaced
    try:
        handler = logging.StreamHandler()  # what a library does at import: takes sys.stderr
    finally:
        sys.stderr = real
    replaced.close()
    log_to_current_stderr(handler)
    now = io.StringIO()
    sys.stderr = now
    try:
        handler.emit(logging.LogRecord("lib", logging.ERROR, __file__, 1, "said", None, None))
        handler.close()  # closes nothing of the process's
    finally:
        sys.stderr = real
    assert "said" in now.getvalue() and not now.closed
