"""``ragaudit runs`` and ``compare`` read Parquet and print: they import no judge, no flow engine.

Each command runs in a fresh interpreter (what a user's shell starts), which then names the
heavy packages present in ``sys.modules``; an import of ragas, litellm, prefect or torch on
these paths costs seconds of start-up for nothing.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from support.cli import cli_env
from support.reporting_runs import write_run

HEAVY = ("ragas", "litellm", "prefect", "torch", "langchain_core", "lancedb", "openai")

_PROBE = """
import json, sys
from ragaudit.cli import app
try:
    app(sys.argv[1:], standalone_mode=False)
finally:
    heavy = json.loads(sys.stdin.read())
    print("HEAVY=" + json.dumps(sorted(m for m in heavy if m in sys.modules)))
"""


def _probe(
    code: str,
    args: list[str],
    tag: str,
    tmp_path: Path,
    *,
    stdin: str | None = None,
    env: dict[str, str] | None = None,
    timeout: int = 300,
) -> Any:
    """Run ``code`` in a fresh interpreter; the JSON its ``TAG=`` line printed."""
    done = subprocess.run(
        [sys.executable, "-c", code, *args],
        input=stdin,
        capture_output=True,
        text=True,
        env=env if env is not None else cli_env(tmp_path),
        cwd=tmp_path,
        timeout=timeout,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    (line,) = [x for x in done.stdout.splitlines() if x.startswith(f"{tag}=")]
    return json.loads(line.removeprefix(f"{tag}="))


def _heavy_imports(
    args: list[str], tmp_path: Path, heavy: tuple[str, ...] | list[str] = HEAVY
) -> list[str]:
    return _probe(_PROBE, args, "HEAVY", tmp_path, stdin=json.dumps(list(heavy)))


@pytest.fixture
def two_runs(tmp_path: Path) -> Path:
    root = tmp_path / "runs"
    write_run(root, "A", {"faithfulness": [0.5, 0.6, 0.7, 0.6, 0.5]})
    write_run(root, "B", {"faithfulness": [0.9, 0.95, 0.99, 0.9, 0.92]})
    return root


@pytest.mark.parametrize(
    "command",
    [
        pytest.param(["runs"], id="runs"),
        pytest.param(["runs", "--trend", "faithfulness"], id="runs-trend"),
        pytest.param(["compare", "A", "B"], id="compare"),
        pytest.param(["compare", "A", "B", "--html"], id="compare-html"),
    ],
)
def test_listing_and_comparing_runs_import_no_heavy_package(
    command: list[str], two_runs: Path, tmp_path: Path
) -> None:
    found = _heavy_imports([*command, "--runs-root", str(two_runs)], tmp_path)
    assert found == [], f"ragaudit {' '.join(command)} imported {found}"


def test_listing_runs_needs_no_statistics_library(two_runs: Path, tmp_path: Path) -> None:
    # The stored summaries hold every interval `runs` prints: scipy.stats (a second of
    # imports) is for `compare` and for scoring.
    args = ["runs", "--runs-root", str(two_runs)]
    found = _heavy_imports(args, tmp_path, [*HEAVY, "scipy.stats"])
    assert found == [], f"ragaudit runs imported {found}"


def test_the_probe_sees_a_heavy_import(tmp_path: Path) -> None:
    # The probe itself: a command that needs the gateway (the memo's statistics) is seen
    # importing litellm, so an empty list above is a finding, not a blind probe.
    assert "litellm" in _heavy_imports(["cache", "stats"], tmp_path)


# What a metric imports only where it scores a row: ragas (with langchain and datasets),
# rouge-score's nltk, sacreBLEU.
SCORING = ("ragas", "nltk", "rouge_score", "sacrebleu", "langchain_core", "datasets")

_REGISTRY_PROBE = """
import json, sys
import ragaudit.metrics
after_import = sorted(m for m in json.loads(sys.argv[1]) if m in sys.modules)
from ragaudit.config import load_config
base = json.loads(sys.argv[2])
base["score"]["metrics"] = list(ragaudit.metrics.METRICS)
load_config(None, base, environ={})
after_load = sorted(m for m in json.loads(sys.argv[1]) if m in sys.modules)
print("FOUND=" + json.dumps([after_import, after_load, len(base["score"]["metrics"])]))
"""


def test_registering_and_checking_the_metrics_imports_no_scoring_library(tmp_path: Path) -> None:
    # Every command that loads a config registers the metrics and checks the listed ones
    # (names, options, the cost models they carry): none of that needs ragas or nltk, nor,
    # for the import, the gateway's litellm.
    from support.runs import REPO

    base = {
        "questions": str(REPO / "data" / "demo" / "questions.jsonl"),
        "runs_root": str(tmp_path / "runs"),
        "cache_dir": str(tmp_path / "cache"),
        "models": {"judge": "fake/judge", "embedder": "fake/embed"},
        "score": {},
    }
    heavy = [*SCORING, "litellm"]
    after_import, after_load, listed = _probe(
        _REGISTRY_PROBE, [json.dumps(heavy), json.dumps(base)], "FOUND", tmp_path
    )
    assert listed > 20
    assert after_import == []
    assert [m for m in after_load if m in SCORING] == []


_SERVER_PROBE = """
import json, sys
import ragaudit._server as s

spawned = []
real = s._spawn


def spawn(port):
    spawned.append(real(port))
    return spawned[-1]


s._spawn = spawn
fail = sys.argv[1] == "fail"
prepared = []


def prepare():
    if fail:
        raise ValueError("the question set is malformed")
    import ragaudit.flows.evaluate  # what a run imports meanwhile
    prepared.append(True)


out = {}
try:
    with s.ephemeral_server(prepare) as server:
        from prefect.client.orchestration import get_client

        with get_client(sync_client=True) as client:
            out["health"] = client.api_healthcheck() is None
        out["same"] = server.server_process is spawned[-1]
        out["alive_inside"] = spawned[-1].poll() is None
except ValueError as exc:
    out["raised"] = str(exc)
out["spawned"] = len(spawned)
out["prepared"] = prepared
out["alive_after"] = [p.poll() is None for p in spawned]
print("OUT=" + json.dumps(out))
"""


def _server_probe(mode: str, tmp_path: Path) -> dict:
    env = {k: v for k, v in cli_env(tmp_path).items() if k != "PREFECT_API_URL"}
    env["PREFECT_HOME"] = str(tmp_path / "prefect")
    return _probe(_SERVER_PROBE, [mode], "OUT", tmp_path, env=env, timeout=600)


def test_the_server_started_beside_the_runs_preparation_is_prefects_own(tmp_path: Path) -> None:
    # Spawned before Prefect's server module is imported, it is handed to Prefect as its
    # instance: a client uses it (no second server), and it stops with the block.
    out = _server_probe("ok", tmp_path)
    assert out["health"] and out["same"] and out["alive_inside"]
    assert out["spawned"] == 1 and out["prepared"] == [True]
    assert out["alive_after"] == [False]


def test_a_failing_preparation_stops_the_server_and_raises_its_error(tmp_path: Path) -> None:
    out = _server_probe("fail", tmp_path)
    assert out["raised"] == "the question set is malformed"
    assert out["spawned"] == 1 and out["alive_after"] == [False]
    assert "health" not in out
