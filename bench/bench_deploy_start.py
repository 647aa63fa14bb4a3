"""Where a deployment run's start goes: the ``evaluate`` deployment on a real Prefect server.

For each checkout (``--base-python`` as in ``bench_startup.py``): ``prefect server start``,
a process work pool, ``prefect deploy`` of prefect.yaml's ``evaluate`` deployment from the
checkout, a worker run by that checkout's interpreter, then two runs of the deployment, one
after the other, on a 1-question config (fake judge and embedder, the question set's own
answers). Each run's start is split at the flow run's states: created → Pending (the worker
picked it up: its polling, Prefect's) → Running (the flow-run process started, ran the pull
step and loaded the entrypoint ``flows/evaluate.py``, whose imports are ours) → the manifest's
``started_at`` (``evaluate_config`` loaded the config and entered the evaluate flow: ours and
Prefect's subflow start); then the stages' own time.

    python bench/bench_deploy_start.py --base-python /work/venvs/startup2-base/bin/python
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from datetime import datetime
from pathlib import Path
from typing import Any

import _util
import yaml
from support.prefect_server import PrefectServer

QUERY_SECONDS = "2"


def _checkout(python: str) -> Path:
    code = "import pathlib, ragaudit; print(pathlib.Path(ragaudit.__file__).parent.parent)"
    found = subprocess.run([python, "-c", code], check=True, capture_output=True, text=True)
    return Path(found.stdout.strip().splitlines()[-1])


def _config(root: Path) -> Path:
    question = json.loads(
        (_util.REPO / "data" / "demo" / "questions.jsonl").read_text("utf-8").splitlines()[0]
    )
    row = {
        "question_id": question["question_id"],
        "question": question["question"],
        "reference": question.get("reference") or "A reference answer.",
        "response": "An answer to the question.",
        "retrieved_contexts": ["A context.", "Another context."],
    }
    (root / "questions.jsonl").write_text(json.dumps(row, ensure_ascii=False) + "\n", "utf-8")
    config = {
        "questions": str(root / "questions.jsonl"),
        "runs_root": str(root / "runs"),
        "cache_dir": str(root / "cache"),
        "collect": {"backend": "question_set", "top_n": 2},
        "ground_truth": {"enabled": False},
        "score": {"top_k": 2, "metrics": ["faithfulness", "context_precision", "rouge_l"]},
        "models": {"judge": "fake/judge", "embedder": "fake/embed", "backoff_s": 0.0},
    }
    path = root / "config.yaml"
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    return path


def _stamp(value: str) -> float:
    return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()


def _states(server: PrefectServer, run_id: str) -> dict[str, float]:
    found = server.http.get("/flow_run_states/", params={"flow_run_id": run_id}).json()
    return {s["type"]: _stamp(s["timestamp"]) for s in found}


def measure(python: str, label: str) -> list[tuple[Any, ...]]:
    """Two deployment runs of one checkout: the seconds of each part of their start."""
    root = _util.scratch(f"deploy-{label}")
    checkout = _checkout(python)
    config = _config(root)
    server = PrefectServer(
        root,
        {
            "RAGAUDIT_PROJECT_DIR": str(checkout),
            "RAGAUDIT_HOME": str(root / "home"),
            "PREFECT_WORKER_QUERY_SECONDS": QUERY_SECONDS,
        },
    )
    rows: list[tuple[Any, ...]] = []
    try:
        server.start()
        project = yaml.safe_load((checkout / "prefect.yaml").read_text(encoding="utf-8"))
        project["deployments"] = [d for d in project["deployments"] if d["name"] == "evaluate"]
        project["deployments"][0]["parameters"]["config_path"] = str(config)
        prefect_file = root / "prefect.yaml"
        prefect_file.write_text(yaml.safe_dump(project, sort_keys=False), encoding="utf-8")
        server.prefect("work-pool", "create", "ragaudit", "--type", "process")
        deploy = ["deploy", "--all", "--prefect-file", str(prefect_file)]
        server.run([python, "-m", "prefect", "--no-prompt", *deploy], cwd=checkout)
        server.spawn(
            [python, "-m", "prefect", "worker", "start", "--pool", "ragaudit"], "worker", cwd=root
        )
        for n, phase in enumerate(("first", "second")):
            run_id = f"d{n}"
            server.prefect(
                "deployment", "run", "ragaudit-evaluate-config/evaluate",
                "--param", f"run_id={run_id}", "--param", f"config_path={config}",
            )  # fmt: skip
            manifest_path = root / "runs" / run_id / "manifest.json"

            def finished(path: Path = manifest_path) -> dict[str, Any] | None:
                if not path.is_file():
                    return None
                found = json.loads(path.read_text(encoding="utf-8"))
                return found if found.get("status") not in (None, "running") else None

            manifest = server.wait(finished, 600, server.logs, every=1.0)
            flow_runs = server.api("/flow_runs/filter", {"sort": "EXPECTED_START_TIME_DESC"})
            # The deployment's own run (the evaluate flow inside it is a subflow run).
            flow_run = next(
                r
                for r in flow_runs
                if r["deployment_id"] and r["parameters"].get("run_id") == run_id
            )
            states = _states(server, flow_run["id"])
            created = _stamp(flow_run["created"])
            started = _stamp(manifest["started_at"])
            rows.append(
                (
                    label,
                    phase,
                    f"{states['PENDING'] - created:.1f}",
                    f"{states['RUNNING'] - states['PENDING']:.1f}",
                    f"{started - states['RUNNING']:.1f}",
                    f"{started - created:.1f}",
                    f"{float(manifest['timings']['total_s']):.1f}",
                )
            )
    finally:
        server.stop()
    return rows


def main() -> None:
    """Time the deployment run's start of this checkout (and ``--base-python``'s)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base-python", help="The interpreter of the code before the change.")
    args = parser.parse_args()
    checkouts = [(sys.executable, "this")]
    if args.base_python is not None:
        checkouts.insert(0, (args.base_python, "base"))
    before = os.getloadavg()
    rows = [row for python, label in checkouts for row in measure(python, label)]
    load = os.getloadavg()
    print(
        f"load average (1, 5, 15 min) {before[0]:.1f} {before[1]:.1f} {before[2]:.1f} before, "
        f"{load[0]:.1f} {load[1]:.1f} {load[2]:.1f} after, on {os.cpu_count()} cores"
    )
    headers = (
        "code", "run", "to Pending s", "Pending→Running s", "Running→flow start s",
        "to flow start s", "stages s",
    )  # fmt: skip
    print(_util.table(rows, headers))


if __name__ == "__main__":
    main()
