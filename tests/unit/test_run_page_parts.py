"""The run page in two parts: people's labels re-render only their part, and say where they differ.

``ppi.disagreements`` is checked against the labels and verdicts read directly; the viewer's
page against ``render_html(build_report(run))``, the whole page built afresh.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from fastapi.testclient import TestClient
from support.labelled_runs import label_row, labelled_run

from ragaudit import labels, ppi, reporting
from ragaudit.atomic import write_json
from ragaudit.reporting import build_report, render_html
from ragaudit.viewer import _pages
from ragaudit.viewer._incremental import split
from ragaudit.viewer.app import create_app


def _same(page: str) -> str:
    """What two renderings of one report share (the charts' time and gradient ids apart)."""
    page = re.sub(r"charts rendered offline in [0-9.]+ s", "", page)
    return re.sub(r"gradient_\d+", "gradient", page)


def test_split_puts_the_labels_store_apart_and_drops_what_the_page_never_reads() -> None:
    entries = (
        (".labels.lock", 1, 0),
        (".scores.parquet.abc.tmp", 1, 5),
        ("compare.json", 2, 10),
        ("labels.parquet", 3, 100),
        ("labels.sample.parquet", 4, 50),
        ("report.html", 5, 9),
        ("scores.parquet", 6, 70),
    )
    rest, labelled = split(entries)
    assert rest == (("scores.parquet", 6, 70),)
    assert [e[0] for e in labelled] == ["labels.parquet", "labels.sample.parquet"]


def test_disagreements_are_the_items_some_person_labelled_otherwise(tmp_path: Path) -> None:
    run, _ = labelled_run(tmp_path, "r", questions=6, candidates=4, annotators=("ann", "bob"))
    # bob changes his mind on one item: only his latest label counts.
    labels.append_labels(
        run,
        [label_row("grade", "q0000", "c0", "bob", 3.0)],
    )
    judge = {
        (r["question_id"], r["context_id"]): r["grade"]
        for r in pq.read_table(run / "verdicts.parquet").to_pylist()
    }
    latest: dict[tuple[str, str], dict[str, float]] = {}
    for r in sorted(labels.read_labels(run).to_pylist(), key=lambda r: r["time"]):
        if r["kind"] == "grade":
            latest.setdefault((r["question_id"], r["candidate_id"]), {})[r["annotator"]] = r[
                "label"
            ]
    expected = {k for k, by in latest.items() if any(v != judge[k] for v in by.values())}
    found = [d for d in ppi.disagreements(run) if d.kind == "grade"]
    assert {(d.question_id, d.candidate_id) for d in found} == expected
    assert 0 < len(expected) < len(latest)
    first = next(
        d for d in ppi.people_labels(run) if (d.question_id, d.candidate_id) == ("q0000", "c0")
    )
    assert {p.annotator: p.label for p in first.people} == latest[("q0000", "c0")]
    assert first.people[0].time.endswith("+00:00")
    assert first.question is not None and first.candidate == "<b>context c0 of q0000</b>"


def test_the_page_shows_the_corrected_figures_on_top_the_disagreements_and_the_labels(
    tmp_path: Path,
) -> None:
    run, _ = labelled_run(tmp_path, "r", questions=12, candidates=4, grade_labels=8)
    report = build_report(run)
    page = render_html(report)
    assert "ragaudit:slot" not in page
    people = report.people
    assert people is not None
    for figure in (ppi.RELEVANT_SHARE, ppi.NDCG):
        c = people.corrected_for(figure)
        assert c is not None and c.ppi_mean is not None
        row = re.search(rf'<tr class="corrected" data-figure="{figure}">(.*?)</tr>', page, re.S)
        assert row is not None
        assert f"<b>{c.ppi_mean:.3f}</b> ({c.ppi_ci_low:.2f} – {c.ppi_ci_high:.2f}" in row.group(1)
    # The corrected figures come before the first chart, not after the whole report.
    assert page.index('data-figure="NDCG@10"') < page.index('<div class="figs">')
    apart = ppi.disagreements(run)
    table = re.search(r'<table id="label-disagreements">(.*?)</table>', page, re.S)
    assert table is not None and table.group(1).count("data-open=") == len(apart) > 0
    blob = re.search(r'<script type="application/json" id="people-labels">(.*?)</script>', page)
    assert blob is not None
    shown = json.loads(blob.group(1))
    assert sum(len(v) for v in shown.values()) == len(ppi.people_labels(run))
    assert page.count("Every NDCG@10 on this page takes") >= 1


def test_a_label_re_renders_only_peoples_part_and_compare_json_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run, _ = labelled_run(tmp_path, "r", questions=8, candidates=4, grade_labels=4)
    calls = {"base": 0, "people": 0, "frame": 0}

    def counted(name: str, fn):  # type: ignore[no-untyped-def]
        def wrapper(*a, **kw):  # type: ignore[no-untyped-def]
            calls[name] += 1
            return fn(*a, **kw)

        return wrapper

    monkeypatch.setattr(_pages, "build_base", counted("base", reporting.build_base))
    monkeypatch.setattr(_pages, "people_section", counted("people", reporting.people_section))
    monkeypatch.setattr(reporting, "render_frame", counted("frame", reporting.render_frame))
    client = TestClient(create_app(tmp_path), base_url="http://127.0.0.1")
    assert client.get("/runs/r").status_code == 200
    assert calls == {"base": 1, "people": 1, "frame": 1}

    labels.append_labels(
        run,
        [label_row("grade", "q0007", "c0", "ann", 2.0)],
    )
    after = client.get("/runs/r").text
    assert calls == {"base": 1, "people": 2, "frame": 1}
    # The page spliced from the kept frame is the page built whole.
    whole = render_html(build_report(run))
    assert _same(after[after.index("<main>") :]) == _same(whole[whole.index("<main>") :])

    write_json({"compared": True}, run / "compare.json")
    assert client.get("/runs/r").status_code == 200
    assert calls == {"base": 1, "people": 2, "frame": 1}


def test_the_viewers_question_page_shows_peoples_labels(tmp_path: Path) -> None:
    run, truth = labelled_run(tmp_path, "r", questions=4, candidates=3, annotators=("ann",))
    client = TestClient(create_app(tmp_path), base_url="http://127.0.0.1")
    page = client.get("/runs/r/questions/q0001").text
    table = re.search(r'<table id="people-labels">(.*?)</table>', page, re.S)
    assert table is not None
    rows = re.findall(
        r"<tr[^>]*><td>grade</td><td><span class=\"qid\">(c\d)</span>.*?<td>ann</td>"
        r"<td class=\"n\">(\d)</td>",
        table.group(1),
    )
    assert {cid: int(g) for cid, g in rows} == {
        cid: g for (q, cid), g in truth["grades"].items() if q == "q0001"
    }
