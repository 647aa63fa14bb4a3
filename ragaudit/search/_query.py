"""Query building shared by the Elasticsearch and OpenSearch backends.

A query template is a JSON structure (a YAML mapping in the config, or JSON text) whose
strings may hold Jinja2 expressions. It is rendered *leaf by leaf*, never as text: a string
that is exactly one ``{{ expression }}`` becomes the expression's value with its type (a
list of clauses, a number, the question), any other string is rendered as text. So a
question holding quotes, braces or ``{{`` can never change the query's structure, and
nothing the question holds is ever evaluated. Rendering runs in Jinja's sandbox with strict
undefined variables: a template that names a filter a question does not have fails for that
question with a message saying which name is missing.

Variables of a search template:

- ``question``: the question text;
- ``filters``: the question's filters as given (filter key → value or list of values);
- ``filter_clauses``: one ``match_phrase`` clause per filter on the engine field it maps to
  (a list value becomes a ``bool.should`` of them), ready for a ``bool.must``;
- ``text_field``: the engine field holding the text;
- ``top_n``: candidates asked for;
- ``params``: the engine section's ``template_params`` (a tune variant's parameters).

The default is the query shape QA services built on Elasticsearch use: ``must`` the collection
filter as ``match_phrase``, ``should`` a ``match`` of the question on the content field with
boost 8.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from jinja2 import StrictUndefined, TemplateError, Undefined
from jinja2.sandbox import SandboxedEnvironment

from ragaudit.errors import ConfigError, RagauditError
from ragaudit.search._base import Hit

DEFAULT_QUERY_TEMPLATE: dict[str, Any] = {
    "query": {
        "bool": {
            "must": "{{ filter_clauses }}",
            "should": [{"match": {"{{ text_field }}": {"query": "{{ question }}", "boost": 8}}}],
        }
    }
}
"""The default bool query: filter on the collection, boosted match of the question."""

# Keys the pager owns: a template setting them would fight the paging.
RESERVED_KEYS = frozenset({"size", "from", "search_after", "pit", "scroll"})

_ENV = SandboxedEnvironment(undefined=StrictUndefined, autoescape=False, keep_trailing_newline=True)
_WHOLE_EXPR = re.compile(r"^\s*\{\{(?P<expr>(?:(?!\{\{|\}\}).)*)\}\}\s*$", re.DOTALL)


class TemplateRenderError(RagauditError):
    """A template could not be rendered with one question's variables."""


class SearchError(RagauditError):
    """A search failed; ``kind`` says how, the message is safe to show.

    Kinds: ``unreachable``, ``timeout``, ``auth``, ``forbidden``, ``missing_index``,
    ``not_engine`` (the server is not the configured product), ``template`` (does not
    render), ``rejected`` (the engine refused the query), ``throttled``, ``engine`` (a 5xx),
    ``paging`` (pages did not advance), ``mapping`` (a hit lacks the configured fields),
    ``protocol`` (an answer the client cannot read).
    """

    FATAL = frozenset({"unreachable", "auth", "forbidden", "missing_index", "not_engine"})
    TRANSIENT = frozenset({"unreachable", "timeout", "throttled", "engine"})

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind

    @property
    def fatal(self) -> bool:
        """True when every other question would fail the same way (host, credentials, index)."""
        return self.kind in self.FATAL

    @property
    def transient(self) -> bool:
        """True when the same request may succeed a moment later."""
        return self.kind in self.TRANSIENT

    @property
    def retryable(self) -> bool:  # type: ignore[override]
        """A stage stopped by this error is worth running again when the error is transient."""
        return self.transient


class _Leaf:
    """One compiled template string."""

    __slots__ = ("expr", "text")

    def __init__(self, source: str, where: str) -> None:
        self.expr = None
        self.text = None
        try:
            whole = _WHOLE_EXPR.match(source)
            if whole:
                # undefined_to_none=False: a missing name must fail, not become null.
                self.expr = _ENV.compile_expression(whole["expr"], undefined_to_none=False)
            else:
                self.text = _ENV.from_string(source)
        except TemplateError as exc:
            raise ConfigError(f"{where}: {source!r} is not a valid template: {exc}") from None

    def render(self, variables: Mapping[str, Any]) -> Any:
        if self.expr is not None:
            value = self.expr(**variables)
            if isinstance(value, Undefined):
                value._fail_with_undefined_error()  # raises UndefinedError naming the name
            return value
        assert self.text is not None
        return self.text.render(**variables)


def _is_template(s: str) -> bool:
    return "{{" in s or "{%" in s or "{#" in s


class Template:
    """A JSON structure whose strings may be Jinja2 expressions, rendered leaf by leaf."""

    def __init__(self, template: Mapping[str, Any] | str, *, where: str) -> None:
        """Compile ``template``.

        Args:
            template: A mapping, or JSON text of one.
            where: The config field it came from (named in every error).

        Raises:
            ConfigError: Not a mapping, not JSON, or a string that is not valid Jinja2.
        """
        if isinstance(template, str):
            try:
                template = json.loads(template)
            except json.JSONDecodeError as exc:
                raise ConfigError(f"{where}: not valid JSON: {exc}") from None
        if not isinstance(template, Mapping):
            raise ConfigError(f"{where}: must be a mapping (a JSON object)")
        self.where = where
        self.source = template
        self._compiled = self._compile(template, where)

    def _compile(self, node: Any, where: str) -> Any:
        if isinstance(node, Mapping):
            out = []
            for key, value in node.items():
                if not isinstance(key, str):
                    raise ConfigError(f"{where}: keys must be strings, got {key!r}")
                ckey = _Leaf(key, where) if _is_template(key) else key
                out.append((ckey, self._compile(value, f"{where}.{key}")))
            return ("map", out)
        if isinstance(node, list | tuple):
            return ("list", [self._compile(v, f"{where}[{i}]") for i, v in enumerate(node)])
        if isinstance(node, str) and _is_template(node):
            return ("leaf", _Leaf(node, where))
        return ("const", node)

    def keys(self) -> set[str]:
        """Top-level keys of the template."""
        return set(self.source)

    def render(self, variables: Mapping[str, Any]) -> dict[str, Any]:
        """The rendered structure.

        Raises:
            TemplateRenderError: A name the variables lack, a failing filter, a key that does
                not render to a string; the message names the template field.
        """
        try:
            out = self._render(self._compiled, variables)
        except TemplateError as exc:
            raise TemplateRenderError(f"{self.where} does not render: {exc}") from None
        except (TypeError, ValueError, ArithmeticError) as exc:
            raise TemplateRenderError(
                f"{self.where} does not render: {type(exc).__name__}: {exc}"
            ) from None
        return out

    def _render(self, node: Any, variables: Mapping[str, Any]) -> Any:
        kind, value = node
        if kind == "const":
            return value
        if kind == "leaf":
            return value.render(variables)
        if kind == "list":
            return [self._render(v, variables) for v in value]
        out: dict[str, Any] = {}
        for key, sub in value:
            if isinstance(key, _Leaf):
                key = key.render(variables)
                if not isinstance(key, str) or not key:
                    raise TemplateRenderError(
                        f"{self.where}: a key rendered to {key!r}, not a name"
                    )
            out[key] = self._render(sub, variables)
        return out


@dataclass(frozen=True)
class FieldMap:
    """Where the pieces of a candidate live in an engine document.

    Attributes:
        id: Dotted ``_source`` path of the context id; None uses the engine's ``_id``.
        text: Dotted ``_source`` path of the text.
        metadata: Dotted ``_source`` path of the metadata object; None takes every other
            ``_source`` field (text and id removed).
        filters: Question filter key → engine field; keys not listed map to
            ``<metadata>.<key>`` (or ``<key>`` without a metadata path).
    """

    id: str | None = None
    text: str = "text"
    metadata: str | None = "metadata"
    filters: Mapping[str, str] = field(default_factory=dict)

    def filter_field(self, key: str) -> str:
        """The engine field a question filter key constrains."""
        if key in self.filters:
            return self.filters[key]
        return f"{self.metadata}.{key}" if self.metadata else key


def get_path(source: Mapping[str, Any], dotted: str) -> Any:
    """``source["a"]["b"]`` for ``"a.b"``; a literal ``"a.b"`` key wins; None when absent."""
    if dotted in source:
        return source[dotted]
    node: Any = source
    for part in dotted.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return None
        node = node[part]
    return node


def set_path(target: dict[str, Any], dotted: str, value: Any) -> None:
    """Set ``target["a"]["b"] = value`` for ``"a.b"``, merging into dicts already there."""
    parts = dotted.split(".")
    node = target
    for part in parts[:-1]:
        nxt = node.get(part)
        if not isinstance(nxt, dict):
            nxt = node[part] = {}
        node = nxt
    last = parts[-1]
    if isinstance(value, dict) and isinstance(node.get(last), dict):
        node[last] = {**node[last], **value}
    else:
        node[last] = value


def _drop_path(source: dict[str, Any], dotted: str) -> None:
    if dotted in source:
        del source[dotted]
        return
    parts = dotted.split(".")
    node: Any = source
    for part in parts[:-1]:
        if not isinstance(node, dict) or part not in node:
            return
        node = node[part]
    if isinstance(node, dict):
        node.pop(parts[-1], None)


def filter_clauses(filters: Mapping[str, Any], fields: FieldMap) -> list[dict[str, Any]]:
    """``match_phrase`` clauses for the filters: keys ANDed, a list value means any of them."""
    clauses: list[dict[str, Any]] = []
    for key, value in filters.items():
        target = fields.filter_field(str(key))
        if isinstance(value, list | tuple | set | frozenset):
            # "any of nothing" matches nothing, as in the local backend.
            options = [{"match_phrase": {target: v}} for v in value]
            clauses.append({"bool": {"should": options, "minimum_should_match": 1}})
        else:
            clauses.append({"match_phrase": {target: value}})
    return clauses


class QueryBuilder:
    """Turns a question and its filters into a search body (without paging keys)."""

    def __init__(
        self,
        template: Mapping[str, Any] | str | None,
        fields: FieldMap,
        source_excludes: tuple[str, ...] = (),
        *,
        where: str,
        params: Mapping[str, Any] | None = None,
    ) -> None:
        """Compile the template and check it leaves paging to the pager.

        Args:
            template: The query template; None is :data:`DEFAULT_QUERY_TEMPLATE`.
            fields: Field mapping of the index.
            source_excludes: ``_source`` fields never fetched (embeddings).
            where: Config field of the template, for errors.
            params: Values the template reads as ``params`` (``tune`` variants set them).

        Raises:
            ConfigError: The template is invalid or sets a key the pager owns.
        """
        self.template = Template(template or DEFAULT_QUERY_TEMPLATE, where=where)
        taken = sorted(self.template.keys() & RESERVED_KEYS)
        if taken:
            raise ConfigError(
                f"{where}: remove {', '.join(taken)}: size and paging are set from "
                "collect.top_n and the backend's page_size"
            )
        self.fields = fields
        self.source_excludes = tuple(source_excludes)
        self.params = dict(params or {})

    def body(self, question: str, filters: Mapping[str, Any], top_n: int) -> dict[str, Any]:
        """The request body for one question (raises :class:`TemplateRenderError`)."""
        variables = {
            "question": question,
            "filters": dict(filters),
            "filter_clauses": filter_clauses(filters, self.fields),
            "text_field": self.fields.text,
            "top_n": top_n,
            "params": self.params,
        }
        body = self.template.render(variables)
        if self.source_excludes and "_source" not in body:
            body["_source"] = {"excludes": list(self.source_excludes)}
        return body

    def hit(self, raw: Mapping[str, Any], rank: int) -> Hit:
        """One engine hit as a candidate with its engine rank and score.

        Raises:
            SearchError: kind ``mapping`` when the hit lacks the id or text field.
        """
        source = dict(raw.get("_source") or {})
        fields = self.fields
        if fields.id:
            cid = get_path(source, fields.id)
            if cid is None or cid == "":
                raise SearchError(
                    "mapping", f"hit {raw.get('_id')!r} has no id field '{fields.id}' in _source"
                )
        else:
            cid = raw.get("_id")
        text = get_path(source, fields.text)
        if text is None:
            raise SearchError(
                "mapping",
                f"hit {raw.get('_id')!r} has no text field '{fields.text}' in _source "
                f"(fields present: {', '.join(sorted(source)) or 'none'})",
            )
        if fields.metadata:
            meta = get_path(source, fields.metadata)
            metadata = dict(meta) if isinstance(meta, Mapping) else {}
            if fields.text.startswith(fields.metadata + "."):
                metadata.pop(fields.text[len(fields.metadata) + 1 :], None)
        else:
            metadata = source
            _drop_path(metadata, fields.text)
            if fields.id:
                _drop_path(metadata, fields.id)
        score = raw.get("_score")
        return Hit(
            id=str(cid),
            text=text if isinstance(text, str) else json.dumps(text, ensure_ascii=False),
            rank=rank,
            score=float(score) if isinstance(score, int | float) else math.nan,
            metadata=metadata,
        )

    def document(self, doc_id: str, text: str, metadata: Mapping[str, Any]) -> dict[str, Any]:
        """The ``_source`` of a document written by ``index``: the inverse of :meth:`hit`."""
        source: dict[str, Any] = {}
        if self.fields.metadata:
            set_path(source, self.fields.metadata, dict(metadata))
        else:
            source.update(metadata)
        set_path(source, self.fields.text, text)
        if self.fields.id:
            set_path(source, self.fields.id, doc_id)
        return source

    def mappings(self, analyzer: str | None = None) -> dict[str, Any]:
        """Index mappings for documents written by ``index``.

        The text is analysed (``analyzer`` or the engine's default); metadata strings are
        keywords, so a ``match_phrase`` filter on them is an exact match.
        """
        props: dict[str, Any] = {}
        text_mapping: dict[str, Any] = {"type": "text"}
        if analyzer:
            text_mapping["analyzer"] = analyzer
        _set_property(props, self.fields.text, text_mapping)
        if self.fields.id:
            _set_property(props, self.fields.id, {"type": "keyword"})
        match = f"{self.fields.metadata}.*" if self.fields.metadata else "*"
        return {
            "dynamic_templates": [
                {
                    "metadata_strings": {
                        "path_match": match,
                        "match_mapping_type": "string",
                        "mapping": {"type": "keyword"},
                    }
                }
            ],
            "properties": props,
        }


def _set_property(props: dict[str, Any], dotted: str, mapping: dict[str, Any]) -> None:
    parts = dotted.split(".")
    node = props
    for part in parts[:-1]:
        node = node.setdefault(part, {"properties": {}})["properties"]
    node[parts[-1]] = mapping


__all__ = [
    "DEFAULT_QUERY_TEMPLATE",
    "RESERVED_KEYS",
    "FieldMap",
    "QueryBuilder",
    "SearchError",
    "Template",
    "TemplateRenderError",
    "filter_clauses",
    "get_path",
    "set_path",
]
