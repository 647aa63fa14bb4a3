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
from support.audit_days import BROKEN, DAYS, FIRST, audit_config, write_logs
from support.servers import ragaudit


@pytest.fixture(scope="module")
def watched(tmp_path_factory: pytest.TempPathFactory, prefect_harness: None) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("watch")
    corpus = write_logs(tmp)
    path = audit_config(tmp, corpus)
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
    # The account queries drawn on both days were served other documents: the traffic's own
    # pairing names the engine. The configured engine behind the probe did not change: the
    # probe says so beside it, as a witness.
    account = changes.filter(pl.col("segment") == "account", pl.col("part") == "total")
    assert set(account.filter(pl.col("moved"))["attribution"]) == {"engine"}
    engine = changes.filter(
        pl.col("segment") == "account", pl.col("part") == "engine", pl.col("kind") == "alarm"
    )
    assert not engine.is_empty()
    reasons = engine["reasons"].explode().drop_nulls()
    assert any("the probe" in r and "did not move that way" in r for r in reasons)
    manifest = json.loads((root / str(BROKEN) / "manifest.json").read_text())
    assert any(r.startswith("account/") for r in manifest["regressed"])
    # One line for the segment and its cause, whatever moved against which reference.
    assert watched["again"].count("account regressed, engine") == 1


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


def test_the_viewer_shows_the_series_the_moves_and_the_probe(watched: dict[str, Any]) -> None:
    from fastapi.testclient import TestClient

    from ragaudit.viewer.app import create_app

    client = TestClient(create_app(watched["tmp"] / "runs"), base_url="http://127.0.0.1")
    page = client.get("/runs/audit-bot?metric=ndcg@3")
    assert page.status_code == 200
    html = page.text
    assert 'id="series-figure"' in html and "<svg" in html
    assert "probe" in html  # the probe's dashed line in the legend
    lines = html.split('id="moves"', 1)[1].split("</ul>", 1)[0]
    assert str(BROKEN) in lines and "account regressed, engine" in lines
    assert lines.count("account regressed") == 1 and "billing" not in lines
    table = html.split('id="changes"', 1)[1].split("</table>", 1)[0]
    assert str(BROKEN) in table and "account" in table and "regressed" in table
    assert "billing" not in table


def test_another_judge_is_refused_a_day_of_the_first_series_then_starts_its_own(
    watched: dict[str, Any],
) -> None:
    import shutil

    from typer.testing import CliRunner

    from ragaudit.cli import app

    path = watched["path"]
    day = _root(watched) / str(BROKEN)
    before = (day / "manifest.json").read_text()
    refused = CliRunner().invoke(
        app, ["audit", "-c", str(path), "--day", str(BROKEN), "--judge", "fake/judge2"]
    )
    # Re-auditing the day under another judge would overwrite the first series' day.
    assert refused.exit_code == 2, refused.output
    assert "audited under another series" in refused.output and "Traceback" not in refused.output
    assert (day / "manifest.json").read_text() == before
    # Deleted as the message says, the day starts the new series.
    shutil.rmtree(day)
    out = ragaudit("audit", "-c", str(path), "--day", str(BROKEN), "--judge", "fake/judge2")
    assert "a new series starts today" in out
    series = pl.read_parquet(_root(watched) / "series.parquet")
    assert series["series"].n_unique() == 2
    assert (
        series.filter(pl.col("day") == str(BROKEN))["series"].n_unique() == 1
    )  # the day's folder now holds the new judge's figures only
