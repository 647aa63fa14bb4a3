"""One stage table: each stage's flow task, CLI command and dry-run estimate, declared once."""

from __future__ import annotations

import asyncio
import dataclasses
import importlib
import inspect
import json
import subprocess
import sys
from typing import Any

import typer

from ragaudit.flows import STAGES

_FUNCTIONS = ("run", "run_part", "combine", "parts", "estimate")


def test_every_function_a_stage_names_exists_and_has_the_declared_arity() -> None:
    # Named by module and name so that the table imports no stage code: a typo would only show
    # when that stage first runs, so every name is resolved here.
    arity = {"run": 1, "run_part": 2, "combine": 2, "parts": 2, "estimate": 1}
    checked = 0
    for stage in STAGES:
        for name in _FUNCTIONS:
            ref = getattr(stage, name)
            if ref is None or not dataclasses.is_dataclass(ref):
                continue
            fn = getattr(importlib.import_module(ref.module), ref.name)
            assert callable(fn), f"{stage.name}.{name}: {ref.module}.{ref.name}"
            positional = [
                p
                for p in inspect.signature(fn).parameters.values()
                if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty
            ]
            assert len(positional) == arity[name], (stage.name, name)
            if name in {"run", "run_part", "estimate"}:
                assert asyncio.iscoroutinefunction(fn), (stage.name, name)
            checked += 1
    assert checked >= 12  # every stage's run, the score stage's parts, the four estimators


def test_the_stage_commands_are_the_tables() -> None:
    from ragaudit.cli import app

    commands = typer.main.get_command(app).commands  # type: ignore[attr-defined]
    declared = {
        (s.command or s.name).replace("_", "-"): s.help for s in STAGES if s.help is not None
    }
    assert list(declared) == ["collect", "sort", "ground-truth", "score"]
    for name, text in declared.items():
        assert commands[name].help == text


def test_only_stages_that_call_a_model_declare_an_estimate() -> None:
    estimated = [s.name for s in STAGES if s.estimate is not None]
    # In stage order: each estimator reads what the earlier ones planned.
    assert estimated == ["collect", "sort", "ground_truth", "score"]


def test_reading_the_table_imports_no_stage_code() -> None:
    code = (
        "import json, sys\n"
        "from ragaudit.flows import STAGES, COMMANDS\n"
        "assert len(STAGES) == 6 and COMMANDS\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.startswith('ragaudit.tasks')"
        " or m.split('.')[0] in ('litellm', 'prefect', 'ragas'))))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    loaded: list[Any] = json.loads(done.stdout.strip().splitlines()[-1])
    assert loaded == []
