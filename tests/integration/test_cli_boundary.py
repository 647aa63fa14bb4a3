"""The CLI's one error boundary: every way in goes through it, and no command catches for itself."""

from __future__ import annotations

import ast
import importlib.metadata
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import typer
from support.runs import REPO
from typer.testing import CliRunner

import ragaudit.cli
from ragaudit.cli import app, main
from ragaudit.cli._app import Interrupted
from ragaudit.errors import RagauditError

CLI_PACKAGE = Path(ragaudit.cli.__file__).parent
# The unquoted --set value that `_overrides` refuses before any work: it raises outside any
# `try` a command once had, so only the boundary turns it into one line.
BAD_SET = ["demo", "--set", "no-equals-sign"]
BAD_SET_MESSAGE = "error: --set no-equals-sign: expected field=value, e.g. --set score.top_k=5"


class _Exploding:
    """Stands in for the metric registry: listing it raises what the test chose."""

    def __init__(self, exc: BaseException) -> None:
        self.exc = exc

    def values(self) -> Any:
        raise self.exc


def _metrics_raising(monkeypatch: pytest.MonkeyPatch, exc: BaseException) -> Any:
    """``ragaudit metrics`` run with a registry that raises ``exc``."""
    monkeypatch.setattr("ragaudit.metrics.METRICS", _Exploding(exc))
    return CliRunner().invoke(app, ["metrics"])


def test_the_console_script_is_main() -> None:
    (script,) = importlib.metadata.entry_points(group="console_scripts", name="ragaudit")
    assert script.value == "ragaudit.cli:main"
    assert script.load() is main


def test_main_prints_an_unexpected_error_as_one_line_and_exits_2(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(REPO)  # demo looks for its config in the checkout
    monkeypatch.setattr(sys, "argv", ["ragaudit", *BAD_SET])
    with pytest.raises(SystemExit) as stopped:
        main()
    assert stopped.value.code == 2
    captured = capsys.readouterr()
    assert captured.err.strip().splitlines() == [BAD_SET_MESSAGE]
    assert captured.out == ""


def test_the_installed_script_prints_one_line_not_a_traceback(tmp_path: Path) -> None:
    script = Path(sys.executable).with_name("ragaudit")
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAGAUDIT_")}
    proc = subprocess.run(
        [str(script), *BAD_SET],
        capture_output=True,
        text=True,
        env={**env, "RAGAUDIT_HOME": str(tmp_path / "home"), "NO_COLOR": "1"},
        timeout=120,
        cwd=REPO,
    )
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip().splitlines() == [BAD_SET_MESSAGE]


def test_an_error_caused_by_a_ragaudit_error_prints_the_cause(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Prefect re-raises a stage's error inside its own exception.
    try:
        raise RagauditError("score.metrics: the judge refused every call")
    except RagauditError as cause:
        wrapped = RuntimeError("Task run failed")
        wrapped.__cause__ = cause
    result = _metrics_raising(monkeypatch, wrapped)
    assert result.exit_code == 2
    assert result.output.strip() == "error: score.metrics: the judge refused every call"


@pytest.mark.parametrize(("signum", "status"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_an_interrupted_run_exits_with_the_signals_status(
    monkeypatch: pytest.MonkeyPatch, signum: int, status: int
) -> None:
    result = _metrics_raising(monkeypatch, Interrupted("r1", signum))
    assert result.exit_code == status
    name = signal.Signals(signum).name
    assert (
        result.output.strip() == f"error: run r1 stopped by {name}: interrupted; re-run to resume"
    )


def test_the_error_line_is_redacted(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAGAUDIT_TEST_API_KEY", "sk-boundary-0123456789")
    result = _metrics_raising(
        monkeypatch, RagauditError("provider said: bad key sk-boundary-0123456789")
    )
    assert result.exit_code == 2
    assert "sk-boundary" not in result.output
    assert result.output.strip() == "error: provider said: bad key ***"


def test_brackets_in_a_message_are_printed_as_written(monkeypatch: pytest.MonkeyPatch) -> None:
    message = "score.metrics: unknown faithfullness; known: [answer_relevancy, faithfulness]"
    result = _metrics_raising(monkeypatch, RagauditError(message))
    assert result.exit_code == 2
    assert result.output.strip() == f"error: {message}"


def test_a_commands_own_exit_code_passes_through(monkeypatch: pytest.MonkeyPatch) -> None:
    result = _metrics_raising(monkeypatch, typer.Exit(3))
    assert result.exit_code == 3
    assert "error:" not in result.output


def test_a_bug_is_not_hidden_behind_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    result = _metrics_raising(monkeypatch, KeyError("not an expected error"))
    assert isinstance(result.exception, KeyError)
    assert "error:" not in result.output


def _catches(handler: ast.ExceptHandler) -> set[str]:
    """The exception names an ``except`` clause catches (a bare one catches everything)."""
    if handler.type is None:
        return {"BaseException"}
    kinds = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
    return {ast.unparse(k).rsplit(".", 1)[-1] for k in kinds}


def test_no_command_module_catches_errors_the_boundary_handles() -> None:
    modules = sorted(p for p in CLI_PACKAGE.glob("*.py") if p.name != "_app.py")
    assert {p.name for p in modules} >= {"_run.py", "_reports.py", "_cache.py", "_index.py"}
    broad = {"RagauditError", "Interrupted", "Exception", "BaseException"}
    found = []
    for path in modules:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.ExceptHandler) and _catches(node) & broad:
                found.append(f"{path.name}:{node.lineno} except {ast.unparse(node.type or node)}")
            # The error line is printed in one place only.
            if isinstance(node, ast.Constant) and "error:[/]" in str(node.value):
                found.append(f"{path.name}:{node.lineno} prints its own error line")
    assert found == []


def test_the_boundary_check_sees_a_catching_command() -> None:
    # The check above would pass on an empty package: it must flag the pattern it forbids.
    source = "try:\n    run()\nexcept (OSError, RagauditError) as exc:\n    fail(exc)\n"
    handler = next(n for n in ast.walk(ast.parse(source)) if isinstance(n, ast.ExceptHandler))
    assert "RagauditError" in _catches(handler)
