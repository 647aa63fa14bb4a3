"""People's labels of an audit day: its items, their values, the PPI figures, the viewer's flow."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from fastapi.testclient import TestClient

from ragaudit import labels
from ragaudit.audit import (
    ALL,
    day_items,
    estimate,
    list_metrics,
    people_estimates,
    read_day_labels,
    read_label_items,
)
from ragaudit.audit._labels import label_items, people_values, write_label_items
from ragaudit.audit._served import Served
from ragaudit.schemas import AUDIT_SAMPLE, AUDIT_SCORES, AUDIT_VERDICTS, to_table
from ragaudit.viewer.app import create_app

DAY = "2026-11-26"
K = 3
HOSTILE = "<script>alert(1)</script>"


def _served(i: int, *, answer: str | None = "an answer", skipped: bool = False) -> Served:
    docs = [
        {"rank": r, "id": f"d{i}-{r}", "text": f"text {i}-{r} {HOSTILE}", "changed": False}
        for r in range(1, K + 1)
    ]
    if skipped:
        docs[1]["text"] = None  # logged by id only, the backend had no text: not graded
    return Served(
        request_id=f"r{i}",
        unit=f"u{i}",
        segment="a" if i % 2 else "b",
        query=f"question {i}",
        language="en",
        answer=answer,
        citations=None,
        docs=docs,
    )


def _judge_grade(i: int, rank: int) -> int:
    return (i + rank) % 4


def _day(root: Path, n: int = 12) -> Path:
    """An audit day's folder as ``run_audit_day`` leaves it: manifest, sample, verdicts, scores."""
    folder = root / "audit-bot" / DAY
    folder.mkdir(parents=True)
    served = [_served(i, skipped=i == 0) for i in range(n)]
    manifest = {
        "kind": "audit",
        "status": "completed",
        "day": DAY,
        "config": {"audit": {"k": K}, "sort": {"relevant_grade": 2}},
    }
    (folder / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    sample = [
        {
            "unit": s.unit,
            "request_id": s.request_id,
            "segment": s.segment,
            "band": "tail",
            "stratum": f"{s.segment}/tail",
            "count": 1,
            "pi": 0.5,
            "weight": 2.0,
        }
        for s in served
    ]
    pl.from_arrow(to_table(sample, AUDIT_SAMPLE)).write_parquet(folder / "sample.parquet")
    verdicts, scores = [], []
    for i, s in enumerate(served):
        grades = []
        for d in s.docs:
            ok = d["text"] is not None
            grades.append(_judge_grade(i, d["rank"]) if ok else None)
            verdicts.append(
                {
                    "request_id": s.request_id,
                    "unit": s.unit,
                    "rank": d["rank"],
                    "doc_id": d["id"],
                    "grade": grades[-1],
                    "status": "ok" if ok else "skipped",
                }
            )
        for metric, value in list_metrics(grades, K, 2).items():
            scores.append(
                {
                    "request_id": s.request_id,
                    "unit": s.unit,
                    "segment": s.segment,
                    "metric": metric,
                    "value": value,
                    "status": "ok" if value is not None else "skipped",
                }
            )
        scores.append(
            {
                "request_id": s.request_id,
                "unit": s.unit,
                "segment": s.segment,
                "metric": "faithfulness",
                "value": 0.5,
                "status": "ok",
            }
        )
    pl.from_arrow(to_table(verdicts, AUDIT_VERDICTS)).write_parquet(folder / "verdicts.parquet")
    pl.from_arrow(to_table(scores, AUDIT_SCORES)).write_parquet(folder / "scores.parquet")
    assert write_label_items(folder, served, ["faithfulness", "aspect_refusal"], "bot")
    return folder


def _label(folder: Path, item: dict[str, Any], value: float | None, who: str = "ann") -> None:
    labels.append_labels(
        folder,
        [
            {
                "item_id": item["item_id"],
                "kind": item["kind"],
                "question_id": item["request_id"],
                "candidate_id": item["doc_id"],
                "annotator": who,
                "label": value,
            }
        ],
        day_items(folder),
    )


def test_the_items_are_blind_complete_lists_in_a_stable_random_order() -> None:
    served = [_served(i, skipped=i == 0, answer=None if i == 1 else "yes") for i in range(8)]
    items = label_items(served, ["faithfulness", "citation_support_recall"], "bot")
    # Texts only: nothing of the judge's verdicts, scores or the sampling design.
    assert not {"grade", "value", "segment", "stratum", "weight"} & set(items.column_names)
    rows = items.to_pylist()
    assert [r["position"] for r in rows] == list(range(len(rows)))
    kinds: dict[str, list[str]] = {}
    for r in rows:
        kinds.setdefault(r["request_id"], []).append(r["kind"])
    # r0 has a document without text (the judge has no list value): only its answer is asked;
    # r1 has no answer: only its documents; yes/no is asked for faithfulness alone.
    assert kinds["r0"] == ["faithfulness"]
    assert kinds["r1"] == ["grade"] * K
    assert all(k == ["grade"] * K + ["faithfulness"] for r, k in kinds.items() if r > "r1")
    # Request by request, in an order that is neither the sample's nor changes between calls.
    order = list(dict.fromkeys(r["request_id"] for r in rows))
    assert order != sorted(order)
    again = label_items(list(reversed(served)), ["faithfulness"], "bot")
    assert list(dict.fromkeys(again.column("request_id").to_pylist())) == order


def test_people_values_list_metrics_from_a_persons_grades_and_yes_no(tmp_path: Path) -> None:
    folder = _day(tmp_path)
    items = read_label_items(folder).to_pylist()
    r2 = [it for it in items if it["request_id"] == "r2"]
    r3 = [it for it in items if it["request_id"] == "r3" and it["kind"] == "grade"]
    given = {"d2-1": 0.0, "d2-2": 3.0, "d2-3": 2.0}
    for it in r2:
        _label(folder, it, given.get(it["doc_id"], 1.0))
    _label(folder, r3[0], 3.0)  # r3: one document graded of three: no list value
    _label(folder, r3[1], None)
    _label(folder, r3[2], 5.0)  # not a grade: left out
    bob = next(it for it in r2 if it["kind"] == "faithfulness")
    _label(folder, bob, 0.0, who="bob")
    values = people_values(folder, K, 2)
    mine = values.filter(pl.col("unit") == "u2")
    expected = list_metrics([0, 3, 2], K, 2)
    for metric, value in expected.items():
        assert mine.filter(pl.col("metric") == metric)["value"].to_list() == [value]
    assert sorted(mine.filter(pl.col("metric") == "faithfulness")["value"]) == [0.0, 1.0]
    assert values.filter(pl.col("unit") == "u3").is_empty()


def test_labels_fill_the_ppi_figure_and_people_who_agree_leave_it(tmp_path: Path) -> None:
    folder = _day(tmp_path)
    assert people_estimates(folder) is None
    items = read_label_items(folder).to_pylist()
    labelled = {f"r{i}" for i in range(1, 7)}
    for it in items:
        if it["request_id"] in labelled and it["kind"] == "grade":
            i, rank = int(it["request_id"][1:]), int(it["doc_id"].rsplit("-", 1)[1])
            _label(folder, it, float(_judge_grade(i, rank)))  # the judge's own grade
    figures = people_estimates(folder)
    assert figures is not None
    row = figures.filter((pl.col("segment") == ALL) & (pl.col("metric") == "dcg@3")).row(
        0, named=True
    )
    assert row["ppi_n"] == 6 and row["ppi_estimate"] == pytest.approx(row["estimate"])
    assert row["ppi_ci_low"] <= row["ppi_estimate"] <= row["ppi_ci_high"]
    # People who grade every document 3: their list is as good as a list gets.
    for it in items:
        if it["kind"] == "grade":
            _label(folder, it, 3.0, who="bob")
    values = people_values(folder, K, 2).filter(pl.col("metric") == "precision@3")
    scores = pl.read_parquet(folder / "scores.parquet")
    by_hand = estimate(
        scores.select("unit", "metric", "value", "status"),
        pl.read_parquet(folder / "sample.parquet"),
        labels=values,
    ).filter((pl.col("segment") == ALL) & (pl.col("metric") == "precision@3"))
    figures = people_estimates(folder)
    assert figures is not None
    row = figures.filter((pl.col("segment") == ALL) & (pl.col("metric") == "precision@3"))
    assert row["ppi_estimate"][0] == pytest.approx(by_hand["ppi_estimate"][0])
    assert row["ppi_n"][0] == 11  # every unit but r0 (a document without text)
    assert row["ppi_estimate"][0] > row["estimate"][0]


def _client(root: Path) -> TestClient:
    return TestClient(create_app(root), base_url="http://127.0.0.1")


def test_the_viewer_labels_an_audit_day(tmp_path: Path) -> None:
    folder = _day(tmp_path / "runs")
    client = _client(tmp_path / "runs")
    base = f"/runs/audit-bot/days/{DAY}/label"
    page = client.get(base)
    assert page.status_code == 200 and "labelling.js" in page.text
    assert "default-src 'self'" in page.headers["content-security-policy"]
    start = client.get(base + "/api/start", params={"annotator": "ann"}).json()
    total = read_label_items(folder).num_rows
    assert start == {"run_id": f"audit-bot {DAY}", "total": total, "labelled": 0, "resume": 0}
    item = client.get(base + "/api/items/0", params={"annotator": "ann"}).json()
    assert item["question"].startswith("question ") and item["labelled"] is False
    assert not {"grade", "value", "segment", "stratum"} & set(item)
    if item["kind"] == "grade":
        assert HOSTILE in item["candidate"] and [c["key"] for c in item["choices"]][0] == "0"
    post = {"position": 0, "item_id": item["item_id"], "annotator": "ann", "label": 1.0}
    assert client.post(base + "/api/labels", json=post).status_code == 200
    # An item that is not the day's at that position: 409, nothing filed under it.
    moved = client.post(base + "/api/labels", json={**post, "item_id": "grade:r99:x"})
    assert moved.status_code == 409 and "reload" in moved.text
    wrong = client.post(base + "/api/labels", json={**post, "label": 7.0})
    assert wrong.status_code == 422
    assert [r["item_id"] for r in read_day_labels(folder).to_pylist()] == [item["item_id"]]
    assert any((folder.parent.parent / "judgments").glob("part-*.parquet"))
    assert not (folder / labels.STORE).exists()
    again = client.get(base + "/api/start", params={"annotator": "ann"}).json()
    assert (again["labelled"], again["resume"]) == (1, 1)
    csv = client.get(f"/runs/audit-bot/days/{DAY}/labels.csv")
    assert csv.status_code == 200 and item["item_id"] in csv.text
    # The audit's page links each day's labelling; a day of another audit or none: 404.
    audit = client.get("/runs/audit-bot").text
    assert f"/runs/audit-bot/days/{DAY}/label" in audit
    assert client.get("/runs/audit-bot/days/2026-01-01/label").status_code == 404
    assert client.get("/runs/audit-bot/days/..%2F..%2Fx/label").status_code == 404


def test_the_audit_page_shows_the_ppi_figure_with_its_interval_and_labels(tmp_path: Path) -> None:
    folder = _day(tmp_path / "runs")
    client = _client(tmp_path / "runs")
    assert 'id="people"' not in client.get("/runs/audit-bot").text
    for it in read_label_items(folder).to_pylist():
        if it["kind"] == "grade":
            # Every document 3, but the first of every third request 0: lists that differ.
            i, rank = int(it["request_id"][1:]), int(it["doc_id"].rsplit("-", 1)[1])
            _label(folder, it, 0.0 if i % 3 == 0 and rank == 1 else 3.0)
    page = client.get("/runs/audit-bot").text
    assert 'id="people"' in page
    figures = people_estimates(folder)
    assert figures is not None
    row = figures.filter((pl.col("segment") == ALL) & (pl.col("metric") == "ndcg@3")).row(
        0, named=True
    )
    table = page[page.index('id="people"') :]
    assert f"{row['ppi_estimate']:.3f}" in table
    assert f"{row['ppi_ci_low']:.3f} – {row['ppi_ci_high']:.3f}" in table
    assert '<td class="n">11</td>' in table


def test_a_day_audited_before_labelling_says_how_to_get_items(tmp_path: Path) -> None:
    folder = _day(tmp_path / "runs")
    (folder / labels.SAMPLE_FILE).unlink()
    client = _client(tmp_path / "runs")
    answer = client.get(f"/runs/audit-bot/days/{DAY}/label/api/start", params={"annotator": "a"})
    assert answer.status_code == 404 and "ragaudit audit --day" in answer.json()["detail"]


def test_audit_label_names_a_day_without_items_in_one_line(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from ragaudit.cli import app

    args = ["audit", "label", "bot", "--day", DAY, "--runs-root", str(tmp_path), "--no-browser"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2, result.output
    assert "no items to label" in result.output and "Traceback" not in result.output
