"""The run folder ``<runs_root>/<run_id>/``: one Parquet table per stage plus ``manifest.json``.

Every write goes to a temporary file in the same folder and is renamed into place, so a
crash never leaves a half-written table or manifest behind.

:class:`RunsRoot` is the one keeper of what lies under a runs root: the one scanner of its run
folders, the one rule of a finished run (:func:`run_state`), a previous like-for-like run, the
judgment store's place, and which kind of folder (run, tune, battles, audit, the store) a name
belongs to, so that one kind never writes into another's folder.
"""

from __future__ import annotations

import contextlib
import json
import threading
from collections import defaultdict
from collections.abc import Callable, Collection
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from cachetools import LRUCache
from pydantic import ValidationError

from ragaudit.atomic import redact_table, write_bytes, write_json, write_table
from ragaudit.config import RunConfig
from ragaudit.dataset import Question
from ragaudit.errors import ConfigError, StageError, clip
from ragaudit.hashing import canonical_hash
from ragaudit.runlock import COMPLETE_STATUSES, check_run_id, is_held
from ragaudit.schemas import SCHEMA_VERSION, TABLES, schema_version

_READ_CACHE_BYTES = 64 << 20
"""Arrow bytes of the tables kept; a table over a quarter of it is never kept."""
# (table, its Arrow bytes) by the file's identity; least recently used out first. The lock
# makes a get (which reorders) safe across threads.
_READ_CACHE: LRUCache[tuple[str, int, int, int, int], tuple[pa.Table, int]] = LRUCache(
    _READ_CACHE_BYTES, getsizeof=lambda kept: kept[1]
)
_READ_CACHE_LOCK = threading.Lock()


class DamagedRunFile(StageError):
    """A file of a run folder exists but cannot be read (truncated, overwritten, not Parquet)."""


def damaged(path: Path, exc: Exception) -> DamagedRunFile:
    """The one-line error for a run-folder file that cannot be read, saying what to do.

    A table is only ever replaced whole (``atomic.py``), so a damaged one was changed from
    outside (a disk fault, a copy cut short, an edit by hand): the stage that writes it must
    run again, which resuming the run does once the file is gone.
    """
    return DamagedRunFile(
        f"{path}: damaged, cannot be read ({type(exc).__name__}); delete it and re-run the "
        f"run with --run-id {path.parent.name} to write it again (or restore the run folder "
        "from a copy)"
    )


def read_parquet_file(path: Path, columns: list[str] | None = None) -> pa.Table:
    """The table of the Parquet file ``path``; a damaged file is a :class:`DamagedRunFile`.

    The one place a Parquet file of a run folder is opened: every command that reads a run
    folder gets the same one line instead of a pyarrow traceback.
    """
    try:
        # One file, read as one: ``pq.read_table`` goes through ``pyarrow.dataset``, whose
        # import pulls in pandas, the largest part of a command's start that reads a table.
        with pq.ParquetFile(path) as file:
            # ``read`` leaves out a column the file lacks; ``read_table`` refused it, as here.
            missing = sorted(set(columns or ()) - set(file.schema_arrow.names))
            if missing:
                raise pa.ArrowInvalid(f"no column {', '.join(missing)}")
            return file.read(columns=columns)
    except (pa.ArrowException, OSError) as exc:
        if isinstance(exc, FileNotFoundError):
            raise
        raise damaged(path, exc) from None


def _read_parquet(path: Path) -> pa.Table:
    """``pq.read_table(path)``, kept in memory while the file is unchanged.

    The stages of one run read the same tables again and again (every metric of the score
    stage reads the questions, answers and candidates; the report and the manifest read the
    scores the combine step just read). Arrow tables are immutable, so one read serves them
    all. The key is the file's identity and its modification: a table is only ever replaced
    by a rename (a new inode) or written anew, never changed in place.
    """
    st = path.stat()
    key = (str(path), st.st_dev, st.st_ino, st.st_mtime_ns, st.st_size)
    with _READ_CACHE_LOCK:
        kept = _READ_CACHE.get(key)
    if kept is not None:
        return kept[0]
    table = read_parquet_file(path)
    # Measured once: an Arrow table's nbytes walks every buffer of every chunk.
    size = table.nbytes
    if size <= _READ_CACHE_BYTES // 4:
        with _READ_CACHE_LOCK:
            _READ_CACHE.setdefault(key, (table, size))
    return table


@dataclass(frozen=True)
class RunState:
    """Whether a run folder holds a finished run, and if not, what it is."""

    run_id: str
    status: str
    """The manifest's status, except ``interrupted`` for a ``running`` run no process holds
    (killed with ``kill -9``, or its machine lost) and ``damaged`` for a table that cannot be
    read."""
    complete: bool
    reason: str | None = None
    """Why the run is not complete, one phrase (None when it is)."""

    @property
    def warning(self) -> str | None:
        """One sentence for a command that reads the run (None when the run is complete)."""
        if self.complete:
            return None
        return (
            f"run {self.run_id} is INCOMPLETE ({self.status}: {self.reason}); its numbers "
            f"cover only what it finished: resume it with --run-id {self.run_id}"
        )


def run_state(run_dir: Path | str) -> RunState:
    """The one rule of whether a run folder holds a complete run, used by every command.

    Complete: the manifest says ``completed`` or ``completed_with_failures`` and every table
    of the folder can be read. A manifest still ``running`` is a live run while a process
    holds the run's lock (:func:`ragaudit.runlock.is_held`), else an interrupted one: a run
    killed with ``kill -9`` never gets to write its end.
    """
    path = Path(run_dir)
    run_id = path.name
    try:
        manifest = RunFolder(path.parent, run_id).read_manifest()
    except DamagedRunFile as exc:
        return RunState(run_id, "damaged", False, str(exc))
    status = str(manifest.get("status") or "unknown")
    for table in sorted(path.glob("*.parquet")):
        try:
            pq.read_metadata(table)
        except (pa.ArrowException, OSError):
            return RunState(run_id, "damaged", False, f"{table.name} cannot be read")
    if status in COMPLETE_STATUSES:
        return RunState(run_id, status, True)
    if status == "running":
        if is_held(path):
            return RunState(run_id, "running", False, "a live process is still writing it")
        return RunState(
            run_id, "interrupted", False, "its process died before the run ended (no live lock)"
        )
    reasons = {
        "interrupted": "it was stopped (SIGINT/SIGTERM) before it ended",
        "failed": "a stage failed: " + clip(manifest.get("error") or "see its manifest", 200),
    }
    return RunState(run_id, status, False, reasons.get(status, "its manifest says no run ended"))


class RunFolder:
    """Paths and typed reads/writes of one run's folder."""

    def __init__(self, root: Path | str, run_id: str) -> None:
        # Refused before anything is written: a path as a run id writes outside the root.
        self.run_id = check_run_id(run_id)
        self.path = Path(root) / run_id

    def table_path(self, name: str) -> Path:
        """Where table ``name`` lives."""
        return self.path / f"{name}.parquet"

    @property
    def manifest_path(self) -> Path:
        """``manifest.json`` of the run."""
        return self.path / "manifest.json"

    @property
    def calls_dir(self) -> Path:
        """Folder of the per-stage LLM call logs."""
        return self.path / "llm_calls"

    def has(self, name: str) -> bool:
        """Whether table ``name`` was written."""
        return self.table_path(name).is_file()

    def prompt_versions(self, *names: str) -> set[str]:
        """The prompt versions (``name@version``) of ``names`` the run's call log holds.

        A part of the log that cannot be read is left out: what it logged is then unknown.
        """
        versions: set[str] = set()
        parts = sorted(self.calls_dir.glob("*.parquet")) if self.calls_dir.is_dir() else []
        for part in parts:
            try:
                logged = read_parquet_file(part, columns=["prompt_version"])
            except DamagedRunFile:
                continue
            versions.update(
                v
                for v in logged["prompt_version"].unique().to_pylist()
                if v and v.split("@", 1)[0] in names
            )
        return versions

    def write(self, name: str, table: pa.Table) -> Path:
        """Write table ``name`` (its schema must be the registered one).

        ``name`` may have a part suffix (``scores/faithfulness``): the part of a table written
        by one task, under the table's schema.
        """
        expected = TABLES[name.split("/", 1)[0]]
        if not table.schema.equals(expected, check_metadata=False):
            raise ValueError(
                f"table {name}: schema differs from schema version {schema_version(expected)}"
            )
        path = self.table_path(name)
        write_table(table.replace_schema_metadata(expected.metadata), path)
        return path

    def read(self, name: str) -> pa.Table:
        """Read table ``name``; a missing table or a newer schema version is a StageError."""
        path = self.table_path(name)
        if not path.is_file():
            raise StageError(
                f"run {self.run_id}: table '{name}' is missing ({path}); "
                "run the stage that writes it first"
            )
        table = _read_parquet(path)
        version = schema_version(table.schema)
        known = TABLES.get((table.schema.metadata or {}).get(b"table", b"").decode())
        newest = schema_version(known) if known is not None else SCHEMA_VERSION
        if version > newest:
            raise StageError(
                f"{path}: schema version {version} is newer than this ragaudit reads ({newest})"
            )
        return table

    def rows(self, name: str, ids: Collection[str] | None = None) -> list[dict[str, Any]]:
        """Table ``name`` as a list of row dicts (only questions ``ids`` when given)."""
        table = self.read(name)
        if ids is not None:
            # Filtered in Arrow before any row becomes a dict: a batch reads only its own rows.
            mask = pc.is_in(table["question_id"], value_set=pa.array(sorted(ids), pa.string()))
            table = table.filter(mask)
        return table.to_pylist()

    def question_ids(self) -> list[str]:
        """The question ids of the ``questions`` table, in its order."""
        return read_parquet_file(self.table_path("questions"), columns=["question_id"])[
            "question_id"
        ].to_pylist()

    def by_question(
        self, name: str, ids: Collection[str] | None = None
    ) -> dict[str, dict[str, Any]]:
        """Table ``name`` (one row per question) keyed by ``question_id``; {} when not written."""
        return {r["question_id"]: r for r in self.rows(name, ids)} if self.has(name) else {}

    def sweep_temp(self) -> int:
        """Delete temporary files a killed writer left behind; returns how many.

        Call only while nothing writes to the run (a flow's start): a live writer's temp file
        would go too.
        """
        swept = 0
        if self.path.is_dir():
            for tmp in self.path.rglob(".*.tmp"):
                tmp.unlink(missing_ok=True)
                swept += 1
        return swept

    def questions(self, ids: Collection[str] | None = None) -> list[Question]:
        """The question set as the collect stage stored it."""
        return [
            Question(
                question_id=r["question_id"],
                question=r["question"],
                language=r["language"],
                filters=json.loads(r["filters"] or "{}"),
                reference=r["reference"],
                reference_context_ids=r["reference_context_ids"],
                reference_contexts=r["reference_contexts"],
                response=r["response"],
                retrieved_contexts=r["retrieved_contexts"],
                metadata=json.loads(r["metadata"] or "{}"),
                # Absent from tables written before graded gold existed.
                reference_context_grades=json.loads(r.get("reference_context_grades") or "null"),
            )
            for r in self.rows("questions", ids)
        ]

    def candidates(
        self, limit: int | None = None, ids: Collection[str] | None = None
    ) -> dict[str, list[dict[str, Any]]]:
        """Each question's candidate rows in engine order (the first ``limit`` when given)."""
        out: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for row in self.rows("candidates", ids):
            out[row["question_id"]].append(row)
        for rows in out.values():
            rows.sort(key=lambda r: r["engine_rank"])
            if limit:
                del rows[limit:]
        return dict(out)

    def answers(self, ids: Collection[str] | None = None) -> dict[str, dict[str, Any]]:
        """The system's answer row per question."""
        return {r["question_id"]: r for r in self.rows("answers", ids)}

    def ground_truth(self, ids: Collection[str] | None = None) -> dict[str, dict[str, Any]]:
        """The reference-answer row per question ({} when the stage did not run)."""
        return self.by_question("ground_truth", ids)

    def ranking(self, ids: Collection[str] | None = None) -> dict[str, dict[str, Any]]:
        """The judged-order row per question ({} when the sort stage did not run)."""
        return self.by_question("ranking", ids)

    def read_manifest(self) -> dict[str, Any]:
        """The manifest, or an empty dict before the first write."""
        if not self.manifest_path.is_file():
            return {}
        try:
            manifest = json.loads(self.manifest_path.read_text(encoding="utf-8"))
        except (UnicodeDecodeError, ValueError) as exc:
            raise damaged(self.manifest_path, exc) from None
        if not isinstance(manifest, dict):
            raise damaged(self.manifest_path, ValueError("not a JSON object"))
        return manifest

    def write_manifest(self, manifest: dict[str, Any]) -> None:
        """Replace the manifest atomically."""
        write_json(manifest, self.manifest_path)


def question_set_hash(questions: pa.Table) -> str:
    """Hash of a question set as evaluated: ids, texts, filters and given references.

    The identity a previous like-for-like run, the nightly's baseline and a trend share.
    """
    cols = [
        c
        for c in ("question_id", "question", "filters", "reference")
        if c in questions.column_names
    ]
    rows = questions.select(cols).sort_by("question_id").to_pylist()
    return canonical_hash({"questions": [[r[c] for c in cols] for r in rows]})


# Settings that change how a run is carried out, not what it measures: two runs differing
# only here are still the same configuration.
OPERATIONAL = (
    "run_id",
    "runs_root",
    "cache_dir",
    "cache",
    "nightly",
    "scale",
    "ablate",
    "tune",
    "models.concurrency",
    "models.global_limit",
    "models.max_retries",
    "models.max_repairs",
    "models.backoff_s",
    "models.timeout_s",
    "collect.answers.concurrency",
    "collect.answers.retries",
    "collect.answers.backoff_s",
    "collect.answers.timeout_s",
    # Which run the sort stage builds its head order on: the order it reuses was judged under
    # this same configuration, so a run that reuses one is still like one that did not.
    "sort.previous",
)


def measured_config(config: RunConfig) -> dict[str, Any]:
    """The configuration as JSON, less the operational settings (:data:`OPERATIONAL`)."""
    data = config.model_dump(mode="json")
    for dotted in OPERATIONAL:
        *parents, last = dotted.split(".")
        node: Any = data
        for part in parents:
            node = node.get(part) if isinstance(node, dict) else None
        if isinstance(node, dict):
            node.pop(last, None)
    return data


def config_key(config: RunConfig) -> str:
    """Hash of what in the configuration changes a score (operational settings left out)."""
    return canonical_hash(measured_config(config))


def stored_config(run: RunFolder) -> RunConfig | None:
    """A stored run's config (None when it has none or it does not load in this version)."""
    try:
        stored = run.read_manifest().get("config")
    except DamagedRunFile:
        return None
    if not isinstance(stored, dict):
        return None
    with contextlib.suppress(ValidationError):
        return RunConfig.model_validate(stored)
    return None


STORE_DIR = "judgments"
"""The judgment store's folder under a runs root."""

AUDIT_PREFIX = "audit-"
"""Every folder named ``audit-<name>`` is an audit's (``ragaudit.audit``)."""

FolderKind = Literal["run", "tune", "battles", "audit", "judgments"]
"""The kinds of folder under a runs root."""

# What marks a folder as each kind (a name alone marks the store and the audits).
_MARKERS: tuple[tuple[FolderKind, str], ...] = (
    ("run", "manifest.json"),
    ("tune", "tune.json"),
    ("tune", "tune.parquet"),
    ("battles", "leaderboard.parquet"),
)

_KIND_NAMES = {
    "run": "a run folder",
    "tune": "a tune folder",
    "battles": "a battles folder",
    "audit": "an audit folder (the audit-<name> folders are the audit's)",
    "judgments": "the judgment store's folder",
}


@dataclass(frozen=True)
class RunEntry:
    """One run folder under a runs root, as the scanner found it."""

    run_id: str
    path: Path
    state: RunState
    manifest: dict[str, Any]
    """The manifest ({} when it cannot be read: the state is then ``damaged``)."""

    @property
    def started_at(self) -> str:
        """The manifest's start time ("" when it has none)."""
        return str(self.manifest.get("started_at") or "")

    @property
    def folder(self) -> RunFolder:
        """The run's :class:`RunFolder`."""
        return RunFolder(self.path.parent, self.run_id)


class RunsRoot:
    """Everything under one runs root: its runs, its other folders and the judgment store."""

    def __init__(self, root: Path | str) -> None:
        self.path = Path(root)

    @property
    def judgments_dir(self) -> Path:
        """The judgment store's folder."""
        return self.path / STORE_DIR

    def kind_of(self, name: str) -> FolderKind | None:
        """The kind of folder ``name`` is under the root, or its name reserves (None: neither)."""
        if name == STORE_DIR:
            return "judgments"
        if name.startswith(AUDIT_PREFIX):
            return "audit"
        folder = self.path / name
        for kind, marker in _MARKERS:
            if (folder / marker).exists():
                return kind
        return None

    def claim(self, name: str, kind: FolderKind, option: str = "--run-id") -> Path:
        """The folder ``name`` for a ``kind``, refused when it is another kind's; nothing written.

        Raises:
            ConfigError: ``name`` is not a folder name, or names (or its folder is) another
                kind's folder.
        """
        check_run_id(name)
        found = self.kind_of(name)
        if found is not None and found != kind:
            raise ConfigError(
                f"{option}: '{clip(name)}' is {_KIND_NAMES[found]}; give a folder of its own "
                f"(under {self.path}), nothing was written"
            )
        return self.path / name

    def run_dirs(self) -> list[Path]:
        """Every run folder (one with a manifest), in name order: the one scan of the root."""
        if not self.path.is_dir():
            return []
        return sorted(p.parent for p in self.path.glob("*/manifest.json"))

    def runs(self) -> list[RunEntry]:
        """Every run folder with its state and manifest, oldest first (by start, then id)."""
        out = []
        for path in self.run_dirs():
            run = RunFolder(self.path, path.name)
            try:
                manifest = run.read_manifest()
            except DamagedRunFile:
                manifest = {}
            out.append(RunEntry(path.name, path, run_state(path), manifest))
        return sorted(out, key=lambda r: (r.started_at, r.run_id))

    def finished(self, statuses: Collection[str] = COMPLETE_STATUSES) -> list[RunEntry]:
        """The runs :func:`run_state` calls complete (with one of ``statuses``), oldest first."""
        return [r for r in self.runs() if r.state.complete and r.state.status in statuses]

    def previous(
        self,
        run: RunFolder,
        like: Callable[[RunEntry], bool],
        statuses: Collection[str] = COMPLETE_STATUSES,
    ) -> RunEntry | None:
        """The newest finished run started before ``run`` on its question set that is ``like`` it.

        ``like`` is asked newest first and only of runs of the same question set (reading a
        stored config is its cost).
        """
        if not run.has("questions"):
            return None
        mine = question_set_hash(read_parquet_file(run.table_path("questions")))
        started = str(run.read_manifest().get("started_at") or "\uffff")
        for entry in reversed(self.finished(statuses)):
            if entry.run_id == run.run_id or entry.started_at >= started:
                continue
            if not entry.folder.has("questions"):
                continue
            try:
                theirs = question_set_hash(read_parquet_file(entry.folder.table_path("questions")))
            except DamagedRunFile:
                continue
            if theirs == mine and like(entry):
                return entry
        return None

    def previous_like(
        self, run: RunFolder, statuses: Collection[str] = COMPLETE_STATUSES
    ) -> RunEntry | None:
        """The newest earlier finished run of ``run``'s question set and configuration.

        The configuration compared is what changes a score (:func:`config_key`); a run whose
        config does not load in this version is like none.
        """
        config = stored_config(run)
        if config is None:
            return None
        key = config_key(config)

        def like(entry: RunEntry) -> bool:
            then = stored_config(entry.folder)
            return then is not None and config_key(then) == key

        return self.previous(run, like, statuses)


__all__ = [
    "AUDIT_PREFIX",
    "COMPLETE_STATUSES",
    "OPERATIONAL",
    "STORE_DIR",
    "DamagedRunFile",
    "FolderKind",
    "RunEntry",
    "RunsRoot",
    "config_key",
    "measured_config",
    "question_set_hash",
    "stored_config",
    "RunState",
    "run_state",
    "RunFolder",
    "damaged",
    "read_parquet_file",
    "redact_table",
    "write_bytes",
    "write_json",
    "write_table",
]
