"""Elastic Relevance Studio's judgements: documents of the ``esrs-judgements`` index.

``{workspace_id, scenario_id, index, doc_id, rating, @meta{created_by, created_at, created_via,
updated_by, updated_at, updated_via}}``, ratings integers within the workspace's rating scale.

Read from a file of such documents (JSON lines, a list, or a search's hits) or the live index.
A judgement names its query by scenario: the scenario's text (its ``values.text``, else its
only value, else its name) comes from the ``esrs-scenarios`` documents when given (a file or the
live index), else the query is known by the scenario's id only. Who rated is ``@meta``'s last
writer; Relevance Studio marks an AI's rating ``updated_by: ai`` or ``via: mcp``. Written as
JSON lines Relevance Studio's bulk loader takes (``@meta`` is its own to write, so raters and
times cannot travel).
"""

from __future__ import annotations

import io
import json
import uuid
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import polars as pl
from pydantic import BaseModel, ConfigDict

from ragaudit.errors import InputError
from ragaudit.judgments._format import (
    JudgmentFormat,
    Read,
    Written,
    file_bytes,
    framed,
    grade_text,
    json_extra,
    register_format,
    require,
    text_of,
)

INDEX = "esrs-judgements"
SCENARIOS = "esrs-scenarios"


class EsrsOptions(BaseModel):
    """Options of Relevance Studio judgements."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    workspace_id: str | None = None
    """The workspace written judgements belong to (default: the rows' own)."""
    index: str | None = None
    """The index of a judged document whose row names none."""


def documents(data: bytes, where: str) -> Iterator[tuple[str, dict[str, Any]]]:
    """Each document of a file: JSON lines, a JSON list, or a search response's hits."""
    text = text_of(data, where).strip()
    if not text:
        return
    try:
        whole = json.loads(text)
    except json.JSONDecodeError:
        whole = None
    if whole is None:
        for n, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                yield f"{where}: line {n}", json.loads(line)
            except json.JSONDecodeError as exc:
                raise InputError(f"{where}: line {n}: not JSON ({exc.msg})") from None
        return
    if isinstance(whole, dict) and isinstance(whole.get("hits"), dict):
        for n, hit in enumerate(whole["hits"].get("hits") or []):
            yield f"{where}: hits[{n}]", {"_id": hit.get("_id"), **(hit.get("_source") or {})}
    elif isinstance(whole, list):
        for n, item in enumerate(whole):
            yield f"{where}: [{n}]", item
    else:
        yield where, whole


def scenario_texts(docs: Iterator[tuple[str, dict[str, Any]]]) -> dict[str, str]:
    """Scenario id → the query it stands for (``values.text``, its only value, or its name)."""
    out: dict[str, str] = {}
    for at, doc in docs:
        sid = doc.get("_id") or doc.get("id")
        if sid is None:
            raise InputError(f"{at}: a scenario without '_id'")
        values: dict[str, Any] = doc["values"] if isinstance(doc.get("values"), dict) else {}
        text = values.get("text")
        if text is None and len(values) == 1:
            text = next(iter(values.values()))
        if text is None:
            text = doc.get("name")
        if text is not None:
            out[str(sid)] = str(text)
    return out


def scenarios_file(path: Path) -> dict[str, str]:
    """Scenario id → query text, from a file of ``esrs-scenarios`` documents."""
    return scenario_texts(documents(file_bytes(path), str(path)))


def scenario_id(workspace: str, query: str) -> str:
    """A scenario id for a query that has none: stable for the workspace and the text."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, json.dumps([workspace, {"text": query}])))


@register_format("esrs")
class RelevanceStudio(JudgmentFormat):
    """Relevance Studio's ``esrs-judgements`` documents."""

    label = "Elastic Relevance Studio judgements"
    holds = frozenset({"query_id", "doc_index"})
    keeps = frozenset({"workspace_id"})
    suffix = ".jsonl"
    options = EsrsOptions

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.scenarios: Mapping[str, str] = {}
        """Scenario id → query text, when scenario documents were given."""

    def read(self, data: bytes, where: str) -> Read:
        """One row per judgement document.

        JSON lines of complete judgements are read by polars at once; anything else (and a
        file with a bad document, which it names exactly) by :func:`documents`.
        """
        fast = self._lines(data)
        return fast if fast is not None else self.read_documents(documents(data, where))

    def _lines(self, data: bytes) -> Read | None:
        """JSON lines of complete judgements, read at once; None for any other file."""
        head = data.lstrip()[:1]
        if head != b"{":
            return None
        try:
            df = pl.read_ndjson(io.BytesIO(data), infer_schema_length=None)
        except (pl.exceptions.PolarsError, ValueError):
            return None
        needed = ("scenario_id", "doc_id", "rating")
        if (
            not set(needed) <= set(df.columns)
            or df.select(pl.any_horizontal(*(pl.col(c).is_null() for c in needed)).any()).item()
        ):
            return None
        if not df.schema["rating"].is_numeric():
            return None

        def meta(field: str) -> pl.Expr:
            if "@meta" not in df.columns or not isinstance(df.schema["@meta"], pl.Struct):
                return pl.lit(None, dtype=pl.String)
            fields = {f.name for f in df.schema["@meta"].fields}
            if field not in fields:
                return pl.lit(None, dtype=pl.String)
            return pl.col("@meta").struct.field(field).cast(pl.String)

        def column(name: str) -> pl.Expr:
            if name not in df.columns:
                return pl.lit(None, dtype=pl.String)
            return pl.col(name).cast(pl.String)

        rating = pl.col("rating")
        value = (
            rating.cast(pl.String)
            if df.schema["rating"].is_integer()
            # A float written as Python writes it (3.0), as the document-by-document path does.
            else (rating.map_elements(repr, return_dtype=pl.String))
        )
        ids = pl.col("scenario_id").cast(pl.String)
        frame = df.select(
            ids.replace_strict(dict(self.scenarios), default=None, return_dtype=pl.String).alias(
                "query"
            ),
            ids.alias("query_id"),
            pl.col("doc_id").cast(pl.String),
            column("index").alias("doc_index"),
            value.alias("value"),
            pl.coalesce(meta("updated_by"), meta("created_by")).alias("annotator"),
            pl.coalesce(meta("updated_at"), meta("created_at")).alias("created_at"),
            pl.struct(
                via=pl.coalesce(meta("updated_via"), meta("created_via")),
                workspace_id=column("workspace_id"),
            )
            .struct.json_encode()
            .alias("extra"),
        )
        return Read(framed(frame))

    def read_documents(self, docs: Iterator[tuple[str, dict[str, Any]]]) -> Read:
        """The rows of judgement documents (a file's, or the live index's)."""
        rows = []
        for at, doc in docs:
            if not isinstance(doc, dict):
                raise InputError(f"{at}: not an object")
            meta: dict[str, Any] = doc["@meta"] if isinstance(doc.get("@meta"), dict) else {}
            sid = str(require(doc, "scenario_id", at, (str, int)))
            rows.append(
                {
                    "query": self.scenarios.get(sid),
                    "query_id": sid,
                    "doc_id": str(require(doc, "doc_id", at, (str, int))),
                    "doc_index": doc.get("index"),
                    "value": grade_text(require(doc, "rating", at, (int, float)), at),
                    "annotator": meta.get("updated_by") or meta.get("created_by"),
                    "created_at": meta.get("updated_at") or meta.get("created_at"),
                    "extra": json_extra(
                        workspace_id=doc.get("workspace_id"),
                        via=meta.get("updated_via") or meta.get("created_via"),
                    ),
                }
            )
        cols = (
            "query",
            "query_id",
            "doc_id",
            "doc_index",
            "value",
            "annotator",
            "created_at",
            "extra",
        )
        return Read(framed(pl.DataFrame(rows, schema=dict.fromkeys(cols, pl.String))))

    def write(self, frame: pl.DataFrame) -> Written:
        """JSON lines of judgement documents (ratings as integers)."""
        opts: EsrsOptions = self.opts  # type: ignore[assignment]
        notes: list[dict[str, Any]] = []
        made: dict[str, str] = {}
        out = []
        for r in frame.iter_rows(named=True):
            extra = json.loads(r["extra"]) if r["extra"] else {}
            workspace = opts.workspace_id or extra.get("workspace_id") or "ragaudit"
            sid = r["query_id"]
            if sid is None:
                sid = made.setdefault(r["query"], scenario_id(workspace, r["query"]))
            out.append(
                json.dumps(
                    {
                        "workspace_id": workspace,
                        "scenario_id": sid,
                        "index": r["doc_index"] or opts.index,
                        "doc_id": r["doc_id"],
                        "rating": int(round(float(r["value"]))),
                    },
                    ensure_ascii=False,
                )
            )
        if made:
            notes.append(
                {
                    "what": "scenario ids made up (create these scenarios): id → query text",
                    "rows": frame.filter(pl.col("query_id").is_null()).height,
                    "ids": {v: k for k, v in made.items()},
                }
            )
        return Written("".join(line + "\n" for line in out).encode(), notes)


__all__ = [
    "INDEX",
    "SCENARIOS",
    "RelevanceStudio",
    "documents",
    "scenario_texts",
    "scenarios_file",
]
