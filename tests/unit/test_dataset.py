"""Question sets: every format and naming loads; each malformation names file, row and column."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from ragaudit.dataset import Question, load_questions
from ragaudit.errors import InputError

ROWS: list[dict[str, Any]] = [
    {
        "question_id": "a1",
        "question": "What does the warranty cover?",
        "reference": "Parts and labour for two years.",
        "reference_context_ids": ["doc-1", "doc-7"],
        "filters": {"collection": "acme"},
        "metadata": {"source": "support"},
    },
    {
        "question_id": "a2",
        "question": "海信电视的画质怎么样？",
        "response": "画质很好。",
        "reference_contexts": ["海信电视的画质很好，性价比高。"],
    },
]


def write_jsonl(path: Path, rows: list[Any]) -> Path:
    path.write_text(
        "\n".join(json.dumps(r, ensure_ascii=False) for r in rows) + "\n", encoding="utf-8"
    )
    return path


def check_rows(questions: list[Question]) -> None:
    assert [q.question_id for q in questions] == ["a1", "a2"]
    first, second = questions
    assert first.question == "What does the warranty cover?"
    assert first.reference == "Parts and labour for two years."
    assert first.reference_context_ids == ["doc-1", "doc-7"]
    assert first.filters == {"collection": "acme"}
    assert first.metadata == {"source": "support"}
    assert first.response is None and first.reference_contexts is None
    assert first.language == "en"
    assert second.response == "画质很好。"
    assert second.reference_contexts == ["海信电视的画质很好，性价比高。"]
    assert second.language == "zh"
    assert second.reference is None and second.filters == {} and second.metadata == {}


# -- formats --------------------------------------------------------------------------------


def test_jsonl(tmp_path: Path) -> None:
    check_rows(load_questions(write_jsonl(tmp_path / "q.jsonl", ROWS)))


def test_jsonl_keeps_unicode_line_separators_inside_strings(tmp_path: Path) -> None:
    # json.dumps leaves U+2028, U+2029 and U+0085 unescaped (ensure_ascii=False); only "\n"
    # ends a JSONL line. A "\r\n" file still reads.
    text = "a\u2028b\u2029c\u0085d"
    path = tmp_path / "q.jsonl"
    lines = [json.dumps({"id": "s1", "question": text}, ensure_ascii=False), json.dumps(ROWS[0])]
    path.write_text("\r\n".join(lines) + "\r\n", encoding="utf-8", newline="")
    questions = load_questions(path)
    assert [q.question for q in questions] == [text, ROWS[0]["question"]]


def test_json_list_and_ragas_samples_shape(tmp_path: Path) -> None:
    plain = tmp_path / "q.json"
    plain.write_text(json.dumps(ROWS, ensure_ascii=False), encoding="utf-8")
    check_rows(load_questions(plain))
    wrapped = tmp_path / "samples.json"
    wrapped.write_text(json.dumps({"samples": ROWS}, ensure_ascii=False), encoding="utf-8")
    check_rows(load_questions(wrapped))


def test_csv_with_json_cells(tmp_path: Path) -> None:
    path = tmp_path / "q.csv"
    lines = [
        "question_id,question,reference,reference_context_ids,filters,metadata,response,"
        "reference_contexts",
        'a1,What does the warranty cover?,Parts and labour for two years.,"[""doc-1"", ""doc-7""]",'
        '"{""collection"": ""acme""}","{""source"": ""support""}",,',
        'a2,海信电视的画质怎么样？,,,,,画质很好。,"[""海信电视的画质很好，性价比高。""]"',
    ]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    check_rows(load_questions(path))


def test_csv_with_utf8_bom(tmp_path: Path) -> None:
    path = tmp_path / "q.csv"
    path.write_bytes("\ufeffquestion\nWhat is BM25?\n".encode())
    (q,) = load_questions(path)
    assert q.question == "What is BM25?" and q.question_id == "q0001"


def test_parquet_with_list_and_struct_columns(tmp_path: Path) -> None:
    path = tmp_path / "q.parquet"
    pl.DataFrame(
        {
            "question_id": ["a1", "a2"],
            "question": [ROWS[0]["question"], ROWS[1]["question"]],
            "reference": [ROWS[0]["reference"], None],
            "reference_context_ids": [["doc-1", "doc-7"], None],
            "reference_contexts": [None, ROWS[1]["reference_contexts"]],
            "response": [None, ROWS[1]["response"]],
            "filters": [json.dumps({"collection": "acme"}), None],
            "metadata": [{"source": "support"}, None],
        }
    ).write_parquet(path)
    check_rows(load_questions(path))


def test_ragas_field_names(tmp_path: Path) -> None:
    rows = [
        {
            "user_input": "Who wrote Hamlet?",
            "retrieved_contexts": ["Hamlet is a tragedy by William Shakespeare."],
            "reference_contexts": ["Shakespeare wrote Hamlet around 1600."],
            "response": "Shakespeare.",
            "reference": "William Shakespeare wrote Hamlet.",
        },
        {"user_input": "What is 2 + 2?", "response": "4", "reference": "Four."},
    ]
    first, second = load_questions(write_jsonl(tmp_path / "ragas.jsonl", rows))
    assert first.question == "Who wrote Hamlet?"
    assert first.retrieved_contexts == ["Hamlet is a tragedy by William Shakespeare."]
    assert first.reference_contexts == ["Shakespeare wrote Hamlet around 1600."]
    assert first.response == "Shakespeare."
    assert first.reference == "William Shakespeare wrote Hamlet."
    assert (first.question_id, second.question_id) == ("q0001", "q0002")
    assert second.retrieved_contexts is None


def test_other_aliases_and_extra_columns_go_to_metadata(tmp_path: Path) -> None:
    rows = [
        {
            "id": 7,
            "query": "  Why is the sky blue?  ",
            "answer": "Rayleigh scattering.",
            "ground_truth": "Scattering of sunlight.",
            "difficulty": "easy",
        }
    ]
    (q,) = load_questions(write_jsonl(tmp_path / "q.jsonl", rows))
    assert q.question_id == "7"
    assert q.question == "Why is the sky blue?"
    assert q.response == "Rayleigh scattering."
    assert q.reference == "Scattering of sunlight."
    assert q.metadata == {"difficulty": "easy"}


def test_limit_and_blank_lines(tmp_path: Path) -> None:
    path = tmp_path / "q.jsonl"
    path.write_text(
        '{"question": "one"}\n\n{"question": "two"}\n{"question": "three"}\n', encoding="utf-8"
    )
    assert [q.question for q in load_questions(path)] == ["one", "two", "three"]
    assert [q.question for q in load_questions(path, limit=2)] == ["one", "two"]


@pytest.mark.parametrize(
    ("text", "lang"),
    [
        ("截至和截止有什么区别？", "zh"),
        ("海信 TV 的画质怎么样？", "zh"),
        ("How does the warranty work?", "en"),
        ("What does 画质 mean in this long English sentence about televisions?", "en"),
    ],
)
def test_language_detection(tmp_path: Path, text: str, lang: str) -> None:
    (q,) = load_questions(write_jsonl(tmp_path / "q.jsonl", [{"question": text}]))
    assert q.language == lang


def test_explicit_language_wins(tmp_path: Path) -> None:
    (q,) = load_questions(
        write_jsonl(tmp_path / "q.jsonl", [{"question": "Bonjour", "language": "fr"}])
    )
    assert q.language == "fr"


# -- errors ---------------------------------------------------------------------------------


def load_error(path: Path) -> str:
    with pytest.raises(InputError) as info:
        load_questions(path)
    return str(info.value)


def test_missing_question_column(tmp_path: Path) -> None:
    path = tmp_path / "q.csv"
    path.write_text("question_id,prompt\na,hello\n", encoding="utf-8")
    message = load_error(path)
    assert str(path) in message and "column 'question'" in message and "missing" in message


def test_empty_question_names_line_and_column(tmp_path: Path) -> None:
    path = write_jsonl(
        tmp_path / "q.jsonl", [{"question": "fine"}, {"question": "also fine"}, {"question": "   "}]
    )
    assert load_error(path) == f"{path}: line 3, column 'question': empty or missing"


def test_empty_question_in_csv_counts_the_header_line(tmp_path: Path) -> None:
    path = tmp_path / "q.csv"
    path.write_text("question_id,question\na,one\nb,\n", encoding="utf-8")
    assert load_error(path) == f"{path}: line 3, column 'question': empty or missing"


def test_empty_question_in_parquet_names_the_row(tmp_path: Path) -> None:
    path = tmp_path / "q.parquet"
    pl.DataFrame({"question": ["ok", None, "ok too"]}).write_parquet(path)
    assert load_error(path) == f"{path}: row 2, column 'question': empty or missing"


def test_duplicate_id_names_both_positions(tmp_path: Path) -> None:
    path = write_jsonl(
        tmp_path / "q.jsonl",
        [
            {"question_id": "x", "question": "a"},
            {"question_id": "y", "question": "b"},
            {"question_id": "x", "question": "c"},
        ],
    )
    message = load_error(path)
    assert message.startswith(f"{path}: line 3, column 'question_id'")
    assert "duplicate id 'x'" in message and "first at line 1" in message


def test_duplicate_id_across_int_and_str(tmp_path: Path) -> None:
    path = write_jsonl(
        tmp_path / "q.jsonl",
        [{"question_id": 5, "question": "a"}, {"question_id": "5", "question": "b"}],
    )
    assert "duplicate id '5' (first at line 1)" in load_error(path)


def test_empty_id_when_the_column_exists(tmp_path: Path) -> None:
    path = tmp_path / "q.csv"
    path.write_text("question_id,question\na,one\n,two\n", encoding="utf-8")
    assert load_error(path) == f"{path}: line 3, column 'question_id': empty"


def test_not_utf8_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "q.jsonl"
    path.write_bytes('{"question": "ok"}\n{"question": "café au lait"}\n'.encode("latin-1"))
    message = load_error(path)
    assert str(path) in message and "not UTF-8" in message
    assert "0xe9" in message and "line 2" in message


def test_bad_json_line(tmp_path: Path) -> None:
    path = tmp_path / "q.jsonl"
    path.write_text('{"question": "ok"}\n{"question": "unterminated\n', encoding="utf-8")
    message = load_error(path)
    assert message.startswith(f"{path}: line 2: not valid JSON")


def test_jsonl_line_that_is_not_an_object(tmp_path: Path) -> None:
    path = tmp_path / "q.jsonl"
    path.write_text('{"question": "ok"}\n["a", "list"]\n', encoding="utf-8")
    assert load_error(path) == f"{path}: line 2: expected a JSON object, got list"


def test_json_file_item_that_is_not_an_object(tmp_path: Path) -> None:
    path = tmp_path / "q.json"
    path.write_text('[{"question": "ok"}, "just a string"]', encoding="utf-8")
    assert load_error(path) == f"{path}: item 2: expected a JSON object, got str"


def test_json_file_not_a_list(tmp_path: Path) -> None:
    path = tmp_path / "q.json"
    path.write_text('{"question": "ok"}', encoding="utf-8")
    assert "expected a JSON list of objects" in load_error(path)


@pytest.mark.parametrize("value", ["just one context", [1, 2], {"a": "b"}])
def test_wrong_type_for_reference_contexts(tmp_path: Path, value: Any) -> None:
    path = write_jsonl(
        tmp_path / "q.jsonl", [{"question": "ok"}, {"question": "q", "reference_contexts": value}]
    )
    message = load_error(path)
    assert message.startswith(f"{path}: line 2, column 'reference_contexts': expected a list")


def test_wrong_type_for_filters_in_csv(tmp_path: Path) -> None:
    path = tmp_path / "q.csv"
    path.write_text('question,filters\nok,"[1, 2]"\n', encoding="utf-8")
    assert load_error(path) == f"{path}: line 2, column 'filters': expected an object (mapping)"


def test_unsupported_suffix_missing_file_and_empty_file(tmp_path: Path) -> None:
    odd = tmp_path / "q.txt"
    odd.write_text("question\nx\n", encoding="utf-8")
    assert "unsupported question-set format '.txt'" in load_error(odd)
    assert "file not found" in load_error(tmp_path / "nope.jsonl")
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n\n", encoding="utf-8")
    assert "empty" in load_error(empty)


def test_broken_parquet(tmp_path: Path) -> None:
    path = tmp_path / "q.parquet"
    path.write_bytes(b"PAR1 this is not parquet")
    assert load_error(path).startswith(f"{path}: not a readable Parquet file")


def test_iter_jsonl_reads_line_by_line_naming_a_bad_byte_and_keeping_u2028(tmp_path: Path) -> None:
    from ragaudit.dataset import iter_jsonl

    good = tmp_path / "good.jsonl"
    # A BOM before line 1, a CRLF line end, a blank line and U+2028 inside a string (which
    # str.splitlines would cut) all read as the records they are.
    good.write_bytes(b'\xef\xbb\xbf{"a": 1}\r\n\n{"b": "x\xe2\x80\xa8y"}\n')
    assert list(iter_jsonl(good)) == [(1, {"a": 1}), (3, {"b": "x\u2028y"})]

    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(b'{"a": 1}\n{"b": "\xff"}\n')
    with pytest.raises(InputError) as info:
        list(iter_jsonl(bad))
    assert str(info.value).startswith(f"{bad}: not UTF-8 text (byte 0xff at line 2, byte 8 ")


def test_iter_jsonl_reads_gzip_and_yields_or_raises_what_it_cannot_read(tmp_path: Path) -> None:
    import gzip

    from ragaudit.dataset import BadLine, iter_jsonl

    long = b'{"c": "' + b"x" * 300_000 + b'"}'
    lines = [b'{"a": 1}', b"[" * 50_000 + b"]" * 50_000, long, b"{no"]
    whole = tmp_path / "d.jsonl.gz"
    whole.write_bytes(gzip.compress(b"\n".join(lines) + b"\n"))
    got = list(iter_jsonl(whole, bad="yield", max_line_bytes=200_000))
    assert got == [
        (1, {"a": 1}),
        (2, BadLine("nested too deeply to read as JSON")),
        (3, BadLine("300,010 bytes long, more than 200,000")),
        (4, BadLine("not valid JSON (Expecting property name enclosed in double quotes)")),
    ]
    with pytest.raises(InputError, match=r"d.jsonl.gz: line 2: nested too deeply to read as JSON"):
        list(iter_jsonl(whole))
    only_long = tmp_path / "long.jsonl"
    only_long.write_bytes(b'{"a": 1}\n' + long + b"\n")
    with pytest.raises(InputError, match=r"long.jsonl: line 2: 300,010 bytes long, more than 2"):
        list(iter_jsonl(only_long, max_line_bytes=200_000))

    # A truncated gzip: the lines read before the cut, then one BadLine for the rest.
    cut = tmp_path / "cut.jsonl.gz"
    cut.write_bytes(gzip.compress(b'{"a": 1}\n' * 5000)[:-20])
    got = list(iter_jsonl(cut, bad="yield"))
    *read, (after, rest) = got
    assert read and all(value == {"a": 1} for _, value in read)
    assert isinstance(rest, BadLine) and rest.reason.startswith(
        f"cannot be read past line {after - 1}"
    )
    with pytest.raises(InputError, match="cut.jsonl.gz: cannot be read past line"):
        list(iter_jsonl(cut))
