"""What every stage shares: its context (config, run folder, gateway) and its result."""

from __future__ import annotations

import hashlib
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import TypeVar

# gateway_for, global_lease, hold_gateway and memo_location belong to the gateway; re-exported
# here for the stage code and tests written against this module.
from ragaudit.cache import (
    Gateway,
    gateway_for,
    global_lease,
    hold_gateway,
    items_in_flight,
    memo_location,
)
from ragaudit.concurrency import gather_limited
from ragaudit.config import RunConfig
from ragaudit.conversation import history_cut, in_context
from ragaudit.dataset import Question
from ragaudit.judging import Judge
from ragaudit.runfolder import RunFolder
from ragaudit.schemas import dumps

T = TypeVar("T")
R = TypeVar("R")


BATCH_PREFIX = "b"
"""Batch part names are ``b0000``, ``b0001``…; a part of a fanned-out stage that also has
batches is ``<name>@b0001`` (the score stage: one part per metric and batch)."""


def batch_names(n_questions: int, batch_size: int) -> list[str]:
    """The batches of ``n_questions`` questions; [] when they fit one batch (no fan-out)."""
    n = -(-n_questions // batch_size)
    return [f"{BATCH_PREFIX}{i:04d}" for i in range(n)] if n > 1 else []


def part_name(name: str | None, batch: str | None) -> str:
    """The part of ``name`` (a metric) in ``batch``; either may be absent, not both."""
    if name is None:
        assert batch is not None
        return batch
    return name if batch is None else f"{name}@{batch}"


def split_part(part: str | None) -> tuple[str | None, str | None]:
    """``(name, batch)`` of a part name (see :func:`part_name`)."""
    if part is None:
        return None, None
    name, _, batch = part.rpartition("@")
    if name:
        return name, batch
    if part.startswith(BATCH_PREFIX) and part[len(BATCH_PREFIX) :].isdigit():
        return None, part
    return part, None


@dataclass
class StageContext:
    """Everything a stage needs at run time.

    A batch task's context has its ``part`` (where its tables go: ``<table>/<part>``) and the
    ``ids`` of its batch's questions (what it reads); a whole stage's has neither.
    """

    config: RunConfig
    run: RunFolder
    gateway: Gateway
    part: str | None = None
    ids: frozenset[str] | None = None

    def out(self, table: str) -> str:
        """The name this task writes ``table`` under: its part of it, or the table itself."""
        return table if self.part is None else f"{table}/{self.part}"

    @property
    def batched(self) -> bool:
        """Whether this task runs one batch of the questions (not all of them)."""
        return self.ids is not None

    @property
    def judge(self) -> str:
        """The judge model string."""
        return self.config.models.judge_model

    @cached_property
    def llm(self) -> Judge:
        """The run's judge, built once per stage context (its window worked out once)."""
        return Judge.from_config(self.config.models, self.gateway, in_flight(self))

    def window(self) -> int:
        """The judge's context window."""
        window = self.llm.window
        assert window is not None  # from_config always works one out
        return window

    def in_context(self, q: Question) -> Question:
        """``q`` as every judge prompt of this run is built from it (its history, bounded)."""
        return in_context(q, self.config.conversation, self.llm.model, self.llm.budget)

    def history_cut(self, q: Question) -> int:
        """Earlier exchanges of ``q`` this run's judge prompts leave out (0: none)."""
        return history_cut(q, self.config.conversation, self.llm.model, self.llm.budget)

    def judged_questions(self, ids: Iterable[str] | None = None) -> list[Question]:
        """The run's questions (this task's, by default) as the judge is shown them."""
        chosen = self.ids if ids is None else frozenset(ids)
        return [self.in_context(q) for q in self.run.questions(chosen)]


@dataclass
class StageResult:
    """What a stage task returns: the tables it wrote (name → content hash) and its LLM counts."""

    stage: str
    tables: dict[str, str]
    llm: dict[str, int]
    seconds: float
    task_seconds: float = 0.0
    worker: str = ""
    """``host:pid`` of the process that ran it."""


def file_digest(path: Path) -> str:
    """SHA-256 of a file's bytes (the fingerprint downstream task caches key on)."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def make_context(
    config_json: str, runs_root: str, run_id: str, part: str | None = None
) -> StageContext:
    """Rebuild the stage context inside a task from its serialisable inputs.

    A part naming a batch (``b0003``, ``faithfulness@b0003``) reads only that batch's
    questions: the ``batch_size`` questions from position 3 × ``batch_size`` of the
    ``questions`` table.
    """
    config = RunConfig.model_validate_json(config_json)
    run = RunFolder(runs_root, run_id)
    ids = None
    batch = split_part(part)[1]
    if batch is not None:
        size = config.scale.batch_size
        start = int(batch[len(BATCH_PREFIX) :]) * size
        ids = frozenset(run.question_ids()[start : start + size])
    return StageContext(config=config, run=run, gateway=gateway_for(config), part=part, ids=ids)


async def run_stage(
    stage: str, ctx: StageContext, work: Callable[[StageContext], Awaitable[Iterable[str]]]
) -> StageResult:
    """Run ``work`` (which writes tables and returns their names) in the run's gateway scope.

    The scope writes the stage's call log to the run's ``llm_calls/`` as it goes.
    """
    started = time.perf_counter()
    with ctx.gateway.scope(stage, run_id=ctx.run.run_id, calls_dir=ctx.run.calls_dir) as counts:
        try:
            names = list(await work(ctx))
        finally:
            await ctx.gateway.drain()
    return StageResult(
        stage=stage,
        tables={n: file_digest(ctx.run.table_path(n)) for n in names},
        llm=counts.as_dict(),
        seconds=time.perf_counter() - started,
    )


def combine_parts(ctx: StageContext, tables: Iterable[str], parts: list[str]) -> list[str]:
    """Concatenate each table's part tables (``<table>/<part>``, in ``parts`` order) into it."""
    import pyarrow as pa

    from ragaudit.schemas import TABLES

    names = list(tables)
    for name in names:
        pieces = [ctx.run.read(f"{name}/{p}") for p in parts]
        table = pa.concat_tables(pieces) if pieces else TABLES[name].empty_table()
        ctx.run.write(name, table.cast(TABLES[name]))
    return names


def in_flight(ctx: StageContext) -> int:
    """Items (rows, candidates, questions) a stage works on at once (``items_in_flight``)."""
    return items_in_flight(ctx.config)


__all__ = [
    "BATCH_PREFIX",
    "StageContext",
    "StageResult",
    "batch_names",
    "combine_parts",
    "dumps",
    "file_digest",
    "gateway_for",
    "global_lease",
    "gather_limited",
    "hold_gateway",
    "in_flight",
    "make_context",
    "part_name",
    "memo_location",
    "run_stage",
    "split_part",
]
