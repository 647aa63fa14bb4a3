"""OpenTelemetry trace files: the OTLP JSON file exporter's lines, spans of a trace joined.

Each line is one ``ExportTraceServiceRequest`` in OTLP/JSON, parsed with ``opentelemetry-proto``
and protobuf's JSON reader. The spans of one trace (they may arrive over several lines, in any
order) become one request: the user's question and the answer from the root span, the served
documents from the retrieval span (or a reranker's output when there is one), the answer from
the LLM span when the root does not carry it. Both span vocabularies are read:

- OpenInference: ``openinference.span.kind`` (CHAIN, RETRIEVER, RERANKER, LLM…),
  ``input.value``, ``output.value``, ``retrieval.documents.N.document.id|content|score|metadata``,
  ``reranker.output_documents.N.document.*``, ``llm.input_messages.N.message.role|content``,
  ``llm.output_messages.N.message.content``, ``session.id``, ``metadata`` (JSON).
- OTel GenAI: ``gen_ai.operation.name`` (``retrieval``, ``chat``…),
  ``gen_ai.retrieval.query.text``, ``gen_ai.retrieval.documents`` (JSON: id, score, content),
  ``gen_ai.input.messages`` / ``gen_ai.output.messages`` (JSON messages with text parts),
  ``gen_ai.conversation.id``.

The request's filters are the span ``metadata`` objects (root first, the retrieval span's
over it), so ``audit.segment: filters.collection`` reads a ``collection`` the service put there.
A trace is emitted once its root span has been read (the SDK exports a root after its
children, so within a file the root closes it) and no later file of the day holds a span of it:
with several files, a first pass reads the trace ids of every file but the first (as JSON,
without protobuf) to know where each trace's last span is, so the spans a file exporter wrote
after rotating mid-trace join their root. Traces without a root are emitted at the end.
"""

from __future__ import annotations

import base64
import contextlib
import datetime as dt
import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ragaudit.audit._records import (
    Bad,
    Partition,
    Request,
    Unmappable,
    as_docs,
    as_object,
    json_records,
    reader,
)
from ragaudit.errors import clip
from ragaudit.registry import NoOptions

if TYPE_CHECKING:
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
    from opentelemetry.proto.common.v1.common_pb2 import AnyValue

_OI_KIND = "openinference.span.kind"
_GENAI_OP = "gen_ai.operation.name"
_ROOT_KINDS = {"CHAIN", "AGENT"}
_RETRIEVAL_OPS = {"retrieval"}
_LLM_OPS = {"chat", "text_completion", "generate_content"}
_ID_FIELDS = {"traceId": 16, "spanId": 8, "parentSpanId": 8}
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


@dataclass
class Span:
    """One span, flattened: its ids, times and attributes as Python values."""

    span_id: str
    parent_id: str
    name: str
    start_ns: int
    end_ns: int
    attrs: dict[str, Any]

    @property
    def kind(self) -> str:
        """``RETRIEVER``, ``RERANKER``, ``LLM``, ``CHAIN``… from either vocabulary."""
        oi = self.attrs.get(_OI_KIND)
        if isinstance(oi, str):
            return oi.upper()
        op = self.attrs.get(_GENAI_OP)
        if op in _RETRIEVAL_OPS:
            return "RETRIEVER"
        if op in _LLM_OPS:
            return "LLM"
        if op == "invoke_agent":
            return "AGENT"
        return ""


@dataclass
class _Trace:
    origin: str
    spans: list[Span] = field(default_factory=list)
    rooted: bool = False


def _value(v: AnyValue) -> Any:
    which = v.WhichOneof("value")
    if which == "array_value":
        return [_value(x) for x in v.array_value.values]
    if which == "kvlist_value":
        return {kv.key: _value(kv.value) for kv in v.kvlist_value.values}
    if which is None:
        return None
    return getattr(v, which)


def _items(obj: Any, key: str) -> list[dict[str, Any]]:
    value = obj.get(key) if isinstance(obj, dict) else None
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def _ids_to_base64(line: Any) -> None:
    # OTLP/JSON writes trace and span ids as hex, where protobuf's JSON mapping of a bytes field
    # expects base64: convert them before parsing (base64 ids, by length, are left alone).
    # A malformed shape is left as it is, for protobuf's parser to name.
    for rs in _items(line, "resourceSpans"):
        for ss in _items(rs, "scopeSpans"):
            for span in _items(ss, "spans"):
                for name, size in _ID_FIELDS.items():
                    raw = span.get(name)
                    if isinstance(raw, str) and len(raw) == 2 * size:
                        # Not hex: left as it is, for protobuf to report.
                        with contextlib.suppress(ValueError):
                            span[name] = base64.b64encode(bytes.fromhex(raw)).decode()


def parse_line(obj: Any) -> ExportTraceServiceRequest:
    """One OTLP/JSON line (already decoded) as the protobuf message.

    Raises:
        ValueError: it is not an ``ExportTraceServiceRequest``.
    """
    # Imported on first use: a day read from another format needs no protobuf.
    from google.protobuf import json_format
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )

    if not isinstance(obj, dict):
        raise ValueError(f"a {type(obj).__name__}, not an OTLP export request")
    _ids_to_base64(obj)
    msg = ExportTraceServiceRequest()
    try:
        json_format.ParseDict(obj, msg, ignore_unknown_fields=True)
    except json_format.ParseError as exc:
        raise ValueError(f"not OTLP/JSON ({clip(str(exc), 100)})") from None
    except RecursionError:
        raise ValueError("not OTLP/JSON (nested too deeply)") from None
    return msg


def _hex_id(raw: Any) -> str | None:
    """A trace id as written (hex, or base64 as protobuf's JSON mapping has it) in hex."""
    if not isinstance(raw, str) or not raw:
        return None
    if len(raw) == 2 * _ID_FIELDS["traceId"]:
        with contextlib.suppress(ValueError):
            return bytes.fromhex(raw).hex()
    try:
        # protobuf's JSON reader takes either base64 alphabet, padded or not.
        std = raw.replace("-", "+").replace("_", "/")
        return base64.b64decode(std + "=" * (-len(std) % 4), validate=True).hex()
    except ValueError:
        return None


def _last_lines(files: list[str]) -> dict[str, tuple[int, int]]:
    """Where the last span of each trace with a span after the first file is.

    (index of the file, record of that file); a trace of the first file alone needs no entry.
    """
    last: dict[str, tuple[int, int]] = {}
    for index, path in enumerate(files[1:], start=1):
        for n, (_, line) in enumerate(json_records([path])):
            for rs in _items(line, "resourceSpans"):
                for ss in _items(rs, "scopeSpans"):
                    for span in _items(ss, "spans"):
                        trace_id = _hex_id(span.get("traceId"))
                        if trace_id is not None:
                            last[trace_id] = (index, n)
    return last


def _spans(msg: ExportTraceServiceRequest) -> Iterator[tuple[str, Span]]:
    for rs in msg.resource_spans:
        for ss in rs.scope_spans:
            for s in ss.spans:
                yield (
                    s.trace_id.hex(),
                    Span(
                        span_id=s.span_id.hex(),
                        parent_id=s.parent_span_id.hex(),
                        name=s.name,
                        start_ns=s.start_time_unix_nano,
                        end_ns=s.end_time_unix_nano,
                        attrs={kv.key: _value(kv.value) for kv in s.attributes},
                    ),
                )


def _json(value: Any) -> Any:
    if isinstance(value, str):
        try:
            return json.loads(value)
        except (ValueError, RecursionError):  # not JSON, or nested too deeply to read: no value
            return None
    return value


def _indexed(attrs: Mapping[str, Any], prefix: str) -> list[dict[str, Any]]:
    """``prefix.N.rest`` attributes as a list of dicts (``rest`` → value), by N."""
    items: dict[int, dict[str, Any]] = {}
    for key, value in attrs.items():
        if key.startswith(prefix):
            n, _, rest = key[len(prefix) :].partition(".")
            if n.isdigit():
                items.setdefault(int(n), {})[rest] = value
    return [items[n] for n in sorted(items)]


def _oi_docs(attrs: Mapping[str, Any], prefix: str) -> list[dict[str, Any]]:
    out = []
    for d in _indexed(attrs, prefix):
        meta = _json(d.get("document.metadata"))
        meta = meta if isinstance(meta, Mapping) else {}
        out.append(
            {
                "id": d.get("document.id"),
                "text": d.get("document.content"),
                "score": d.get("document.score"),
                "content_hash": meta.get("content_hash"),
            }
        )
    return out


def _genai_docs(attrs: Mapping[str, Any]) -> list[dict[str, Any]] | None:
    docs = _json(attrs.get("gen_ai.retrieval.documents"))
    if not isinstance(docs, list):
        return None
    return [
        {
            "id": d.get("id"),
            "text": d.get("content", d.get("text")),
            "score": d.get("score"),
            "content_hash": d.get("content_hash"),
        }
        if isinstance(d, Mapping)
        else d
        for d in docs
    ]


def _message_text(message: Any) -> str | None:
    # GenAI messages carry parts ({"type": "text", "content": …}); older ones a content string.
    if not isinstance(message, Mapping):
        return None
    if isinstance(message.get("content"), str):
        return str(message["content"])
    texts = [
        str(p["content"])
        for p in message.get("parts") or ()
        if isinstance(p, Mapping) and p.get("type") == "text" and isinstance(p.get("content"), str)
    ]
    return "\n".join(texts) if texts else None


def _user_question(span: Span) -> str | None:
    oi = [
        m.get("message.content")
        for m in _indexed(span.attrs, "llm.input_messages.")
        if m.get("message.role") == "user"
    ]
    if oi and isinstance(oi[-1], str):
        return oi[-1]
    messages = _json(span.attrs.get("gen_ai.input.messages"))
    if isinstance(messages, list):
        users = [
            _message_text(m) for m in messages if isinstance(m, Mapping) and m.get("role") == "user"
        ]
        users = [u for u in users if u]
        if users:
            return users[-1]
    return None


def _llm_answer(span: Span) -> str | None:
    oi = [m.get("message.content") for m in _indexed(span.attrs, "llm.output_messages.")]
    if oi and isinstance(oi[-1], str):
        return oi[-1]
    messages = _json(span.attrs.get("gen_ai.output.messages"))
    if isinstance(messages, list):
        texts = [t for t in map(_message_text, messages) if t]
        if texts:
            return texts[-1]
    out = span.attrs.get("output.value")
    return out if isinstance(out, str) else None


def _text_input(span: Span) -> str | None:
    value = span.attrs.get("input.value")
    if not isinstance(value, str) or not value:
        return None
    if span.attrs.get("input.mime_type") == "application/json":
        obj = _json(value)
        if isinstance(obj, Mapping):
            for key in ("query", "question", "input"):
                if isinstance(obj.get(key), str):
                    return str(obj[key])
            return None
    return value


def _request(trace_id: str, trace: _Trace) -> Request | Bad:
    spans = sorted(trace.spans, key=lambda s: (s.start_ns, s.end_ns))
    ids = {s.span_id for s in spans}
    roots = [s for s in spans if not s.parent_id or s.parent_id not in ids]
    root = roots[0] if roots else spans[0]
    retrievers = [s for s in spans if s.kind == "RETRIEVER"]
    rerankers = [s for s in spans if s.kind == "RERANKER"]
    llms = [s for s in spans if s.kind == "LLM"]
    where = f"trace {trace_id}"
    if not (retrievers or llms):
        return Bad(trace.origin, f"{where}: no retrieval or LLM span")
    root_is_request = root.kind in _ROOT_KINDS
    query = (
        (_text_input(root) if root_is_request else None)
        or next((q for s in rerankers if isinstance(q := s.attrs.get("reranker.query"), str)), None)
        or next(
            (
                q
                for s in retrievers
                if isinstance(
                    q := s.attrs.get("gen_ai.retrieval.query.text") or _text_input(s), str
                )
            ),
            None,
        )
        or next((q for s in reversed(llms) if (q := _user_question(s))), None)
    )
    if not query:
        return Bad(
            trace.origin, f"{where}: no question (root input, retrieval query or user message)"
        )
    answer = root.attrs.get("output.value") if root_is_request else None
    if not isinstance(answer, str) or not answer:
        answer = next((a for s in reversed(llms) if (a := _llm_answer(s))), None)
    served: list[Any] = []
    if rerankers:
        served = _oi_docs(rerankers[-1].attrs, "reranker.output_documents.")
    if not served and retrievers:
        last = retrievers[-1]
        served = _genai_docs(last.attrs) or _oi_docs(last.attrs, "retrieval.documents.")
    session = next(
        (
            v
            for s in spans
            for k in ("session.id", "gen_ai.conversation.id")
            if isinstance(v := s.attrs.get(k), str) and v
        ),
        None,
    )
    try:
        filters: dict[str, Any] = {}
        for s in [root, *retrievers]:
            filters.update(as_object(s.attrs.get("metadata"), f"metadata of span {s.name!r}"))
        docs = as_docs(served)
    except Unmappable as exc:
        return Bad(trace.origin, f"{where}: {exc}")
    # start_time_unix_nano is a fixed64: at most year 2554, always a datetime.
    return Request(
        request_id=trace_id,
        query=query,
        origin=trace.origin,
        time=_EPOCH + dt.timedelta(microseconds=root.start_ns // 1000) if root.start_ns else None,
        session=session,
        filters=filters,
        docs=docs,
        answer=answer,
    )


@reader("otlp")
def read_traces(options: NoOptions, part: Partition) -> Iterator[Request | Bad]:
    """Every trace of the day's files as one request, or a Bad.

    A request's origin is the file and line of its trace's first span; a line that is not
    OTLP/JSON and a trace with neither a retrieval nor an LLM span are Bad. The format takes
    no options. A line is a batch of spans, not a record: ``max_record_bytes`` bounds the
    requests made of them, not the line.
    """
    last = _last_lines(part.files)
    open_traces: dict[str, _Trace] = {}
    for index, path in enumerate(part.files):
        for n, (origin, obj) in enumerate(json_records([path])):
            if isinstance(obj, Bad):
                yield obj
                continue
            try:
                msg = parse_line(obj)
            except ValueError as exc:
                yield Bad(origin, str(exc))
                continue
            touched = []
            for trace_id, span in _spans(msg):
                trace = open_traces.setdefault(trace_id, _Trace(origin))
                trace.spans.append(span)
                trace.rooted = trace.rooted or not span.parent_id
                touched.append(trace_id)
            # A trace is closed once its root and its last span are read: within one line the
            # root may come before its children, and a later line or file may hold more spans.
            here = (index, n)
            for trace_id in dict.fromkeys(touched):
                if open_traces[trace_id].rooted and last.get(trace_id, here) <= here:
                    yield _request(trace_id, open_traces.pop(trace_id))
    for trace_id, trace in open_traces.items():
        yield _request(trace_id, trace)


__all__ = ["Span", "parse_line", "read_traces"]
