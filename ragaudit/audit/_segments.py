r"""The segment names the audit reserves, and how a user's segment value is kept apart from them.

A segment is whatever ``audit.segment`` finds in a request, so a service may well name one
``(all)`` or ``(none)``. The audit's own names all start with ``(``: :data:`ALL`, the row over
every segment, and :data:`NO_SEGMENT`, the requests the expression finds nothing in. A user's
value that starts with ``(`` or with the escape ``\`` is written with one more ``\`` in
front (:func:`segment_name`), so no user value can equal a reserved name and two different
values never share a name.
"""

from __future__ import annotations

ALL = "(all)"
"""The segment name of the figures over every segment."""
NO_SEGMENT = "(none)"
"""The segment of a request the ``audit.segment`` expression finds nothing in."""
ESCAPE = "\\"


def segment_name(value: str) -> str:
    """A user's segment value as the audit names it: escaped away from the reserved names."""
    return ESCAPE + value if value.startswith(("(", ESCAPE)) else value


def segment_value(name: str) -> str | None:
    """The user's value a segment name stands for (None: a reserved name)."""
    if name.startswith(ESCAPE):
        return name[len(ESCAPE) :]
    return None if name.startswith("(") else name


__all__ = ["ALL", "ESCAPE", "NO_SEGMENT", "segment_name", "segment_value"]
