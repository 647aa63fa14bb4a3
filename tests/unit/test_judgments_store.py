"""Imported judgments in the judgment store: kept apart from the judge's grades unless told to
stand for them, resolved to texts, summed up with agreement, and read by the calibration."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from ragaudit.dataset import Question
from ragaudit.errors import InputError
from ragaudit.judging import (
    Grader,
    JudgmentStore,
    grade_key,
    label_key,
    text_hash,
)
from ragaudit.judgments import (
    CorpusTexts,
    grade_labels,
    import_read,
    make_format,
    store_stats,
)
from ragaudit.prompts import RELEVANCE
from ragaudit.stats import grade_agreement

GRADER = Grader("fake/judge", 0.0, 8192, 512)

CORPUS = {
    "d1": "Refunds for damaged parcels are paid within ten days.",
    "d2": "Shipping abroad costs depend on the parcel's weight.",
    "d3": "Passwords are reset from the login page.",
}


def _corpus(tmp_path: Path) -> Path:
    path = tmp_path / "corpus.jsonl"
    path.write_text(
        "".join(json.dumps({"id": k, "text": v}) + "\n" for k, v in CORPUS.items()),
        encoding="utf-8",
    )
    return path


def _import(
    store: JudgmentStore,
    fmt_name: str,
    data: str,
    source: str,
    **kw: object,
) -> object:
    fmt = make_format(fmt_name)
    read = fmt.read(data.encode(), source)
    return asyncio.run(
        import_read(store, read, fmt, source=source, scale=fmt.grades, where=source, **kw)  # type: ignore[arg-type]
    )


BOOK = json.dumps(
    {
        "name": "b",
        "query_doc_pairs": [
            {
                "query_text": "how do I get a refund",
                "doc_id": doc,
                "judgements": [
                    {"rating": a, "user_email": "ann@x"},
                    {"rating": b, "user_email": "bob@x"},
                ],
            }
            for doc, a, b in (("d1", 3, 2), ("d2", 0, 0), ("d3", 1, 0))
        ],
    }
)


def test_people_rows_are_not_the_judges_grades_and_raters_never_conflict(tmp_path: Path) -> None:
    store = JudgmentStore(tmp_path / "judgments")
    texts = CorpusTexts(_corpus(tmp_path))
    report = _import(store, "quepid-book", BOOK, "book", documents=texts)
    assert report.rows == 6 and report.resolved == 6 and report.pairs == 3  # type: ignore[attr-defined]
    # Two raters disagree on d1 and d3: no conflict, and nothing a judge's look-up finds.
    fresh = JudgmentStore(tmp_path / "judgments")
    assert len(fresh) == 0 and fresh.conflicts == {} and fresh.problems == []
    key = grade_key(GRADER, RELEVANCE.key, "en", "how do I get a refund", CORPUS["d1"])
    assert fresh.get(key) is None
    rows = pl.from_arrow(fresh.rows())
    assert isinstance(rows, pl.DataFrame)
    assert set(rows["key"]) == {
        label_key("how do I get a refund", CORPUS[d]) for d in ("d1", "d2", "d3")
    }
    assert set(rows["source_kind"]) == {"imported"} and set(rows["role"]) == {"people"}
    assert rows["text_hash"].to_list()[0] == text_hash(CORPUS["d1"])
    # The texts the rows were resolved to are kept, by hash.
    assert fresh.texts_of([text_hash(CORPUS["d2"])]) == {text_hash(CORPUS["d2"]): CORPUS["d2"]}


def test_seeded_rows_stand_for_the_judge_under_its_own_key(tmp_path: Path) -> None:
    store = JudgmentStore(tmp_path / "judgments")
    questions = [Question(question_id="q-refund", question="How do I get a refund?")]
    report = _import(
        store,
        "quepid-book",
        BOOK.replace("how do I get a refund", "how do i get a REFUND?"),
        "book",
        documents=CorpusTexts(_corpus(tmp_path)),
        questions=questions,
        seed=GRADER,
    )
    assert report.seeded == 3  # type: ignore[attr-defined]
    fresh = JudgmentStore(tmp_path / "judgments")
    assert len(fresh) == 3
    # Matched to the question set's question (case and spacing aside): the judge's key is the
    # question as the set writes it; the grade is the raters' lower median.
    for doc, grade in (("d1", 2), ("d2", 0), ("d3", 0)):
        key = grade_key(GRADER, RELEVANCE.key, "en", "How do I get a refund?", CORPUS[doc])
        held = fresh.get(key)
        assert held is not None and held.grade == grade, doc
    assert held is not None and "2 rating(s), lower median" in held.reason
    # Stats leave the seeds apart: they repeat the imported rows.
    stats = store_stats(fresh)
    assert stats.rows == 6 and stats.seeded == 3


def test_a_source_name_is_imported_once(tmp_path: Path) -> None:
    store = JudgmentStore(tmp_path / "judgments")
    _import(store, "trec", "q1 0 d1 2\n", "qrels")
    with pytest.raises(InputError, match="already holds a source of that name"):
        _import(store, "trec", "q1 0 d1 2\n", "qrels")


def test_documents_resolve_by_id_by_index_and_id_and_by_text(tmp_path: Path) -> None:
    texts = CorpusTexts(_corpus(tmp_path), index="docs")
    body = {
        "requests": [
            {
                "id": "q",
                "request": {"query": {"match": {"text": "refund"}}},
                "ratings": [
                    {"_index": "docs", "_id": "d1", "rating": 3},
                    {"_index": "other", "_id": "d2", "rating": 1},
                    {"_index": "docs", "_id": "d9", "rating": 0},
                ],
            }
        ]
    }
    store = JudgmentStore(tmp_path / "a")
    report = _import(store, "rank-eval", json.dumps(body), "re", documents=texts, how="index-id")
    assert report.resolved == 1  # type: ignore[attr-defined]
    assert report.unresolved == {  # type: ignore[attr-defined]
        "index 'other' is not the one searched ('docs')": 1,
        "document id not in index 'docs'": 1,
    }
    # By text: the source's own document text (a book's fields hold none; a made-up column does).
    book = {
        "query_doc_pairs": [
            {"query_text": "refund", "doc_id": "their-7", "judgements": [{"rating": 2}]}
        ]
    }
    fmt = make_format("quepid-book")
    read = fmt.read(json.dumps(book).encode(), "b")
    read.frame = read.frame.with_columns(
        pl.lit(" refunds for damaged PARCELS are paid within ten days.").alias("doc_text")
    )
    store = JudgmentStore(tmp_path / "b")
    report = asyncio.run(
        import_read(
            store, read, fmt, source="b", scale=fmt.grades, where="b", documents=texts, how="text"
        )
    )
    assert report.resolved == 1
    row = pl.from_arrow(store.rows()).row(0, named=True)  # type: ignore[union-attr]
    assert row["context_id"] == "their-7" and json.loads(row["extra"])["corpus_id"] == "d1"
    assert row["text_hash"] == text_hash(CORPUS["d1"])


def test_a_query_known_by_id_resolves_through_the_question_set(tmp_path: Path) -> None:
    store = JudgmentStore(tmp_path / "judgments")
    questions = [Question(question_id="301", question="Refunds?")]
    report = _import(
        store,
        "trec",
        "301 0 d1 2\n302 0 d2 1\n",
        "qrels",
        documents=CorpusTexts(_corpus(tmp_path)),
        questions=questions,
    )
    assert report.resolved == 1  # type: ignore[attr-defined]
    assert report.unresolved == {  # type: ignore[attr-defined]
        "query known by id only, and no question of the set has it": 1
    }


def test_stats_count_sources_and_annotators_and_measure_agreement(tmp_path: Path) -> None:
    store = JudgmentStore(tmp_path / "judgments")
    texts = CorpusTexts(_corpus(tmp_path))
    _import(store, "quepid-book", BOOK, "book", documents=texts)
    csv = (
        "query,docid,rating\nhow do I get a refund,d1,3\nhow do I get a refund,d2,1\n"
        "how do I get a refund,d3,0\n"
    )
    _import(store, "quepid-csv", csv, "team", documents=texts)
    stats = store_stats(store)
    assert stats.rows == 9 and stats.pairs == 3 and stats.by_kind == {"imported": 9}
    by_source = {s["source"]: s for s in stats.sources}
    assert by_source["book"]["rows"] == 6 and by_source["book"]["annotators"] == 2
    assert {a["annotator"]: a["rows"] for a in stats.annotators} == {"ann@x": 3, "bob@x": 3}
    (between,) = stats.overlaps
    assert (between.a, between.b, between.pairs) == ("book", "team", 3)
    # The book's grade of a pair is its raters' lower median: d1 2, d2 0, d3 0.
    expected = grade_agreement([2, 0, 0], [3, 1, 0])
    assert [f.value for f in between.figures] == [f.value for f in expected]
    (raters,) = stats.raters
    assert raters.pairs == 3
    assert [f.value for f in raters.figures] == [
        f.value for f in grade_agreement([3, 0, 1], [2, 0, 0])
    ]
    assert json.loads(json.dumps(stats.as_dict()))["agreement_between_sources"][0]["pairs"] == 3


def test_the_calibration_reads_peoples_grades_from_the_store(tmp_path: Path) -> None:
    from ragaudit.calibration import load_grade_labels

    store = JudgmentStore(tmp_path / "judgments")
    texts = CorpusTexts(_corpus(tmp_path))
    _import(store, "quepid-book", BOOK, "book", documents=texts)
    _import(store, "trec", "zz 0 d1 1\n", "unresolved")  # no text: not a label it can use
    rows = grade_labels(store)
    assert len(rows) == 6 and {r["annotator"] for r in rows} == {"ann@x", "bob@x"}
    labels = load_grade_labels(tmp_path / "judgments")
    assert sorted((lab.context, lab.human) for lab in labels) == sorted(
        [
            (CORPUS["d1"], 3),
            (CORPUS["d1"], 2),
            (CORPUS["d2"], 0),
            (CORPUS["d2"], 0),
            (CORPUS["d3"], 1),
            (CORPUS["d3"], 0),
        ]
    )
    assert {lab.question for lab in labels} == {"how do I get a refund"}
    assert np.unique([lab.question_id for lab in labels]).size == 1


def test_the_judges_own_rows_carry_their_query_and_kind(tmp_path: Path) -> None:
    store = JudgmentStore(tmp_path / "judgments")
    key = grade_key(GRADER, RELEVANCE.key, "en", "q?", "a text")
    store.add(
        [
            {
                "key": key,
                "grader": GRADER,
                "prompt": RELEVANCE.key,
                "language": "en",
                "question": "q?",
                "text": "a text",
                "question_id": "q1",
                "context_id": "d1",
                "grade": 2,
                "reason": "because",
            }
        ],
        "run:r1",
    )
    row = pl.from_arrow(store.rows()).row(0, named=True)  # type: ignore[union-attr]
    assert (row["source_kind"], row["state"], row["query"], row["source_value"]) == (
        "judge",
        "graded",
        "q?",
        "2",
    )
    with pytest.raises(ValueError, match="state 'maybe'"):
        store.add_table(
            pl.from_arrow(store.rows()).with_columns(pl.lit("maybe").alias("state")).to_arrow()  # type: ignore[union-attr]
        )


def test_keys_computed_over_columns_equal_the_stores_key_functions() -> None:
    from ragaudit.judging import ref_key
    from ragaudit.judgments._keys import digests, label_keys, ref_keys, text_hashes

    tricky = [
        "plain",
        'quo"te',
        "back\\slash",
        "new\nline\ttab\r\x08\x0c",
        "\x00\x1f\x7f",
        "ünïcødé 中文 🚀",
        "\u2028",
        "",
    ]
    df = pl.DataFrame({"a": tricky, "b": list(reversed(tricky))})
    assert text_hashes(df, "a").to_list() == [text_hash(t) for t in tricky]
    hashed = df.with_columns(text_hashes(df, "a").alias("ha"), text_hashes(df, "b").alias("hb"))
    labels = digests(hashed.select(label_keys(pl.col("ha"), pl.col("hb"))).to_series())
    assert labels.to_list() == [
        label_key(a, b) for a, b in zip(tricky, reversed(tricky), strict=True)
    ]
    refs = digests(
        df.select(
            ref_keys(pl.col("a"), pl.lit(None, pl.String), pl.col("b"), pl.col("a"))
        ).to_series()
    )
    assert refs.to_list() == [
        ref_key(a, "", b, a) for a, b in zip(tricky, reversed(tricky), strict=True)
    ]
