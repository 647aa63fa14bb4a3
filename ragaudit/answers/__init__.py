"""Answer sources: where the system-under-test's answers come from, registered by name.

``column`` (already in the question set), ``entrypoint`` (a Python function) and ``http``
(the live system). :func:`answer_one` wraps any of them in bounded retries with backoff and
a per-attempt timeout, and turns every outcome into an ``answers`` row: ``ok``, ``skipped``
or ``failed`` with the reason.
"""

from ragaudit.answers import _column, _entrypoint, _http  # noqa: F401  (register by name)
from ragaudit.answers._base import (
    AnswerError,
    AnswerSource,
    answer_failure_warnings,
    answer_one,
    make_source,
    register_source,
    source_names,
)
from ragaudit.answers._column import ColumnSource
from ragaudit.answers._entrypoint import resolve_entrypoint
from ragaudit.answers._http import json_path

__all__ = [
    "AnswerError",
    "AnswerSource",
    "ColumnSource",
    "answer_failure_warnings",
    "answer_one",
    "json_path",
    "make_source",
    "register_source",
    "resolve_entrypoint",
    "source_names",
]
