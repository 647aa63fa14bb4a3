"""The stages of the evaluate flow, each declared once, in DAG order.

A declaration says what the flow needs to run a stage and to cache it: the function that runs
it, the tables it reads (their content hashes key its cache) and writes (a cached result whose
tables are gone is refreshed), the config sections that change its output, and the module whose
source, with every in-package module it imports, is the code that computes it. The score stage
fans out into one task per metric (``parts``), whose tables a final step combines; with the
questions in more than one batch (``scale.batch_size``) the judged stages fan out the same
way, one task per batch (the score stage: per metric and batch).
"""

from __future__ import annotations

import ast
import hashlib
import importlib.util
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from ragaudit.config import RunConfig
from ragaudit.tasks import StageContext, collect, ground_truth, report, score, sort

Work = Callable[[StageContext], Awaitable[Iterable[str]]]
PartWork = Callable[[StageContext, str], Awaitable[Iterable[str]]]

_PACKAGE = "ragaudit"


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
        run=collect.collect,
        reads=(),
        writes=("questions", "candidates", "answers", "retrieval"),
        sections=("questions", "limit", "collect", "gold", "models.embedder"),
        module=collect.__name__,
    ),
    Stage(
        name="sort",
        run=sort.sort,
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
        module=sort.__name__,
        enabled=lambda c: c.sort.enabled,
        parts=_batches,
        combine=sort.combine_sort,
        judged=("verdicts", "comparisons"),
    ),
    Stage(
        # With the judge off, gold relevance alone still grades the engine (no LLM call).
        name="gold",
        run=sort.gold,
        reads=("questions", "candidates"),
        writes=("agreement",),
        sections=("sort.agreement_k", "sort.max_candidates"),
        module=sort.__name__,
        enabled=lambda c: not c.sort.enabled,
        command="sort",
    ),
    Stage(
        name="ground_truth",
        run=ground_truth.ground_truth,
        reads=("questions", "candidates", "ranking"),
        writes=("ground_truth", "nuggets"),
        sections=("ground_truth", "sort.enabled", *_JUDGE),
        module=ground_truth.__name__,
        enabled=lambda c: c.ground_truth.enabled,
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
        module=score.__name__,
        parts=score.score_parts,
        run_part=score.score_metric,
        combine=score.combine_scores,
        judged=("scores",),
    ),
    Stage(
        name="report",
        run=report.report,
        # Everything the report model shows besides the call log; absent tables are skipped.
        reads=("questions", "answers", "scores", "ground_truth", "verdicts", "agreement"),
        writes=("summary",),
        sections=("report",),
        module=report.__name__,
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


__all__ = ["BY_NAME", "COMMANDS", "STAGES", "Stage", "code_digest", "code_modules"]
