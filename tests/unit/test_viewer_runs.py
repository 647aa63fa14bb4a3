"""The runs list of ``ragaudit view``: every run id ``run`` accepts, every kind of folder, pages.

Through FastAPI's TestClient. A run id is any folder name ``runlock.check_run_id`` accepts, so
the viewer encodes it once on the way out and takes it decoded once on the way in.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from markupsafe import escape
from support.label_runs import write_label_run
from support.reporting_runs import write_run
from support.viewer_runs import write_summary

from ragaudit import labels
from ragaudit.errors import ConfigError
from ragaudit.reporting import CALIBRATION_META
from ragaudit.runlock import check_run_id
from ragaudit.viewer import _listing as listing_module
from ragaudit.viewer import run_url
from ragaudit.viewer._listing import PAGE_SIZE
from ragaudit.viewer.app import create_app

LOOPBACK = "http://127.0.0.1"
ODD_IDS = ["测试运行", "nightly 01", "a+b", "100%", "q?x#y", 'it\'s "quoted"']


def _client(root: Path) -> TestClient:
    return TestClient(create_app(root), base_url=LOOPBACK)


def _run(root: Path, run_id: str, started_at: str | None = None) -> Path:
    path = write_run(root, run_id, {"faithfulness": [0.5, 0.6, 0.7], "rouge_l": [0.5, 0.6, 0.7]})
    write_summary(path)
    if started_at is not None:
        manifest = json.loads((path / "manifest.json").read_text())
        (path / "manifest.json").write_text(json.dumps({**manifest, "started_at": started_at}))
    return path


def _listed(page: str) -> list[str]:
    """The run ids of the list's rows, as the page names them."""
    import html

    return [html.unescape(r) for r in re.findall(r'<tr class="[^"]*" data-run="([^"]*)"', page)]


@pytest.mark.parametrize("run_id", ODD_IDS)
def test_a_run_id_run_accepts_is_listed_opened_labelled_and_exported(
    tmp_path: Path, run_id: str
) -> None:
    root = tmp_path / "runs"
    run_dir = write_label_run(root, run_id, n_questions=3, hostile=False)
    write_summary(run_dir)
    client = _client(root)
    listing = client.get("/")
    assert _listed(listing.text) == [run_id]
    # The link in the list is the address of the run, encoded once.
    href = re.search(r'<a href="(/runs/[^"]*)"', listing.text)
    assert href is not None and unquote(href.group(1)) == f"/runs/{run_id}"
    report = client.get(href.group(1))
    assert report.status_code == 200, report.text
    assert str(escape(run_id)) in report.text
    # Drawn from the run's page, labelled, exported: every address is the run's.
    drawn = client.post(run_url(run_id, "label", "draw"), follow_redirects=False)
    assert drawn.status_code == 303 and drawn.headers["location"] == run_url(run_id, "label")
    assert client.get(drawn.headers["location"]).status_code == 200
    start = client.get(run_url(run_id, "label", "api", "start"), params={"annotator": "ann"})
    assert start.status_code == 200 and start.json()["run_id"] == run_id
    item = client.get(run_url(run_id, "label", "api", "items", "0"), params={"annotator": "ann"})
    assert item.status_code == 200, item.text
    saved = client.post(
        run_url(run_id, "label", "api", "labels"),
        json={
            "position": 0,
            "item_id": item.json()["item_id"],
            "annotator": "ann",
            "label": item.json()["choices"][0]["label"],
        },
    )
    assert saved.status_code == 200, saved.text
    exported = client.get(run_url(run_id, "labels.csv"))
    assert exported.status_code == 200 and "ann" in exported.text
    disposition = exported.headers["content-disposition"]
    assert disposition.endswith("filename*=UTF-8''" + run_url(f"{run_id}.labels.csv")[6:])
    assert client.get(run_url(run_id, "questions", "q0000")).status_code in (200, 404)


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(run_id=st.text(min_size=1, max_size=24))
def test_every_id_check_run_id_accepts_is_listed_and_opens(tmp_path: Path, run_id: str) -> None:
    try:
        check_run_id(run_id)
    except ConfigError:
        return
    template = tmp_path / "template"
    if not template.exists():
        _run(template, "t")
    root = tmp_path / "runs"
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir()
    shutil.copytree(template / "t", root / run_id)
    client = _client(root)
    assert _listed(client.get("/").text) == [run_id]
    assert client.get(run_url(run_id, "label")).status_code == 200
    assert client.get(run_url(run_id, "labels.csv")).status_code == 200


@pytest.mark.parametrize("path", ["/runs/.hidden", "/runs/%2Ehidden", "/runs/..%2F.hidden"])
def test_a_hidden_folder_is_no_run_id_and_not_shown(tmp_path: Path, path: str) -> None:
    root = tmp_path / "runs"
    _run(root, "a")
    shutil.copytree(root / "a", root / ".hidden")
    with pytest.raises(ConfigError, match="hidden"):
        check_run_id(".hidden")
    client = _client(root)
    assert _listed(client.get("/").text) == ["a"]
    assert client.get(path).status_code == 404


def test_the_annotator_is_stored_as_named(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    run_dir = write_label_run(root, "nightly 01", n_questions=3, hostile=False)
    labels.ensure_sample(run_dir, 4)
    client = _client(root)
    # The address `ragaudit label --annotator "Ana Lee"` prints, as the page's script reads it.
    address = run_url("nightly 01", "label", annotator="Ana Lee")
    assert address == "/runs/nightly%2001/label?annotator=Ana%20Lee"
    for position, name in enumerate(["Ana Lee", " Ana  Lee ", "Ana\u00a0Lee"]):
        item = client.get(
            run_url("nightly 01", "label", "api", "items", str(position)),
            params={"annotator": name},
        ).json()
        saved = client.post(
            run_url("nightly 01", "label", "api", "labels"),
            json={
                "position": position,
                "item_id": item["item_id"],
                "annotator": name,
                "label": item["choices"][0]["label"],
            },
        )
        assert saved.status_code == 200, saved.text
    stored = set(labels.read_labels(run_dir)["annotator"].to_pylist())
    assert stored == {"Ana Lee"}


def _tune(root: Path, name: str) -> None:
    (root / name).mkdir(parents=True)
    (root / name / "tune.json").write_text("{}")
    (root / name / "report.html").write_text("<html><body><h1>Tune page</h1></body></html>")


def test_every_kind_of_folder_is_listed_as_what_it_is(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    _run(root, "a")
    _tune(root, "tune-demo")
    (root / "battles-1").mkdir()
    pq.write_table(pa.table({"run": ["a"]}), root / "battles-1" / "leaderboard.parquet")
    (root / "audit-shop").mkdir()
    (root / "judgments").mkdir()
    pq.write_table(pa.table({"x": [1]}), root / "judgments" / "part-0.parquet")
    (root / "calib").mkdir()
    (root / "calib" / CALIBRATION_META).write_text("{}")
    (root / "notes").mkdir()
    client = _client(root)
    page = client.get("/").text
    rows = {
        run_id: page.split(f'data-run="{run_id}"', 1)[1].split("</tr>", 1)[0]
        for run_id in _listed(page)
    }
    # The store holds no run: not listed at all.
    assert set(rows) == {"a", "tune-demo", "battles-1", "audit-shop", "calib", "notes"}
    assert "completed" in rows["a"]
    # Every kind of run is shown with its kind and its state by the one rule (a folder written
    # before its kind had a manifest is complete by its marker).
    assert '<span class="kind">tune</span>' in rows["tune-demo"]
    assert "st-completed" in rows["tune-demo"] and "not a run folder" not in rows["tune-demo"]
    assert '<span class="kind">battles</span>' in rows["battles-1"]
    assert "st-completed" in rows["battles-1"]
    assert "st-audit" in rows["audit-shop"]
    assert "calibration" in rows["calib"]
    assert "not a run folder" in rows["notes"]
    # A tune's page is the report it wrote; the store has no page.
    tune = client.get("/runs/tune-demo")
    assert tune.status_code == 200 and "Tune page" in tune.text
    assert client.get("/runs/judgments").status_code == 409
    assert client.get("/runs/battles-1").status_code == 409


def test_the_list_is_paged_newest_first_and_reads_only_its_page(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "runs"
    template = _run(tmp_path / "template", "t")
    n = 2 * PAGE_SIZE + 7
    for i in range(n):
        target = root / f"r{i:03d}"
        shutil.copytree(template, target)
        manifest = json.loads((target / "manifest.json").read_text())
        manifest.update(run_id=target.name, started_at=f"2026-11-01T00:{i // 60:02d}:{i % 60:02d}")
        (target / "manifest.json").write_text(json.dumps(manifest))
    read: list[str] = []
    real = listing_module.run_overview

    def counted(folder: Path):  # type: ignore[no-untyped-def]
        read.append(Path(folder).name)
        return real(folder)

    monkeypatch.setattr(listing_module, "run_overview", counted)
    client = _client(root)
    first = client.get("/")
    assert first.status_code == 200
    newest = [f"r{i:03d}" for i in range(n - 1, -1, -1)]
    assert _listed(first.text) == newest[:PAGE_SIZE]
    # Only the rows shown were read beyond their manifests.
    assert sorted(read) == sorted(newest[:PAGE_SIZE])
    assert 'rel="next" href="/?page=2"' in first.text and 'rel="prev"' not in first.text
    assert f"page 1 of 3 · {n} folder(s)" in first.text
    last = client.get("/", params={"page": 3}).text
    assert _listed(last) == newest[2 * PAGE_SIZE :]
    assert 'rel="prev" href="/?page=2"' in last and 'rel="next"' not in last
    # Past the end: the last page; a name filter pages what it keeps.
    assert _listed(client.get("/", params={"page": 99}).text) == newest[2 * PAGE_SIZE :]
    found = client.get("/", params={"q": "R10"}).text
    assert _listed(found) == [r for r in newest if "r10" in r]
    # Unchanged folders are not read again; a changed one is, and moves to the top.
    read.clear()
    client.get("/")
    assert read == []
    changed = root / "r000" / "manifest.json"
    manifest = json.loads(changed.read_text())
    changed.write_text(json.dumps({**manifest, "started_at": "2026-12-01T00:00:00"}))
    os.utime(root / "r000", ns=(1, 1))
    assert _listed(client.get("/").text)[0] == "r000"
    assert read == ["r000"]


def test_a_new_server_reads_only_the_folders_changed_since_the_index(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "runs"
    for i in range(3):
        _run(root, f"r{i}", started_at=f"2026-11-0{i + 1}T00:00:00")
    heads: list[str] = []
    real = listing_module._started

    def counted(folder: Path, kind: str) -> str:
        heads.append(folder.name)
        return real(folder, kind)

    monkeypatch.setattr(listing_module, "_started", counted)
    assert _listed(_client(root).get("/").text) == ["r2", "r1", "r0"]
    assert sorted(heads) == ["r0", "r1", "r2"]
    assert (root / listing_module.INDEX_FILE).is_file()
    # A fresh server: the index holds every unchanged folder's head.
    heads.clear()
    _run(root, "r3", started_at="2026-11-04T00:00:00")
    assert _listed(_client(root).get("/").text) == ["r3", "r2", "r1", "r0"]
    assert heads == ["r3"]
    # A damaged index (or one from elsewhere) is only a cache: every folder is read again.
    (root / listing_module.INDEX_FILE).write_text('{"version": 1, "heads": {"../x": [1]}}')
    heads.clear()
    assert _listed(_client(root).get("/").text) == ["r3", "r2", "r1", "r0"]
    assert sorted(heads) == ["r0", "r1", "r2", "r3"]
