"""Labelling: the blind stratified sample, the JSON API that appends and resumes, the exports."""

from __future__ import annotations

import csv
import io
import json
import os
from collections import Counter
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from support.label_runs import HOSTILE, JUDGE_SAYS, write_label_run
from typer.testing import CliRunner

from ragaudit import labels
from ragaudit.calibration import load_grade_labels, load_labels
from ragaudit.cli import app as cli_app
from ragaudit.errors import InputError
from ragaudit.runfolder import RunFolder
from ragaudit.viewer.app import create_app


def _client(root: Path) -> TestClient:
    # The viewer's app, as `ragaudit label` and `ragaudit view` serve it (loopback names only).
    return TestClient(create_app(root), base_url="http://127.0.0.1")


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    run_dir = write_label_run(tmp_path / "runs", "r1")
    labels.ensure_sample(run_dir, 12)
    return run_dir


def _post(client: TestClient, position: int, label: float | None, annotator: str = "ann"):
    item = client.get(f"/runs/r1/label/api/items/{position}", params={"annotator": annotator})
    assert item.status_code == 200, item.text
    return client.post(
        "/runs/r1/label/api/labels",
        json={
            "position": position,
            "item_id": item.json()["item_id"],
            "annotator": annotator,
            "label": label,
        },
    )


def _first_label(client: TestClient, position: int) -> float:
    """A label the item at ``position`` accepts (its first choice)."""
    item = client.get(f"/runs/r1/label/api/items/{position}", params={"annotator": "ann"})
    return item.json()["choices"][0]["label"]


def test_allocation_is_even_and_capped_by_stratum_size() -> None:
    assert labels.allocate({"0": 50, "1": 50, "3": 2}, 20) == {"0": 9, "1": 9, "3": 2}
    assert labels.allocate({"a": 3, "b": 4}, 100) == {"a": 3, "b": 4}
    assert sum(labels.allocate({"a": 7, "b": 7, "c": 7}, 10).values()) == 10


def test_the_sample_draws_questions_then_their_candidates_and_records_its_design(
    tmp_path: Path,
) -> None:
    run_dir = write_label_run(tmp_path, "r1", n_questions=12)
    sample = labels.draw_sample(run_dir, 20, seed=3).to_pylist()
    pops = labels.populations(run_dir)
    frame = labels.grade_frame(run_dir)
    verdicts = RunFolder(tmp_path, "r1").read("verdicts").to_pylist()
    graded = Counter(str(v["grade"]) for v in verdicts if v["status"] == "ok")
    failed = {
        labels.item_id("grade", v["question_id"], v["context_id"])
        for v in verdicts
        if v["status"] != "ok"
    }
    assert failed, "the fixture must hold failed verdicts"
    assert {k: len(v) for k, v in pops["grade"].items()} == dict(graded)
    grade_rows = [r for r in sample if r["kind"] == "grade"]
    # Questions first (each gives its whole judged pool here: ten candidates or fewer), then
    # every candidate of a drawn question: about 20 grade items.
    questions = list(dict.fromkeys(r["question_id"] for r in grade_rows))
    assert len(grade_rows) == sum(len(frame[q]) for q in questions) >= 20 - 10
    for r in grade_rows:
        assert r["design"] == "two-stage"
        assert (r["psu_size"], r["psu_sampled"]) == (len(frame), len(questions))
        assert r["stratum_sampled"] <= r["stratum_size"]
        assert r["inclusion"] == pytest.approx(
            len(questions) / len(frame) * r["stratum_sampled"] / r["stratum_size"]
        )
    assert not failed & {r["item_id"] for r in grade_rows}
    # The answer metrics by a third of the score scale; context precision is not labelled.
    assert {r["kind"] for r in sample} == {"grade", "faithfulness", "answer_relevancy"}
    answers = sample[len(grade_rows) :]
    assert all(r["stratum"].split()[0] in {"low", "mid", "high"} for r in answers)
    assert all(r["design"] == "stratified" for r in answers)
    assert [r["position"] for r in sample] == list(range(len(sample)))
    assert len({r["item_id"] for r in sample}) == len(sample)
    # The kinds follow one another; the order inside a kind is the seed's.
    kinds = [r["kind"] for r in sample]
    assert kinds == sorted(kinds, key=["grade", "faithfulness", "answer_relevancy"].index)
    again = labels.draw_sample(run_dir, 20, seed=3).to_pylist()
    other = labels.draw_sample(run_dir, 20, seed=4).to_pylist()
    assert [r["item_id"] for r in again] == [r["item_id"] for r in sample]
    assert [r["item_id"] for r in other] != [r["item_id"] for r in sample]


def test_a_sample_of_the_first_form_is_still_read(tmp_path: Path) -> None:
    # labels.sample.parquet as written before the design columns (schema version 1).
    import pyarrow as pa

    from ragaudit.runfolder import write_table
    from ragaudit.schemas import LABEL_SAMPLE

    run_dir = write_label_run(tmp_path, "r1")
    table = labels.draw_sample(run_dir, 5)
    old = [n for n in LABEL_SAMPLE.names if n in ("position", "item_id", "kind", "question_id",
           "candidate_id", "stratum", "stratum_size", "stratum_sampled", "seed")]  # fmt: skip
    write_table(pa.Table.from_pylist(table.select(old).to_pylist()), run_dir / labels.SAMPLE_FILE)
    kept = labels.read_sample(run_dir)
    assert kept is not None and kept.num_rows == table.num_rows
    assert kept["design"].null_count == kept.num_rows


def test_a_drawn_sample_is_kept_for_every_annotator(tmp_path: Path) -> None:
    run_dir = write_label_run(tmp_path, "r1")
    first, drawn = labels.ensure_sample(run_dir, 5)
    again, drawn_again = labels.ensure_sample(run_dir, 50, seed=9)
    assert drawn and not drawn_again
    assert again.equals(first)
    assert (run_dir / labels.SAMPLE_FILE).is_file()


def test_the_viewers_button_draws_once_then_opens_the_labelling_page(tmp_path: Path) -> None:
    run_dir = write_label_run(tmp_path, "r1")
    client = _client(tmp_path)
    first = client.post("/runs/r1/label/draw?n=5", follow_redirects=False)
    assert first.status_code == 303 and first.headers["location"] == "/runs/r1/label"
    sample = labels.read_sample(run_dir)
    assert sample is not None
    # Pressed again (another tab, a second person): the kept sample, never a new draw.
    again = client.post("/runs/r1/label/draw?n=50", follow_redirects=False)
    assert again.status_code == 303 and labels.read_sample(run_dir).equals(sample)
    assert client.post("/runs/..%2Fr1/label/draw").status_code == 404
    # A form posted from another site is refused like every state-changing request.
    assert (
        client.post("/runs/r1/label/draw", headers={"Origin": "http://evil.test"}).status_code
        == 403
    )


def test_a_run_with_nothing_judged_cannot_be_sampled(tmp_path: Path) -> None:
    run_dir = write_label_run(tmp_path, "r1")
    (run_dir / "verdicts.parquet").unlink()
    (run_dir / "scores.parquet").unlink()
    with pytest.raises(InputError, match="nothing to label"):
        labels.draw_sample(run_dir, 10)


def test_the_button_on_a_run_with_nothing_judged_answers_with_a_page(tmp_path: Path) -> None:
    run_dir = write_label_run(tmp_path / "runs", "r1")
    (run_dir / "verdicts.parquet").unlink()
    (run_dir / "scores.parquet").unlink()
    answer = _client(tmp_path / "runs").post("/runs/r1/label/draw?n=5", follow_redirects=False)
    assert answer.status_code == 409
    assert answer.headers["content-type"].startswith("text/html")
    assert "nothing to label" in answer.text and "Back to the runs" in answer.text
    assert not (run_dir / labels.SAMPLE_FILE).exists()


def test_items_served_are_blind_to_the_judge(run_dir: Path) -> None:
    client = _client(run_dir.parent)
    judged = RunFolder(run_dir.parent, "r1").read("verdicts")["reason"].to_pylist()
    assert any(JUDGE_SAYS in (r or "") for r in judged)
    total = client.get("/runs/r1/label/api/start", params={"annotator": "ann"}).json()["total"]
    assert total == labels.read_sample(run_dir).num_rows
    shared = {"kind", "question_id", "candidate_id", "question", "position", "total"}
    shared |= {"item_id", "instruction", "choices", "labelled", "label", "history", "given"}
    for position in range(total):
        item = client.get(f"/runs/r1/label/api/items/{position}", params={"annotator": "ann"})
        body = item.json()
        if body["kind"] == "grade":
            assert set(body) == shared | {"candidate"}
            assert [c["key"] for c in body["choices"]] == ["0", "1", "2", "3"]
        elif body["kind"] == "faithfulness":
            assert set(body) == shared | {"answer", "contexts"}
            assert len(body["contexts"]) == 3  # the k_used contexts its judge read
        else:
            assert set(body) == shared | {"answer"}
            assert [c["key"] for c in body["choices"]] == ["y", "n"]
        text = item.text
        assert JUDGE_SAYS not in text
        assert "stratum" not in text and "grade_samples" not in text


def test_each_label_is_appended_at_once_and_the_page_resumes(run_dir: Path) -> None:
    client = _client(run_dir.parent)
    for position in range(5):
        label = None if position == 3 else _first_label(client, position)
        response = _post(client, position, label)
        assert response.status_code == 200, response.text
        assert response.json()["next"] == position + 1
        # On disk before the next key: a killed server loses nothing already answered.
        assert labels.read_labels(run_dir).num_rows == position + 1
    start = client.get("/runs/r1/label/api/start", params={"annotator": "ann"}).json()
    assert start["labelled"] == 5 and start["resume"] == 5
    skipped = client.get("/runs/r1/label/api/items/3", params={"annotator": "ann"}).json()
    assert skipped["labelled"] and skipped["label"] is None
    # Back, then a new key: the latest label wins and the resume point stays.
    choices = client.get("/runs/r1/label/api/items/1", params={"annotator": "ann"}).json()
    corrected = choices["choices"][-1]["label"]
    assert _post(client, 1, corrected).status_code == 200
    again = client.get("/runs/r1/label/api/items/1", params={"annotator": "ann"}).json()
    assert again["label"] == corrected
    assert client.get("/runs/r1/label/api/start", params={"annotator": "ann"}).json()["resume"] == 5
    latest = labels.latest_labels(labels.read_labels(run_dir))
    assert latest.num_rows == 5
    assert labels.read_labels(run_dir).num_rows == 6


def test_two_annotators_label_the_same_items_apart(run_dir: Path) -> None:
    client = _client(run_dir.parent)
    for position in range(4):
        assert _post(client, position, _first_label(client, position), "ann").status_code == 200
    for position in range(2):
        assert _post(client, position, _first_label(client, position), "bob").status_code == 200
    ann = client.get("/runs/r1/label/api/start", params={"annotator": "ann"}).json()
    bob = client.get("/runs/r1/label/api/start", params={"annotator": "bob"}).json()
    assert (ann["resume"], bob["resume"]) == (4, 2)
    latest = labels.latest_labels(labels.read_labels(run_dir)).to_pylist()
    by_item = Counter(r["item_id"] for r in latest)
    sample_ids = labels.read_sample(run_dir)["item_id"].to_pylist()
    assert [by_item[i] for i in sample_ids[:4]] == [2, 2, 1, 1]


def test_bad_labels_are_refused_and_nothing_is_written(run_dir: Path) -> None:
    client = _client(run_dir.parent)
    sample = labels.read_sample(run_dir).to_pylist()
    grade = next(r for r in sample if r["kind"] == "grade")
    yes_no = next(r for r in sample if r["kind"] != "grade")
    base = {"annotator": "ann", "label": 1.0}
    bad = [
        {**base, "position": grade["position"], "item_id": grade["item_id"], "label": 5.0},
        {**base, "position": yes_no["position"], "item_id": yes_no["item_id"], "label": 2.0},
        {**base, "position": grade["position"], "item_id": yes_no["item_id"]},
        {**base, "position": grade["position"], "item_id": grade["item_id"], "annotator": " "},
        {**base, "position": grade["position"], "item_id": grade["item_id"], "annotator": "a\x00"},
        {**base, "position": 10_000, "item_id": grade["item_id"]},
        {**base, "position": grade["position"], "item_id": grade["item_id"], "grade": 1},
    ]
    codes = [client.post("/runs/r1/label/api/labels", json=b).status_code for b in bad]
    assert codes == [422, 422, 409, 422, 422, 404, 422]
    # A JSON body sent as a form (a cross-site form post) is not read as a label.
    form = client.post(
        "/runs/r1/label/api/labels",
        content=json.dumps({**base, "position": 0, "item_id": sample[0]["item_id"]}),
        headers={"Content-Type": "text/plain"},
    )
    assert form.status_code == 422
    assert labels.read_labels(run_dir).num_rows == 0


def test_labels_export_as_csv_and_as_one_persons_qrels(run_dir: Path) -> None:
    client = _client(run_dir.parent)
    sample = labels.read_sample(run_dir).to_pylist()
    grades = [r for r in sample if r["kind"] == "grade"][:3]
    for r, label in zip(grades, [3.0, None, 0.0], strict=True):
        assert _post(client, r["position"], label).status_code == 200
    assert _post(client, grades[0]["position"], 2.0, "=HYPERLINK(1)").status_code == 200
    rows = list(csv.DictReader(io.StringIO(client.get("/runs/r1/labels.csv").text)))
    assert [r["label"] for r in rows if r["annotator"] == "ann"] == [
        {grades[0]["item_id"]: "3.0", grades[1]["item_id"]: "", grades[2]["item_id"]: "0.0"}[
            r["item_id"]
        ]
        for r in rows
        if r["annotator"] == "ann"
    ]
    assert len(rows) == 4
    # A name a spreadsheet would run as a formula stays text.
    assert "'=HYPERLINK(1)" in {r["annotator"] for r in rows}
    both = client.get("/runs/r1/labels.qrels")
    assert both.status_code == 409 and "name one annotator" in both.json()["detail"]
    qrels = client.get("/runs/r1/labels.qrels", params={"annotator": "ann"}).text
    expected = sorted(
        f"{r['question_id']} 0 {r['candidate_id']} {g}"
        for r, g in zip(grades, [3, None, 0], strict=True)
        if g is not None
    )
    assert qrels.splitlines() == expected


def test_the_cli_exports_labels(run_dir: Path, tmp_path: Path) -> None:
    client = _client(run_dir.parent)
    grade = next(r for r in labels.read_sample(run_dir).to_pylist() if r["kind"] == "grade")
    assert _post(client, grade["position"], 2.0).status_code == 200
    runner = CliRunner()
    out = tmp_path / "h.qrels"
    root = ["--runs-root", str(run_dir.parent)]
    result = runner.invoke(cli_app, ["label", "r1", *root, "--export", "qrels", "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert out.read_text() == f"{grade['question_id']} 0 {grade['candidate_id']} 2\n"
    out_csv = tmp_path / "l.csv"
    result = runner.invoke(cli_app, ["label", "r1", *root, "--export", "csv", "-o", str(out_csv)])
    assert result.exit_code == 0, result.output
    assert out_csv.read_text().splitlines()[1].startswith(grade["item_id"] + ",grade,")
    result = runner.invoke(cli_app, ["label", "r1", *root, "--export", "csv"])
    assert result.exit_code == 2 and "--export needs --output" in result.output


@pytest.mark.parametrize("run_id", ["..", "...", "%2e%2e", ".hidden", "out", "r1%2F..%2F.."])
def test_paths_leaving_the_runs_root_are_404(run_dir: Path, run_id: str) -> None:
    outside = run_dir.parent.parent / "elsewhere"
    outside.mkdir()
    os.symlink(outside, run_dir.parent / "out")
    client = _client(run_dir.parent)
    for path in ("label", "labels.csv", "labels.qrels", "label/api/items/0?annotator=a"):
        assert client.get(f"/runs/{run_id}/{path}").status_code == 404
    assert client.get("/labelling/static/..%2F..%2Flabels.py").status_code == 404
    assert client.get("/labelling/static/labelling.js").status_code == 200


def test_a_script_in_a_candidate_stays_text(run_dir: Path) -> None:
    client = _client(run_dir.parent)
    page = client.get("/runs/r1/label")
    # The page holds no run text at all; the script writes items with textContent.
    assert "<script>document" not in page.text and "q000" not in page.text
    assert "default-src 'self'" in page.headers["content-security-policy"]
    script = client.get("/labelling/static/labelling.js").text
    assert "innerHTML" not in script and "insertAdjacentHTML" not in script
    sample = labels.read_sample(run_dir).to_pylist()
    shown = [
        client.get(f"/runs/r1/label/api/items/{r['position']}", params={"annotator": "a"}).json()
        for r in sample
        if r["kind"] == "faithfulness"
    ]
    # The first candidate (the hostile one) is among every faithfulness item's contexts, as is.
    assert shown and all(s["contexts"][0].startswith(HOSTILE) for s in shown)


def test_calibrate_reads_the_labels_store_as_it_is(run_dir: Path) -> None:
    client = _client(run_dir.parent)
    sample = labels.read_sample(run_dir).to_pylist()
    grade = [r for r in sample if r["kind"] == "grade"][:2]
    faith = next(r for r in sample if r["kind"] == "faithfulness")
    assert _post(client, grade[0]["position"], 3.0).status_code == 200
    assert _post(client, grade[1]["position"], None).status_code == 200
    assert _post(client, faith["position"], 1.0).status_code == 200
    assert _post(client, faith["position"], 0.0, "bob").status_code == 200
    for path in (run_dir, run_dir / labels.STORE):
        grades = load_grade_labels(path)
        assert [(g.question_id, g.context_id, g.human) for g in grades] == [
            (grade[0]["question_id"], grade[0]["candidate_id"], 3)
        ]
        cand = RunFolder(run_dir.parent, "r1").candidates()[grade[0]["question_id"]]
        text = next(c for c in cand if c["context_id"] == grade[0]["candidate_id"])
        assert grades[0].context == text["text"] and grades[0].rank == text["engine_rank"]
        metric = load_labels(path)
        assert sorted((m.metric, m.label) for m in metric) == [
            ("faithfulness", 0.0),
            ("faithfulness", 1.0),
        ]
        assert all(len(m.sample.contexts) == 3 and m.sample.response for m in metric)
    with pytest.raises(InputError, match="no labels in this folder"):
        load_labels(run_dir.parent)


@pytest.mark.parametrize("damage", ["not parquet", "foreign columns"])
def test_a_damaged_or_foreign_labels_store_is_one_409_line_and_is_kept(
    run_dir: Path, damage: str
) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    client = _client(run_dir.parent)
    item = client.get("/runs/r1/label/api/items/0", params={"annotator": "ann"}).json()
    store = run_dir / labels.FILE
    if damage == "not parquet":
        store.write_bytes(b"garbage")
    else:
        pq.write_table(pa.table({"x": [1]}), store)
    before = store.read_bytes()
    answers = [
        client.get("/runs/r1/label/api/start", params={"annotator": "ann"}),
        client.get("/runs/r1/labels.csv"),
        client.get("/runs/r1/labels.qrels"),
        client.post(
            "/runs/r1/label/api/labels",
            json={"position": 0, "item_id": item["item_id"], "annotator": "ann", "label": 1},
        ),
    ]
    for answer in answers:
        assert answer.status_code == 409, answer.text
        assert answer.text.startswith("r1/labels.parquet: ")
        assert str(run_dir.parent.resolve()) not in answer.text
    # The labels already given are not overwritten by the refused POST.
    assert store.read_bytes() == before


def test_a_huge_label_post_is_refused_before_it_is_read(run_dir: Path) -> None:
    client = _client(run_dir.parent)
    huge = b'{"position": 0, "item_id": "' + b"x" * (1024 * 1024) + b'"}'
    refused = client.post(
        "/runs/r1/label/api/labels", content=huge, headers={"content-type": "application/json"}
    )
    assert refused.status_code == 413 and "KiB" in refused.text
    unsized = client.post(
        "/runs/r1/label/api/labels",
        content=iter([b"{}"]),
        headers={"content-type": "application/json"},
    )
    assert unsized.status_code == 411
    assert not labels.has_labels(run_dir)


def test_a_foreign_part_in_the_labels_store_is_one_409_line(run_dir: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    client = _client(run_dir.parent)
    assert _post(client, 0, 1.0).status_code == 200
    pq.write_table(pa.table({"x": [1]}), run_dir.parent / "judgments" / "part-0-foreign.parquet")
    answer = client.get("/runs/r1/label/api/start", params={"annotator": "ann"})
    assert answer.status_code == 409
    assert answer.text.startswith("judgments/part-0-foreign.parquet: not a part of this store")
    assert str(run_dir.parent.resolve()) not in answer.text
