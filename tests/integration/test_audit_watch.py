"""Day after day: ``ragaudit audit --from --to`` over eight days of a request log with the fake
judge — the series, a day compared with the one before and the trailing week, the probe re-run
through the local engine, a planted regression flagged in its segment only, a backfill that
does not redo a finished day, a changed judge starting a new series.
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import polars as pl
import pytest
import yaml
from support.servers import ragaudit

FIRST = dt.date(2026, 11, 1)
DAYS = 8
BROKEN = FIRST + dt.timedelta(days=DAYS - 1)

QUERIES = {
    "billing": [
        "refund for a damaged parcel",
        "download an invoice as pdf",
        "apply a coupon code at checkout",
        "change the billing address",
        "pay with a gift card",
        "cancel a pending order",
    ],
    "account": [
        "reset a forgotten password",
        "close my account for good",
        "change the email on my profile",
        "turn on two factor login",
        "export my personal data",
        "merge two duplicate accounts",
    ],
}


def _docs(collection: str, qi: int, query: str, broken: bool) -> list[dict[str, Any]]:
    """The served top 3: the document that answers first, then two others; on the broken day
    the account segment's engine serves only documents about something else."""
    answer = {"_id": f"{collection}-{qi}", "_source": {"content": f"How to {query}: step by step."}}
    others = [
        {"_id": f"{collection}-{qi}-x{d}", "_source": {"content": f"Opening hours of store {d}."}}
        for d in range(3)
    ]
    hits = others[:3] if broken and collection == "account" else [answer, *others[:2]]
    return [{**h, "_score": 3.0 - i} for i, h in enumerate(hits)]


def _write_logs(tmp: Path) -> Path:
    corpus = []
    for day in range(DAYS):
        date = FIRST + dt.timedelta(days=day)
        rows, n = [], 0
        for collection, queries in QUERIES.items():
            for qi, query in enumerate(queries):
                for _ in range(1 + (qi % 3)):
                    n += 1
                    hits = _docs(collection, qi, query, date == BROKEN)
                    rows.append(
                        {
                            "id": f"q{n}on{day}",
                            "ts": f"{date}T10:{n % 60:02d}:00Z",
                            "request": {"q": query, "filters": {"collection": collection}},
                            "retrieval": {"hits": hits},
                            "response": {"text": hits[0]["_source"]["content"]},
                        }
                    )
        folder = tmp / "logs" / date.isoformat()
        folder.mkdir(parents=True)
        (folder / "part-0.jsonl").write_text(
            "\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8"
        )
    for collection, queries in QUERIES.items():
        for qi, query in enumerate(queries):
            for h in _docs(collection, qi, query, False):
                corpus.append(
                    {
                        "id": h["_id"],
                        "text": h["_source"]["content"],
                        "metadata": {"collection": collection},
                    }
                )
    path = tmp / "corpus.jsonl"
    path.write_text("\n".join(json.dumps(c) for c in corpus) + "\n", encoding="utf-8")
    return path


def _config(tmp: Path, corpus: Path, **audit: Any) -> Path:
    config = {
        "runs_root": str(tmp / "runs"),
        "cache_dir": str(tmp / "cache"),
        "models": {"judge": "fake/judge", "embedder": "fake/embed", "backoff_s": 0.0},
        "collect": {"backend": "local", "corpus": str(corpus), "index_path": str(tmp / "index")},
        "audit": {
            "name": "bot",
            "source": {
                "format": "jsonl",
                "path": str(tmp / "logs" / "{day}" / "*.jsonl"),
                "fields": {
                    "request_id": "id",
                    "time": "ts",
                    "query": "request.q",
                    "filters": "request.filters",
                    "docs": "retrieval.hits[*].{id: _id, text: _source.content, score: _score}",
                    "answer": "response.text",
                },
            },
            "segment": "filters.collection",
            "sample": 100,
            "k": 3,
            "metrics": ["faithfulness"],
            "probe": 6,
            "judge_check_days": 3,
            "judge_check_size": 6,
            **audit,
        },
    }
    path = tmp / "audit.yaml"
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def watched(tmp_path_factory: pytest.TempPathFactory, prefect_harness: None) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("watch")
    corpus = _write_logs(tmp)
    path = _config(tmp, corpus)
    last = BROKEN - dt.timedelta(days=1)
    first = ragaudit("audit", "-c", str(path), "--from", str(FIRST), "--to", str(last))
    again = ragaudit("audit", "-c", str(path), "--from", str(FIRST), "--to", str(BROKEN))
    return {"tmp": tmp, "path": path, "corpus": corpus, "first": first, "again": again}


def _root(watched: dict[str, Any]) -> Path:
    return watched["tmp"] / "runs" / "audit-bot"


def test_backfill_runs_missing_days_in_order_and_never_redoes_one(watched: dict[str, Any]) -> None:
    root = _root(watched)
    days = sorted(p.name for p in root.iterdir() if p.is_dir())
    assert days == [str(FIRST + dt.timedelta(days=i)) for i in range(DAYS)]
    assert watched["again"].count("done already, not redone") == DAYS - 1
    for d in days:
        manifest = json.loads((root / d / "manifest.json").read_text())
        assert manifest["status"] == "completed"
    series = pl.read_parquet(root / "series.parquet")
    assert series["series"].n_unique() == 1
    assert sorted(series["day"].unique()) == days
    assert {"(all)", "billing", "account"} <= set(series["segment"])


def test_a_quiet_week_moves_nothing_and_the_broken_day_flags_its_segment(
    watched: dict[str, Any],
) -> None:
    root = _root(watched)
    for i in range(1, DAYS - 1):
        changes = pl.read_parquet(root / str(FIRST + dt.timedelta(days=i)) / "changes.parquet")
        assert not changes.is_empty()
        assert not changes["moved"].any(), changes.filter(pl.col("moved"))
    changes = pl.read_parquet(root / str(BROKEN) / "changes.parquet")
    regressed = changes.filter(pl.col("regressed"))
    assert set(regressed["segment"]) <= {"account", "(all)"}
    assert "account" in set(regressed["segment"])
    assert {"baseline", "previous"} <= set(
        regressed.filter(pl.col("segment") == "account")["against"]
    )
    # The engine behind the probe did not change: the probe says so, and no cause is invented.
    account = regressed.filter(pl.col("segment") == "account").row(0, named=True)
    assert account["attribution"] == "unexplained"
    manifest = json.loads((root / str(BROKEN) / "manifest.json").read_text())
    assert any(r.startswith("account/") for r in manifest["regressed"])
    assert "account" in watched["again"] and "regressed beyond noise" in watched["again"]


def test_the_probe_is_kept_and_rerun_through_the_store(watched: dict[str, Any]) -> None:
    root = _root(watched)
    (probe_set,) = root.glob("probe-*.parquet")
    probe = pl.read_parquet(probe_set)
    assert probe.height == 6
    for i in range(DAYS):
        day = pl.read_parquet(root / str(FIRST + dt.timedelta(days=i)) / "probe.parquet")
        assert set(day["probe"]) == set(probe["unit"])
    later = json.loads((root / str(FIRST + dt.timedelta(days=3)) / "manifest.json").read_text())
    # From the second day on every grade (the probe's too) comes from the store.
    assert later["grading"]["paid"] == 0


def test_the_judge_check_asks_again_every_third_day(watched: dict[str, Any]) -> None:
    root = _root(watched)
    checked = {}
    for i in range(DAYS):
        manifest = json.loads(
            (root / str(FIRST + dt.timedelta(days=i)) / "manifest.json").read_text()
        )
        checked[i] = manifest.get("judge_check")
    assert [i for i, c in checked.items() if c] == [3, 6]
    # The same fake judge answers the same: κ 1, no drift.
    assert checked[3]["kappa"] == pytest.approx(1.0) and not checked[3]["drifted"]


def test_another_judge_starts_a_new_series(watched: dict[str, Any]) -> None:
    path = watched["path"]
    out = ragaudit("audit", "-c", str(path), "--day", str(BROKEN), "--judge", "fake/judge2")
    assert "a new series starts today" in out
    series = pl.read_parquet(_root(watched) / "series.parquet")
    assert series["series"].n_unique() == 2
    assert (
        series.filter(pl.col("day") == str(BROKEN))["series"].n_unique() == 1
    )  # the day's folder now holds the new judge's figures only
