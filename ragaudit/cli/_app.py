"""The ``ragaudit`` application: its error boundary, consoles, shared options and entry point."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Annotated, Any

import typer
from pydantic import BaseModel
from rich.console import Console
from rich.markup import escape
from typer.core import TyperGroup

import ragaudit  # noqa: F401  (offline environment before anything else)
from ragaudit.config import RunConfig, load_config, set_path
from ragaudit.errors import RagauditError, os_error_message
from ragaudit.numbers import fixed
from ragaudit.secrets import redact
from ragaudit.stopping import exit_status


class Interrupted(RagauditError):
    """The run was stopped by a signal (Ctrl-C, SIGTERM)."""

    def __init__(self, run_id: str, signum: int) -> None:
        name = signal.Signals(signum).name
        super().__init__(f"run {run_id} stopped by {name}: interrupted; re-run to resume")
        self.signum = int(signum)


ERROR_EXIT = 2


def expected_error(exc: BaseException) -> RagauditError | None:
    """The ``RagauditError`` behind ``exc``: itself or the first one among its causes.

    Prefect re-raises an error a stage raised inside its own; the user needs the cause, once.
    """
    cause: BaseException | None = exc
    while cause is not None and not isinstance(cause, RagauditError):
        cause = cause.__cause__
    return cause


class ErrorBoundary(TyperGroup):
    """The root command: the one place an expected error becomes one line and an exit code.

    A ``RagauditError`` (or an error caused by one) raised anywhere in a command is printed
    as one unwrapped ``error:`` line, secrets redacted, and ends the process with exit code
    2 (128 + the signal for ``Interrupted``); an ``OSError`` with an errno (a full or
    read-only disk) becomes one line too; any other exception keeps its traceback. It is the root
    command rather than a ``try`` in ``main()`` so that every way of running ``app`` passes
    through it: the console script, ``python -m ragaudit`` and ``CliRunner`` in the tests.
    """

    # ``Any``: Typer's context class belongs to the copy of click it ships, a private module.
    def invoke(self, ctx: Any) -> Any:
        """Run the command, turning an expected error into a clean exit."""
        try:
            return super().invoke(ctx)
        except Exception as exc:
            # Typer's own exits and usage errors have no such cause: they pass through.
            error = expected_error(exc)
            if error is None:
                cause: BaseException | None = exc
                while cause is not None and not isinstance(cause, OSError):
                    cause = cause.__cause__
                if not isinstance(cause, OSError) or cause.errno is None:
                    raise
                # A full or read-only disk: one line naming the path and the errno.
                error = RagauditError(os_error_message(cause))
            # Escaped: a message naming a list (``[a, b]``) or a path with brackets would
            # otherwise be read as console markup and lose that text.
            err.print(f"[bold red]error:[/] {escape(redact(str(error)))}")
            # 128 + the signal (130 Ctrl-C, 143 SIGTERM), as shells report a run a signal stopped.
            code = exit_status(error.signum) if isinstance(error, Interrupted) else ERROR_EXIT
            raise typer.Exit(code) from None


app = typer.Typer(
    name="ragaudit",
    cls=ErrorBoundary,
    help="Evaluate retrieval-augmented QA on Elasticsearch/OpenSearch: rank contexts with an "
    "LLM judge, write reference answers, score RAGAS metrics, as cached, resumable Prefect flows.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)


def stdout_console() -> Console:
    """The console of tables and results on stdout.

    Piped output (CI logs, `make demo | tee`) gets 120 columns rather than Rich's 80, unless
    COLUMNS says how wide the reader is (Rich then takes it, as on a terminal).
    """
    wide = sys.stdout.isatty() or os.environ.get("COLUMNS", "").isdigit()
    return Console(stderr=False, width=None if wide else 120)


console = stdout_console()
# Errors are never wrapped: a path or a message cut at 80 columns when piped can neither be
# grepped nor copied.
err = Console(stderr=True, soft_wrap=True)

ConfigOpt = Annotated[
    Path | None, typer.Option("--config", "-c", help="YAML/TOML/JSON config file.")
]
RunIdOpt = Annotated[
    str | None, typer.Option("--run-id", help="Run id; the same id resumes a run.")
]
QuestionsOpt = Annotated[
    Path | None, typer.Option("--questions", "-q", help="Question set (JSONL/CSV/Parquet).")
]
JudgeOpt = Annotated[str | None, typer.Option("--judge", help="Judge model (any litellm string).")]
EmbedderOpt = Annotated[
    str | None, typer.Option("--embedder", help="Embedding model (any litellm string).")
]
RootOpt = Annotated[Path | None, typer.Option("--runs-root", help="Folder of run folders.")]


def field_range(model: type[BaseModel], name: str) -> dict[str, Any]:
    """A config field's bounds as a flag's ``min``/``max``.

    A flag that sets a config field takes the field's range, so a value out of it is an error
    of the flag (naming it) rather than of the config file the command was given.
    """
    found: dict[str, Any] = {}
    for bound in model.model_fields[name].metadata:
        if getattr(bound, "ge", None) is not None:
            found["min"] = bound.ge
        if getattr(bound, "le", None) is not None:
            found["max"] = bound.le
    return found


LimitOpt = Annotated[
    int | None,
    typer.Option("--limit", help="Only the first N questions.", **field_range(RunConfig, "limit")),
]
SetOpt = Annotated[
    list[str] | None, typer.Option("--set", help="Any config field: --set score.top_k=5")
]
DryRunOpt = Annotated[
    bool,
    typer.Option(
        "--dry-run", help="Print the calls, tokens and cost per stage; call no model, write no run."
    ),
]
AssumeOpt = Annotated[
    list[str] | None,
    typer.Option("--assume", help="A dry-run prior: --assume relevant_share=0.5"),
]

RecordOpt = Annotated[
    list[Path] | None,
    typer.Option(
        "--record",
        help="A judge record file (ragaudit record) the dry run reads when no earlier run under "
        "the runs root used the judge.",
    ),
]


def _overrides(
    *,
    questions: Path | None = None,
    judge: str | None = None,
    embedder: str | None = None,
    runs_root: Path | None = None,
    limit: int | None = None,
    run_id: str | None = None,
    sets: list[str] | None = None,
) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for dotted, value in (
        ("questions", questions),
        ("models.judge", judge),
        ("models.embedder", embedder),
        ("runs_root", runs_root),
        ("limit", limit),
        ("run_id", run_id),
    ):
        if value is not None:
            set_path(out, dotted, str(value) if isinstance(value, Path) else value)
    for item in sets or []:
        if "=" not in item:
            raise RagauditError(f"--set {item}: expected field=value, e.g. --set score.top_k=5")
        dotted, raw = item.split("=", 1)
        import yaml

        set_path(out, dotted.strip(), yaml.safe_load(raw))
    return out


def load_paid_config(path: Path | None, overrides: dict[str, Any]) -> RunConfig:
    """The config of a command that calls models, its model strings checked before any call.

    A judge, juror or generator no provider can route would fail every one of its calls
    after the others were paid: every command that spends loads its config here.
    """
    from ragaudit._env import follow_runs_root
    from ragaudit.cache.providers import check_judges

    config = load_config(path, overrides)
    check_judges(config.models)
    # Before any flow module imports Prefect: its database goes beside the runs.
    follow_runs_root(config.runs_root)
    return config


def demo_or_config(command: str, demo: bool, config: Path | None, demo_config: Path) -> Path:
    """The config file of a command that takes ``--config FILE`` or ``--demo`` (one of them)."""
    if demo and config is not None:
        raise RagauditError("--demo and --config: pick one")
    if demo:
        if not demo_config.is_file():
            raise RagauditError(f"{demo_config} not found: run the demo from the checkout")
        return demo_config
    if config is None:
        raise RagauditError(f"{command}: give --config {command}.yaml, or --demo")
    return config


@contextlib.contextmanager
def held_folders(*folders: Path, prepare: Callable[[], None] | None = None) -> Iterator[None]:
    """The folders a command writes, each locked before Prefect's API server starts, and it.

    A second process on one of the folders is refused in one line (``RunLocked``) before a
    server starts or a call is paid: two Prefect servers on one database would otherwise race
    on its rows. The ephemeral server is this process's own and dies with it
    (``ragaudit._server``), so ``kill -9`` leaves none running. SIGTERM stops the command as
    Ctrl-C does: a folder's manifest then says ``interrupted``.
    """
    from ragaudit import stopping
    from ragaudit._server import ephemeral_server
    from ragaudit.runlock import RunLock

    with contextlib.ExitStack() as stack:
        stack.enter_context(stopping.sigterm_as_sigint())
        for folder in folders:
            stack.enter_context(RunLock(folder))
        stack.enter_context(ephemeral_server(prepare))
        yield


def quiet_prefect_runs() -> None:
    """Leave a failure to this CLI's one clean line (``RAGAUDIT_DEBUG`` keeps Prefect's).

    Prefect's own ERROR records of flow and task runs would print the same failure again with
    tracebacks. Called once the flow's modules are imported: importing Prefect's flow API
    configures its logging (the root's handlers, these levels).
    """
    import logging

    if not os.environ.get("RAGAUDIT_DEBUG"):
        for name in ("prefect.flow_runs", "prefect.task_runs"):
            logging.getLogger(name).setLevel(logging.CRITICAL)


def _num(value: float | None, digits: int = 3) -> str:
    return fixed(value, digits)


def main() -> None:
    """The console entry point (``ragaudit``) and ``python -m ragaudit``.

    Errors need no handling here: ``app``'s root command is the error boundary.
    """
    app()
