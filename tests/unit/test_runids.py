"""Run ids: one minting function, UTC, sortable by start time, apart within one second."""

from __future__ import annotations

import datetime as dt
import re
from types import SimpleNamespace

import pytest
from support.runs import REPO

from ragaudit import runids
from ragaudit.reporting import artifact_key
from ragaudit.runids import new_run_id

RUN_ID = re.compile(r"^(?:(?P<prefix>[a-z]+)-)?(?P<stamp>\d{8}-\d{6})-(?P<suffix>[0-9a-f]{4})$")


def _frozen_at(monkeypatch: pytest.MonkeyPatch, when: dt.datetime) -> None:
    """Make ``new_run_id`` read ``when`` as the current time."""

    class Clock(dt.datetime):
        @classmethod
        def now(cls, tz: dt.tzinfo | None = None) -> dt.datetime:  # type: ignore[override]
            assert tz is dt.UTC, "run ids are minted from UTC"
            return when

    monkeypatch.setattr(runids, "dt", SimpleNamespace(datetime=Clock, UTC=dt.UTC))


def test_a_run_id_is_the_utc_second_and_four_hex_digits() -> None:
    before = dt.datetime.now(dt.UTC).replace(microsecond=0)
    found = RUN_ID.match(new_run_id())
    after = dt.datetime.now(dt.UTC)
    assert found is not None and found["prefix"] is None
    stamp = dt.datetime.strptime(found["stamp"], "%Y%m%d-%H%M%S").replace(tzinfo=dt.UTC)
    assert before <= stamp <= after


def test_a_run_id_is_its_own_prefect_artifact_key() -> None:
    # Artifact keys are lower-case letters, digits and dashes; the nightly flow names its
    # comparison artifacts after the run id, and a reader finds them by that id.
    for run_id in (new_run_id(), new_run_id("calibrate")):
        assert artifact_key("ragaudit-compare-", run_id) == f"ragaudit-compare-{run_id}"


def test_a_prefix_names_the_kind_of_run() -> None:
    found = RUN_ID.match(new_run_id("calibrate"))
    assert found is not None and found["prefix"] == "calibrate"


def test_ids_sort_as_the_runs_started(monkeypatch: pytest.MonkeyPatch) -> None:
    minted = []
    # Across a day, a month and a year boundary: a local-time or unpadded stamp would not sort.
    for when in ("2026-11-30T23:59:59", "2026-12-01T00:00:00", "2027-01-01T09:05:00"):
        _frozen_at(monkeypatch, dt.datetime.fromisoformat(when).replace(tzinfo=dt.UTC))
        minted.append(new_run_id())
    assert sorted(minted) == minted
    assert minted[1].startswith("20261201-000000-")


def test_runs_started_in_the_same_second_get_different_ids(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _frozen_at(monkeypatch, dt.datetime(2026, 11, 25, 20, 30, tzinfo=dt.UTC))
    minted = {new_run_id() for _ in range(20)}
    assert all(i.startswith("20261125-203000-") for i in minted)
    # 20 draws of four hex digits all equal: one chance in 65536 ** 19.
    assert len(minted) > 1


def test_run_ids_are_minted_only_by_new_run_id() -> None:
    # A second minting site (a strftime stamp, local or UTC) would break the sort order.
    sources = [p for d in ("ragaudit", "flows", "tasks", "cache") for p in (REPO / d).rglob("*.py")]
    minting = [
        f"{p.relative_to(REPO)}:{n}"
        for p in sources
        if p.name != "runids.py"
        for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
        if "strftime(" in line and "%Y%m%d" in line
    ]
    assert sources and minting == []
