"""Judgment formats (ragaudit.judgments): golden files per format, both directions.

Each format reads golden files written from its tool's documented examples and real files from
its tool's public repository (tests/data/judgments, NOTICE.md). Import: the (query, document,
grade) triples a file holds are read exactly. Export: what was imported into the judgment store
and exported in the same format reads back to the same triples, and exported to every other
format keeps every triple the target can represent, the loss report naming the rest.
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from support.paths import REPO_ROOT

from ragaudit.judging import JudgmentStore
from ragaudit.judgments import (
    Selection,
    as_frame,
    export_frame,
    file_bytes,
    format_names,
    import_read,
    make_format,
    scale_of,
    store_rows,
    with_texts,
)

DATA = REPO_ROOT / "tests" / "data" / "judgments"

Triple = tuple[str, str, float]

# Per file: the format, then the (query or query id, document, grade) triples it holds, in file
# order, as its tool's documentation or source says they mean.
GOLDEN: dict[str, tuple[str, list[Triple]]] = {
    "documented/quepid_ratings.csv": (
        "quepid-csv",
        [("star trek", "1370", 3), ("star trek", "193", 1), ("I like, commas!", "12180", 2)],
    ),
    "documented/quepid_book_judgements.csv": (
        "quepid-book-csv",
        [
            ("star trek", "1370", 3),
            ("star trek", "193", 1),
            ("star trek", "193", 1),
            ("star wars", "12180", 0),
            ("star trek", "1370", 2),
            ("star wars", "12180", 0),
        ],
    ),
    "documented/quepid_book.json": (
        "quepid-book",
        [("star trek", "1370", 3), ("star trek", "1370", 2), ("star wars", "12180", 1)],
    ),
    "documented/quepid_hash.json": (
        "quepid-hash",
        [("star trek", "1370", 3), ("star trek", "193", 1), ("star wars", "12180", 2)],
    ),
    "documented/quepid_rre_export.json": (
        "rre",
        [("star trek", "docb", 1), ("star trek", "doca", 3), ("star wars", "12180", 2)],
    ),
    "documented/rre_ratings_topics.json": (
        "rre",
        [("fender", "1", 3), ("fender", "2", 2), ("fender", "3", 1)],
    ),
    "real/quepid_mock_rre.json": (
        "rre",
        [
            ("star trek", "193", 1),
            ("star trek", "157", 2),
            ("star trek", "152", 2),
            ("star wars", "12180", 1),
            ("star wars", "13532", 2),
            ("star wars", "1895", 2),
        ],
    ),
    "documented/quepid_ltr.txt": (
        "quepid-ltr",
        [("star trek", "1370", 3), ("star trek", "193", 1), ("star wars", "12180", 2)],
    ),
    "documented/srw_import_body.json": (
        "srw",
        [
            ("red dress", "B077ZJXCTS", 3),
            ("red dress", "B071S6LTJJ", 2),
            ("red dress", "B01IDSPDJI", 0),
            ("blue jeans", "B07L9V4Y98", 1),
            ("blue jeans", "B01N0DSRJC", 0),
        ],
    ),
    "documented/srw_stored_llm.json": (
        "srw",
        [
            ("red dress", "B077ZJXCTS", 0.9),
            ("red dress", "B071S6LTJJ", 0.4),
            ("blue jeans", "B07L9V4Y98", 0.7),
        ],
    ),
    "documented/srw_stored_ubi.json": (
        "srw",
        [
            ("laptop", "B0817YJBN5", 2.412),
            ("laptop", "B07FW397QN", 0.0),
            ("laptop", "B07G5KS48G", 0.873),
        ],
    ),
    "documented/es_rank_eval_docs.json": (
        "rank-eval",
        [
            ("amsterdam_query", "doc1", 0),
            ("amsterdam_query", "doc2", 3),
            ("amsterdam_query", "doc3", 1),
            ("berlin_query", "doc1", 1),
        ],
    ),
    "documented/es_rank_eval_template_docs.json": (
        "rank-eval",
        [("amsterdam_query", "doc1", 2), ("berlin_query", "doc2", 0)],
    ),
    "real/es_rank_eval_basic.json": (
        "rank-eval",
        [
            ("amsterdam_query", "doc1", 0),
            ("amsterdam_query", "doc2", 1),
            ("amsterdam_query", "doc3", 1),
            ("berlin_query", "doc1", 1),
        ],
    ),
    "real/es_rank_eval_templated.json": (
        "rank-eval",
        [("amsterdam_query", d, 1.0) for d in "2345"] + [("berlin_query", "1", 1.0)],
    ),
    "documented/esrs_judgements.jsonl": (
        "esrs",
        [
            ("5199e0ae-de59-5227-9647-c44f2c6617fc", "41476", 3),
            ("5199e0ae-de59-5227-9647-c44f2c6617fc", "41477", 0),
            ("0c7b2c5e-7f39-5d5c-9f5a-0a2f1d9a1b22", "41476", 1),
        ],
    ),
    "real/esrs_test_models_judgement.jsonl": (
        "esrs",
        [("5199e0ae-de59-5227-9647-c44f2c6617fc", "41476", 3)],
    ),
    "documented/svmrank_example.txt": (
        "ranklib",
        [
            ("1", "1A", 3),
            ("1", "1B", 2),
            ("1", "1C", 1),
            ("1", "1D", 1),
            ("2", "2A", 1),
            ("2", "2B", 2),
        ],
    ),
    "real/ranklib_ltr_demo_rocky_wfeatures.txt": (
        "ranklib",
        [
            ("1", "1370", 2),
            ("1", "1369", 2),
            ("1", "1368", 2),
            ("1", "64807", 2),
            ("1", "1246", 3),
            ("1", "47059", 2),
            ("1", "1366", 4),
            ("1", "81830", 3),
        ],
    ),
    "documented/opensearch_ltr_judgments.csv": (
        "ltr-csv",
        [("rambo", "7555", 4), ("rambo", "1370", 3), ("rambo", "1369", 3), ("rocky", "4241", 4)],
    ),
    "documented/trec.qrels.txt": (
        "trec",
        [
            ("301", "FBIS3-10082", 1),
            ("301", "FBIS3-10169", 0),
            ("302", "FT943-11212", 2),
            ("302", "LA030690-0034", 3),
        ],
    ),
    "documented/beir_qrels.tsv": (
        "beir",
        [("q1", "doc1", 1), ("q1", "doc2", 0), ("q2", "doc3", 2)],
    ),
}

# Real files whose triples are checked by count and a few spot values (too long to spell out).
REAL: dict[str, tuple[str, int, list[Triple]]] = {
    "real/quepid_haystack_book.json": (
        "quepid-book",
        9,
        [("projector screen", "325961", 3)],
    ),
    "real/ltr_demo_sample_judgments.txt": (
        "quepid-ltr",
        25,
        [
            ("rambo", "7555", 4),
            ("rocky", "1366", 4),
            ("bullwinkle", "17711", 4),
            ("bullwinkle", "1246", 0),
        ],
    ),
    "real/srw_import_judgments.json": ("srw", 80, [("metal frame", "B097Q69V1B", 0.9)]),
    "real/srw_esci_import_judgment.json": ("srw", 10, [("giangentic form", "B08KH3GFXL", 0.4)]),
    "real/srw_esci_us_judgments.json": ("srw", 10, [("t towels kitchen", "B07QLRTGVQ", 10.0)]),
    "real/trec_eval_qrels_comment.test": (
        "trec",
        12,
        [("2024-127266", "msmarco_v2.1_doc_05_1607548104#0_3077382650", 2)],
    ),
    "real/beir_mtrag_fiqa_dev.tsv": (
        "beir",
        8,
        [("e9dd465e8dd63a80dda8f3ce9cba6848<::>1", "471123-0-798", 1)],
    ),
}

FILES = {**{k: v[0] for k, v in GOLDEN.items()}, **{k: v[0] for k, v in REAL.items()}}

SCALES = {  # the scale a file is declared in where the format's default is not it
    "real/srw_import_judgments.json": "unit",
    "real/srw_esci_import_judgment.json": "unit",
    "real/srw_esci_us_judgments.json": "esci",
    "documented/srw_stored_llm.json": None,  # the list's type gives it (an LLM's 0-1 scores)
    "real/ltr_demo_sample_judgments.txt": "0-4",  # its header: "# grade (0-4)"
}


def _query(row: dict[str, Any], fmt_name: str) -> str:
    holds = make_format(fmt_name).holds
    if "query_id" in holds and ("query" not in holds or fmt_name == "rank-eval"):
        return str(row["query_id"])
    return str(row["query"])


def _triples(frame: pl.DataFrame, fmt_name: str) -> list[Triple]:
    graded = frame.filter(pl.col("state") == "graded")
    return [(_query(r, fmt_name), r["doc_id"], float(r["value"])) for r in graded.to_dicts()]


def _read(rel: str) -> Any:
    fmt = make_format(FILES[rel])
    return fmt, fmt.read(file_bytes(DATA / rel), rel)


def _builtins() -> set[str]:
    from ragaudit.registry import JUDGMENT_FORMATS

    return {n for n in format_names() if JUDGMENT_FORMATS.modules[n].startswith("ragaudit.")}


def test_every_builtin_format_has_golden_files_both_documented_and_real() -> None:
    documented = {f for k, f in FILES.items() if k.startswith("documented/")}
    real = {f for k, f in FILES.items() if k.startswith("real/")}
    assert documented == _builtins()
    # A real file of every tool: Quepid, SRW, _rank_eval, Relevance Studio, RankLib, TREC,
    # BEIR (the LTR plugin's CSV exists only as its documentation's listing).
    assert {
        "quepid-book",
        "rre",
        "quepid-ltr",
        "srw",
        "rank-eval",
        "esrs",
        "ranklib",
        "trec",
        "beir",
    } <= real
    notice = (DATA / "NOTICE.md").read_text(encoding="utf-8")
    for rel in FILES:
        assert Path(rel).name in notice, rel


@pytest.mark.parametrize("rel", sorted(GOLDEN))
def test_import_reads_the_golden_triples(rel: str) -> None:
    name, expected = GOLDEN[rel]
    _, read = _read(rel)
    assert _triples(read.frame, name) == [(q, d, float(g)) for q, d, g in expected]


@pytest.mark.parametrize("rel", sorted(REAL))
def test_import_reads_real_files(rel: str) -> None:
    name, count, spots = REAL[rel]
    _, read = _read(rel)
    triples = _triples(read.frame, name)
    assert len(triples) == count
    for spot in spots:
        assert (spot[0], spot[1], float(spot[2])) in triples


def test_what_the_richest_files_say_besides_the_grades() -> None:
    _, book = _read("documented/quepid_book.json")
    rows = book.frame.to_dicts()
    assert Counter(r["state"] for r in rows) == {"graded": 3, "unrateable": 1, "later": 1}
    assert {r["annotator"] for r in rows} == {"eric@example.com", "doug@example.com", None}
    assert rows[0]["reason"] == "the film itself"
    assert json.loads(rows[0]["extra"])["position"] == 1
    assert book.notes == ["1 pair(s) without a judgement"] and book.source == "Star Trek book"
    assert book.scale is not None and book.scale.name == "0-3"
    _, llm = _read("documented/srw_stored_llm.json")
    first = llm.frame.row(0, named=True)
    assert first["query"] == "red dress"  # the reference answer after '#' is not the query
    assert json.loads(first["extra"])["reference"] == "A red dress for a summer party"
    assert first["annotator"] == "llm:N8AE1osB0jLkkocYjz7D"
    assert llm.scale is not None and llm.scale.name == "unit"
    _, ubi = _read("documented/srw_stored_ubi.json")
    assert ubi.scale is not None and ubi.scale.name == "coec"
    _, esrs = _read("documented/esrs_judgements.jsonl")
    assert esrs.frame["annotator"].to_list() == ["bob", "ai", "ann"]  # the last writer
    _, templated = _read("real/es_rank_eval_templated.json")
    assert set(templated.frame["query"].to_list()) == {"amsterdam", "berlin"}  # query_string
    _, demo = _read("real/ltr_demo_sample_judgments.txt")
    assert demo.frame.row(0, named=True)["query"] == "rambo"  # from the '# qid:1: rambo' header
    assert json.loads(demo.frame.row(0, named=True)["extra"])["title"] == "Rambo"


def _store_of(tmp_path: Path, rels: list[str]) -> JudgmentStore:
    store = JudgmentStore(tmp_path / "judgments")
    for rel in rels:
        fmt, read = _read(rel)
        scale = scale_of(SCALES.get(rel), read.scale or fmt.scale)
        asyncio.run(import_read(store, read, fmt, source=rel, scale=scale, where=rel))
    return store


def _export(store: JudgmentStore, name: str, sources: list[str], scale: str | None = None) -> Any:
    fmt = make_format(name, scale=scale)
    frame = as_frame(store_rows(store, Selection(tuple(sources))), fmt.grades)
    if "doc_text" in fmt.holds:
        frame = with_texts(frame, store)
    return fmt, export_frame(frame, fmt, sources=sources)


def _representable(frame: pl.DataFrame, name: str) -> tuple[set[Triple], int]:
    """The triples a format can hold of what was read, and the pairs it cannot (raters disagree)."""
    triples = _triples(frame, name)
    if "raters" in make_format(name).holds:
        return set(triples), 0
    values: dict[tuple[str, str], set[float]] = {}
    for q, d, v in triples:
        values.setdefault((q, d), set()).add(v)
    return {(q, d, v.pop()) for (q, d), v in values.items() if len(v) == 1}, sum(
        len(v) > 1 for v in values.values()
    )


@pytest.mark.parametrize("rel", sorted(FILES))
def test_import_then_export_in_the_same_format_keeps_every_triple(tmp_path: Path, rel: str) -> None:
    name = FILES[rel]
    _, read = _read(rel)
    store = _store_of(tmp_path, [rel])
    fmt, exported = _export(store, name, [rel], SCALES.get(rel) or (read.scale and read.scale.key))
    back = fmt.read(exported.data, "export")
    expected, disagreeing = _representable(read.frame, name)
    got = set(_triples(back.frame, name))
    assert got == expected, got ^ expected
    loss = exported.loss
    assert loss["accounted"] and loss["scale"]["converted_rows"] == 0
    assert (loss["merged"] or {}).get("pairs_disagreeing", 0) == disagreeing
    if "raters" in fmt.holds:
        # Every rater's label comes back as theirs.
        pairs = read.frame.filter(pl.col("state") == "graded").select("annotator", "doc_id")
        assert Counter(
            back.frame.filter(pl.col("state") == "graded").select("annotator", "doc_id").iter_rows()
        ) == Counter(pairs.iter_rows())


def test_same_scale_export_writes_each_value_as_the_source_wrote_it(tmp_path: Path) -> None:
    """SRW's "3.000" strings and 0-1 LLM scores travel as written, not re-formatted."""
    rels = ["documented/srw_import_body.json", "documented/srw_stored_llm.json"]
    store = _store_of(tmp_path, rels)
    _, srw = _export(store, "srw", [rels[0]])
    ratings = json.loads(srw.data)["judgmentRatings"][0]["ratings"]
    assert ratings[0] == {"docId": "B077ZJXCTS", "rating": "3.000"}
    _, llm = _export(store, "srw", [rels[1]], "unit")
    assert json.loads(llm.data)["judgmentRatings"][0]["ratings"][0]["rating"] == "0.9"
    # In another scale: the grade's mark there, and the loss report says so.
    _, csv = _export(store, "quepid-csv", [rels[1]])
    assert csv.data.decode().splitlines()[1] == "red dress,B077ZJXCTS,3"
    assert csv.loss["scale"] == {
        "target": "0-3",
        "converted_rows": 3,
        "from": {"unit": 3},
        "what": csv.loss["scale"]["what"],
    }


RICH = [
    "documented/quepid_book.json",  # raters, explanations, unrateable, later, positions
    "documented/esrs_judgements.jsonl",  # indices, times, scenario ids, who rated
    "documented/es_rank_eval_docs.json",  # request ids, indices, requests
    "documented/srw_stored_llm.json",  # another scale, a reference answer
]


@pytest.mark.parametrize("name", sorted(_builtins()))
def test_export_to_each_format_keeps_what_it_can_and_names_the_rest(
    tmp_path: Path, name: str
) -> None:
    store = _store_of(tmp_path, RICH)
    fmt, exported = _export(store, name, RICH)
    loss = exported.loss
    assert loss["accounted"], loss
    # Every row is selected: graded, unrateable and later alike.
    assert loss["rows_selected"] == sum(_read(rel)[1].frame.height for rel in RICH)
    lost = {e["field"] for e in loss["lost"]}
    holds = fmt.holds
    # Whatever the source said that the format has no place for is named, with examples.
    assert ("annotator" in lost) == ("annotator" not in holds)
    assert ("reason" in lost) == ("reason" not in holds)
    assert ("doc_index" in lost) == ("doc_index" not in holds)
    assert ("created_at" in lost) == ("created_at" not in holds)
    assert all(e["rows"] > 0 and e["examples"] for e in loss["lost"])
    assert "extra.reference" in lost  # the LLM list's reference answer: no format holds it
    not_written = {e["what"].split(" ")[0]: e["rows"] for e in loss["not_written"]}
    assert not_written.get("unrateable", 0) == (0 if "unrateable" in holds else 1)
    assert not_written.get("later", 0) == (0 if "later" in holds else 1)
    # The LLM's 0-1 scores are written as marks of the target's scale, and counted.
    assert loss["scale"]["from"]["unit"] == 3
    assert sum(loss["scale"]["from"].values()) == loss["scale"]["converted_rows"]
    # Every triple the target can hold is there; queries named by made-up ids map back through
    # the loss report's own list.
    back = fmt.read(exported.data, "export").frame
    made: dict[str, str] = {}
    for note in loss["notes"]:
        made.update(note.get("ids") or {})
    by_text = "query" in holds and name != "rank-eval"
    got = set()
    for r in back.filter(pl.col("state") == "graded").to_dicts():
        query = r["query"] if by_text else None
        query = query or made.get(r["query_id"]) or r["query_id"]
        got.add((query, r["doc_id"], int(fmt.grades.grade_of(float(r["value"])))))
    rows = store_rows(store, Selection(tuple(RICH)))
    expected = set()
    pairs: dict[tuple[str, str], set[int]] = {}
    for r in rows.filter(pl.col("grade").is_not_null()).to_dicts():
        first, second = ("query", "question_id") if by_text else ("question_id", "query")
        pairs.setdefault((r[first] or r[second], r["context_id"]), set()).add(r["grade"])
    for (q, d), grades in pairs.items():
        if len(grades) == 1 or "raters" in holds:
            for g in grades:
                # A grade the target writes with a shared mark reads back as the mark's grade.
                expected.add((q, d, fmt.grades.grade_of(fmt.grades.marks[g])))
    assert expected <= got, expected - got


def test_bad_grades_are_refused_in_one_line_naming_the_row(tmp_path: Path) -> None:
    from ragaudit.errors import InputError

    store = JudgmentStore(tmp_path / "judgments")
    fmt = make_format("quepid-csv")
    read = fmt.read(b"query,docid,rating\na,d1,2\na,d2,high\n", "bad.csv")
    with pytest.raises(InputError, match=r"^bad\.csv: row 2 \(document 'd2'\): grade 'high' is "):
        asyncio.run(import_read(store, read, fmt, source="bad", scale=fmt.grades, where="bad.csv"))
    read = fmt.read(b"query,docid,rating\na,d1,7\n", "big.csv")
    with pytest.raises(InputError, match=r"outside the scale '0-3' \(0–3\); declare .* --scale"):
        asyncio.run(import_read(store, read, fmt, source="big", scale=fmt.grades, where="big.csv"))
    assert not store.parts.parts()  # nothing written
    with pytest.raises(InputError, match="line 2: expected '<rating> qid:<id> # <doc_id>"):
        make_format("quepid-ltr").read(b"3 qid:1 # 1 a\nnot a line\n", "x.txt")


def test_scales_map_and_reverse() -> None:
    from ragaudit.judgments import SCALES, GradeScale

    unit = SCALES["unit"]
    assert [unit.grade_of(v) for v in (0.0, 0.3, 0.6, 0.9)] == [0, 1, 2, 3]
    assert [unit.write(g) for g in range(4)] == ["0.000", "0.333", "0.667", "1.000"]
    binary = SCALES["0-1"]
    assert [binary.grade_of(v) for v in (0, 1)] == [0, 2] and binary.write(3) == "1"
    custom = scale_of('{"cuts": [1, 2, 3], "marks": [0, 1, 2, 3], "decimals": 1}', unit)
    assert isinstance(custom, GradeScale) and custom.write(2) == "2.0"
    assert scale_of("[1, 2, 3, 4]", unit).name == "1-4"
    from ragaudit.errors import InputError

    with pytest.raises(InputError, match="marks.*maps back"):
        scale_of('{"cuts": [1, 2, 3], "marks": [0, 2, 2.5, 3]}', unit)


def test_a_plugin_format_registers_as_the_builtins_do(tmp_path: Path) -> None:
    """A format of one's own: a class registered by name, then imported and exported like any."""
    from ragaudit.judgments import JudgmentFormat, Read, Written, register_format
    from ragaudit.judgments._format import framed

    @register_format("pairs-tsv")
    class PairsTsv(JudgmentFormat):
        label = "query, document and grade, tab-separated"
        holds = frozenset({"query"})

        def read(self, data: bytes, where: str) -> Read:
            rows = [line.split("\t") for line in data.decode().splitlines()]
            return Read(
                framed(
                    {k: [r[i] for r in rows] for i, k in enumerate(("query", "doc_id", "value"))}
                )
            )

        def write(self, frame: pl.DataFrame) -> Written:
            lines = ["\t".join(r) for r in frame.select("query", "doc_id", "value").iter_rows()]
            return Written("".join(line + "\n" for line in lines).encode())

    assert "pairs-tsv" in format_names()
    store = JudgmentStore(tmp_path / "judgments")
    fmt = make_format("pairs-tsv")
    read = fmt.read(b"refund\td1\t3\nrefund\td2\t0\n", "p.tsv")
    asyncio.run(import_read(store, read, fmt, source="p", scale=fmt.grades, where="p.tsv"))
    _, exported = _export(store, "quepid-csv", ["p"])
    assert exported.data.decode().splitlines()[1:] == ["refund,d1,3", "refund,d2,0"]
