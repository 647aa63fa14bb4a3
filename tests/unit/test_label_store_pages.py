"""People's labels kept once in the judgment store, read wherever their pair appears.

A run's labelling page and an audit day's share one store: a pair labelled on one is labelled
on the other and never asked again; an audit day's labelling goes on in its permanent order of
units; a turn's label is keyed by its conversation as the judge's grade is; every label says
where it was given, on the labelling pages, the question page and the store's summary.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import polars as pl
from fastapi.testclient import TestClient
from support.reporting_runs import write_run

from ragaudit import labels
from ragaudit.audit import day_items, read_day_labels
from ragaudit.audit._labels import label_items, labelling_order, write_label_items
from ragaudit.audit._served import Served
from ragaudit.dataset import Question, Turn
from ragaudit.judging import JudgmentStore, label_key
from ragaudit.judgments import Selection, store_rows, store_stats
from ragaudit.runfolder import RunFolder
from ragaudit.schemas import (
    AUDIT_SAMPLE,
    AUDIT_SCORES,
    AUDIT_VERDICTS,
    CANDIDATES,
    VERDICTS,
    to_table,
)
from ragaudit.viewer.app import create_app

DAY = "2026-11-26"
K = 2


def _client(root: Path) -> TestClient:
    return TestClient(create_app(root), base_url="http://127.0.0.1")


def _served(i: int, *, unit: str | None = None, rid: str | None = None) -> Served:
    return Served(
        request_id=rid or f"r{i}",
        unit=unit or f"u{i}",
        segment="a",
        query=f"question q{i:04d}?",
        language="en",
        answer=None,
        citations=None,
        docs=[
            {"rank": r, "id": f"d{i}-{r}", "text": f"passage {i}-{r}", "changed": False}
            for r in range(1, K + 1)
        ],
    )


def _day(root: Path, served: list[Served], day: str = DAY, turns: Any = None) -> Path:
    """An audit day's folder as the audit leaves it (its items to label among its tables)."""
    folder = root / "audit-bot" / day
    folder.mkdir(parents=True)
    manifest = {
        "kind": "audit",
        "status": "completed",
        "day": day,
        "config": {"audit": {"k": K}, "sort": {"relevant_grade": 2}},
    }
    (folder / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    sample, verdicts, scores = [], [], []
    for s in served:
        sample.append(
            {
                "unit": s.unit,
                "request_id": s.request_id,
                "segment": "a",
                "band": "tail",
                "stratum": "a/tail",
                "count": 1,
                "pi": 0.5,
                "weight": 2.0,
            }
        )
        for d in s.docs:
            verdicts.append(
                {
                    "request_id": s.request_id,
                    "unit": s.unit,
                    "rank": d["rank"],
                    "doc_id": d["id"],
                    "grade": 1,
                    "status": "ok",
                }
            )
        scores.append(
            {
                "request_id": s.request_id,
                "unit": s.unit,
                "segment": "a",
                "metric": "precision@2",
                "value": 0.0,
                "status": "ok",
            }
        )
    for name, rows, schema in (
        ("sample", sample, AUDIT_SAMPLE),
        ("verdicts", verdicts, AUDIT_VERDICTS),
        ("scores", scores, AUDIT_SCORES),
    ):
        pl.from_arrow(to_table(rows, schema)).write_parquet(folder / f"{name}.parquet")
    assert write_label_items(folder, served, [], "bot", turns)
    return folder


def _run(root: Path, run_id: str, questions: dict[str, list[str]]) -> Path:
    """A run whose question ``q`` (text ``question q?``) has the candidates given, all graded."""
    ids = list(questions)
    path = write_run(root, run_id, {"faithfulness": [0.5] * len(ids)}, question_ids=ids)
    run = RunFolder(root, run_id)
    cands, verdicts = [], []
    for q, texts in questions.items():
        for j, text in enumerate(texts):
            cid = f"{q}-c{j}"
            cands.append(
                {
                    "run_id": run_id,
                    "question_id": q,
                    "context_id": cid,
                    "text": text,
                    "engine_rank": j + 1,
                    "engine_score": 1.0,
                }
            )
            verdicts.append(
                {
                    "run_id": run_id,
                    "question_id": q,
                    "context_id": cid,
                    "grade": 1,
                    "relevant": False,
                    "status": "ok",
                }
            )
    run.write("candidates", to_table(cands, CANDIDATES))
    run.write("verdicts", to_table(verdicts, VERDICTS))
    return path


def _label_page(client: TestClient, base: str, who: str, value: float) -> list[dict[str, Any]]:
    """A person goes through a labelling page as it asks; the items they were asked."""
    start = client.get(base + "/api/start", params={"annotator": who}).json()
    position, asked = start["resume"], []
    while position < start["total"]:
        item = client.get(f"{base}/api/items/{position}", params={"annotator": who}).json()
        assert not item["labelled"]
        asked.append(item)
        post = {"position": position, "item_id": item["item_id"], "annotator": who}
        if item["kind"] == "grade":
            answer = client.post(base + "/api/labels", json={**post, "label": value})
        else:
            answer = client.post(base + "/api/labels", json={**post, "label": 1.0})
        assert answer.status_code == 200, answer.text
        position = answer.json()["next"]
    return asked


def test_a_person_is_never_asked_a_pair_twice_across_a_run_and_an_audit_day(
    tmp_path: Path,
) -> None:
    root = tmp_path / "runs"
    # The audit day served "question q0001?" with passages 1-1 and 1-2 (and another request);
    # the run holds the same question with passage 1-1 and one of its own.
    day = _day(root, [_served(1), _served(2)])
    run = _run(root, "r1", {"q0001": ["passage 1-1", "a passage of the run"]})
    labels.ensure_sample(run, 10)
    client = _client(root)
    on_run = _label_page(client, "/runs/r1/label", "ann", 2.0)
    asked = {(it["question"], it.get("candidate")) for it in on_run}
    assert ("question q0001?", "passage 1-1") in asked
    on_day = _label_page(client, f"/runs/audit-bot/days/{DAY}/label", "ann", 3.0)
    shown = [(it["question"], it["candidate"]) for it in on_day]
    # The pair labelled on the run's page is not asked on the day's, nor the other way round.
    assert ("question q0001?", "passage 1-1") not in shown
    assert len(shown) == 3 and not set(shown) & asked
    # On the day's page it counts as labelled, saying where it was given.
    items = day_items(day)
    pos = items.with_row_index().filter(pl.col("text") == "passage 1-1")["index"][0]
    item = client.get(
        f"/runs/audit-bot/days/{DAY}/label/api/items/{pos}", params={"annotator": "ann"}
    ).json()
    assert item["labelled"] and item["label"] == 2.0
    assert item["given"]["given_in"] == "r1" and item["given"]["here"] is False
    start = client.get(
        f"/runs/audit-bot/days/{DAY}/label/api/start", params={"annotator": "ann"}
    ).json()
    assert start == {
        "run_id": f"audit-bot {DAY}",
        "total": 4,
        "labelled": 4,
        "resume": 4,
    }
    # Another person is asked everything: the rule is a person's own pairs.
    bob = client.get(f"/runs/audit-bot/days/{DAY}/label/api/start", params={"annotator": "bob"})
    assert bob.json()["labelled"] == 0
    # Kept once: one row of the pair for ann in the store, read by both folders.
    rows = store_rows(JudgmentStore(root / "judgments"), Selection(kinds=("person",)))
    key = label_key("question q0001?", "passage 1-1")
    assert rows.filter(pl.col("key") == key).select("annotator", "grade").rows() == [("ann", 2)]
    mine = read_day_labels(day).to_pylist()
    assert {r["given_in"] for r in mine} == {"r1", f"audit-bot/{DAY}"}


def test_a_later_days_labelling_starts_with_its_recurring_units_and_keeps_the_order(
    tmp_path: Path,
) -> None:
    root = tmp_path / "runs"
    first = [_served(i, rid=f"a{i}") for i in range(8)]
    day1 = _day(root, first, "2026-11-25")
    order1 = [s.unit for s in labelling_order(first, "bot")]
    client = _client(root)
    base1 = "/runs/audit-bot/days/2026-11-25/label"
    # The person gets through the first three requests (six items) of day 1.
    start = client.get(base1 + "/api/start", params={"annotator": "ann"}).json()
    position = start["resume"]
    for _ in range(6):
        item = client.get(f"{base1}/api/items/{position}", params={"annotator": "ann"}).json()
        post = {"position": position, "item_id": item["item_id"], "annotator": "ann"}
        position = client.post(base1 + "/api/labels", json={**post, "label": 1.0}).json()["next"]
    assert position == 6
    # Day 2: units 0-5 recur (new requests, the same queries and lists), 8 and 9 are new.
    second = [_served(i, rid=f"b{i}") for i in (*range(6), 8, 9)]
    day2 = _day(root, second, DAY)
    order2 = [s.unit for s in labelling_order(second, "bot")]
    # The units' order is permanent: the recurring ones keep theirs, the new ones fall in
    # where their numbers put them.
    assert [u for u in order2 if u in order1] == [u for u in order1 if u in order2]
    labelled_units = set(order1[:3])
    start = client.get(
        f"/runs/audit-bot/days/{DAY}/label/api/start", params={"annotator": "ann"}
    ).json()
    assert start["labelled"] == 2 * len(labelled_units & set(order2))
    asked = _label_page(client, f"/runs/audit-bot/days/{DAY}/label", "ann", 1.0)
    # Asked: every item of a unit not labelled before, in the day's order, nothing else.
    units = [it["item_id"].split(":")[1] for it in asked]
    expected = [
        s.request_id for s in labelling_order(second, "bot") if s.unit not in labelled_units
    ]
    assert list(dict.fromkeys(units)) == expected
    # Every request of day 2 labelled: the recurring units' from day 1's page, the rest now.
    places: dict[str, set[str]] = {}
    for r in read_day_labels(day2).to_pylist():
        places.setdefault(r["question_id"], set()).add(r["given_in"])
    assert places == {
        s.request_id: {f"audit-bot/{day1.name}" if s.unit in labelled_units else f"audit-bot/{DAY}"}
        for s in second
    }


def test_a_turns_label_is_keyed_by_its_conversation_as_the_judges_grade_is(
    tmp_path: Path,
) -> None:
    root = tmp_path / "runs"
    history = [Turn(role="user", text="tell me about Berlin"), Turn(role="assistant", text="ok")]
    other = [Turn(role="user", text="tell me about Paris"), Turn(role="assistant", text="ok")]
    turns = {
        "r1": (Question(question_id="r1", question="and its size?", history=history), 0),
        "r2": (Question(question_id="r2", question="and its size?", history=other), 0),
    }
    served = [
        Served("r1", "u1", "a", "and its size?", "en", None, None, _served(1).docs),
        Served("r2", "u2", "a", "and its size?", "en", None, None, _served(1).docs),
    ]
    items = label_items(served, [], "bot", turns).to_pylist()
    asked = {r["request_id"]: r["asked"] for r in items}
    # The question as the judge saw it (conversation.in_context's text): the history, then
    # the turn; one utterance under two histories is two questions, two keys.
    assert "tell me about Berlin" in asked["r1"] and asked["r1"].endswith("and its size?")
    assert asked["r1"] != asked["r2"]
    from ragaudit.conversation import ConversationConfig, in_context

    judged = in_context(turns["r1"][0], ConversationConfig(), "fake/judge", None)
    assert asked["r1"] == judged.question
    folder = _day(root, served, turns=turns)
    keyed = day_items(folder)
    assert keyed.filter(pl.col("question_id") == "r1")["key"].to_list()[0] == label_key(
        judged.question, "passage 1-1"
    )
    assert keyed["key"].n_unique() == keyed.height
    # A request alone keeps the key of its query as typed, as its judge's grade does.
    alone = label_items([_served(3)], [], "bot").to_pylist()
    assert alone[0]["asked"] == "question q0003?" and alone[0]["conversation"] is None


def test_the_store_summary_and_the_export_say_who_labelled_what_where(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    day = _day(root, [_served(1)])
    client = _client(root)
    _label_page(client, f"/runs/audit-bot/days/{DAY}/label", "ann", 3.0)
    _label_page(client, f"/runs/audit-bot/days/{DAY}/label", "bob", 2.0)
    stats = store_stats(JudgmentStore(root / "judgments"))
    assert stats.by_kind == {"person": 4}
    assert [(s["source"], s["kind"], s["rows"], s["annotators"]) for s in stats.sources] == [
        ("labelling", "person", 4, 2)
    ]
    assert stats.pages == [
        {"page": f"audit-bot/{DAY}", "rows": 4, "pairs": 2, "annotators": ["ann", "bob"]}
    ]
    assert [(r.a, r.b, r.pairs) for r in stats.raters] == [("labelling: ann", "labelling: bob", 2)]
    rows = store_rows(JudgmentStore(root / "judgments"), Selection(kinds=("person",)))
    assert sorted(rows.select("annotator", "grade").rows()) == [
        ("ann", 3),
        ("ann", 3),
        ("bob", 2),
        ("bob", 2),
    ]
    assert set(rows["context_id"]) == {"d1-1", "d1-2"} and day.is_dir()


def test_the_question_page_says_where_each_grade_and_label_came_from(tmp_path: Path) -> None:
    import datetime as dt

    from ragaudit.judging import Grader, text_hash
    from ragaudit.schemas import JUDGMENTS

    root = tmp_path / "runs"
    texts = ["passage 1-1", "passage 1-2", "a passage of the run"]
    _run(root, "r1", {"q0001": texts})
    store = JudgmentStore(root / "judgments")
    grader = Grader("fake/judge", 0.0, None, 512)
    row = {"grader": grader, "prompt": "relevance@1", "language": "en", "grade": 1, "reason": ""}
    question = "question q0001?"
    store.add(
        [{**row, "key": "k-1", "question": question, "text": texts[0], "question_id": "x",
          "context_id": "y"}],
        "tune:t1",
    )  # fmt: skip
    now = dt.datetime.now(dt.UTC).isoformat()
    seed = {
        "key": "k-2", "judge": "fake/judge", "question_hash": text_hash(question),
        "text_hash": text_hash(texts[1]), "grade": 1, "source": "quepid-1",
        "created_at": now, "source_kind": "imported", "role": "seed", "state": "graded",
    }  # fmt: skip
    store.add_table(to_table([seed], JUDGMENTS))
    # A person labels the run's third passage on an audit day's page where the pair appeared.
    day = _day(root, [_served(1)])
    day_run = Served("r9", "u9", "a", question, "en", None, None,
                     [{"rank": 1, "id": "z", "text": texts[2], "changed": False}])  # fmt: skip
    (day / labels.SAMPLE_FILE).unlink()
    assert write_label_items(day, [day_run], [], "bot")
    client = _client(root)
    _label_page(client, f"/runs/audit-bot/days/{DAY}/label", "ann", 3.0)
    labels.ensure_sample(root / "r1", 10)
    page = client.get("/runs/r1/questions/q0001").text
    assert "judge fake/judge, paid by tune:t1" in page
    assert "imported: quepid-1, standing for the judge fake/judge" in page
    assert f"audit-bot/{DAY} (the same pair)" in page and "person ann: grade 3" in page
    # The run's own labelling page says the same of ann's label.
    sample = labels.read_sample(root / "r1")
    assert sample is not None
    pos = next(r["position"] for r in sample.to_pylist() if r["candidate_id"] == "q0001-c2")
    item = client.get(f"/runs/r1/label/api/items/{pos}", params={"annotator": "ann"}).json()
    assert item["labelled"] and item["given"]["given_in"] == f"audit-bot/{DAY}"


def test_an_imported_persons_grade_of_a_pair_counts_on_the_page(tmp_path: Path) -> None:
    from ragaudit.judging import text_hash
    from ragaudit.schemas import JUDGMENTS

    root = tmp_path / "runs"
    _run(root, "r1", {"q0001": ["passage 1-1", "passage 1-2"]})
    question, text = "question q0001?", "passage 1-1"
    imported = {
        "key": label_key(question, text), "judge": "", "question_hash": text_hash(question),
        "text_hash": text_hash(text), "grade": 3, "source": "quepid-1", "source_value": "3.000",
        "created_at": "2026-11-01T00:00:00+00:00", "source_kind": "imported", "role": "people",
        "annotator": "ann", "state": "graded", "extra": '{"kind": "faithfulness"}',
    }  # fmt: skip
    JudgmentStore(root / "judgments").add_table(to_table([imported], JUDGMENTS))
    labels.ensure_sample(root / "r1", 10)
    seen = labels.read_labels(root / "r1").to_pylist()
    # The store's grade (the source's own "3.000" on its scale), of the grade item of the pair.
    assert [(r["kind"], r["candidate_id"], r["label"], r["given_in"]) for r in seen] == [
        ("grade", "q0001-c0", 3.0, "imported: quepid-1")
    ]
    client = _client(root)
    start = client.get("/runs/r1/label/api/start", params={"annotator": "ann"}).json()
    assert start["labelled"] == 1
    asked = _label_page(client, "/runs/r1/label", "ann", 1.0)
    assert "passage 1-1" not in {it.get("candidate") for it in asked}
