"""How the tests start the ``ragaudit`` command on the demo data."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from support.paths import REPO_ROOT as REPO

DEMO_QUESTIONS = REPO / "data" / "demo" / "questions.jsonl"
DEMO_CORPUS = REPO / "data" / "demo" / "corpus.jsonl"


def run_args(tmp_path: Path, *extra: str) -> list[str]:
    """``ragaudit run`` on the demo questions, the fake judge, everything under tmp_path."""
    return [
        "run",
        "--questions",
        str(DEMO_QUESTIONS),
        "--runs-root",
        str(tmp_path / "runs"),
        "--judge",
        "fake/judge",
        "--embedder",
        "fake/embed",
        "--set",
        f"cache_dir={tmp_path / 'cache'}",
        "--set",
        f"collect.index_path={tmp_path / 'index'}",
        *extra,
    ]


def cli_command() -> list[str]:
    """The installed ``ragaudit`` script of this interpreter's environment."""
    cli = Path(sys.executable).with_name("ragaudit")
    return [str(cli)] if cli.exists() else [sys.executable, "-m", "ragaudit"]


def cli_env(tmp_path: Path) -> dict[str, str]:
    """The environment of a CLI subprocess: no RAGAUDIT_* settings of the caller's."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAGAUDIT_")}
    return {**env, "RAGAUDIT_HOME": str(tmp_path / "home"), "NO_COLOR": "1"}
