"""OpenSearch Search Relevance Workbench judgments.

Its import body, ``PUT _plugins/_search_relevance/judgments``: ``{"name", "type":
"IMPORT_JUDGMENT", "judgmentRatings": [{"query", "ratings": [{"docId", "rating": "3.000"}]}]}``
(ratings as strings of floats; no index, no rater). It stores every judgment list, imported,
LLM-made or click-derived (UBI, COEC ratios), as a document of the ``search-relevance-judgment``
index in the same shape with ``id``, ``timestamp``, ``status`` and ``metadata``: those documents
are read too (a file of one, a list, or hits of a search), each list's type deciding its
default scale (an LLM's 0–1 scores, COEC ratios, imported 0–3). An LLM list's query may carry
its reference answer after ``#``: the query is the part before, the reference kept.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import polars as pl
from pydantic import BaseModel, ConfigDict

from ragaudit.errors import InputError
from ragaudit.judgments._format import (
    JudgmentFormat,
    Read,
    Written,
    framed,
    grade_text,
    json_extra,
    parse_json,
    register_format,
    require,
)
from ragaudit.judgments._scale import SCALES, GradeScale

INDEX = "search-relevance-judgment"
"""The index SRW keeps its judgment lists in."""
REFERENCE_DELIMITER = "#"
"""What separates an LLM judgment's query from the reference answer it was judged with."""
TYPE_SCALES: dict[str, GradeScale] = {
    "IMPORT_JUDGMENT": SCALES["srw"],
    "LLM_JUDGMENT": SCALES["unit"],
    "UBI_JUDGMENT": SCALES["coec"],
}


class SrwOptions(BaseModel):
    """Options of an SRW import body."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = "ragaudit judgments"
    """The judgment list's name."""
    description: str | None = "Judgments exported by ragaudit"
    """Its description."""


def judgment_lists(body: Any, where: str) -> Iterator[tuple[str, dict[str, Any]]]:
    """Each judgment list in a body, a stored document, a list of them or a search's hits."""
    if isinstance(body, dict) and isinstance(body.get("hits"), dict):
        for n, hit in enumerate(body["hits"].get("hits") or []):
            yield f"{where}: hits[{n}]", (hit or {}).get("_source") or {}
    elif isinstance(body, list):
        for n, item in enumerate(body):
            yield f"{where}: [{n}]", item.get("_source", item) if isinstance(item, dict) else item
    else:
        yield where, body


def _ratings(value: Any, at: str) -> Iterator[tuple[str, str | None]]:
    """(docId, rating) of a query's ratings: a list of objects, or (UBI) an object of them."""
    if isinstance(value, dict):
        for doc, rating in value.items():
            yield str(doc), grade_text(rating, f"{at}.{doc}")
        return
    if not isinstance(value, list):
        raise InputError(f"{at}: 'ratings' is neither a list nor an object")
    for n, r in enumerate(value):
        rat = f"{at}[{n}]"
        doc = require(r, "docId", rat, (str, int))
        yield str(doc), grade_text(r.get("rating"), rat)


@register_format("srw")
class SrwJudgments(JudgmentFormat):
    """SRW's judgment import body and its stored judgment documents."""

    label = "OpenSearch Search Relevance Workbench judgments"
    scale = SCALES["srw"]
    holds = frozenset({"query"})
    suffix = ".json"
    options = SrwOptions

    def read(self, data: bytes, where: str) -> Read:
        """One row per rating of every list; the first list's type picks the default scale."""
        return self.read_documents(judgment_lists(parse_json(data, where), where))

    def read_documents(self, lists: Iterator[tuple[str, dict[str, Any]]]) -> Read:
        """The rows of judgment lists (from a file, or the documents of the live index)."""
        rows = []
        types: list[str] = []
        names: list[str] = []
        for at, doc in lists:
            if not isinstance(doc, dict):
                raise InputError(f"{at}: not an object")
            kind = str(doc.get("type") or "IMPORT_JUDGMENT")
            types.append(kind)
            if isinstance(doc.get("name"), str):
                names.append(doc["name"])
            meta: dict[str, Any] = doc["metadata"] if isinstance(doc.get("metadata"), dict) else {}
            annotator = _annotator(kind, meta)
            for n, q in enumerate(require(doc, "judgmentRatings", at, list)):
                qat = f"{at}.judgmentRatings[{n}]"
                query = str(require(q, "query", qat, (str, int, float)))
                reference = None
                if kind == "LLM_JUDGMENT" and REFERENCE_DELIMITER in query:
                    query, reference = query.split(REFERENCE_DELIMITER, 1)
                extra = json_extra(
                    judgment_id=doc.get("id"),
                    judgment_type=kind if kind != "IMPORT_JUDGMENT" else None,
                    reference=reference,
                )
                for docid, rating in _ratings(q.get("ratings"), f"{qat}.ratings"):
                    rows.append(
                        {
                            "query": query,
                            "doc_id": docid,
                            "value": rating,
                            "annotator": annotator,
                            "created_at": doc.get("timestamp"),
                            "extra": extra,
                        }
                    )
        cols = ("query", "doc_id", "value", "annotator", "created_at", "extra")
        frame = framed(pl.DataFrame(rows, schema=dict.fromkeys(cols, pl.String)))
        kinds = sorted(set(types))
        notes = [f"judgment types {', '.join(kinds)}: one scale for all"] if len(kinds) > 1 else []
        return Read(
            frame,
            scale=TYPE_SCALES.get(kinds[0]) if kinds else None,
            source=names[0] if len(set(names)) == 1 else None,
            notes=notes,
        )

    def read_sources(self, docs: Iterator[tuple[str, dict[str, Any]]]) -> list[Read]:
        """Each stored judgment list its own source: its name, its type's scale."""
        return [self.read_documents(iter([item])) for item in docs]

    def write(self, frame: pl.DataFrame) -> Written:
        """The ``PUT _plugins/_search_relevance/judgments`` body, one entry per query."""
        opts: SrwOptions = self.opts  # type: ignore[assignment]
        grouped = (
            frame.select(
                pl.col("query").fill_null(pl.col("query_id")),
                pl.struct(pl.col("doc_id").alias("docId"), pl.col("value").alias("rating")).alias(
                    "r"
                ),
            )
            .group_by("query", maintain_order=True)
            .agg(pl.col("r").alias("ratings"))
        )
        body: dict[str, Any] = {"name": opts.name}
        if opts.description:
            body["description"] = opts.description
        body["type"] = "IMPORT_JUDGMENT"
        text = json.dumps(body, ensure_ascii=False)[:-1] + ', "judgmentRatings": '
        return Written((text + grouped.write_json() + "}").encode())


def _annotator(kind: str, meta: dict[str, Any]) -> str | None:
    """Who (or what) gave a stored list's ratings: the LLM's model, the click model."""
    if kind == "LLM_JUDGMENT" and meta.get("modelId"):
        return f"llm:{meta['modelId']}"
    if kind == "UBI_JUDGMENT" and meta.get("clickModel"):
        return f"ubi:{meta['clickModel']}"
    return None


__all__ = ["INDEX", "SrwJudgments", "SrwOptions", "judgment_lists"]
