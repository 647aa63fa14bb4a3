"""The audit's readers are registered units: a plugin's reader, named in a config, reads a day
as the built-in ones do; ``ragaudit plugins`` lists what is installed, what is allow-listed and
what each registered; and the readers import no circle back to ``read_day``.
"""

from __future__ import annotations

import datetime as dt
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import grimp
import pyarrow.parquet as pq
import pytest
import yaml

from ragaudit.audit import RedactOptions, audit_section, read_day
from ragaudit.config import load_config
from ragaudit.registry import READERS

PLUGINS = Path(__file__).resolve().parents[1] / "support" / "plugins"
DAY = dt.date(2026, 11, 26)
CSV = """id;when;question;collection;served;answer
r1;2026-11-26T09:00:00Z;how do refunds work;billing;kb-1|kb-2;Five days.
r2;2026-11-26T09:05:00Z;reset my password;account;kb-7;Use the link.
r3;2026-11-26T09:06:00Z;;account;kb-7;No question was asked.
r1;2026-11-26T09:00:00Z;how do refunds work;billing;kb-1|kb-2;Five days.
"""
COLUMNS = {
    "request_id": "id",
    "time": '"when"',
    "query": "question",
    "filters": "{collection: collection}",
    "docs": "served",
    "answer": "answer",
    "session": None,
    "citations": None,
    "feedback": None,
}


def _audit(tmp: Path, plugins: list[str], fmt: str = "csv") -> dict[str, object]:
    day = tmp / "logs" / DAY.isoformat()
    day.mkdir(parents=True, exist_ok=True)
    (day / "part-0.csv").write_text(CSV, encoding="utf-8")
    return {
        "plugins": plugins,
        "runs_root": str(tmp / "runs"),
        "cache_dir": str(tmp / "cache"),
        "models": {"judge": "fake/judge", "embedder": "fake/embed", "backoff_s": 0.0},
        "audit": {
            "name": "csv-bot",
            "source": {
                "format": fmt,
                "path": str(tmp / "logs" / "{day}" / "*.csv"),
                "options": {"delimiter": ";", "fields": COLUMNS},
            },
            "segment": "filters.collection",
            "max_bad_share": 0.5,
            "sample": 4,
            "k": 2,
            "metrics": ["faithfulness"],
        },
    }


@pytest.fixture
def plugin_path(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The plugin modules importable; the reader unregistered afterwards."""
    monkeypatch.syspath_prepend(str(PLUGINS))
    yield PLUGINS
    for table in (READERS.units, READERS.options, READERS.modules):
        table.pop("csv", None)
    sys.modules.pop("csv_log", None)


def test_a_plugin_reader_named_in_the_config_reads_a_day(tmp_path: Path, plugin_path) -> None:
    config = load_config(None, _audit(tmp_path, ["csv_log"]))
    source = audit_section(config).source
    assert READERS.modules["csv"] == "csv_log"
    assert source.options.delimiter == ";"  # checked against its options model at load
    out = tmp_path / "requests.parquet"
    report = read_day(
        source, RedactOptions(), DAY, segment="filters.collection", out=out, max_bad_share=0.5
    )
    assert (report.records, report.bad, report.duplicates) == (2, 1, 1)
    assert report.bad_samples[0][0].endswith("part-0.csv:4") and report.bad_samples[0][1] == (
        "no query"
    )
    rows = pq.read_table(out).to_pylist()
    assert [(r["request_id"], r["segment"]) for r in rows] == [("r1", "billing"), ("r2", "account")]
    assert [d["id"] for d in rows[0]["docs"]] == ["kb-1", "kb-2"]
    assert rows[0]["time"] == dt.datetime(2026, 11, 26, 9, tzinfo=dt.UTC)


def test_a_format_no_plugin_registered_fails_at_load_naming_the_known(tmp_path: Path) -> None:
    from ragaudit.errors import ConfigError

    with pytest.raises(ConfigError, match="unknown audit reader 'csv' .*jsonl, parquet, otlp, ubi"):
        load_config(None, _audit(tmp_path, []))


def _fresh(tmp: Path, args: list[str], *paths: Path, **env: str) -> str:
    """``python -m ragaudit ARGS`` in a fresh interpreter that can import ``paths`` too."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith("RAGAUDIT_")}
    environ.update(
        PYTHONPATH=os.pathsep.join([*map(str, paths), *sys.path]),
        RAGAUDIT_HOME=str(tmp / "home"),
        COLUMNS="250",
        NO_COLOR="1",
        **env,
    )
    done = subprocess.run(
        [sys.executable, "-m", "ragaudit", *args],
        cwd=tmp,
        env=environ,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Traceback" not in done.stdout + done.stderr
    return done.stdout


def test_a_plugin_reader_audits_a_day_in_a_fresh_process(tmp_path: Path) -> None:
    path = tmp_path / "audit.yaml"
    path.write_text(yaml.safe_dump(_audit(tmp_path, ["csv_log"])), encoding="utf-8")
    said = _fresh(
        tmp_path, ["audit", "-c", str(path), "--day", DAY.isoformat(), "--dry-run"], PLUGINS
    )
    said = " ".join(said.split())
    assert "read 2 requests (1 records did not map)" in said
    assert "1 of the requests read had an id read before that day: left out" in said


def _install(site: Path) -> None:
    """``ragaudit-csvlog``: a distribution naming the CSV reader under the readers' group."""
    info = site / "ragaudit_csvlog-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: ragaudit-csvlog\nVersion: 0.1\n", encoding="utf-8"
    )
    (info / "entry_points.txt").write_text(
        "[ragaudit.audit_readers]\ncsv_log = csv_log\n", encoding="utf-8"
    )
    shutil.copy(PLUGINS / "csv_log.py", site / "csv_log.py")


def _row(listing: str, *cells: str) -> bool:
    """Whether a table row of ``listing`` holds ``cells`` in this order."""
    return any(
        all(c in line for c in cells)
        and [line.index(c) for c in cells] == sorted(line.index(c) for c in cells)
        for line in listing.splitlines()
    )


def test_ragaudit_plugins_lists_installed_allow_listed_and_registered(tmp_path: Path) -> None:
    site = tmp_path / "site"
    _install(site)
    # Installed, not allow-listed: listed, never imported, nothing of it registered.
    listing = _fresh(tmp_path, ["plugins"], site)
    assert _row(listing, "ragaudit-csvlog", "no", "ragaudit.audit_readers: csv_log")
    assert "Allow-listed (plugins: or RAGAUDIT_PLUGINS): none" in listing
    assert _row(listing, "audit reader", "jsonl", "built-in", "ragaudit.audit._jsonlog", "fields")
    assert "csv_log" not in listing.split("Registered units", 1)[1]

    # Allow-listed: its reader is registered, namespaced by its package.
    listing = _fresh(tmp_path, ["plugins"], site, RAGAUDIT_PLUGINS="ragaudit-csvlog")
    assert _row(listing, "ragaudit-csvlog", "yes", "ragaudit.audit_readers: csv_log")
    assert _row(
        listing,
        "audit reader",
        "ragaudit-csvlog/csv",
        "ragaudit-csvlog",
        "csv_log",
        "delimiter, docs_separator, fields",
    )
    # A module named in a config's plugins registers a plain name.
    path = tmp_path / "plugins.yaml"
    path.write_text(yaml.safe_dump({"plugins": ["csv_log"]}), encoding="utf-8")
    listing = _fresh(tmp_path, ["plugins", "-c", str(path)], PLUGINS)
    assert "Allow-listed (plugins: or RAGAUDIT_PLUGINS): csv_log" in listing
    assert _row(listing, "audit reader", "csv ", "csv_log", "csv_log", "delimiter")


def test_the_readers_and_read_day_import_no_circle() -> None:
    graph = grimp.build_graph("ragaudit", cache_dir=None, exclude_type_checking_imports=True)
    audit = {m for m in graph.modules if m.startswith("ragaudit.audit.")}

    def imports(module: str) -> set[str]:
        return graph.find_modules_directly_imported_by(module) & audit

    # The readers' vocabulary imports no other audit module; each reader imports only it (not
    # read_day's module, which finds them by name through the registry, never by import).
    assert imports("ragaudit.audit._records") == set()
    for reader in ("_jsonlog", "_otlp", "_ubi"):
        assert imports(f"ragaudit.audit.{reader}") == {"ragaudit.audit._records"}, reader
    assert imports("ragaudit.audit._source") == {
        "ragaudit.audit._records",
        "ragaudit.audit._redact",
        "ragaudit.audit._segments",
    }
    assert set(READERS.builtins) == {f"ragaudit.audit.{r}" for r in ("_jsonlog", "_otlp", "_ubi")}
