"""The stages of a run, each declared once, in DAG order: flow task, CLI command, estimate.

A declaration says what the flow needs to run a stage and to cache it: the function that runs
it, the tables it reads (their content hashes key its cache) and writes (a cached result whose
tables are gone is refreshed), the config sections that change its output, and the module whose
source, with every in-package module it imports, is the code that computes it. The score stage
fans out into one task per metric (``parts``), whose tables a final step combines; with the
questions in more than one batch (``scale.batch_size``) the judged stages fan out the same
way, one task per batch (the score stage: per metric and batch). It also names the stage's
CLI command and its help (the CLI adds one command per stage from this table) and the
estimator the dry run asks for the stage's calls (:func:`estimate_run`).

A stage's functions are named by module and imported when first called: the CLI reads this
table to list its commands, and importing a stage's code would load the judge's client and
the flow engine into every command (seconds of start-up for ``ragaudit --help``).
"""

from __future__ import annotations

import ast
import hashlib
import importlib
import importlib.util
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ragaudit.config import RunConfig

if TYPE_CHECKING:
    from ragaudit.dryrun import Assumptions, Estimate, Plan
    from ragaudit.tasks import StageContext

Work = Callable[["StageContext"], Awaitable[Iterable[str]]]
PartWork = Callable[["StageContext", str], Awaitable[Iterable[str]]]
Estimator = Callable[["Plan"], Awaitable[None]]

_PACKAGE = "ragaudit"
_DRY_RUN = "ragaudit.dryrun"


@dataclass(frozen=True)
class _Named:
    """A module's function, imported when first called."""

    module: str
    name: str

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return getattr(importlib.import_module(self.module), self.name)(*args, **kwargs)


def _named(module: str, name: str) -> Any:
    # Any: the declared field's type (Work, PartWork, Estimator …) is the function's, which
    # only its module knows until it is imported.
    return _Named(module, name)


def _task(stage: str, name: str) -> Any:
    """The function ``name`` of the stage's module ``ragaudit.tasks.<stage>``."""
    return _named(f"ragaudit.tasks.{stage}", name)


def _always(config: RunConfig) -> bool:
    return True


@dataclass(frozen=True)
class Stage:
    """One stage of the flow.

    Attributes:
        name: The stage's name (manifest key, task run name).
        run: Runs the whole stage; returns the tables it wrote.
        reads: Tables whose content hashes key the stage's cache.
        writes: Tables the stage writes.
        sections: Dotted config fields that change the stage's output (its cache keys on them).
        module: The module whose source and in-package imports are the stage's code.
        enabled: Whether the stage runs under a config.
        command: The CLI stage command that runs it (its name unless it stands in for another).
        help: The help of its CLI stage command; None: no command of its own (it runs under
            ``run``, or under the command it stands in for).
        estimate: Adds the stage's model calls to the dry run's plan; None: it calls no model.
        parts: The stage's fan-out under a config and the run's question batches (one task
            per part); None or an empty list: one task for the whole stage.
        run_part: Runs one part; returns the part tables it wrote. None: ``run`` runs it (a
            batch part's context reads and writes only its batch).
        combine: Joins the parts' tables into the stage's tables (None: each written table
            is its parts concatenated, in part order).
        judged: Tables whose rows record the judge's work, one status per row (what the
            manifest checks for a judge that failed on most calls).
    """

    name: str
    run: Work | None
    reads: tuple[str, ...]
    writes: tuple[str, ...]
    sections: tuple[str, ...]
    module: str
    enabled: Callable[[RunConfig], bool] = _always
    command: str | None = None
    help: str | None = None
    estimate: Estimator | None = None
    parts: Callable[[RunConfig, list[str]], Sequence[str] | None] | None = None
    run_part: PartWork | None = None
    combine: Callable[[StageContext, list[str]], Any] | None = None
    judged: tuple[str, ...] = ()

    def part_writes(self, part: str | None) -> tuple[str, ...]:
        """Tables one task of the stage writes (a part's own tables for a fanned-out stage)."""
        return tuple(f"{t}/{part}" for t in self.writes) if part is not None else self.writes

    def requested(self, commands: Sequence[str] | None) -> bool:
        """Whether the stage belongs to the requested stage commands (None: all)."""
        return commands is None or (self.command or self.name) in commands


def _batches(config: RunConfig, batches: list[str]) -> list[str]:
    return batches


_JUDGE = ("models.judge", "models.temperature", "models.judge_context_window")

STAGES: tuple[Stage, ...] = (
    Stage(
        name="collect",
        run=_task("collect", "collect"),
        reads=(),
        writes=("questions", "candidates", "answers", "retrieval"),
        sections=(
            "questions",
            "limit",
            "collect",
            "gold",
            "models.embedder",
            # collect.query_form rewrite: the judge's model rewrites a turn from its history.
            *_JUDGE,
            "models.max_output_tokens",
            "conversation",
        ),
        module="ragaudit.tasks.collect",
        help="Stage 1: fetch candidates and the system's answers into the run folder.",
        estimate=_named(_DRY_RUN, "estimate_collect"),
    ),
    Stage(
        name="sort",
        run=_task("sort", "sort"),
        reads=("questions", "candidates"),
        writes=("verdicts", "comparisons", "ranking", "agreement"),
        sections=(
            "sort",
            *_JUDGE,
            "models.max_output_tokens",
            # The grades' samples: each juror, each repeat, repeats at the sampling temperature.
            "models.judge_repeats",
            "models.jury",
            "score.sampling_temperature",
        ),
        module="ragaudit.tasks.sort",
        enabled=lambda c: c.sort.enabled,
        help="Stage 2: judge relevance and order the candidates; agreement with the engine.",
        # Also what a run without the judge's sort takes as relevant (every candidate).
        estimate=_named(_DRY_RUN, "estimate_sort"),
        parts=_batches,
        combine=_task("sort", "combine_sort"),
        judged=("verdicts", "comparisons"),
    ),
    Stage(
        # With the judge off, gold relevance alone still grades the engine (no LLM call).
        name="gold",
        run=_task("sort", "gold"),
        reads=("questions", "candidates"),
        writes=("agreement",),
        sections=("sort.agreement_k", "sort.max_candidates"),
        module="ragaudit.tasks.sort",
        enabled=lambda c: not c.sort.enabled,
        command="sort",
    ),
    Stage(
        name="ground_truth",
        run=_task("ground_truth", "ground_truth"),
        reads=("questions", "candidates", "ranking"),
        writes=("ground_truth", "nuggets"),
        sections=("ground_truth", "sort.enabled", *_JUDGE),
        module="ragaudit.tasks.ground_truth",
        enabled=lambda c: c.ground_truth.enabled,
        help="Stage 3: write reference answers from the relevant candidates.",
        # Also what a run without the stage takes as references (the questions' own).
        estimate=_named(_DRY_RUN, "estimate_ground_truth"),
        parts=_batches,
        judged=("ground_truth", "nuggets"),
    ),
    Stage(
        name="score",
        run=None,
        reads=("questions", "candidates", "answers", "ground_truth", "nuggets"),
        writes=("scores",),
        sections=(
            "score",
            "models.judge",
            "models.embedder",
            "models.max_output_tokens",
            "models.judge_context_window",
        ),
        module="ragaudit.tasks.score",
        help="Stage 4: score every configured metric on the top-k contexts.",
        estimate=_named(_DRY_RUN, "estimate_score"),
        parts=_task("score", "score_parts"),
        run_part=_task("score", "score_metric"),
        combine=_task("score", "combine_scores"),
        judged=("scores",),
    ),
    Stage(
        # Its command is ``ragaudit report --run-id`` (cli/_reports.py), which also renders a
        # finished run's report from its tables.
        name="report",
        run=_task("report", "report"),
        # Everything the report model shows besides the call log; absent tables are skipped.
        reads=("questions", "answers", "scores", "ground_truth", "verdicts", "agreement"),
        writes=("summary",),
        sections=("report",),
        module="ragaudit.tasks.report",
    ),
)

BY_NAME: dict[str, Stage] = {s.name: s for s in STAGES}
COMMANDS: tuple[str, ...] = tuple(dict.fromkeys(s.command or s.name for s in STAGES))
"""The stage commands, in DAG order (what ``evaluate(stages=…)`` and the CLI take)."""


def _imports(name: str, tree: ast.AST) -> set[str]:
    """Names of the in-package modules ``tree`` (module ``name``) may import."""
    found: set[str] = set()
    package = name.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{parent}.{base}" if base else parent
            found.add(base)
            # ``from pkg import mod`` imports a module; ``from mod import name`` a name: both
            # are tried, and what is not a module is dropped below.
            found.update(f"{base}.{a.name}" for a in node.names)
    out: set[str] = set()
    for mod in found:
        if mod == _PACKAGE or mod.startswith(_PACKAGE + "."):
            parts = mod.split(".")
            out.update(".".join(parts[: i + 1]) for i in range(len(parts)))
    return out


def _source_file(name: str) -> Path | None:
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, AttributeError, ValueError):  # a name inside a module, not a module
        return None
    if spec is None or not spec.origin or not spec.origin.endswith(".py"):
        return None
    return Path(spec.origin)


@cache
def code_modules(root: str) -> tuple[str, ...]:
    """``root`` and every in-package module it imports, directly or not, sorted."""
    seen: set[str] = set()
    todo = [root]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        path = _source_file(name)
        if path is None:
            continue
        seen.add(name)
        todo.extend(_imports(name, ast.parse(path.read_bytes(), filename=str(path))) - seen)
    return tuple(sorted(seen))


@cache
def module_digest(name: str) -> str:
    """SHA-256 of one module's source file."""
    path = _source_file(name)
    return hashlib.sha256(path.read_bytes()).hexdigest() if path else ""


def code_digest(stage: Stage) -> str:
    """Hash of the source of the code that computes ``stage``: its module and its imports."""
    h = hashlib.sha256()
    for name in code_modules(stage.module):
        h.update(f"{name}:{module_digest(name)}\n".encode())
    return h.hexdigest()


async def estimate_run(
    config: RunConfig,
    assume: Assumptions | None = None,
    stages: list[str] | None = None,
    *,
    use_history: bool = True,
    records: list[Path] | None = None,
) -> Estimate:
    """The calls, tokens and cost ``config``'s run will need, without calling any model.

    Every stage's estimator, in stage order, over one plan (:mod:`ragaudit.dryrun`).
    ``stages`` limits the lines to those stages; the earlier stages are still estimated, since
    later ones read what they produce. ``use_history`` and ``records``: where the judge's
    record is read (:func:`ragaudit.dryrun.start_plan`).
    """
    from ragaudit.dryrun import finish_plan, start_plan

    plan = start_plan(config, assume, use_history=use_history, records=records)
    for stage in STAGES:
        if stage.estimate is not None:
            await stage.estimate(plan)
    return finish_plan(plan, stages)


__all__ = [
    "BY_NAME",
    "COMMANDS",
    "STAGES",
    "Stage",
    "code_digest",
    "code_modules",
    "estimate_run",
]
