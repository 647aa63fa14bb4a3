"""JSON schemas as llama.cpp GBNF grammars, bounded for a small base model.

The ``local/`` judge's output is forced into the requested JSON shape with a grammar built
from the request's JSON schema: a model this small would otherwise rarely produce parseable
JSON, and every failed parse costs a repair call. Strings and arrays get length caps, because
a base model repeats itself until ``max_tokens``; integer verdicts that a schema only
describes ("Binary (0/1) verdict") become enums. llama-cpp-python's converter does the
translation; this module prepares the schemas it gets and tightens what it emits.
"""

from __future__ import annotations

import contextlib
import functools
import json
import math
import re
from collections.abc import Callable
from typing import Any

# Generation budget. A grammar-constrained token is slow on a CPU, so these caps keep the
# longest answer a small schema allows short: a capped string is ~50 tokens
# of base-model rambling, and lists stop after a handful of items.
MAX_STRING_CHARS = 160
MAX_ARRAY_ITEMS = 5

# The JSON schema of instructor's JSON mode (and of our gateway's instruction) follows these
# words in the system message.
_SCHEMA_MARKER = re.compile(r"json[ _]schema\s*:", re.IGNORECASE)
# llama-cpp-python's converter lets raw control characters (newlines…) into strings, which
# strict JSON parsers such as pydantic's reject; llama.cpp's own JSON grammar excludes them.
_LOOSE_CHAR = 'char ::= [^"\\\\] |'
_STRICT_CHAR = 'char ::= [^"\\\\\\x7F\\x00-\\x1F] |'
_LOOSE_STRING = 'string ::= "\\"" char* "\\""'
_CAPPED_STRING = f'string ::= "\\"" char{{0,{MAX_STRING_CHARS}}} "\\""'


def message_text(content: Any) -> str:
    """The text of a message's content: a string, or the text parts of a content list."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            part.get("text", "") if isinstance(part, dict) else str(part) for part in content
        )
    return str(content)


def _schema_in_messages(messages: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The JSON schema embedded after ``json_schema:`` in a system message, if any."""
    decoder = json.JSONDecoder()
    for message in messages:
        if message.get("role") not in {"system", "developer"}:
            continue
        text = message_text(message.get("content"))
        for match in _SCHEMA_MARKER.finditer(text):
            start = text.find("{", match.end())
            if start < 0:
                continue
            with contextlib.suppress(ValueError):
                schema, _ = decoder.raw_decode(text, start)
                if isinstance(schema, dict):
                    return schema
    return None


# Where a schema nests sub-schemas: keyword → how (one schema, a list, or a name → schema map).
_SUBSCHEMA_ONE = ("items", "additionalProperties", "not", "contains", "propertyNames")
_SUBSCHEMA_LIST = ("anyOf", "oneOf", "allOf", "prefixItems")
_SUBSCHEMA_MAP = ("properties", "$defs", "definitions", "patternProperties")


def _map_schema(schema: Any, fn: Callable[[dict[str, Any]], dict[str, Any]]) -> Any:
    """Apply ``fn`` to every (sub-)schema, bottom-up, on a copy.

    Only schema positions are visited, so a property *named* ``pattern`` or ``type`` or a
    ``default`` value that happens to look like a schema is left alone.
    """
    if not isinstance(schema, dict):
        return schema
    out = dict(schema)
    for key in _SUBSCHEMA_ONE:
        if isinstance(out.get(key), dict):
            out[key] = _map_schema(out[key], fn)
        elif key == "items" and isinstance(out.get(key), list):  # draft-4 tuples
            out[key] = [_map_schema(item, fn) for item in out[key]]
    for key in _SUBSCHEMA_LIST:
        if isinstance(out.get(key), list):
            out[key] = [_map_schema(item, fn) for item in out[key]]
    for key in _SUBSCHEMA_MAP:
        if isinstance(out.get(key), dict):
            out[key] = {name: _map_schema(sub, fn) for name, sub in out[key].items()}
    return fn(out)


# How ragas describes its integer verdicts instead of bounding them: "Binary (0/1) verdict",
# "the verdict(0/1)", "Accuracy rating (0, 2, or 4)", "Score from 1-5", "1 to 5 score",
# "1 if the response is evasive/vague, 0 if it is substantive".
_DESCRIBED_RANGE = re.compile(r"\b(\d{1,3})\s*(?:-|–|to)\s*(\d{1,3})\b")
_DESCRIBED_LIST = re.compile(r"\b\d{1,3}(?:\s*(?:/|,|,?\s*or)\s*\d{1,3})+\b")
_DESCRIBED_IF = re.compile(r"\b(\d{1,3}) if\b")


def _described_integers(description: str) -> list[int] | None:
    """The integer values a field's description allows, when it spells them out.

    Without this, the base model writes ``1000000000000000`` for a "Binary (0/1) verdict"
    (it likes to repeat digits) and ragas turns that into a precision of 10^15.
    """
    if match := _DESCRIBED_LIST.search(description):
        values = sorted({int(v) for v in re.findall(r"\d+", match.group(0))})
    elif match := _DESCRIBED_RANGE.search(description):
        low, high = int(match.group(1)), int(match.group(2))
        values = list(range(low, high + 1)) if low < high else []
    else:
        values = sorted({int(v) for v in _DESCRIBED_IF.findall(description)})
        values = values if len(values) > 1 else []
    if re.search(r"\bbinary\b", description, re.IGNORECASE) and not values:
        values = [0, 1]
    return values if 1 < len(values) <= 101 else None


def _range_as_enum(node: dict[str, Any]) -> dict[str, Any]:
    """A bounded integer or number as an ``enum``: the converter ignores ``minimum``/``maximum``.

    Integers with at most 101 values become exactly those values; numbers become 21 evenly
    spaced values (coarse, but always valid, which is what a smoke-test judge needs). An
    unbounded integer whose description spells out its values gets those values.
    """
    kind = node.get("type")
    if kind not in {"integer", "number"} or "enum" in node or "const" in node:
        return node
    low = node.get("minimum", node.get("exclusiveMinimum"))
    high = node.get("maximum", node.get("exclusiveMaximum"))
    if low is None and high is None and kind == "integer":
        described = _described_integers(str(node.get("description") or ""))
        if described:
            return {**{k: v for k, v in node.items() if k != "type"}, "enum": described}
    if not isinstance(low, int | float) or not isinstance(high, int | float) or high < low:
        return node
    if kind == "integer":
        first = math.ceil(low) if "minimum" in node else math.floor(low) + 1
        last = math.floor(high) if "maximum" in node else math.ceil(high) - 1
        values: list[Any] = list(range(first, last + 1))
        if not values or len(values) > 101:
            return node
    else:
        values = [round(low + (high - low) * i / 20, 6) for i in range(21)]
        values = [
            v
            for v in values
            if not ("exclusiveMinimum" in node and v <= low)
            and not ("exclusiveMaximum" in node and v >= high)
        ]
    bounds = {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "type"}
    return {**{k: v for k, v in node.items() if k not in bounds}, "enum": values}


def _cap_one(node: dict[str, Any]) -> dict[str, Any]:
    node = _range_as_enum(node)
    kind = node.get("type")
    kinds = kind if isinstance(kind, list) else [kind]
    constrained = any(k in node for k in ("enum", "const", "pattern")) or node.get("format") in {
        "date",
        "time",
        "date-time",
        "uuid",
    }
    # Caps never go below the schema's own minimum: the answer must still validate.
    if "string" in kinds and not constrained:
        cap = min(int(node.get("maxLength", MAX_STRING_CHARS)), MAX_STRING_CHARS)
        node["maxLength"] = max(int(node.get("minLength", 0)), cap)
    if "array" in kinds:
        cap = min(int(node.get("maxItems", MAX_ARRAY_ITEMS)), MAX_ARRAY_ITEMS)
        node["maxItems"] = max(int(node.get("minItems", 0)), cap)
    return node


def _bounded(schema: Any) -> Any:
    """A copy of ``schema`` with length caps on free-text strings and on arrays.

    Args:
        schema: A JSON schema.

    Returns:
        The bounded copy.
    """
    return _map_schema(schema, _cap_one)


def _without(schema: Any, keywords: frozenset[str]) -> Any:
    """A copy of ``schema`` with the given keywords removed from every (sub-)schema."""
    return _map_schema(schema, lambda node: {k: v for k, v in node.items() if k not in keywords})


def _tighten(gbnf: str) -> str:
    """Make converter output strict and bounded: no control characters, capped free strings."""
    # The generic ``string`` rule (dictionary keys, untyped values) has no cap of its own.
    return gbnf.replace(_LOOSE_CHAR, _STRICT_CHAR).replace(_LOOSE_STRING, _CAPPED_STRING)


@functools.lru_cache(maxsize=256)
def schema_grammars(schema_json: str) -> tuple[str, ...]:
    r"""Candidate GBNF grammars for a JSON schema, strictest first.

    llama-cpp-python's converter sometimes fails, or emits a grammar llama.cpp cannot parse
    (regex classes such as ``\d`` in ``pattern``). The candidates are: the schema with
    length caps, the same without ``pattern``, then also without ``format`` keywords, and a
    generic JSON grammar; the caller uses the first one llama.cpp accepts.

    Args:
        schema_json: The schema as JSON text (a string so that results can be cached).

    Returns:
        The grammar texts, never empty.
    """
    from llama_cpp import llama_grammar

    schema = json.loads(schema_json)
    candidates: list[str] = []
    for candidate in (
        _bounded(schema),
        _bounded(_without(schema, frozenset({"pattern"}))),
        _bounded(_without(schema, frozenset({"pattern", "format"}))),
    ):
        try:
            gbnf = _tighten(llama_grammar.json_schema_to_gbnf(json.dumps(candidate)))
        except Exception:  # noqa: BLE001 - any converter failure means "try simpler"
            continue
        if gbnf not in candidates:
            candidates.append(gbnf)
    candidates.append(llama_grammar.JSON_GBNF)
    return tuple(candidates)


def grammar_for(
    optional_params: dict[str, Any], messages: list[dict[str, Any]]
) -> tuple[str, ...] | None:
    """The grammars a request asks for through ``response_format``, or None for free text."""
    fmt = optional_params.get("response_format")
    to_schema = getattr(fmt, "model_json_schema", None)
    if callable(to_schema):  # a pydantic class passed straight through
        fmt = {"type": "json_schema", "json_schema": {"schema": to_schema()}}
    if not isinstance(fmt, dict):
        return None
    from llama_cpp import llama_grammar

    schema: Any = None
    if fmt.get("type") == "json_schema":
        spec = fmt.get("json_schema") or {}
        schema = spec.get("schema") if isinstance(spec, dict) else None
    elif fmt.get("type") == "json_object":
        schema = _schema_in_messages(messages)
    else:
        return None
    if isinstance(schema, dict):
        return schema_grammars(json.dumps(schema))
    return (llama_grammar.JSON_GBNF,)


__all__ = [
    "MAX_ARRAY_ITEMS",
    "MAX_STRING_CHARS",
    "grammar_for",
    "message_text",
    "schema_grammars",
]
