"""What of a run folder a run's page depends on, split in two: people's labels, and the rest.

A label rewrites the labels store and nothing else; ``compare`` drops ``compare.json`` into
run B. Keyed on the whole folder's signature, either rebuilt the whole report (its charts and
drill-down: seconds). Split, the report without people (:func:`ragaudit.reporting.build_base`)
and its rendered frame are kept per *rest* signature, and what people's labels give
(:func:`ragaudit.reporting.people_section`) per (rest, labels) signature: a label recomputes
only the latter and re-renders only its parts of the page.

Kept in the viewer's memory rather than in a file in the run folder: a file written there on a
page view would change the folder's signature (and the runs list's) at every view, and a
cache read back from a folder that came from elsewhere would be one more input to distrust.
The price is one full build per run when the server starts.
"""

from __future__ import annotations

from ragaudit import labels

# Written into a run folder but never read by its report: outputs of other commands, and the
# lock and temporary files of atomic writes (hidden names).
_NOT_READ = frozenset({"compare.json", "compare.html", "report.html", "report.xlsx"})
# The labels store and its sample: a store kept as one file, or as a folder of parts.
_LABELS_PREFIX = labels.FILE.split(".")[0]

Entries = tuple[tuple[str, int, int], ...]


def split(entries: Entries) -> tuple[Entries, Entries]:
    """A folder's entries (name, mtime_ns, size) as (the rest's, the labels store's).

    The folder's own mtime is left out of both: every write renames a file into place, so the
    entry that changed says as much, and a file the page never reads says nothing.
    """
    rest = []
    labelled = []
    for entry in entries:
        name = entry[0]
        if name.startswith(_LABELS_PREFIX):
            labelled.append(entry)
        elif not name.startswith(".") and name not in _NOT_READ:
            rest.append(entry)
    return tuple(rest), tuple(labelled)


__all__ = ["Entries", "split"]
