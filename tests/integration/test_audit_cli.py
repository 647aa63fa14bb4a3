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
from support.audit_logs import DAY, audit_yaml, write_log
from support.servers import ragaudit
from typer.testing import CliRunner


@pytest.fixture(scope="module")
def audited(tmp_path_factory: pytest.TempPathFactory, prefect_harness: None) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("audit")
    write_log(tmp)
    path = audit_yaml(tmp)
    dry = ragaudit("audit", "-c", str(path), "--day", DAY, "--dry-run")
    # Nothing under the runs root (no audit folder, no judgment store) and no memo opened.
    after_dry = [p.name for p in tmp.iterdir() if p.name in {"runs", "cache"}]
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
    # Rounding may put a degenerate interval (every value equal) a hair off its estimate.
    assert row["ci_low"] - 1e-9 <= row["estimate"] <= row["ci_high"] + 1e-9
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
    assert audited["after_dry"] == []
    assert "billing" in dry and "account" in dry
    assert "judge prompt tokens in all" in dry
    assert "score:faithfulness" in dry


def test_the_report_escapes_what_the_logs_hold(audited: dict[str, Any]) -> None:
    page = (audited["folder"] / "report.html").read_text(encoding="utf-8")
    assert "<script" not in page
    assert "Content-Security-Policy" in page
    requests = pl.read_parquet(audited["folder"] / "requests.parquet")
    assert requests["query"].str.contains("<script>", literal=True).any()
    assert "&lt;script&gt;" in page


def test_a_metric_that_needs_a_reference_is_refused_at_load(tmp_path: Path) -> None:
    from ragaudit.cli import app

    write_log(tmp_path)
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


def promote(tmp: Path, out: Path, *extra: str) -> str:
    """``ragaudit audit promote`` of the audited day's worst 3 requests into ``out``."""
    runs = str(tmp / "runs")
    args = ["support-bot", "--day", DAY, "--worst", "3", "-o", str(out), "--runs-root", runs]
    return ragaudit("audit", "promote", *args, *extra)


def test_promote_writes_the_worst_requests_and_ragaudit_run_reads_them(
    audited: dict[str, Any],
) -> None:
    from support.cli import DEMO_CORPUS

    tmp = audited["tmp"]
    out = tmp / "promoted.jsonl"
    printed = promote(tmp, out)
    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert 0 < len(rows) <= 3 and f"{len(rows)} questions" in printed
    for row in rows:
        assert row["metadata"]["audit"] == "support-bot" and row["metadata"]["day"] == DAY
        assert row["metadata"]["request_ids"] and "ndcg@3" in row["metadata"]["scores"]
    # Promoting again against that set adds nothing: every question is already in it.
    again = tmp / "again.jsonl"
    promote(tmp, again, "--against", str(out))
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


def test_failed_grades_and_scores_are_marked_and_the_day_goes_on(
    tmp_path: Path, prefect_harness: None
) -> None:
    write_log(tmp_path)
    path = audit_yaml(tmp_path)
    from ragaudit.cli import app

    # Half the judge's distinct replies are broken JSON and no repair is asked.
    result = CliRunner().invoke(
        app,
        ["audit", "-c", str(path), "--day", DAY, "--judge", "fake/judge?malformed=0.5"]
        + ["--set", "models.max_repairs=0"],
    )
    # Most judged rows failed: the day is written whole, and the exit says so (as a run's).
    assert result.exit_code == 3, result.output
    assert "completed with failures" in result.output and "Traceback" not in result.output
    folder = tmp_path / "runs" / "audit-support-bot" / DAY
    verdicts = pl.read_parquet(folder / "verdicts.parquet")
    failed = verdicts.filter(pl.col("status") == "failed")
    assert 0 < failed.height < verdicts.height
    assert failed["grade"].is_null().all() and failed["reason"].str.len_chars().min() > 0
    scores = pl.read_parquet(folder / "scores.parquet")
    # A list with an ungraded document has no nDCG: failed, naming the rank, never 0.
    lists = scores.filter(pl.col("metric") == "ndcg@3", pl.col("status") == "failed")
    assert lists.height > 0 and lists["value"].is_null().all()
    assert lists["error"].str.contains("has no grade").all()
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["grading"]["failed"] == failed.height
    assert manifest["status"] == "completed_with_failures"
    assert (folder / "report.html").is_file() and (folder / "estimates.parquet").is_file()


def test_people_label_the_day_in_the_viewer_and_the_next_audit_fills_ppi(
    audited: dict[str, Any],
) -> None:
    # Last in this module: it adds labels to the shared day and audits it once more.
    from fastapi.testclient import TestClient

    from ragaudit.viewer.app import create_app

    folder = audited["folder"]
    assert (folder / "labels.sample.parquet").is_file()
    before = pl.read_parquet(folder / "estimates.parquet")
    assert before["ppi_estimate"].is_null().all() and (before["ppi_n"] == 0).all()
    client = TestClient(create_app(audited["tmp"] / "runs"), base_url="http://127.0.0.1")
    api = f"/runs/audit-support-bot/days/{DAY}/label/api"
    start = client.get(api + "/start", params={"annotator": "ann"}).json()
    assert start["total"] > 0
    for position in range(start["total"]):
        item = client.get(f"{api}/items/{position}", params={"annotator": "ann"}).json()
        # Every document as good as it gets; every answer faithful.
        label = 3.0 if item["kind"] == "grade" else 1.0
        post = {"position": position, "item_id": item["item_id"], "annotator": "ann"}
        assert client.post(api + "/labels", json={**post, "label": label}).status_code == 200
    out = ragaudit("audit", "-c", str(audited["path"]), "--day", DAY)
    assert "provider calls 0" in out
    after = pl.read_parquet(folder / "estimates.parquet")
    sample = pl.read_parquet(folder / "sample.parquet")
    overall = after.filter(pl.col("segment") == "(all)")
    for metric in ("precision@3", "relevant share", "ndcg@3", "faithfulness"):
        row = overall.filter(pl.col("metric") == metric).row(0, named=True)
        # Every graded request labelled: the corrected figure is the people's own mean. They
        # call everything perfect, which a sample of the day cannot tell from a day with some
        # misses: no interval rather than a point (ADR 21).
        assert row["ppi_n"] == row["n"] == sample.height, metric
        assert row["ppi_estimate"] == pytest.approx(1.0), metric
        assert row["ppi_ci_low"] is None and row["ppi_se"] is None, metric
        assert row["se"] is None or row["se"] > 0
    page = (folder / "report.html").read_text(encoding="utf-8")
    assert f"1.000 (– – –), {sample.height} labelled" in page


def test_a_paid_judge_is_asked_about_prompt_tokens_not_only_calls(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ragaudit.cli import app
    from ragaudit.cli._audit import CONFIRM_ABOVE

    log = write_log(tmp_path)
    # One request whose query is long: a handful of calls, many tokens.
    long = json.loads(log.read_text().splitlines()[0])
    long.update(id="long", request={**long["request"], "q": "refund policy " * 6_000})
    (log.parent / "part-1.jsonl").write_text(json.dumps(long) + "\n", encoding="utf-8")
    path = audit_yaml(tmp_path, metrics=["faithfulness"])
    monkeypatch.setattr("ragaudit.cli._audit.CONFIRM_TOKENS_ABOVE", 20_000)
    started: list[Any] = []
    monkeypatch.setattr("ragaudit.flows.audit.run_audit", lambda *a: started.append(a) or {})
    paid = ["audit", "-c", str(path), "--day", DAY, "--judge", "openai/gpt-4o-mini"]
    result = CliRunner().invoke(app, paid)

    said = " ".join(result.output.split())
    assert result.exit_code == 2, result.output
    calls = int(said.split(" paid judge calls")[0].rsplit(" ", 1)[-1].replace(",", ""))
    tokens = int(said.split(" prompt tokens")[0].rsplit(" ", 1)[-1].replace(",", ""))
    assert calls <= CONFIRM_ABOVE and tokens > 20_000
    assert "counted by the dry run" in said and "pass --yes" in said
    assert started == [] and not (tmp_path / "runs").exists()
    assert "Traceback" not in result.output
