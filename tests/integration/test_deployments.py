"""prefect.yaml's deployments against a real ``prefect server start``, a process worker, a schedule.

One test drives the whole path a user takes: a work pool, ``prefect deploy --all`` from
prefect.yaml, a worker, ``prefect deployment run`` of the evaluate deployment (whose run folder
must equal a CLI run's), then a one-minute schedule on the nightly deployment whose run
compares itself with the run before, publishes the comparison as artifacts and, because the
system's answers got worse in between, emits the ``ragaudit.regression`` event.
"""

from __future__ import annotations

import datetime as dt
import json
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import polars as pl
import pytest
import yaml
from support.audit_days import BROKEN, FIRST, audit_config, write_logs
from support.paths import REPO_ROOT
from support.prefect_server import PrefectServer

REPO = REPO_ROOT
TOPICS = [
    "river",
    "meadow",
    "forest",
    "desert",
    "ocean",
    "glacier",
    "volcano",
    "island",
    "canyon",
    "valley",
    "lake",
    "marsh",
]


def write_questions(path: Path, *, worse: bool = False) -> None:
    """12 questions with their contexts and the system's answers (``worse``: useless answers).

    The question set's hash covers ids, texts, filters and references, not the answers: the
    worse answers are the same question set answered by a system that regressed.
    """
    rows = []
    for i, topic in enumerate(TOPICS):
        rows.append(
            {
                "question_id": f"q{i:02d}",
                "question": f"What lives in the {topic}?",
                "reference": f"The {topic} is home to many animals and changes with the seasons.",
                "response": "I cannot say anything about that."
                if worse
                else f"Many animals live in the {topic}, which changes with the seasons.",
                "retrieved_contexts": [
                    f"The {topic} hosts many animals.",
                    f"Seasons change the {topic}.",
                    f"Unrelated text about cars, number {i}.",
                ],
            }
        )
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")


def write_config(root: Path) -> Path:
    """The evaluation config of both deployments: fake judge and embedder, no model needed."""
    config = {
        "questions": str(root / "questions.jsonl"),
        "runs_root": str(root / "runs"),
        "cache_dir": str(root / "cache"),
        "collect": {"backend": "question_set", "top_n": 3},
        "sort": {"strategy": "merge", "agreement_k": 2},
        "ground_truth": {"enabled": False},
        "score": {"top_k": 2, "metrics": ["faithfulness", "context_precision", "rouge_l"]},
        "models": {"judge": "fake/judge", "embedder": "fake/embed", "backoff_s": 0.0},
        "report": {"bootstrap_samples": 200, "compare_resamples": 999},
        "nightly": {"on_regression": "name"},
    }
    path = root / "config.yaml"
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    return path


@pytest.fixture(scope="session")
def prefect_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrefectServer]:
    """``prefect server start`` on a free loopback port with its own PREFECT_HOME, started once."""
    root = tmp_path_factory.mktemp("prefect-server")
    server = PrefectServer(
        root,
        {
            # The pull step of prefect.yaml moves each flow run into this checkout.
            "RAGAUDIT_PROJECT_DIR": str(REPO),
            "RAGAUDIT_HOME": str(root / "ragaudit-home"),
        },
    )
    try:
        server.start()
        yield server
    finally:
        server.stop()


class _Hook(BaseHTTPRequestHandler):
    """Records the bodies POSTed to it: the notification the automation sends."""

    received: list[dict[str, Any]] = []

    def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
        length = int(self.headers.get("Content-Length", 0))
        self.received.append(json.loads(self.rfile.read(length) or b"{}"))
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def webhook() -> Iterator[tuple[str, list[dict[str, Any]]]]:
    """A loopback HTTP receiver standing in for Slack or e-mail."""
    _Hook.received = []
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Hook)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}/hook", _Hook.received
    finally:
        httpd.shutdown()
        httpd.server_close()


def create_regression_automation(
    server: PrefectServer, hook_url: str, root: Path, name: str = "regression.yaml"
) -> None:
    """``automations/<name>`` as shipped, notifying a webhook block on ``hook_url``."""
    saved = server.run(
        [
            sys.executable,
            "-c",
            "from prefect.blocks.notifications import CustomWebhookNotificationBlock as B\n"
            f"b = B(name='hook', url={hook_url!r}, "
            "json_data={'subject': '{{subject}}', 'body': '{{body}}'})\n"
            "print(b.save('ragaudit-test-hook', overwrite=True))",
        ]
    )
    block_id = saved.stdout.strip().splitlines()[-1]
    automation = yaml.safe_load((REPO / "automations" / name).read_text("utf-8"))
    automation["actions"][0]["block_document_id"] = block_id
    path = root / f"automation-{name}"
    path.write_text(yaml.safe_dump(automation), encoding="utf-8")
    server.prefect("automation", "create", "--from-file", str(path))


def _comparable_rows(path: Path) -> list[str]:
    """A table's rows without what differs between two runs of one config (id, timings)."""
    frame = pl.read_parquet(path)
    frame = frame.drop([c for c in ("run_id", "latency_s") if c in frame.columns])
    return sorted(json.dumps(row, sort_keys=True, default=str) for row in frame.to_dicts())


def _flow_runs(server: PrefectServer, deployment_id: str) -> list[dict[str, Any]]:
    return server.api(
        "/flow_runs/filter",
        {"flow_runs": {"deployment_id": {"any_": [deployment_id]}}, "sort": "START_TIME_ASC"},
    )


def _final(run: dict[str, Any]) -> bool:
    return run["state_type"] in {"COMPLETED", "FAILED", "CRASHED", "CANCELLED"}


@pytest.mark.slow
def test_deploy_run_and_scheduled_comparison(
    prefect_server: PrefectServer, tmp_path: Path, webhook: tuple[str, list[dict[str, Any]]]
) -> None:
    server = prefect_server
    hook_url, notifications = webhook
    questions = tmp_path / "questions.jsonl"
    write_questions(questions)
    config = write_config(tmp_path)
    runs = tmp_path / "runs"

    # prefect.yaml as shipped, its config_path parameters pointed at the test config.
    project = yaml.safe_load((REPO / "prefect.yaml").read_text(encoding="utf-8"))
    for deployment in project["deployments"]:
        deployment["parameters"]["config_path"] = str(config)
    prefect_file = tmp_path / "prefect.yaml"
    prefect_file.write_text(yaml.safe_dump(project, sort_keys=False), encoding="utf-8")

    server.prefect("work-pool", "create", "ragaudit", "--type", "process")
    server.prefect("deploy", "--all", "--prefect-file", str(prefect_file), cwd=REPO)
    deployments = {d["name"]: d for d in server.api("/deployments/filter")}
    assert set(deployments) == {d["name"] for d in project["deployments"]}
    nightly = deployments["nightly-reevaluation"]
    assert nightly["entrypoint"] == "flows/nightly.py:reevaluate"
    assert [s["schedule"].get("cron") for s in nightly["schedules"]] == ["0 3 * * *"]

    worker_log = server.spawn(
        [sys.executable, "-m", "prefect", "worker", "start", "--pool", "ragaudit"],
        "worker",
        cwd=tmp_path,
    )
    server.prefect(
        "deployment", "run", "ragaudit-evaluate-config/evaluate", "--param", "run_id=deployed"
    )
    # The same config through the CLI meanwhile (against the same server).
    server.run(
        [sys.executable, "-m", "ragaudit", "run", "--config", str(config), "--run-id", "cli"],
        cwd=tmp_path,
    )
    evaluate_id = deployments["evaluate"]["id"]
    done = server.wait(
        lambda: [r for r in _flow_runs(server, evaluate_id) if _final(r)],
        300,
        lambda: f"the evaluate deployment's run did not finish\n{server.logs()}",
    )
    assert done[0]["state_type"] == "COMPLETED", f"{done[0]['state']}\n{server.logs()}"

    # The deployment left the same run folder as the CLI.
    manifest = json.loads((runs / "deployed" / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["status"] == "completed"
    tables = sorted(p.name for p in (runs / "cli").glob("*.parquet"))
    assert {"questions.parquet", "candidates.parquet", "scores.parquet"} <= set(tables)
    assert sorted(p.name for p in (runs / "deployed").glob("*.parquet")) == tables
    for name in tables:
        assert _comparable_rows(runs / "deployed" / name) == _comparable_rows(
            runs / "cli" / name
        ), name

    create_regression_automation(server, hook_url, tmp_path)

    # The live system regresses; a one-minute schedule runs the nightly re-evaluation.
    write_questions(questions, worse=True)
    anchor = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=30)
    server.prefect(
        "deployment",
        "schedule",
        "create",
        "ragaudit-reevaluate/nightly-reevaluation",
        "--interval",
        "60",
        "--anchor-date",
        anchor.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "--replace",
        "-y",
    )
    scheduled = server.wait(
        lambda: [r for r in _flow_runs(server, nightly["id"]) if r["auto_scheduled"] and _final(r)],
        240,
        lambda: f"no scheduled nightly run finished\n{server.logs()}",
        every=3.0,
    )[0]
    assert scheduled["state_type"] == "COMPLETED", f"{scheduled['state']}\n{server.logs()}"
    # nightly.on_regression: name — the run's name says it regressed.
    assert scheduled["name"].endswith("-regressed"), scheduled["name"]

    # Run folders only: the runs root also holds the judgment store the sort stages append to.
    nightly_runs = [
        p.parent.name
        for p in runs.glob("*/manifest.json")
        if p.parent.name not in {"cli", "deployed"}
    ]
    assert len(nightly_runs) == 1, nightly_runs
    nightly_run = nightly_runs[0]
    # The baseline is the newest earlier run like it: the CLI's or the deployment's run,
    # whichever started last (they ran at the same time).
    started = {
        r: json.loads((runs / r / "manifest.json").read_text(encoding="utf-8"))["started_at"]
        for r in ("cli", "deployed")
    }
    baseline = max(started, key=started.__getitem__)

    artifacts = {
        a["key"]: a
        for a in server.api(
            "/artifacts/filter", {"artifacts": {"flow_run_id": {"any_": [scheduled["id"]]}}}
        )
    }
    markdown = artifacts[f"ragaudit-compare-{nightly_run}"]
    assert markdown["type"] == "markdown"
    assert f"`{nightly_run}` against `{baseline}`" in markdown["data"]
    assert "rouge_l regressed" in markdown["data"]
    table = artifacts[f"ragaudit-compare-table-{nightly_run}"]
    rows = {r["metric"]: r for r in json.loads(table["data"])}
    assert set(rows) == {"faithfulness", "context_precision", "rouge_l"}
    assert rows["rouge_l"]["verdict"] == "regressed"
    assert rows["rouge_l"]["mean_now"] < rows["rouge_l"]["mean_previous"]

    # The server stores events in batches, a moment after the run that emitted them ended.
    events = server.wait(
        lambda: server.api(
            "/events/filter", {"filter": {"event": {"name": ["ragaudit.regression"]}}}
        )["events"],
        60,
        lambda: f"no ragaudit.regression event reached the server\n{server.logs()}",
    )
    assert len(events) == 1, events
    event = events[0]
    assert event["resource"]["prefect.resource.id"].startswith("ragaudit.question-set.")
    assert event["payload"]["baseline_run_id"] == baseline
    assert event["payload"]["regressed"] == ["rouge_l"]
    assert event["payload"]["metrics"][0]["delta"] < 0
    related = {r["prefect.resource.id"] for r in event["related"]}
    assert f"prefect.flow-run.{scheduled['id']}" in related
    assert worker_log.is_file()

    # The automation turned the event into a notification.
    server.wait(
        lambda: notifications,
        90,
        lambda: f"the regression automation sent no notification\n{server.logs()}",
    )
    (note,) = notifications
    assert note["subject"] == "ragaudit: rouge_l regressed"
    assert f"Run {nightly_run} against {baseline}" in note["body"]


def test_tune_deployment_runs_on_a_process_worker(
    prefect_server: PrefectServer, tmp_path: Path
) -> None:
    """prefect.yaml's ``tune`` deployment, run once by a process worker, writes the tune folder."""
    server = prefect_server
    config = {
        "questions": str(REPO / "data" / "demo" / "questions.jsonl"),
        "runs_root": str(tmp_path / "runs"),
        "cache_dir": str(tmp_path / "cache"),
        "collect": {
            "backend": "local",
            "index_path": str(tmp_path / "index"),
            "corpus": str(REPO / "data" / "demo" / "corpus.jsonl"),
            "top_n": 10,
        },
        "models": {"judge": "fake/judge", "embedder": "fake/embed", "backoff_s": 0.0},
        "report": {"bootstrap_samples": 200, "compare_resamples": 999},
        "tune": {"name": "deployed-tune", "depth": 5, "variants": {"hybrid": {"mode": "hybrid"}}},
    }
    config_path = tmp_path / "tune.yaml"
    config_path.write_text(yaml.safe_dump(config), encoding="utf-8")
    project = yaml.safe_load((REPO / "prefect.yaml").read_text(encoding="utf-8"))
    project["deployments"] = [d for d in project["deployments"] if d["name"] == "tune"]
    project["deployments"][0]["parameters"]["config_path"] = str(config_path)
    prefect_file = tmp_path / "prefect.yaml"
    prefect_file.write_text(yaml.safe_dump(project, sort_keys=False), encoding="utf-8")
    if not any(p["name"] == "ragaudit" for p in server.api("/work_pools/filter")):
        server.prefect("work-pool", "create", "ragaudit", "--type", "process")
    server.prefect("deploy", "--all", "--prefect-file", str(prefect_file), cwd=REPO)
    deployment = next(d for d in server.api("/deployments/filter") if d["name"] == "tune")
    assert deployment["entrypoint"] == "flows/tune.py:tune_config"
    server.prefect("deployment", "run", "ragaudit-tune-config/tune")
    server.spawn(
        [sys.executable, "-m", "prefect", "worker", "start", "--pool", "ragaudit", "--run-once"],
        "tune-worker",
        cwd=tmp_path,
    )
    done = server.wait(
        lambda: [r for r in _flow_runs(server, deployment["id"]) if _final(r)],
        300,
        lambda: f"the tune deployment's run did not finish\n{server.logs()}",
    )
    assert done[0]["state_type"] == "COMPLETED", f"{done[0]['state']}\n{server.logs()}"
    folder = tmp_path / "runs" / "deployed-tune"
    table = pl.read_parquet(folder / "tune.parquet")
    assert set(table["variant"]) == {"baseline", "hybrid"}
    assert (folder / "report.html").is_file() and (folder / "best.yaml").is_file()


@pytest.mark.slow
def test_audit_deployment_flags_a_regression_and_notifies(
    prefect_server: PrefectServer, tmp_path: Path, webhook: tuple[str, list[dict[str, Any]]]
) -> None:
    """prefect.yaml's ``audit`` deployment audits a day on a process worker; the day the account
    collection's engine broke, the ``ragaudit.audit.regression`` event reaches the server, the
    run is named "-regressed" (``audit.on_regression: name``) and the automation notifies."""
    server = prefect_server
    hook_url, notifications = webhook
    config = audit_config(tmp_path, write_logs(tmp_path), on_regression="name")
    # The quiet week through the CLI against the same server: the series the day joins.
    server.run(
        [
            sys.executable,
            "-m",
            "ragaudit",
            "audit",
            "-c",
            str(config),
            "--from",
            str(FIRST),
            "--to",
            str(BROKEN - dt.timedelta(days=1)),
        ],
        cwd=tmp_path,
    )
    project = yaml.safe_load((REPO / "prefect.yaml").read_text(encoding="utf-8"))
    project["deployments"] = [d for d in project["deployments"] if d["name"] == "audit"]
    project["deployments"][0]["parameters"] = {"config_path": str(config), "day": str(BROKEN)}
    prefect_file = tmp_path / "prefect.yaml"
    prefect_file.write_text(yaml.safe_dump(project, sort_keys=False), encoding="utf-8")
    if not any(p["name"] == "ragaudit" for p in server.api("/work_pools/filter")):
        server.prefect("work-pool", "create", "ragaudit", "--type", "process")
    server.prefect("deploy", "--all", "--prefect-file", str(prefect_file), cwd=REPO)
    deployment = next(d for d in server.api("/deployments/filter") if d["name"] == "audit")
    assert deployment["entrypoint"] == "flows/audit.py:audit_config"
    assert [s["schedule"].get("cron") for s in deployment["schedules"]] == ["0 4 * * *"]
    create_regression_automation(server, hook_url, tmp_path, "audit-regression.yaml")
    server.prefect("deployment", "run", "ragaudit-audit-config/audit")
    server.spawn(
        [sys.executable, "-m", "prefect", "worker", "start", "--pool", "ragaudit", "--run-once"],
        "audit-worker",
        cwd=tmp_path,
    )
    done = server.wait(
        lambda: [r for r in _flow_runs(server, deployment["id"]) if _final(r)],
        300,
        lambda: f"the audit deployment's run did not finish\n{server.logs()}",
    )
    assert done[0]["state_type"] == "COMPLETED", f"{done[0]['state']}\n{server.logs()}"
    assert done[0]["name"].endswith("-regressed"), done[0]["name"]
    folder = tmp_path / "runs" / "audit-bot" / str(BROKEN)
    manifest = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["status"] == "completed"
    assert pl.read_parquet(folder / "estimates.parquet").height > 0
    changes = pl.read_parquet(folder / "changes.parquet")
    assert "account" in set(changes.filter(pl.col("regressed"))["segment"])
    events = server.wait(
        lambda: server.api(
            "/events/filter", {"filter": {"event": {"name": ["ragaudit.audit.regression"]}}}
        )["events"],
        60,
        lambda: f"no ragaudit.audit.regression event reached the server\n{server.logs()}",
    )
    (event,) = events
    assert event["resource"]["prefect.resource.id"] == "ragaudit.audit.bot"
    assert event["payload"]["day"] == str(BROKEN)
    assert any(r.startswith("account/") for r in event["payload"]["regressed"])
    server.wait(
        lambda: notifications,
        90,
        lambda: f"the audit automation sent no notification\n{server.logs()}",
    )
    (note,) = notifications
    assert note["subject"].startswith("ragaudit audit bot: ")
    assert "account" in note["subject"] and str(BROKEN) in note["subject"]
