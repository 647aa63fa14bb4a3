"""Audit days that are lost, paid twice or overwritten (issue round 6): a backfill over a gap
day, an empty day and a provider's outage audits every day it can, names each day not done and
why, and a re-run completes the outage day; a second audit of a day is refused before Prefect
starts; a killed audit leaves no Prefect server; ``promote`` never writes over a file; a grade
the memo answered says so; a day's series holds what it grades with.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from support.audit_days import FIRST, audit_config, write_logs
from support.audit_logs import DAY, audit_yaml, write_log
from support.cli import cli_command, cli_env
from support.hold_gate import HoldGate, calls, hold_env
from support.servers import ragaudit
from typer.testing import CliRunner

from ragaudit.cache._fake import FAKE
from ragaudit.cli import app
from ragaudit.config import load_config


def _days(n: int) -> list[str]:
    return [(FIRST + dt.timedelta(days=i)).isoformat() for i in range(n)]


@pytest.fixture
def four_days(tmp_path: Path) -> Path:
    """Four days of logs: the second has no file (a gap), the third an empty file."""
    corpus = write_logs(tmp_path)
    one, gap, empty, _ = _days(4)
    for f in (tmp_path / "logs" / gap).iterdir():
        f.unlink()
    (tmp_path / "logs" / gap).rmdir()
    (tmp_path / "logs" / empty / "part-0.jsonl").write_text("", encoding="utf-8")
    # No probe or judge check: the days' own grades are what an outage fails.
    return audit_config(tmp_path, corpus, probe=0, judge_check_days=0)


def test_a_backfill_over_a_gap_an_empty_day_and_an_outage_audits_what_it_can_and_says_why(
    four_days: Path, tmp_path: Path, prefect_harness: None
) -> None:
    one, gap, empty, last = _days(4)
    down = tmp_path / "down"
    down.write_text("the provider is down")
    FAKE.gate = HoldGate(f"{tmp_path / 'count.json'}|{tmp_path / 'no-hold'}|{down}")
    args = ["audit", "-c", str(four_days), "--from", one, "--to", last]
    args += ["--set", "models.max_retries=0"]
    root = tmp_path / "runs" / "audit-bot"

    def states() -> dict[str, str]:
        return {d: json.loads((root / d / "manifest.json").read_text())["status"] for d in _days(4)}

    try:
        first = CliRunner().invoke(app, args)
        after_outage = states()
        # The provider back: the same config, the same series.
        down.unlink()
        (tmp_path / "logs" / gap).mkdir()
        second = CliRunner().invoke(app, args)
    finally:
        FAKE.gate = None
    assert first.exit_code == 3, first.output
    out = first.output
    assert "Traceback" not in out
    assert "4 of 4 days not done" in out
    assert f"{gap}: audit.source.path: no file matches" in out
    assert f"{empty}: no request in the day's logs" in out
    assert f"{one}: most of its judge calls failed" in out and f"{last}:" in out
    assert after_outage == {
        one: "completed_with_failures",
        gap: "no_data",
        empty: "no_data",
        last: "completed_with_failures",
    }
    # Run again: the outage days are redone (not "done already"), the no-data days tried again.
    assert second.exit_code == 3, second.output
    assert "done already" not in second.output
    assert "2 of 4 days not done" in second.output
    for d in (one, last):
        manifest = json.loads((root / d / "manifest.json").read_text())
        assert manifest["status"] == "completed" and manifest["failed_rows"] == 0
        verdicts = pl.read_parquet(root / d / "verdicts.parquet")
        assert set(verdicts["status"]) == {"ok"}


def test_a_grade_the_memo_answered_says_memo(tmp_path: Path, prefect_harness: None) -> None:
    import shutil

    write_log(tmp_path)
    path = audit_yaml(tmp_path)
    args = ("audit", "-c", str(path), "--day", DAY)
    ragaudit(*args)
    folder = tmp_path / "runs" / "audit-support-bot" / DAY
    first = pl.read_parquet(folder / "verdicts.parquet")
    assert set(first["source"]) == {"paid"}
    # The store gone, the memo kept: every grade is asked again and the memo answers it.
    shutil.rmtree(tmp_path / "runs" / "judgments")
    ragaudit(*args)
    again = pl.read_parquet(folder / "verdicts.parquet")
    assert set(again["source"]) == {"memo"}


def test_an_estimated_count_of_requests_is_printed_whole(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A segment's requests are a sum of design weights: never ``20849.30989271142``."""
    from ragaudit.audit._report import _estimate_rows
    from ragaudit.cli._audit import _print

    row = {
        "segment": "(all)",
        "metric": "ndcg@3",
        "estimate": 0.5,
        "ci_low": 0.4,
        "ci_high": 0.6,
        "n": 57,
        "requests": 20849.30989271142,
        "ess": 40.2,
    }
    (shown,) = _estimate_rows(pl.DataFrame([row]))
    assert shown["requests"] == "20849"
    _print(
        {
            "audit": "a",
            "day": DAY,
            "folder": "f",
            "grading": {k: 0 for k in ("from_store", "from_memo", "paid", "failed", "skipped")},
            "llm": {},
            "read": {"records": 1, "bad": 0},
            "sampled": 1,
            "overall": [row],
        }
    )
    out = capsys.readouterr().out
    assert "20849" in out and "20849.3" not in out


def test_promote_never_writes_over_a_file_unasked(tmp_path: Path, prefect_harness: None) -> None:
    write_log(tmp_path)
    path = audit_yaml(tmp_path)
    ragaudit("audit", "-c", str(path), "--day", DAY)
    mine = tmp_path / "curated.jsonl"
    mine.write_text('{"question_id": "q1", "question": "kept"}\n', encoding="utf-8")
    args = ["audit", "promote", "support-bot", "--day", DAY, "-o", str(mine)]
    args += ["--runs-root", str(tmp_path / "runs")]
    refused = CliRunner().invoke(app, args)
    assert refused.exit_code == 2, refused.output
    assert "exists" in refused.output and "--force" in refused.output
    assert mine.read_text(encoding="utf-8") == '{"question_id": "q1", "question": "kept"}\n'
    forced = CliRunner().invoke(app, [*args, "--force"])
    assert forced.exit_code == 0, forced.output
    assert "kept" not in mine.read_text(encoding="utf-8")


def test_the_series_holds_what_maps_and_grades_a_day_and_not_how_it_runs(tmp_path: Path) -> None:
    from ragaudit.audit._watch import day_series

    write_log(tmp_path)
    base = load_config(audit_yaml(tmp_path), environ={})

    def with_(**over: Any) -> str:
        data = base.model_dump(mode="json")
        for dotted, value in over.items():
            node = data
            *parents, last = dotted.split("__")
            for part in parents:
                node = node[part]
            node[last] = value
        return day_series(type(base).model_validate(data))

    same = day_series(base)
    # What is graded: the field the query is read from, the documents, the judge's window.
    assert with_(audit__source__options__fields__query="request.rewritten") != same
    assert with_(audit__source__options__fields__docs="retrieval.other[*]") != same
    assert with_(models__judge_context_window=4096) != same
    assert with_(models__temperature=0.7) != same
    # How it runs: timeouts, retries, concurrency, where the runs go.
    assert with_(models__timeout_s=5.0) == same
    assert with_(models__concurrency=2) == same
    assert with_(runs_root=str(tmp_path / "elsewhere")) == same
    # A section of another command never moves an audit's series, nor an audit a run's key.
    assert with_(tune__depth=50) == same
    from ragaudit.runfolder import config_key

    assert config_key(base) == config_key(base.model_copy(update={"audit": None}))


def _children(pid: int) -> list[int]:
    out = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        text = (task / "children").read_text().split()
        out += [int(c) for c in text]
    return out


def test_a_second_audit_of_a_day_is_refused_before_prefect_and_a_killed_one_leaves_no_server(
    tmp_path: Path,
) -> None:
    """Ephemeral Prefect (no API URL): the first audit's server dies with it; the second, refused
    on the day's lock, never starts one."""
    write_log(tmp_path)
    path = audit_yaml(tmp_path)
    env = {k: v for k, v in cli_env(tmp_path).items() if not k.startswith("PREFECT_API")}
    hold = tmp_path / "hold"
    hold.write_text("held")
    count, second_count = tmp_path / "first.json", tmp_path / "second.json"
    command = [*cli_command(), "audit", "-c", str(path), "--day", DAY]
    log = tmp_path / "first.log"
    with log.open("wb") as out:
        first = subprocess.Popen(
            command,
            env={**env, **hold_env(count, hold)},
            cwd=tmp_path,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        deadline = time.monotonic() + 300
        while calls(count) < 1:
            assert first.poll() is None, log.read_text()
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.2)
        servers = [c for c in _children(first.pid) if c != first.pid]
        assert servers, "the audit runs no ephemeral Prefect server"
        dbs = sorted(str(p) for p in (tmp_path / "home").rglob("*.db"))
        second = subprocess.run(
            command,
            env={**env, **hold_env(second_count, hold)},
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=300,
        )
        output = second.stdout + second.stderr
        assert second.returncode == 2, output
        assert "already running" in output and "Traceback" not in output
        assert "IntegrityError" not in output and calls(second_count) == 0
        # Refused before a Prefect server of its own (no new database either).
        assert sorted(str(p) for p in (tmp_path / "home").rglob("*.db")) == dbs
        os.kill(first.pid, signal.SIGKILL)
        first.wait()
        deadline = time.monotonic() + 60
        while any(Path(f"/proc/{s}").exists() and _alive(s) for s in servers):
            assert time.monotonic() < deadline, "the Prefect server outlived its audit"
            time.sleep(0.5)
    finally:
        if first.poll() is None:
            os.killpg(first.pid, signal.SIGKILL)
            first.wait()


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split()[2]
    except OSError:
        return False
    return state != "Z"
