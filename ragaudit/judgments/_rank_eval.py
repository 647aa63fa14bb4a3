"""Elasticsearch's and OpenSearch's ``_rank_eval`` request.

``requests[{id, request | template_id + params, ratings[{_index, _id, rating}]}]``, with a
``metric`` (and ``templates``).

A request is a query: its id is the query's id, its text the template's query parameter (the
``query_param`` option, else ``query_string``, else its only text parameter) or the first text
a ``match``/``multi_match``/``query_string``/``simple_query_string`` clause of its body searches
for. The request (or template and parameters) is kept with the rows, so the file is written
back with the same requests; rows from elsewhere get a ``match`` query on ``field``. Ready
requests for a run's or a tune winner's questions, rendered by the configured engine, are
:func:`ragaudit.judgments.rank_eval_body`'s.
"""

from __future__ import annotations

import json
from typing import Any

import polars as pl
from pydantic import BaseModel, ConfigDict, Field

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

TEXT_QUERIES = ("match", "match_phrase", "multi_match", "query_string", "simple_query_string")


class RankEvalOptions(BaseModel):
    """Options of a ``_rank_eval`` request."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    query_param: str | None = None
    """The template parameter holding the query's text (read: ``query_string``, else the only
    text parameter)."""
    field: str = "text"
    """The field a request written for a row without one searches (a ``match`` query)."""
    index: str | None = None
    """``_index`` of a rating whose row names none."""
    metric: dict[str, Any] = Field(default_factory=lambda: {"ndcg": {"k": 10}})
    """The request's ``metric``."""


def query_text(request: Any) -> str | None:
    """The first text a full-text clause of a search body searches for."""
    if isinstance(request, dict):
        for key, value in request.items():
            if key in TEXT_QUERIES and isinstance(value, dict):
                if isinstance(value.get("query"), str):
                    return str(value["query"])
                for inner in value.values():
                    if isinstance(inner, str):
                        return inner
                    if isinstance(inner, dict) and isinstance(inner.get("query"), str):
                        return str(inner["query"])
            found = query_text(value)
            if found is not None:
                return found
    elif isinstance(request, list):
        for item in request:
            found = query_text(item)
            if found is not None:
                return found
    return None


def _param_text(params: dict[str, Any], name: str | None) -> str | None:
    if name is not None:
        value = params.get(name)
        return str(value) if value is not None else None
    if isinstance(params.get("query_string"), str):
        return str(params["query_string"])
    texts = [v for v in params.values() if isinstance(v, str)]
    return texts[0] if len(texts) == 1 else None


@register_format("rank-eval")
class RankEval(JudgmentFormat):
    """A ``_rank_eval`` request body."""

    label = "_rank_eval request"
    holds = frozenset({"query", "query_id", "doc_index"})
    keeps = frozenset({"request", "template_id", "params", "template"})
    suffix = ".json"
    options = RankEvalOptions

    def read(self, data: bytes, where: str) -> Read:
        """One row per rating of every request."""
        opts: RankEvalOptions = self.opts  # type: ignore[assignment]
        body = parse_json(data, where)
        requests = require(body, "requests", where, list)
        templates = {
            str(t.get("id")): t.get("template")
            for t in (body.get("templates") or [])
            if isinstance(t, dict)
        }
        rows = []
        for n, req in enumerate(requests):
            at = f"{where}: requests[{n}]"
            rid = str(require(req, "id", at, (str, int)))
            if "request" in req:
                text = query_text(req["request"])
                keep = {"request": req["request"]}
            elif "template_id" in req:
                params = req.get("params") or {}
                if not isinstance(params, dict):
                    raise InputError(f"{at}: 'params' is not an object")
                text = _param_text(params, opts.query_param)
                keep = {
                    "template_id": req["template_id"],
                    "params": params,
                    "template": templates.get(str(req["template_id"])),
                }
            else:
                raise InputError(f"{at}: neither 'request' nor 'template_id'")
            extra = json_extra(**keep)
            for m, r in enumerate(require(req, "ratings", at, list)):
                rat = f"{at}.ratings[{m}]"
                rows.append(
                    {
                        "query": text,
                        "query_id": rid,
                        "doc_id": str(require(r, "_id", rat, (str, int))),
                        "doc_index": r.get("_index"),
                        "value": grade_text(r.get("rating"), rat),
                        "extra": extra,
                    }
                )
        cols = ("query", "query_id", "doc_id", "doc_index", "value", "extra")
        return Read(framed(pl.DataFrame(rows, schema=dict.fromkeys(cols, pl.String))))

    def write(self, frame: pl.DataFrame) -> Written:
        """One request per query, its ratings as integers (``_rank_eval``'s ratings are)."""
        opts: RankEvalOptions = self.opts  # type: ignore[assignment]
        notes: list[dict[str, Any]] = []
        requests: dict[str, dict[str, Any]] = {}
        templates: dict[str, Any] = {}
        written_queries = 0
        no_index = 0
        for r in frame.iter_rows(named=True):
            rid = r["query_id"] or r["query"]
            req = requests.get(rid)
            if req is None:
                extra = json.loads(r["extra"]) if r["extra"] else {}
                req = {"id": rid}
                if "request" in extra:
                    req["request"] = extra["request"]
                elif "template_id" in extra:
                    req["template_id"] = extra["template_id"]
                    req["params"] = extra.get("params") or {}
                    if extra.get("template") is not None:
                        templates[str(extra["template_id"])] = extra["template"]
                else:
                    written_queries += 1
                    req["request"] = {"query": {"match": {opts.field: r["query"] or rid}}}
                req["ratings"] = []
                requests[rid] = req
            index = r["doc_index"] or opts.index
            if index is None:
                no_index += 1
            rating = {"_index": index, "_id": r["doc_id"], "rating": int(round(float(r["value"])))}
            req["ratings"].append(rating)
        if written_queries:
            notes.append(
                {
                    "what": f"requests written as a match query on '{opts.field}' (the rows came "
                    "without one): render your own with a run's config",
                    "rows": written_queries,
                }
            )
        if no_index:
            notes.append(
                {
                    "what": "ratings without an index (_index null): set the index option",
                    "rows": no_index,
                }
            )
        body: dict[str, Any] = {"requests": list(requests.values()), "metric": opts.metric}
        if templates:
            body["templates"] = [{"id": k, "template": v} for k, v in templates.items()]
        return Written(json.dumps(body, ensure_ascii=False, indent=1).encode(), notes)


__all__ = ["RankEval", "RankEvalOptions", "query_text"]
