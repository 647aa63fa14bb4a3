"""The audit's OTLP reader on a file the OpenTelemetry SDK's own OTLP JSON file exporter wrote."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from opentelemetry.exporter.otlp.json.file import FileSpanExporter
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.id_generator import IdGenerator

from ragaudit.audit import RedactOptions, SourceOptions, read_day

DAY = dt.date(2026, 11, 26)
T0 = int(dt.datetime(2026, 11, 26, 9, 30, tzinfo=dt.UTC).timestamp()) * 10**9


class FixedIds(IdGenerator):
    """Ids of hex letters and a counter: about one random trace id in twenty holds a run of
    digits the redactor reads as a phone number (the id is then hashed, and counted)."""

    def __init__(self) -> None:
        self.n = 0

    def _next(self, letters: int) -> int:
        self.n += 1
        return int("abcdef"[self.n % 6] * letters + f"{self.n:02x}", 16)

    def generate_span_id(self) -> int:
        return self._next(14)

    def generate_trace_id(self) -> int:
        return self._next(30)


def write_traces(path: Path) -> None:
    """Three requests as a RAG service instrumented with OpenInference or GenAI would trace them."""
    exporter = FileSpanExporter(path)
    provider = TracerProvider(id_generator=FixedIds())
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("rag-service")

    # OpenInference: a CHAIN root with the question and answer, a RETRIEVER, a RERANKER, an LLM.
    with tracer.start_as_current_span(
        "qa",
        start_time=T0,
        attributes={
            "openinference.span.kind": "CHAIN",
            "input.value": "How long do refunds take? mail ann@example.com",
            "output.value": "Five days [1].",
            "session.id": "sess-1",
            "metadata": json.dumps({"collection": "acme"}),
        },
    ):
        with tracer.start_as_current_span(
            "retrieve",
            attributes={
                "openinference.span.kind": "RETRIEVER",
                "input.value": "refunds duration",
                **{
                    f"retrieval.documents.{i}.document.{k}": v
                    for i, (doc, text, score) in enumerate(
                        [("d1", "Refunds take five days.", 3.0), ("d2", "Shipping.", 1.0)]
                    )
                    for k, v in (("id", doc), ("content", text), ("score", score))
                },
            },
        ):
            pass
        with tracer.start_as_current_span(
            "rerank",
            attributes={
                "openinference.span.kind": "RERANKER",
                "reranker.query": "refunds duration",
                "reranker.output_documents.0.document.id": "d2",
                "reranker.output_documents.0.document.content": "Shipping.",
                "reranker.output_documents.0.document.metadata": json.dumps(
                    {"content_hash": "abc123"}
                ),
                "reranker.output_documents.1.document.id": "d1",
                "reranker.output_documents.1.document.content": "Refunds take five days.",
            },
        ):
            pass
        with tracer.start_as_current_span(
            "llm",
            attributes={
                "openinference.span.kind": "LLM",
                "llm.input_messages.0.message.role": "system",
                "llm.input_messages.0.message.content": "Answer from the documents.",
                "llm.input_messages.1.message.role": "user",
                "llm.input_messages.1.message.content": "How long do refunds take?",
                "llm.output_messages.0.message.role": "assistant",
                "llm.output_messages.0.message.content": "Five days [1].",
            },
        ):
            pass

    # OTel GenAI: a retrieval span and a chat span under a plain root; the question and the
    # answer come from the retrieval query and the chat span's output messages.
    with tracer.start_as_current_span("POST /ask", start_time=T0 + 60 * 10**9):
        with tracer.start_as_current_span(
            "retrieval kb",
            attributes={
                "gen_ai.operation.name": "retrieval",
                "gen_ai.retrieval.query.text": "warranty length",
                "gen_ai.retrieval.documents": json.dumps(
                    [{"id": "w1", "score": 0.9}, {"id": "w2", "score": 0.4}]
                ),
                "gen_ai.conversation.id": "conv-9",
            },
        ):
            pass
        with tracer.start_as_current_span(
            "chat model",
            attributes={
                "gen_ai.operation.name": "chat",
                "gen_ai.input.messages": json.dumps(
                    [{"role": "user", "parts": [{"type": "text", "content": "warranty length"}]}]
                ),
                "gen_ai.output.messages": json.dumps(
                    [
                        {
                            "role": "assistant",
                            "parts": [{"type": "text", "content": "Two years."}],
                            "finish_reason": "stop",
                        }
                    ]
                ),
            },
        ):
            pass

    # A health check: no retrieval, no LLM: not a request, and counted as such.
    with tracer.start_as_current_span("GET /health", start_time=T0 + 120 * 10**9):
        pass
    provider.shutdown()


def test_traces_from_the_sdk_exporter_become_requests(tmp_path: Path) -> None:
    path = tmp_path / "traces" / "2026-11-26.jsonl"
    path.parent.mkdir()
    write_traces(path)
    lines = path.read_text().splitlines()
    assert len(lines) == 8 and all("resourceSpans" in json.loads(line) for line in lines)
    with path.open("a") as fh:
        fh.write('{"resourceSpans": "not a list"}\n')

    out = tmp_path / "requests.parquet"
    report = read_day(
        SourceOptions(format="otlp", path=str(tmp_path / "traces" / "{day}.jsonl")),
        RedactOptions(),
        DAY,
        segment="filters.collection",
        out=out,
        max_bad_share=0.5,
    )
    assert (report.records, report.bad) == (2, 2)
    reasons = sorted(r for _, r in report.bad_samples)
    assert reasons[0].startswith("not OTLP/JSON")
    assert reasons[1].endswith("no retrieval or LLM span")
    assert report.redactions == {"email": 1}

    oi, genai = sorted(pq.read_table(out).to_pylist(), key=lambda r: r["time"])
    assert len(oi["request_id"]) == 32  # the trace id, in hex
    assert oi["time"] == dt.datetime(2026, 11, 26, 9, 30, tzinfo=dt.UTC)
    assert oi["query"] == "How long do refunds take? mail [email]"
    assert oi["answer"] == "Five days [1]."
    assert oi["session"] == "sess-1"
    assert oi["segment"] == "acme" and json.loads(oi["filters"]) == {"collection": "acme"}
    # The reranker's output is what was served, in its order, with its logged hash.
    assert [(d["rank"], d["id"], d["content_hash"]) for d in oi["docs"]] == [
        (1, "d2", "abc123"),
        (2, "d1", None),
    ]
    assert oi["origin"].startswith(str(path))

    assert genai["query"] == "warranty length"
    assert genai["answer"] == "Two years."
    assert genai["session"] == "conv-9"
    assert genai["segment"] == "(none)"
    assert [(d["id"], d["score"], d["text"]) for d in genai["docs"]] == [
        ("w1", 0.9, None),
        ("w2", 0.4, None),
    ]


def test_spans_of_a_trace_spread_over_files_are_joined(tmp_path: Path) -> None:
    full = tmp_path / "all.jsonl"
    write_traces(full)
    lines = full.read_text().splitlines()
    # The first trace's child spans in one file, its root (exported last) in the next.
    (tmp_path / "2026-11-26-a.jsonl").write_text("\n".join(lines[:3]) + "\n")
    (tmp_path / "2026-11-26-b.jsonl").write_text("\n".join(lines[3:]) + "\n")
    report = read_day(
        SourceOptions(format="otlp", path=str(tmp_path / "{day}-*.jsonl")),
        RedactOptions(),
        DAY,
        segment="filters.collection",
        out=tmp_path / "r.parquet",
        max_bad_share=0.5,
    )
    assert (report.records, report.bad) == (2, 1)
    rows = pq.read_table(tmp_path / "r.parquet").to_pylist()
    assert sorted(len(r["docs"]) for r in rows) == [2, 2]


@pytest.mark.parametrize("hexed", [True, False])
def test_trace_ids_in_hex_and_in_base64_read_alike(tmp_path: Path, hexed: bool) -> None:
    from ragaudit.audit._otlp import parse_line

    tid = "5b8efff798038103d269b633813fc60c"
    import base64

    raw = tid if hexed else base64.b64encode(bytes.fromhex(tid)).decode()
    msg = parse_line({"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": raw}]}]}]})
    assert msg.resource_spans[0].scope_spans[0].spans[0].trace_id.hex() == tid


def test_a_trace_whose_root_comes_first_is_joined_with_its_spans_in_the_next_file(
    tmp_path: Path,
) -> None:
    full = tmp_path / "all.jsonl"
    write_traces(full)
    lines = full.read_text().splitlines()
    # The exporter rotated after the first trace's root: its retrieval, reranker and LLM
    # spans (exported before it) land in the next file, read after it.
    (tmp_path / "2026-11-26-a.jsonl").write_text(lines[3] + "\n")
    (tmp_path / "2026-11-26-b.jsonl").write_text("\n".join(lines[:3] + lines[4:]) + "\n")
    out = tmp_path / "r.parquet"
    report = read_day(
        SourceOptions(format="otlp", path=str(tmp_path / "{day}-*.jsonl")),
        RedactOptions(),
        DAY,
        segment="filters.collection",
        out=out,
        max_bad_share=0.5,
    )
    rows = pq.read_table(out).to_pylist()
    assert (report.records, report.bad, len(rows)) == (2, 1, 2)
    oi = min(rows, key=lambda r: r["time"])
    # One whole request: the root's question and answer with the reranker's documents.
    assert oi["query"] == "How long do refunds take? mail [email]"
    assert oi["answer"] == "Five days [1]."
    assert [d["id"] for d in oi["docs"]] == ["d2", "d1"]
    assert oi["origin"].endswith("2026-11-26-a.jsonl:1")
    assert report.duplicates == 0  # not two halves under one id, one of them left out


def test_a_deeply_nested_otlp_line_is_one_bad_record(tmp_path: Path) -> None:
    path = tmp_path / "2026-11-26.jsonl"
    write_traces(path)
    deep = '{"resourceSpans": ' + "[" * 100_000 + "]" * 100_000 + "}"
    nested_value = {"arrayValue": {"values": [{"stringValue": "x"}]}}
    for _ in range(200):  # deeper than protobuf's JSON reader goes
        nested_value = {"arrayValue": {"values": [nested_value]}}
    span = {"traceId": "ab" * 16, "spanId": "cd" * 8, "name": "x"}
    span["attributes"] = [{"key": "k", "value": nested_value}]
    too_deep = {"resourceSpans": [{"scopeSpans": [{"spans": [span]}]}]}
    with path.open("a") as fh:
        fh.write(deep + "\n" + json.dumps(too_deep) + "\n")
    report = read_day(
        SourceOptions(format="otlp", path=str(tmp_path / "{day}.jsonl")),
        RedactOptions(),
        DAY,
        segment="filters.collection",
        out=tmp_path / "r.parquet",
        max_bad_share=0.9,
    )
    assert (report.records, report.bad) == (2, 3)
    reasons = [r for _, r in report.bad_samples]
    assert "nested too deeply to read as JSON" in reasons
    assert any(r.startswith("not OTLP/JSON") for r in reasons)
