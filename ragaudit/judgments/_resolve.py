"""Which question and which document text an imported judgment is about.

The store keys a judgment by the text of its question and of its document (the judge sees
texts, not ids), so an imported row is only reusable (a tune's pool, a calibration) once both
are known:

- the query: its text as the source wrote it, matched to a question of the question set by
  text (exactly, then case and spacing aside) or by id (TREC's and RankLib's qids, a
  ``_rank_eval`` request's id, a Relevance Studio scenario); a query the set lacks keeps its own
  text, and a query known by id alone stays unresolved;
- the document: by its id in the corpus or the configured backend (``fetch_texts``), by
  ``_index`` and ``_id`` (a row naming another index than the backend's is not resolved), or by
  the text the source carries, found in the corpus.

A row left unresolved is kept all the same, keyed by its reference (``judging.ref_key``): it
counts in the stats and exports back, it just cannot stand for a judge's grade.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Protocol

import polars as pl

from ragaudit.dataset import Question
from ragaudit.lang import detect_language

Resolve = Literal["id", "index-id", "text"]
"""How a document is found: by its id, by ``_index`` and ``_id``, or by its text."""

_SPACE = re.compile(r"\s+")


def normalised(text: str) -> str:
    """A text as matched leniently: case folded, runs of whitespace one space, ends trimmed."""
    return _SPACE.sub(" ", text).strip().casefold()


class DocumentTexts(Protocol):
    """Where documents' texts are found by id (a corpus file or the configured backend)."""

    index: str | None
    """The index the ids live in (``_index`` a row must name to be resolved by index and id)."""

    async def texts(self, ids: Sequence[str]) -> dict[str, str]:
        """The text of each of ``ids`` found; the others left out."""
        ...


class CorpusTexts:
    """A corpus file's documents by id (and by text, for resolution by text)."""

    def __init__(self, path: Path | str, index: str | None = None) -> None:
        from ragaudit.search import read_corpus

        self.index = index
        self.by_id = {d.id: d.text for d in read_corpus(path)}
        self._by_text: dict[str, str] | None = None

    async def texts(self, ids: Sequence[str]) -> dict[str, str]:
        """The corpus text of each of ``ids`` it holds."""
        return {i: self.by_id[i] for i in ids if i in self.by_id}

    def ids_of(self, texts: Sequence[str]) -> dict[str, str]:
        """Text → the id of the corpus document with that text (case and spacing aside)."""
        if self._by_text is None:
            self._by_text = {}
            for doc_id, text in self.by_id.items():
                self._by_text.setdefault(normalised(text), doc_id)
        found: dict[str, str] = {}
        for text in texts:
            hit = self._by_text.get(normalised(text))
            if hit is not None:
                found[text] = hit
        return found


class BackendTexts:
    """The configured search backend's documents by id (``SearchBackend.fetch_texts``)."""

    def __init__(self, backend: object) -> None:
        self.backend = backend
        self.index = getattr(backend, "index_name", None)

    async def texts(self, ids: Sequence[str]) -> dict[str, str]:
        """The backend's text of each of ``ids`` it holds."""
        fetched: dict[str, str] = await self.backend.fetch_texts(list(ids))  # type: ignore[attr-defined]
        return fetched


@dataclass(frozen=True)
class Resolved:
    """What resolution found, one entry per row of the frame, in its order."""

    question: list[str | None]
    """The question's text as the store hashes it (the question set's, else the query's)."""
    language: list[str]
    question_id: list[str | None]
    """The question set's id of the question, where one matched."""
    text: list[str | None]
    """The document's text, where it was found."""
    corpus_id: list[str | None]
    """The corpus id a document found by its text has (None where it was found by id)."""
    why: list[str | None]
    """Why a row's document (or query) was not resolved (None: it was)."""


def match_questions(
    frame: pl.DataFrame, questions: Sequence[Question] | None
) -> tuple[list[Question | None], list[str | None]]:
    """Each row's question of the set (by text, leniently, then by id) and the query text."""
    queries = frame["query"].to_list()
    qids = frame["query_id"].to_list()
    if not questions:
        return [None] * frame.height, queries
    exact = {q.question: q for q in questions}
    loose: dict[str, Question] = {}
    for q in questions:
        loose.setdefault(normalised(q.question), q)
    by_id = {q.question_id: q for q in questions}
    found: dict[tuple[str | None, str | None], Question | None] = {}
    out = []
    for query, qid in zip(queries, qids, strict=True):
        key = (query, qid)
        if key not in found:
            hit = None
            if query is not None:
                hit = exact.get(query) or loose.get(normalised(query))
            if hit is None and qid is not None:
                hit = by_id.get(qid)
            found[key] = hit
        out.append(found[key])
    return out, queries


async def resolve(
    frame: pl.DataFrame,
    *,
    questions: Sequence[Question] | None = None,
    documents: DocumentTexts | None = None,
    how: Resolve = "id",
) -> Resolved:
    """Resolve every row's question and document (see the module's docstring)."""
    matched, queries = match_questions(frame, questions)
    question = [
        q.question if q is not None else query for q, query in zip(matched, queries, strict=True)
    ]
    language_of: dict[str, str] = {}
    language = []
    for q, text in zip(matched, question, strict=True):
        if q is not None:
            language.append(q.language)
        elif text is None:
            language.append("en")
        else:
            if text not in language_of:
                language_of[text] = detect_language(text)
            language.append(language_of[text])
    doc_ids = frame["doc_id"].to_list()
    indices = frame["doc_index"].to_list()
    texts: list[str | None] = [None] * frame.height
    corpus_ids: list[str | None] = [None] * frame.height
    why: list[str | None] = [None] * frame.height
    if documents is None:
        why = ["no corpus or backend to find document texts in"] * frame.height
    elif how == "text":
        ids_of = getattr(documents, "ids_of", None)
        carried = frame["doc_text"].to_list()
        if ids_of is None:
            why = ["resolution by text needs a corpus file (--corpus)"] * frame.height
        else:
            found = ids_of(sorted({t for t in carried if t is not None}))
            for n, text in enumerate(carried):
                if text is None:
                    why[n] = "the source carries no document text"
                elif text in found:
                    corpus_ids[n] = found[text]
            got = await documents.texts(sorted({c for c in corpus_ids if c is not None}))
            for n, cid in enumerate(corpus_ids):
                if cid is not None:
                    texts[n] = got.get(cid)
                elif why[n] is None:
                    why[n] = "no corpus document has the source's text"
    else:
        wanted = sorted({d for d in doc_ids if d is not None})
        got = await documents.texts(wanted) if wanted else {}
        for n, (doc, index) in enumerate(zip(doc_ids, indices, strict=True)):
            if how == "index-id" and index is not None and documents.index not in (None, index):
                why[n] = f"index '{index}' is not the one searched ('{documents.index}')"
            elif doc in got:
                texts[n] = got[doc]
            else:
                where = f"index '{documents.index}'" if documents.index else "the corpus"
                why[n] = f"document id not in {where}"
    for n, text in enumerate(question):
        if text is None and why[n] is None:
            why[n] = "query known by id only, and no question of the set has it"
    return Resolved(
        question=question,
        language=language,
        question_id=[q.question_id if q is not None else None for q in matched],
        text=texts,
        corpus_id=corpus_ids,
        why=why,
    )


def examples(values: Mapping[str, int], n: int = 3) -> list[str]:
    """The ``n`` most frequent of counted values (a report's examples)."""
    return [k for k, _ in sorted(values.items(), key=lambda kv: (-kv[1], kv[0]))[:n]]


__all__ = [
    "BackendTexts",
    "CorpusTexts",
    "DocumentTexts",
    "Resolve",
    "Resolved",
    "match_questions",
    "normalised",
    "resolve",
]
