"""Rated Ranking Evaluator's ratings (JSON), as Quepid exports and imports them.

Quepid writes ``{id_field, index, template, queries[{placeholders{"$query"}, relevant_documents
{<doc>: {gain}}}]}`` and reads ``relevant_documents`` as ``{<gain>: [<doc>, …]}``; RRE's own files
nest queries in ``topics[].query_groups[]``. All three are read; the index applies to every
row, the query is the ``$query`` placeholder (else the only placeholder). Written as Quepid
exports it (gains as integers), one index per file.
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
)

QUERY_PLACEHOLDER = "$query"


class RreOptions(BaseModel):
    """Options of an RRE ratings export."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    index: str | None = None
    """The index the file names (default: the rows' own, when they name one)."""
    id_field: str = "id"
    """The documents' id field."""
    template: str = "template.json"
    """The query template file RRE renders each query with."""


def _queries(body: dict[str, Any], where: str) -> Iterator[tuple[str, dict[str, Any], Any]]:
    """Each query object with where it is and the topic/group it belongs to."""
    if isinstance(body.get("queries"), list):
        for n, q in enumerate(body["queries"]):
            yield f"{where}: queries[{n}]", q, None
    for t, topic in enumerate(body.get("topics") or []):
        for g, group in enumerate((topic or {}).get("query_groups") or []):
            docs = group.get("relevant_documents")
            for n, q in enumerate(group.get("queries") or []):
                at = f"{where}: topics[{t}].query_groups[{g}].queries[{n}]"
                yield (
                    at,
                    {**q, "relevant_documents": docs},
                    {
                        "topic": topic.get("description"),
                        "group": group.get("name"),
                    },
                )


def _judged(docs: Any, at: str) -> Iterator[tuple[str, str | None]]:
    """(document, gain) of a ``relevant_documents`` in any of its three forms."""
    if isinstance(docs, list):
        for n, d in enumerate(docs):
            if not isinstance(d, dict) or "document_id" not in d:
                raise InputError(f"{at}.relevant_documents[{n}]: no 'document_id'")
            yield str(d["document_id"]), grade_text(d.get("gain"), at)
        return
    if not isinstance(docs, dict):
        raise InputError(f"{at}: 'relevant_documents' is not an object")
    for key, value in docs.items():
        if isinstance(value, dict):
            yield str(key), grade_text(value.get("gain"), f"{at}.relevant_documents.{key}")
        elif isinstance(value, list):
            for doc in value:  # Quepid's import form: gain → documents
                yield str(doc), str(key)
        else:
            raise InputError(f"{at}.relevant_documents.{key}: neither {{gain}} nor a list")


@register_format("rre")
class RreRatings(JudgmentFormat):
    """RRE ratings JSON (Quepid's export and import forms, RRE's topics and query groups)."""

    label = "RRE ratings JSON"
    holds = frozenset({"query", "doc_index"})
    suffix = ".json"
    options = RreOptions

    def read(self, data: bytes, where: str) -> Read:
        """One row per rated document of each query."""
        body = parse_json(data, where)
        if not isinstance(body, dict):
            raise InputError(f"{where}: not a JSON object")
        index = body.get("index")
        rows = []
        unjudged = 0
        for at, q, group in _queries(body, where):
            placeholders = q.get("placeholders") or {}
            if not isinstance(placeholders, dict) or not placeholders:
                raise InputError(f"{at}: no 'placeholders'")
            query = placeholders.get(QUERY_PLACEHOLDER, next(iter(placeholders.values())))
            docs = q.get("relevant_documents")
            if not docs:
                unjudged += 1
                continue
            extra = json_extra(
                template=q.get("template") or body.get("template"),
                id_field=body.get("id_field"),
                placeholders=placeholders if set(placeholders) != {QUERY_PLACEHOLDER} else None,
                **(group or {}),
            )
            for doc, gain in _judged(docs, at):
                rows.append(
                    {
                        "query": str(query),
                        "doc_id": doc,
                        "doc_index": index,
                        "value": gain,
                        "extra": extra,
                    }
                )
        schema = dict.fromkeys(("query", "doc_id", "doc_index", "value", "extra"), pl.String)
        notes = [f"{unjudged} quer(ies) without rated documents"] if unjudged else []
        return Read(framed(pl.DataFrame(rows, schema=schema)), notes=notes)

    def write(self, frame: pl.DataFrame) -> Written:
        """Quepid's RRE export: one entry per query, gains as integers."""
        opts: RreOptions = self.opts  # type: ignore[assignment]
        notes: list[dict[str, Any]] = []
        indices = [i for i in frame["doc_index"].unique().to_list() if i is not None]
        index = opts.index or (indices[0] if indices else None)
        other = frame.filter(pl.col("doc_index").is_not_null() & (pl.col("doc_index") != index))
        if other.height:
            notes.append(
                {
                    "what": f"documents of other indices written under the file's one ({index})",
                    "rows": other.height,
                    "indices": sorted(set(other["doc_index"].to_list())),
                }
            )
        fractional = frame.filter(
            pl.col("value").cast(pl.Float64) != pl.col("value").cast(pl.Float64).round(0)
        )
        if fractional.height:
            notes.append(
                {
                    "what": "gains rounded to integers (RRE's gains are integers)",
                    "rows": fractional.height,
                }
            )
        queries: dict[str, dict[str, Any]] = {}
        for r in frame.with_columns(pl.col("query").fill_null(pl.col("query_id"))).iter_rows(
            named=True
        ):
            entry = queries.setdefault(
                r["query"],
                {"placeholders": {QUERY_PLACEHOLDER: r["query"]}, "relevant_documents": {}},
            )
            entry["relevant_documents"][r["doc_id"]] = {"gain": int(round(float(r["value"])))}
        body = {
            "id_field": opts.id_field,
            "index": index,
            "template": opts.template,
            "queries": list(queries.values()),
        }
        return Written(json.dumps(body, ensure_ascii=False, indent=1).encode(), notes)


__all__ = ["RreOptions", "RreRatings"]
