"""``ragaudit audit`` end to end on a small JSONL request log with the fake judge: the day's
tables, its estimates, a re-run that pays nothing, the dry run that calls nothing, a metric
that needs a reference refused, a report that escapes what the logs hold, and ``promote``
feeding ``ragaudit run``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import polars as pl
import pytest
import yaml
from support.servers import ragaudit
from typer.testing import CliRunner

DAY = "2026-11-26"
PLANTED = "<script>alert('x')</script>"

TOPICS = {
    "billing": [
        ("how do I get a refund for a damaged parcel", "refund damaged parcel"),
        ("where can I download an invoice as pdf", "download invoice pdf"),
        ("how to apply a coupon code at checkout", "apply coupon code checkout"),
    ],
    "account": [
        ("how can I reset a forgotten password", "reset forgotten password"),
        ("how do I close my account for good", "close account good"),
        (f"is my data deleted {PLANTED}", "data deleted"),
    ],
}


def _log(folder: Path) -> Path:
    """A day of a service's request log: repeated queries (a head), one-off ones (a tail)."""
    rows = []
    n = 0
    for collection, queries in TOPICS.items():
        for qi, (query, words) in enumerate(queries):
            # The first query of each collection is asked often, the others once or twice.
            for repeat in range(6 if qi == 0 else 1 + qi % 2):
                n += 1
                hits = [
                    {
                        "_id": f"{collection}-{qi}-{d}",
                        "_source": {
                            "content": f"note {d}: {words if d == 0 else 'other matters'} "
                            + (PLANTED if qi == 2 and d == 1 else "")
                        },
                        "_score": 3.0 - d,
                    }
                    for d in range(3)
                ]
                rows.append(
                    {
                        "id": f"r{n}",
                        "ts": f"{DAY}T10:{n:02d}:00Z",
                        "session_id": f"s{n % 4}",
                        "request": {
                            "q": query if repeat % 2 == 0 else query.upper(),
                            "filters": {"collection": collection},
                        },
                        "retrieval": {"hits": hits},
                        "response": {
                            "text": f"You can {words} [1].",
                            "citations": [hits[0]["_id"]],
                        },
                        "feedback": {"thumb": "up" if repeat % 3 else "down"},
                    }
                )
    day = folder / "logs" / DAY
    day.mkdir(parents=True)
    path = day / "part-0.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    return path


def audit_yaml(tmp: Path, **audit: Any) -> Path:
    """An audit config over ``tmp``'s log, the fake judge and embedder."""
    config = {
        "runs_root": str(tmp / "runs"),
        "cache_dir": str(tmp / "cache"),
        "models": {"judge": "fake/judge", "embedder": "fake/embed", "backoff_s": 0.0},
        "audit": {
            "name": "support-bot",
            "source": {
                "format": "jsonl",
                "path": str(tmp / "logs" / "{day}" / "*.jsonl"),
                "fields": {
                    "request_id": "id",
                    "time": "ts",
                    "session": "session_id",
                    "query": "request.q",
                    "filters": "request.filters",
                    "docs": "retrieval.hits[*].{id: _id, text: _source.content, score: _score}",
                    "answer": "response.text",
                    "citations": "response.citations",
                    "feedback": "feedback.thumb",
                },
            },
            "segment": "filters.collection",
            "sample": 8,
            "k": 3,
            "metrics": ["faithfulness", "answer_relevancy"],
            **audit,
        },
    }
    path = tmp / "audit.yaml"
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def audited(tmp_path_factory: pytest.TempPathFactory, prefect_harness: None) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("audit")
    _log(tmp)
    path = audit_yaml(tmp)
    dry = ragaudit("audit", "-c", str(path), "--day", DAY, "--dry-run")
    after_dry = sorted(p.name for p in (tmp / "runs").glob("*")) if (tmp / "runs").exists() else []
    first = ragaudit("audit", "-c", str(path), "--day", DAY)
    folder = tmp / "runs" / "audit-support-bot" / DAY
    first_manifest = json.loads((folder / "manifest.json").read_text())
    second = ragaudit("audit", "-c", str(path), "--day", DAY)
    return {
        "tmp": tmp,
        "path": path,
        "dry": dry,
        "after_dry": after_dry,
        "first": first,
        "first_manifest": first_manifest,
        "second": second,
        "folder": folder,
    }


def test_the_day_writes_every_table_and_estimates_per_segment(audited: dict[str, Any]) -> None:
    folder = audited["folder"]
    for name in (
        "requests.parquet",
        "sample.parquet",
        "verdicts.parquet",
        "scores.parquet",
        "estimates.parquet",
        "report.html",
        "manifest.json",
    ):
        assert (folder / name).is_file(), name
    sample = pl.read_parquet(folder / "sample.parquet")
    assert 0 < sample.height <= 8
    verdicts = pl.read_parquet(folder / "verdicts.parquet")
    # Every sampled request's served top 3, each graded 0-3 or failed/skipped with a reason.
    assert verdicts.height == 3 * sample.height
    ok = verdicts.filter(pl.col("status") == "ok")
    assert ok.height == verdicts.height
    assert ok["grade"].is_between(0, 3).all()
    scores = pl.read_parquet(folder / "scores.parquet")
    assert {"ndcg@3", "precision@3", "faithfulness", "answer_relevancy"} <= set(scores["metric"])
    assert scores.filter(pl.col("metric") == "faithfulness").height == sample.height
    estimates = pl.read_parquet(folder / "estimates.parquet")
    assert {"(all)", "billing", "account"} <= set(estimates["segment"])
    overall = estimates.filter((pl.col("segment") == "(all)") & (pl.col("metric") == "ndcg@3"))
    assert overall.height == 1
    row = overall.row(0, named=True)
    assert row["ci_low"] <= row["estimate"] <= row["ci_high"]
    assert row["n"] > 0
    manifest = audited["first_manifest"]
    assert manifest["kind"] == "audit" and manifest["status"] == "completed"
    assert manifest["grading"]["paid"] + manifest["grading"]["from_memo"] > 0
    assert manifest["llm"]["provider_calls"] > 0


def test_a_rerun_pays_nothing(audited: dict[str, Any]) -> None:
    manifest = json.loads((audited["folder"] / "manifest.json").read_text())
    first = audited["first_manifest"]["grading"]
    assert manifest["grading"]["from_store"] == first["paid"] + first["from_memo"]
    assert manifest["grading"]["paid"] == 0
    assert manifest["llm"]["provider_calls"] == 0
    assert "provider calls 0" in audited["second"]
    verdicts = pl.read_parquet(audited["folder"] / "verdicts.parquet")
    assert set(verdicts["source"]) == {"store"}


def test_the_dry_run_calls_nothing_and_writes_nothing(audited: dict[str, Any]) -> None:
    dry = audited["dry"]
    assert audited["after_dry"] == []  # no audit folder, no judgment store
    assert "billing" in dry and "account" in dry
    assert "judge prompt tokens in all" in dry
    assert "score:faithfulness" in dry
    assert not (audited["tmp"] / "cache").exists() or not any(
        (audited["tmp"] / "cache").rglob("*.val")
    )


def test_the_report_escapes_what_the_logs_hold(audited: dict[str, Any]) -> None:
    page = (audited["folder"] / "report.html").read_text(encoding="utf-8")
    assert "<script" not in page
    assert "Content-Security-Policy" in page
    requests = pl.read_parquet(audited["folder"] / "requests.parquet")
    assert requests["query"].str.contains("<script>", literal=True).any()
    assert "&lt;script&gt;" in page


def test_a_metric_that_needs_a_reference_is_refused_at_load(tmp_path: Path) -> None:
    from ragaudit.cli import app

    _log(tmp_path)
    path = audit_yaml(tmp_path, metrics=["faithfulness", "context_recall", "rouge_l"])
    result = CliRunner().invoke(app, ["audit", "-c", str(path), "--day", DAY])
    assert result.exit_code == 2
    assert "context_recall, rouge_l need a reference answer" in result.output
    assert "Traceback" not in result.output
    assert not (tmp_path / "runs").exists()


def test_the_viewer_lists_and_shows_the_audit(audited: dict[str, Any]) -> None:
    from fastapi.testclient import TestClient

    from ragaudit.viewer.app import create_app

    client = TestClient(create_app(audited["tmp"] / "runs"), base_url="http://127.0.0.1")
    listing = client.get("/").text
    assert "audit-support-bot" in listing
    days = client.get("/runs/audit-support-bot")
    assert days.status_code == 200 and DAY in days.text
    page = client.get(f"/runs/audit-support-bot/days/{DAY}")
    assert page.status_code == 200 and "ndcg@3" in page.text
    assert "default-src 'none'" in page.headers["content-security-policy"]
    assert client.get("/runs/audit-support-bot/days/..%2F..").status_code == 404


def test_promote_writes_the_worst_requests_and_ragaudit_run_reads_them(
    audited: dict[str, Any],
) -> None:
    from support.cli import DEMO_CORPUS

    tmp = audited["tmp"]
    out = tmp / "promoted.jsonl"
    printed = ragaudit(
        "audit",
        "promote",
        "support-bot",
        "--day",
        DAY,
        "--worst",
        "3",
        "-o",
        str(out),
        "--runs-root",
        str(tmp / "runs"),
    )
    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert 0 < len(rows) <= 3 and f"{len(rows)} questions" in printed
    for row in rows:
        assert row["metadata"]["audit"] == "support-bot" and row["metadata"]["day"] == DAY
        assert row["metadata"]["request_ids"] and "ndcg@3" in row["metadata"]["scores"]
    # Promoting again against that set adds nothing: every question is already in it.
    again = tmp / "again.jsonl"
    ragaudit(
        "audit",
        "promote",
        "support-bot",
        "--day",
        DAY,
        "--worst",
        "3",
        "-o",
        str(again),
        "--runs-root",
        str(tmp / "runs"),
        "--against",
        str(out),
    )
    assert again.read_text(encoding="utf-8") == ""
    # The promoted set is a question set `ragaudit run` evaluates end to end.
    ragaudit(
        "run",
        "--questions",
        str(out),
        "--runs-root",
        str(tmp / "runs"),
        "--judge",
        "fake/judge",
        "--embedder",
        "fake/embed",
        "--run-id",
        "promoted",
        "--set",
        f"cache_dir={tmp / 'cache'}",
        "--set",
        f"collect.index_path={tmp / 'index'}",
        "--set",
        f"collect.corpus={DEMO_CORPUS}",
        "--set",
        "collect.filter_field=null",
    )
    manifest = json.loads((tmp / "runs" / "promoted" / "manifest.json").read_text())
    assert manifest["status"] == "completed"
    questions = pl.read_parquet(tmp / "runs" / "promoted" / "questions.parquet")
    assert sorted(questions["question_id"]) == sorted(r["question_id"] for r in rows)
