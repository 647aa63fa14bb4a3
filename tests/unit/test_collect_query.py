"""Query templates, field mapping, corpus reading and chunking (no server needed)."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from ragaudit.config import load_config
from ragaudit.errors import ConfigError, InputError
from ragaudit.search import Chunking, Document, FieldMap, SearchError, chunk_documents, read_corpus
from ragaudit.search._query import (
    DEFAULT_QUERY_TEMPLATE,
    QueryBuilder,
    Template,
    TemplateRenderError,
)


def builder(template: object = None, **fields: object) -> QueryBuilder:
    return QueryBuilder(
        template,
        FieldMap(**fields),
        ("content_embedding",),
        where="collect.opensearch.query_template",
    )


def test_default_template_is_the_users_query() -> None:
    b = builder(text="metadata.content", filters={"company": "collection_info.collect_id"})
    assert b.body("主营业务", {"company": "东方航空公司"}, 200) == {
        "query": {
            "bool": {
                "must": [{"match_phrase": {"collection_info.collect_id": "东方航空公司"}}],
                "should": [{"match": {"metadata.content": {"query": "主营业务", "boost": 8}}}],
            }
        },
        "_source": {"excludes": ["content_embedding"]},
    }
    assert builder().body("q", {}, 5)["query"]["bool"]["must"] == []  # no filter, no must
    any_of = builder().body("q", {"collection": ["a", "b"]}, 5)["query"]["bool"]["must"]
    assert any_of == [
        {
            "bool": {
                "should": [
                    {"match_phrase": {"metadata.collection": "a"}},
                    {"match_phrase": {"metadata.collection": "b"}},
                ],
                "minimum_should_match": 1,
            }
        }
    ]


@pytest.mark.parametrize(
    "question", ['he said "stop" }, {"boost": 1000', "{{ 7*7 }} {% raw %}", "{{ filters }}\n"]
)
def test_a_question_cannot_change_the_query(question: str) -> None:
    body = builder().body(question, {"collection": "x"}, 5)
    assert body["query"]["bool"]["should"][0]["match"]["text"] == {"query": question, "boost": 8}
    assert json.loads(json.dumps(body)) == body


def test_whole_expressions_keep_their_type_and_text_mixes() -> None:
    t = Template(
        {"size_hint": "{{ top_n }}", "label": "q={{ question | upper }}", "{{ text_field }}": 1},
        where="t",
    )
    assert t.render({"top_n": 7, "question": "ab", "text_field": "body"}) == {
        "size_hint": 7,
        "label": "q=AB",
        "body": 1,
    }


def test_template_errors_name_the_field() -> None:
    with pytest.raises(
        ConfigError,
        match=r"^collect.x.a: 'q={{ question' is not a valid template: unexpected end of template",
    ):
        Template({"a": "q={{ question"}, where="collect.x")
    with pytest.raises(ConfigError, match=r"^collect.x: not valid JSON"):
        Template("{not json", where="collect.x")
    with pytest.raises(
        ConfigError, match="remove from, size: size and paging are set from collect.top_n"
    ):
        builder({"query": {"match_all": {}}, "size": 10, "from": 0})
    t = Template({"a": "{{ filters.company }}"}, where="collect.x")
    with pytest.raises(
        TemplateRenderError,
        match="collect.x does not render: 'dict object' has no attribute 'company'",
    ):
        t.render({"filters": {}})
    # The sandbox: a template cannot reach Python internals.
    with pytest.raises(TemplateRenderError, match="does not render"):
        Template({"a": "{{ question.__class__.__mro__ }}"}, where="collect.x").render(
            {"question": "q"}
        )


def test_json_text_template_from_the_config() -> None:
    cfg = load_config(
        None,
        {
            "collect": {
                "opensearch": {"query_template": '{"query": {"match": {"body": "{{ question }}"}}}'}
            }
        },
        environ={},
    )
    b = QueryBuilder(cfg.collect.opensearch.query_template, FieldMap(), (), where="w")
    assert b.body("hi", {}, 3) == {"query": {"match": {"body": "hi"}}}


def test_hits_read_through_the_field_mapping() -> None:
    b = builder(id="doc.uid", text="metadata.content", metadata="metadata")
    hit = b.hit(
        {
            "_id": "x",
            "_score": 2.5,
            "_source": {"doc": {"uid": "u1"}, "metadata": {"content": "text", "page": 3}},
        },
        rank=4,
    )
    assert (hit.id, hit.text, hit.rank, hit.score, hit.metadata) == (
        "u1",
        "text",
        4,
        2.5,
        {"page": 3},
    )
    with pytest.raises(SearchError, match="has no text field 'metadata.content'") as info:
        b.hit({"_id": "x", "_source": {"doc": {"uid": "u2"}, "metadata": {}}}, rank=1)
    assert info.value.kind == "mapping"
    assert b.document("u1", "text", {"page": 3}) == {
        "metadata": {"page": 3, "content": "text"},
        "doc": {"uid": "u1"},
    }


@pytest.mark.parametrize(
    ("opensearch", "field", "says"),
    [
        (
            {"hosts": ["https://elastic:pw@es.internal:9200"]},
            "collect.opensearch.hosts",
            "must not hold credentials",
        ),
        ({"password_env": "A", "api_key_env": "B"}, "collect.opensearch", "one kind of credential"),
        (
            {"password_env": "A", "password_secret": "b"},
            "collect.opensearch",
            "password_env or password_secret",
        ),
        ({"paging": "deep"}, "collect.opensearch.paging", "Input should be"),
        ({"page_size": 20_000}, "collect.opensearch.page_size", "less than or equal to 10000"),
    ],
)
def test_engine_config_errors_name_the_field(
    opensearch: dict[str, object], field: str, says: str
) -> None:
    with pytest.raises(ConfigError) as info:
        load_config(None, {"collect": {"opensearch": opensearch}}, environ={})
    assert str(info.value).startswith(f"config: {field}: ") and says in str(info.value)


# ---------------------------------------------------------------------------- corpora


def test_corpus_formats(tmp_path: Path) -> None:
    jsonl = tmp_path / "c.jsonl"
    jsonl.write_text(
        '{"id": 1, "text": "a", "title": "T", "metadata": {"collection": "x"}}\n\n{"text": "b"}\n',
        encoding="utf-8",
    )
    docs = read_corpus(jsonl)
    assert docs == [Document("1", "a", {"title": "T", "collection": "x"}), Document("c-3", "b", {})]
    pq.write_table(
        pa.table({"doc": ["p1", "p2"], "body": ["x", "y"], "collection": ["k", "k"]}),
        tmp_path / "c.parquet",
    )
    docs = read_corpus(tmp_path / "c.parquet", id_field="doc", text_field="body")
    assert [(d.id, d.text, d.metadata) for d in docs] == [
        ("p1", "x", {"collection": "k"}),
        ("p2", "y", {"collection": "k"}),
    ]
    folder = tmp_path / "docs"
    (folder / "sub").mkdir(parents=True)
    (folder / "a.md").write_text("# Alpha\n\ntext", encoding="utf-8")
    (folder / "sub" / "b.txt").write_text("plain", encoding="utf-8")
    (folder / "skip.pdf").write_bytes(b"%PDF")
    docs = read_corpus(folder)
    assert [(d.id, d.metadata["title"]) for d in docs] == [("a.md", "Alpha"), ("sub/b.txt", "b")]


def test_corpus_jsonl_keeps_unicode_line_separators_inside_strings(tmp_path: Path) -> None:
    text = "x\u2028y\u2029z\u0085w"
    jsonl = tmp_path / "c.jsonl"
    jsonl.write_text(
        json.dumps({"id": "d1", "text": text}, ensure_ascii=False) + "\n" + '{"text": "b"}\n',
        encoding="utf-8",
    )
    assert read_corpus(jsonl) == [Document("d1", text, {}), Document("c-2", "b", {})]


@pytest.mark.parametrize(
    ("name", "content", "says"),
    [
        (
            "bad.jsonl",
            '{"id": "a", "text": "x"}\n{"id": "a", "text": "y"}\n',
            "line 2: id 'a' already used at line 1",
        ),
        ("bad.jsonl", '{"id": "a", "text": 3}\n', "line 1: 'text' is missing or not text"),
        (
            "bad.jsonl",
            '{"id": "a", "text": "x", "metadata": [1]}\n',
            "line 1: 'metadata' must be an object",
        ),
        ("bad.jsonl", "{nope\n", "line 1: not valid JSON"),
        ("bad.csv", "id,text\n", "use a .jsonl or .parquet file, or a folder of .txt/.md files"),
    ],
)
def test_corpus_errors_name_file_and_line(
    tmp_path: Path, name: str, content: str, says: str
) -> None:
    path = tmp_path / name
    path.write_text(content, encoding="utf-8")
    with pytest.raises(InputError) as info:
        read_corpus(path)
    assert str(info.value).startswith(str(path)) and says in str(info.value)


TEXT = (
    "# Handbook\n\n## Refunds\n\n"
    + "Refunds are paid within ten days of the request. " * 8
    + "\n\n## 退款\n\n"
    + "退款将在申请后十天内支付。" * 10
    + "\n"
)


def test_chunks_cover_the_text_with_overlap_and_stable_ids() -> None:
    doc = Document("h.md", TEXT, {"collection": "c"})
    chunks = chunk_documents([doc], Chunking(size=150, overlap=30), {"source": "cli"})
    assert len(chunks) > 3 and [c.id for c in chunks] == [f"h.md#{i}" for i in range(len(chunks))]
    assert all(len(c.text) <= 150 for c in chunks)
    assert all(c.metadata["collection"] == "c" and c.metadata["source"] == "cli" for c in chunks)
    spans = [(c.metadata["start"], c.metadata["end"]) for c in chunks]
    assert spans[0][0] == 0 and spans[-1][1] >= len(TEXT.rstrip()) - 1
    assert all(
        b[0] < a[1] for a, b in zip(spans, spans[1:], strict=False)
    )  # consecutive chunks overlap
    assert all(
        not c.text.endswith("## 退款") for c in chunks
    )  # a heading opens a chunk, never ends one
    assert (
        chunk_documents([doc], Chunking(size=150, overlap=30), {"source": "cli"}) == chunks
    )  # idempotent


def test_keep_context_prefixes_title_and_headings_and_tokens_unit() -> None:
    doc = Document("h.md", TEXT, {"title": "Handbook"})
    with_ctx = chunk_documents(
        [doc], Chunking(size=40, overlap=5, unit="tokens", keep_context=True)
    )
    zh = [c for c in with_ctx if "退款将" in c.text]
    assert zh and all(
        c.text.startswith("Handbook › 退款\n") or c.text.startswith("## 退款") for c in zh
    )
    assert all(c.metadata["context"].startswith("Handbook") for c in with_ctx)
    plain = chunk_documents([doc], Chunking(size=40, overlap=5, unit="tokens"))
    assert not any("context" in c.metadata for c in plain)
    # Plain windows run across sections; with context, a chunk stays inside its section.
    assert any("Refunds are" in c.text and "退款将" in c.text for c in plain)
    assert not any("Refunds are" in c.text and "退款将" in c.text for c in with_ctx)
    with pytest.raises(ValueError, match="overlap must be >= 0 and below the size 10"):
        Chunking(size=10, overlap=10)
    assert chunk_documents([doc], Chunking()) == [doc]  # no size: whole documents
    assert (
        DEFAULT_QUERY_TEMPLATE["query"]["bool"]["should"][0]["match"]["{{ text_field }}"]["boost"]
        == 8
    )
