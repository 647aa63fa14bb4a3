"""``ragaudit judgments`` end to end: import (files, and live from osmem-server's indices),
export with its loss report, ``_rank_eval`` bodies of a run, stats, the calibration fed from the
store, and a tune seeded with imported judgments paying only for the pairs nobody judged."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import polars as pl
import pytest
import yaml
from support.paths import REPO_ROOT
from support.runs import make_config, write_question
from support.servers import ragaudit
from typer.testing import CliRunner

from ragaudit.cache import hold_gateway
from ragaudit.cli import app
from ragaudit.dataset import load_questions
from ragaudit.runfolder import RunFolder
from ragaudit.schemas import VERDICTS, to_table
from ragaudit.tuning import judgment_store, run_tune

DATA = REPO_ROOT / "tests" / "data" / "judgments"


def test_import_stats_export_from_the_command_line(tmp_path: Path) -> None:
    root = str(tmp_path / "runs")
    out = ragaudit(
        "judgments",
        "import",
        str(DATA / "real" / "quepid_haystack_book.json"),
        "-f",
        "quepid-book",
        "--runs-root",
        root,
        "--json",
    )
    (report,) = json.loads(out)
    assert report["source"] == "Haystack Icecat Rating Party"
    assert report["states"] == {"graded": 9, "unrateable": 1}
    ragaudit(
        "judgments",
        "import",
        str(DATA / "documented" / "srw_stored_llm.json"),
        "-f",
        "srw",
        "--runs-root",
        root,
    )
    stats = json.loads(ragaudit("judgments", "stats", "--runs-root", root, "--json"))
    assert stats["rows"] == 13 and stats["by_kind"] == {"imported": 13}
    assert {s["source"] for s in stats["sources"]} == {
        "Haystack Icecat Rating Party",
        "LLM judgments",
    }
    target = tmp_path / "out" / "judgments.tsv"
    printed = ragaudit(
        "judgments",
        "export",
        "-f",
        "beir",
        "-o",
        str(target),
        "--runs-root",
        root,
        "--source",
        "Haystack Icecat Rating Party",
    )
    loss = json.loads((tmp_path / "out" / "judgments.tsv.loss.json").read_text())
    assert loss["accounted"] and loss["rows_selected"] == 10
    assert loss["not_written"][0]["rows"] == 1  # the unrateable one
    assert {e["field"] for e in loss["lost"]} >= {"annotator", "extra.document_fields"}
    (ids,) = [n for n in loss["notes"] if "ids" in n]
    assert set(ids["ids"].values()) == {"projector screen", "phone cord"}
    assert "lost: annotator" in printed and "loss report:" in printed
    lines = target.read_text().splitlines()
    assert lines[0] == "query-id\tcorpus-id\tscore" and len(lines) == 1 + 6  # six pairs


def test_bad_input_is_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.csv"
    bad.write_text("query,docid,rating\na,d1,high\n", encoding="utf-8")
    result = CliRunner().invoke(
        app,
        ["judgments", "import", str(bad), "-f", "quepid-csv", "--runs-root", str(tmp_path)],
    )
    assert result.exit_code == 2
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and "row 1 (document 'd1'): grade 'high' is not a number" in lines[0]
    assert "Traceback" not in result.output
    result = CliRunner().invoke(
        app, ["judgments", "import", str(bad), "-f", "nope", "--runs-root", str(tmp_path)]
    )
    assert result.exit_code == 2 and "unknown judgment format 'nope'" in result.output


@pytest.fixture(scope="module")
def engine(osmem_server: Any) -> Iterator[Any]:
    clone = osmem_server.clone()
    try:
        yield clone
    finally:
        clone.close()


def _index(url: str, index: str, docs: list[dict[str, Any]]) -> None:
    from opensearchpy import OpenSearch

    client = OpenSearch(hosts=[url])
    for n, doc in enumerate(docs):
        doc = dict(doc)
        doc_id = doc.pop("_id", f"{index}-{n}")
        client.index(index=index, id=doc_id, body=doc)
    client.indices.refresh(index=index)


def test_live_import_from_the_indices_srw_and_relevance_studio_keep(
    engine: Any, tmp_path: Path
) -> None:
    srw = [
        json.loads((DATA / "documented" / f).read_text())
        for f in ("srw_stored_llm.json", "srw_stored_ubi.json")
    ]
    _index(engine.url, "search-relevance-judgment", [{"_id": d["id"], **d} for d in srw])
    lines = (DATA / "documented" / "esrs_judgements.jsonl").read_text().splitlines()
    _index(engine.url, "esrs-judgements", [json.loads(line) for line in lines])
    lines = (DATA / "documented" / "esrs_scenarios.jsonl").read_text().splitlines()
    _index(engine.url, "esrs-scenarios", [json.loads(line) for line in lines])
    root = str(tmp_path / "runs")
    lists = json.loads(
        ragaudit(
            "judgments",
            "import",
            "--from-index",
            "search-relevance-judgment",
            "--host",
            engine.url,
            "-f",
            "srw",
            "--runs-root",
            root,
            "--json",
        )
    )
    # Each stored list its own source, in its type's scale: an LLM's 0-1, COEC ratios.
    by_name = {r["source"]: r for r in lists}
    assert {n: (r["scale"], r["rows"]) for n, r in by_name.items()} == {
        "LLM judgments": ("unit", 3),
        "COEC clicks": ("coec", 3),
    }
    assert by_name["COEC clicks"]["grades"] == {"0": 1, "1": 1, "3": 1}
    assert by_name["LLM judgments"]["annotators"] == {"llm:N8AE1osB0jLkkocYjz7D": 3}
    (studio,) = json.loads(
        ragaudit(
            "judgments",
            "import",
            "--from-index",
            "esrs-judgements",
            "--host",
            engine.url,
            "-f",
            "esrs",
            "--scenarios",
            "esrs-scenarios",
            "--runs-root",
            root,
            "--json",
        )
    )
    assert studio["rows"] == 3 and studio["annotators"] == {"bob": 1, "ai": 1, "ann": 1}
    rows = pl.read_parquet(tmp_path / "runs" / "judgments" / "part-*.parquet")
    esrs = rows.filter(pl.col("format") == "esrs").sort("context_id")
    assert set(esrs["query"]) == {"brown shoes", "red boots"}  # the scenarios' texts
    assert set(esrs["doc_index"]) == {"products"}


def _run_with_verdicts(tmp_path: Path) -> Path:
    config = make_config(
        tmp_path,
        collect__backend="opensearch",
        collect__opensearch={
            "hosts": ["http://127.0.0.1:9"],
            "index": "contexts",
            "query_template": {"query": {"match": {"{{ text_field }}": "{{ question }}"}}},
        },
    )
    run = RunFolder(tmp_path / "runs", "r1")
    write_question(run, {"c1": "a text", "c2": "another", "c3": "a third"}, "Where is my parcel?")
    verdicts = [
        {
            "run_id": "r1",
            "question_id": "q0",
            "context_id": c,
            "grade": g,
            "relevant": g is not None and g >= 2,
            "reason": f"because {c}",
            "status": s,
            "error": None if s == "ok" else "boom",
        }
        for c, g, s in (("c1", 3, "ok"), ("c2", 0, "ok"), ("c3", None, "failed"))
    ]
    run.write("verdicts", to_table(verdicts, VERDICTS))
    run.write_manifest(
        {"run_id": "r1", "status": "completed", "config": config.model_dump(mode="json")}
    )
    return tmp_path / "runs"


def test_rank_eval_requests_for_a_runs_questions(tmp_path: Path) -> None:
    root = _run_with_verdicts(tmp_path)
    out = tmp_path / "rank_eval.json"
    ragaudit(
        "judgments",
        "export",
        "-f",
        "rank-eval",
        "-o",
        str(out),
        "--run",
        "r1",
        "--runs-root",
        str(root),
    )
    body = json.loads(out.read_text())
    (request,) = body["requests"]
    assert request["id"] == "q0"
    assert request["request"]["query"] == {"match": {"text": "Where is my parcel?"}}
    assert request["ratings"] == [
        {"_index": "contexts", "_id": "c1", "rating": 3},
        {"_index": "contexts", "_id": "c2", "rating": 0},
    ]
    loss = json.loads(out.with_name(out.name + ".loss.json").read_text())
    lost = {e["field"]: e for e in loss["lost"]}
    assert lost["reason"]["rows_by_kind"] == {"judge": 2}  # the judge's reasons
    assert any("failed" in n["what"] and n["rows"] == 1 for n in loss["notes"])


def test_calibrate_against_imported_grades(fake: Any, tmp_path: Path) -> None:
    corpus = tmp_path / "corpus.jsonl"
    texts = {
        "d1": "Refunds are paid in ten days.",
        "d2": "Shipping costs vary.",
        "d3": "Passwords reset on the login page.",
    }
    corpus.write_text("".join(json.dumps({"id": k, "text": v}) + "\n" for k, v in texts.items()))
    book = {
        "query_doc_pairs": [
            {
                "query_text": "refund time",
                "doc_id": d,
                "judgements": [
                    {"rating": g, "user_email": "ann@x"},
                    {"rating": g, "user_email": "bob@x"},
                ],
            }
            for d, g in (("d1", 3), ("d2", 0), ("d3", 1))
        ]
    }
    path = tmp_path / "book.json"
    path.write_text(json.dumps(book))
    root = tmp_path / "runs"
    ragaudit(
        "judgments",
        "import",
        str(path),
        "-f",
        "quepid-book",
        "--corpus",
        str(corpus),
        "--runs-root",
        str(root),
    )
    human = {texts[d]: g for d, g in (("d1", 3), ("d2", 0), ("d3", 1))}

    def honest(req: Any) -> dict[str, Any] | None:
        if req.title != "RelevanceGrade":
            return None
        return {"grade": human[req.payload["context"]], "reason": "scripted"}

    with fake.script(honest):
        result = CliRunner().invoke(
            app,
            [
                "calibrate",
                "--judge",
                "fake/judge",
                "--embedder",
                "fake/embed",
                "--grade-labels",
                str(root / "judgments"),
                "--runs-root",
                str(root),
                "--run-id",
                "cal",
                "--set",
                f"cache_dir={tmp_path / 'cache'}",
            ],
        )
    assert result.exit_code == 0, result.output
    grades = pl.read_parquet(root / "cal" / "calibration_grades.parquet")
    assert grades.height == 6  # each rater's label against the judge's one grade
    assert (grades["human_grade"] == grades["judge_grade"]).all()
    assert fake.stats.calls == 3  # one judge call per labelled pair


def test_a_tune_seeded_with_imported_judgments_pays_only_for_pairs_nobody_judged(
    tmp_path: Path, fake: Any
) -> None:
    tune = {"depth": 5, "variants": {"short": {"top_n": 3}}}
    first = make_config(tmp_path / "first", collect__top_n=10, tune=tune)
    with hold_gateway(first) as gateway:
        learned = asyncio.run(run_tune(first, gateway))
    pairs = sorted((q, c) for q, docs in learned.pool.texts.items() for c in docs)
    questions = {q.question_id: q.question for q in load_questions(first.questions)}
    # A team judged half of those pairs in Quepid, two raters each (one pair split 3 / 1).
    judged = pairs[::2]
    book = {
        "name": "team",
        "query_doc_pairs": [
            {
                "query_text": questions[q],
                "doc_id": c,
                "judgements": [
                    {"rating": 3 if n == 0 else n % 4, "user_email": "ann@x"},
                    {"rating": 1 if n == 0 else n % 4, "user_email": "bob@x"},
                ],
            }
            for n, (q, c) in enumerate(judged)
        ],
    }
    path = tmp_path / "book.json"
    path.write_text(json.dumps(book))
    second = make_config(tmp_path / "second", collect__top_n=10, tune=tune)
    config_path = tmp_path / "second.yaml"
    config_path.write_text(yaml.safe_dump(second.model_dump(mode="json")))
    fake.reset(keep_requests=True)
    (report,) = json.loads(
        ragaudit(
            "judgments",
            "import",
            str(path),
            "-f",
            "quepid-book",
            "-c",
            str(config_path),
            "--seed",
            "--json",
        )
    )
    assert report["resolved"] == 2 * len(judged) and report["seeded"] == len(judged)
    assert fake.stats.calls == 0  # importing pays nothing
    with hold_gateway(second) as gateway:
        out = asyncio.run(run_tune(second, gateway))
    pooled = {(q, c) for q, docs in out.pool.texts.items() for c in docs}
    texts = out.pool.texts
    # The store knows a pair by its texts: two ids of one text (or one judged, one not) are one.
    judged_texts = {(q, texts[q][c]) for q, c in pooled & set(judged)}
    nobody = {(q, texts[q][c]) for q, c in pooled - set(judged)} - judged_texts
    assert out.grading.found_in_store == len(pooled & set(judged)) > 0
    assert out.calls["provider_calls"] == fake.stats.calls == len(nobody) > 0
    # The imported pairs hold the raters' lower median: the split pair 1 (not 3), the rest n % 4.
    grades = out.pool.grades
    for n, (q, c) in enumerate(judged):
        if (q, c) in pooled:
            assert grades[q][c] == (1 if n == 0 else n % 4)
    assert len(judgment_store(second)) == len(judged) + len(nobody)


def test_imported_qrels_stand_as_gold_for_the_question_set(tmp_path: Path) -> None:
    from ragaudit.dataset import check_qrels, read_qrels

    config = make_config(tmp_path)
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(config.model_dump(mode="json")))
    questions = load_questions(config.questions)
    # A team's qrels name two of the set's questions by text (Quepid's CSV) and one it lacks.
    rows = [
        f"{questions[0].question},doc-a,3",
        f"{questions[1].question.upper()},doc-b,1",
        "a question nobody asked,doc-c,2",
    ]
    csv = tmp_path / "team.csv"
    csv.write_text(
        "query,docid,rating\n"
        + "\n".join(f'"{r.rsplit(",", 2)[0]}",' + ",".join(r.rsplit(",", 2)[1:]) for r in rows)
        + "\n"
    )
    ragaudit("judgments", "import", str(csv), "-f", "quepid-csv", "--as", "gold", "-c", str(path))
    ragaudit(
        "judgments",
        "import",
        str(DATA / "documented" / "trec.qrels.txt"),
        "-f",
        "trec",
        "-c",
        str(path),
    )  # people's labels: not gold
    out = tmp_path / "gold.qrels"
    ragaudit(
        "judgments",
        "export",
        "-f",
        "trec",
        "--role",
        "gold",
        "--for-questions",
        "-c",
        str(path),
        "-o",
        str(out),
    )
    qrels = read_qrels(out)
    assert qrels.grades == {
        questions[0].question_id: {"doc-a": 3},
        questions[1].question_id: {"doc-b": 1},
    }
    assert check_qrels(qrels, [q.question_id for q in questions]) == []
    loss = json.loads(out.with_name(out.name + ".loss.json").read_text())
    (left,) = [n for n in loss["notes"] if "question set" in n["what"]]
    assert left["rows"] == 1 and left["examples"] == ["a question nobody asked"]
    assert loss["rows_selected"] == 3 and loss["rows_written"] == 2
