"""The fixed cost of the CLI: a 1-question ``ragaudit run``, ``runs``, ``compare``, a deployment.

Every command runs in a fresh process (``python -m ragaudit``), with bytecode written and
present (``PYTHONDONTWRITEBYTECODE`` unset, the sources compiled before the first timing).
For ``run`` (fake judge and embedder, one demo question, the local index built from the demo
corpus) the bench reads the time from the process start to the flow's start (the manifest's
``started_at``: what the run pays before its first stage), the stages' own time (the
manifest's ``timings.total_s``) and the whole wall. "cold" is the first command in a fresh
project (new home, memo, index and runs root); "warm" is the same command again in it.
``deploy entry`` is what a worker's flow-run process does before a deployment's flow starts
that is ours: loading the ``evaluate`` deployment's entrypoint (``flows/evaluate.py``, which
imports every stage's module), in a fresh process.

``--base-python PY`` times a second checkout side by side: the interpreter of a venv with the
code before a change installed editable (``git worktree add /tmp/startup2-base cc15bea``, then
a venv with the system site packages and ``pip install --no-deps -e /tmp/startup2-base``), so
both run on the same installed packages. The two checkouts take turns command by command, so
that a change of the machine's load falls on both.

    python bench/bench_startup.py                                              # this checkout
    python bench/bench_startup.py --base-python /work/venvs/startup2-base/bin/python

The goals it checks: a run's fixed cost (wall minus the stages' time) ≤ 5 s, ``runs`` and
``compare`` ≤ 3 s cold; each printed as met or not met with the figure. Figures depend on the
machine's load: the load average is printed with them.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

import _util

RUN_GOAL_S = 5.0
LIST_GOAL_S = 3.0


def _env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAGAUDIT_")}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env.update(RAGAUDIT_HOME=str(home), NO_COLOR="1")
    return env


def _timed(python: str, args: list[str], env: dict[str, str], cwd: Path) -> tuple[float, float]:
    """(process start epoch, wall seconds) of ``python -m ragaudit ARGS``; it must succeed."""
    start = time.time()
    t0 = time.perf_counter()
    done = subprocess.run(
        [python, "-m", "ragaudit", *args], env=env, cwd=cwd, capture_output=True, text=True
    )
    wall = time.perf_counter() - t0
    if done.returncode != 0:
        raise SystemExit(f"ragaudit {args[0]} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return start, wall


def _run(python: str, project: Path, run_id: str) -> tuple[float, float, float]:
    """(seconds to the flow's start, stages' seconds, wall seconds) of a 1-question run."""
    questions = project / "q1.jsonl"
    if not questions.exists():
        line = (_util.REPO / "data" / "demo" / "questions.jsonl").read_text().splitlines()[0]
        questions.write_text(line + "\n")
    args = [
        "run",
        "--questions", str(questions),
        "--runs-root", str(project / "runs"),
        "--run-id", run_id,
        "--judge", "fake/judge",
        "--embedder", "fake/embed",
        "--set", f"cache_dir={project / 'cache'}",
        "--set", f"collect.index_path={project / 'index'}",
        "--set", f"collect.corpus={_util.REPO / 'data' / 'demo' / 'corpus.jsonl'}",
    ]  # fmt: skip
    start, wall = _timed(python, args, _env(project / "home"), project)
    manifest = json.loads((project / "runs" / run_id / "manifest.json").read_text())
    flow_start = datetime.fromisoformat(manifest["started_at"]).timestamp()
    return flow_start - start, float(manifest["timings"]["total_s"]), wall


_ENTRY = (
    "from prefect.flows import load_flow_from_entrypoint; "
    "load_flow_from_entrypoint('flows/evaluate.py:evaluate_config')"
)


def _checkout(python: str) -> Path:
    """The checkout an interpreter's venv has installed (editable), with bytecode compiled."""
    found = subprocess.run(
        [python, "-c", "import compileall, pathlib, ragaudit; "
         "root = pathlib.Path(ragaudit.__file__).parent.parent; "
         "compileall.compile_dir(str(root), quiet=1); print(root)"],
        check=True, capture_output=True, text=True,
    )  # fmt: skip
    return Path(found.stdout.strip().splitlines()[-1])


def measure(checkouts: list[tuple[str, str]]) -> tuple[list[tuple], dict[str, dict[str, float]]]:
    """The rows of every checkout: run, runs, compare and the deployment's entry, cold and warm.

    The checkouts take turns at each command.
    """
    projects = {label: _util.scratch(f"startup-{label}") for _, label in checkouts}
    roots = {label: _checkout(python) for python, label in checkouts}
    rows: dict[str, list[tuple]] = {label: [] for _, label in checkouts}
    figures: dict[str, dict[str, float]] = {label: {} for _, label in checkouts}
    for phase, run_id in (("cold", "a"), ("warm", "b")):
        for python, label in checkouts:
            to_flow, stages, wall = _run(python, projects[label], run_id)
            figures[label][phase] = wall - stages
            rows[label].append(
                (label, "run", phase, f"{to_flow:.1f}", f"{stages:.1f}", f"{wall:.1f}")
            )
    for command in ("runs", "compare", "deploy entry"):
        for phase in ("cold", "warm"):
            for python, label in checkouts:
                project = projects[label]
                env = _env(project / "home")
                root = str(project / "runs")
                if command == "deploy entry":
                    start = time.perf_counter()
                    subprocess.run(
                        [python, "-c", _ENTRY], env=env, cwd=roots[label], check=True,
                        capture_output=True,
                    )  # fmt: skip
                    wall = time.perf_counter() - start
                else:
                    args = ["runs", "--runs-root", root]
                    if command == "compare":
                        args = ["compare", "a", "b", "--runs-root", root]
                    _, wall = _timed(python, args, env, project)
                rows[label].append((label, command, phase, "-", "-", f"{wall:.1f}"))
                figures[label][f"{command} {phase}"] = wall
    return [r for _, label in checkouts for r in rows[label]], figures


def verdicts(figures: dict[str, float]) -> list[str]:
    """One met / not met line per goal."""
    out = []
    fixed = figures["cold"]
    out.append(
        f"run fixed cost (wall - stages, cold) {fixed:.1f} s <= {RUN_GOAL_S:.0f} s: "
        + ("met" if fixed <= RUN_GOAL_S else "NOT met")
    )
    for command in ("runs", "compare"):
        wall = figures[f"{command} cold"]
        out.append(
            f"{command} cold {wall:.1f} s <= {LIST_GOAL_S:.0f} s: "
            + ("met" if wall <= LIST_GOAL_S else "NOT met")
        )
    return out


def main() -> None:
    """Time this checkout (and ``--base``) and print the table and the goals."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base-python", help="The interpreter of the code before the change.")
    args = parser.parse_args()
    checkouts = [(sys.executable, "this")]
    if args.base_python is not None:
        checkouts.insert(0, (args.base_python, "base"))
    before = os.getloadavg()
    rows, figures = measure(checkouts)
    goals = {label: verdicts(found) for label, found in figures.items()}
    load = os.getloadavg()
    print(
        f"load average (1, 5, 15 min) {before[0]:.1f} {before[1]:.1f} {before[2]:.1f} before, "
        f"{load[0]:.1f} {load[1]:.1f} {load[2]:.1f} after, on {os.cpu_count()} cores"
    )
    headers = ("code", "command", "phase", "to flow start s", "stages s", "wall s")
    print(_util.table(rows, headers))
    for label, lines in goals.items():
        for line in lines:
            print(f"{label}: {line}")


if __name__ == "__main__":
    main()
