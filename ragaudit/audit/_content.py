"""The content that was served: texts fetched by id, and documents whose text changed since.

A log that names only document ids leaves the texts to the backend the service searched: they
are fetched by id (``FetchingBackend.fetch_texts``). A log that also carries a content hash
tells whether the text fetched today is the one served: when it hashes differently the
document changed, and grading its new text would judge something the user never saw, so it is
flagged ``changed`` and keeps no text.
"""

from __future__ import annotations

import hashlib
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import polars as pl

from ragaudit.audit._redact import RedactOptions, Redactor

Fetch = Callable[[Sequence[str]], Awaitable[dict[str, str]]]
"""An async function: ids → the current text of those the backend holds."""
_CHUNK = 500  # ids per fetch: one engine request or one SQL ``IN`` list

DOC_RESOLVED = pl.Struct(
    {
        "rank": pl.Int32,
        "id": pl.String,
        "text": pl.String,
        "content_hash": pl.String,
        "score": pl.Float64,
        # True: the text hashes differently now (not graded); False: it is the one served;
        # null: nothing to compare (no hash logged, or the text came with the log).
        "changed": pl.Boolean,
    }
)


def content_digest(text: str, algorithm: str = "sha256") -> str:
    """The hex digest of ``text`` (UTF-8) as a service logs a served text's content hash."""
    return hashlib.new(algorithm, text.encode("utf-8")).hexdigest()


def _same(logged: str, text: str, algorithm: str) -> bool:
    # "sha256:ab12…" and "AB12…" both name the same digest.
    digest = logged.split(":", 1)[1] if ":" in logged else logged
    return digest.strip().lower() == content_digest(text, algorithm)


async def resolve_texts(
    requests: pl.DataFrame,
    fetch: Fetch,
    *,
    redact: RedactOptions | Redactor | None = None,
    hash_algorithm: str = "sha256",
) -> pl.DataFrame:
    """``requests`` with each document's missing text fetched by id, and changed ones flagged.

    Args:
        requests: Rows of ``requests.parquet`` (only its ``docs`` column is read and replaced).
        fetch: The backend's by-id fetch (``backend.fetch_texts``).
        redact: The audit's redaction (fetched texts are redacted before they are returned);
            None applies the defaults, never nothing. A :class:`Redactor` keeps its counts.
        hash_algorithm: How the service hashed served texts (``audit.source.hash_algorithm``).

    Returns:
        The same rows; ``docs`` items gain ``changed`` (see :data:`DOC_RESOLVED`). A document
        the backend no longer holds keeps a null text and a null ``changed``.
    """
    red = redact if isinstance(redact, Redactor) else Redactor(redact or RedactOptions())
    docs: list[list[dict[str, Any]] | None] = requests["docs"].to_list()
    wanted = sorted({d["id"] for ds in docs for d in ds or () if d["text"] is None})
    fetched: dict[str, str] = {}
    for i in range(0, len(wanted), _CHUNK):
        fetched.update(await fetch(wanted[i : i + _CHUNK]))
    out = []
    for ds in docs:
        row = []
        for d in ds or ():
            text, changed = d["text"], None
            if text is None and d["id"] in fetched:
                current = fetched[d["id"]]
                if d.get("content_hash"):
                    changed = not _same(d["content_hash"], current, hash_algorithm)
                text = None if changed else red(current)
            row.append({**d, "text": text, "changed": changed})
        out.append(row)
    return requests.with_columns(pl.Series("docs", out, dtype=pl.List(DOC_RESOLVED)))


def changed_count(requests: pl.DataFrame) -> int:
    """Served documents flagged ``changed`` in a frame ``resolve_texts`` returned."""
    flags = requests.select(pl.col("docs").explode().struct.field("changed")).to_series()
    return int(flags.fill_null(False).sum())


__all__ = ["DOC_RESOLVED", "Fetch", "changed_count", "content_digest", "resolve_texts"]
