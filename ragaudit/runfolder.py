"""The run folder ``<runs_root>/<run_id>/``: one Parquet table per stage plus ``manifest.json``.

Every write goes to a temporary file in the same folder and is renamed into place, so a
crash never leaves a half-written table or manifest behind.

:class:`RunsRoot` is the one keeper of what lies under a runs root: the one scanner of its run
folders, the one rule of a finished run (:func:`run_state`), a previous like-for-like run, the
judgment store's place, and which kind of folder (run, tune, battles, audit, the store) a name
belongs to, so that one kind never writes into another's folder.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import functools
import json
import threading
from collections import defaultdict
from collections.abc import Callable, Collection
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from cachetools import LRUCache
from pydantic import ValidationError

from ragaudit._section import measured
from ragaudit.atomic import redact_table, write_bytes, write_json, write_table
from ragaudit.config import DEFAULT_RUNS_ROOT, RunConfig
from ragaudit.dataset import Question
from ragaudit.errors import ConfigError, StageError, clip
from ragaudit.hashing import canonical_hash
from ragaudit.registry import FOLDER_KINDS
from ragaudit.runlock import COMPLETE_STATUSES, RunLock, check_run_id, is_held
from ragaudit.schemas import SCHEMA_VERSION, TABLES, schema_version
from ragaudit.secrets import redact

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


def run_state(run_dir: Path | str, kind: FolderKind | None = None) -> RunState:
    """The one rule of whether a folder of any kind holds a finished run, used by every command.

    Complete: the manifest says ``completed`` or ``completed_with_failures`` and every table
    of the folder can be read. A manifest still ``running`` is a live run while a process
    holds the folder's lock (:func:`ragaudit.runlock.is_held`), else an interrupted one: a run
    killed with ``kill -9`` never gets to write its end. A folder of a kind that wrote no
    manifest before its kind had one (``kind.legacy``) is complete when its marker is there.
    """
    path = Path(run_dir)
    run_id = path.name
    folder = RunFolder(path.parent, run_id)
    try:
        manifest = folder.read_manifest()
    except DamagedRunFile as exc:
        return RunState(run_id, "damaged", False, str(exc))
    if not manifest and kind is not None and any((path / m).exists() for m in kind.legacy):
        return RunState(run_id, "completed", True)
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
        "no_data": clip(str(manifest.get("error") or "there was nothing to read"), 200),
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
                # Absent from tables written before conversations; null for a lone question.
                **_conversation(r.get("conversation")),
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


class FolderRun:
    """A folder of any kind held by one writer from its start to its end: the one lifecycle.

    Entering claims the folder for its kind (another kind's folder is refused, nothing
    written), takes its lock (a second process is refused at once, naming the holder, before
    it pays for anything: :class:`ragaudit.runlock.RunLocked`) and writes the manifest as
    ``running`` with the kind, the config and its identity. :meth:`finish` writes the end; an
    exception leaving the block writes ``interrupted`` (Ctrl-C, SIGTERM, a cancelled task) or
    ``failed`` with the error, redacted. A process killed outright writes nothing: its folder
    stays ``running`` with no lock held, which :func:`run_state` reads as ``interrupted``, and
    running the same command again resumes it.
    """

    def __init__(
        self,
        path: Path | str,
        kind: str,
        config: RunConfig | None = None,
        *,
        manifest: dict[str, Any] | None = None,
        identity_extra: dict[str, Any] | None = None,
        option: str = "--run-id",
    ) -> None:
        self.path = Path(path)
        self.kind = folder_kind(kind)
        self.config = config
        self.option = option
        self.manifest: dict[str, Any] = dict(manifest or {})
        self.identity_extra = dict(identity_extra or {})
        self._lock = RunLock(self.path)
        self._finished = False

    def _claim(self) -> None:
        parts = self.path.parts
        depth = self.kind.depth
        root = RunsRoot(Path(*parts[:-depth]) if len(parts) > depth else Path("."))
        if depth == 1:
            root.claim(self.path.name, self.kind.name, self.option)
            return
        for part in parts[-depth:]:
            check_run_id(part)
        top = parts[-depth]
        if not self.kind.reserves(top):
            raise ConfigError(
                f"{self.option}: '{clip(top)}' is not {self.kind.title}'s folder; nothing was "
                "written"
            )

    def __enter__(self) -> FolderRun:
        self._claim()
        self.path.mkdir(parents=True, exist_ok=True)
        self._lock.acquire()
        try:
            folder = RunFolder(self.path.parent, self.path.name)
            folder.sweep_temp()
            self.manifest = {
                **self.manifest,
                "kind": self.kind.name,
                "status": "running",
                "started_at": dt.datetime.now(dt.UTC).isoformat(),
            }
            if self.config is not None:
                self.manifest["config"] = json.loads(self.config.model_dump_json())
                self.manifest["identity"] = identity_of(
                    self.config, self.kind.name, self.identity_extra
                )
            if self.identity_extra:
                self.manifest["instrument_extra"] = self.identity_extra
            self.write()
        except BaseException:
            self._lock.release()
            raise
        return self

    def write(self) -> None:
        """Write the manifest as it stands now (atomically)."""
        write_json(self.manifest, self.path / MANIFEST)

    def finish(self, status: str = "completed", **fields: Any) -> None:
        """Write the end: ``status`` (``completed``, ``completed_with_failures``, ``no_data`` …)."""
        self.manifest.update(fields)
        self.manifest["status"] = status
        self.manifest["finished_at"] = dt.datetime.now(dt.UTC).isoformat()
        self.write()
        self._finished = True

    def __exit__(self, kind: Any, exc: BaseException | None, tb: Any) -> None:
        try:
            if exc is not None and not self._finished:
                stopped = isinstance(exc, KeyboardInterrupt | asyncio.CancelledError) or (
                    isinstance(exc, SystemExit) and exc.code not in (0, None)
                )
                if stopped:
                    self.manifest["status"] = "interrupted"
                else:
                    self.manifest["status"] = "failed"
                    self.manifest["error"] = clip(redact(f"{type(exc).__name__}: {exc}"), 2000)
                self.manifest["finished_at"] = dt.datetime.now(dt.UTC).isoformat()
                with contextlib.suppress(OSError):
                    self.write()
        finally:
            self._lock.release()


def _conversation(text: str | None) -> dict[str, Any]:
    """A ``questions`` row's conversation fields (``history_cut`` is the stage's, not the set's)."""
    if not text:
        return {}
    stored = json.loads(text)
    return {k: v for k, v in stored.items() if k != "history_cut"}


def question_set_hash(questions: pa.Table) -> str:
    """Hash of a question set as evaluated: ids, texts, filters and given references.

    The identity a previous like-for-like run, the nightly's baseline and a trend share. A
    conversation's turns are in it (their histories); a set of lone questions hashes as it did
    before conversations were read.
    """
    cols = [
        c
        for c in ("question_id", "question", "filters", "reference")
        if c in questions.column_names
    ]
    if "conversation" in questions.column_names and questions["conversation"].null_count < len(
        questions
    ):
        cols.append("conversation")
    rows = questions.select(cols).sort_by("question_id").to_pylist()
    for r in rows:
        if "conversation" in r:
            # The set's turns, not the judge's cut of them (its window's).
            r["conversation"] = _conversation(r["conversation"]) or None
    return canonical_hash({"questions": [[r[c] for c in cols] for r in rows]})


def measured_config(config: RunConfig, kind: str = "run") -> dict[str, Any]:
    """What ``kind``'s folders measure of ``config``: its sections, less operational fields.

    A kind names the sections (or dotted fields) it measures (:attr:`FolderKind.measures`);
    inside them, a field declared ``operational`` (timeouts, retries, concurrency, where
    outputs go: ``ragaudit._section.operational``) is left out. Two configs of equal measured
    parts measure the same thing: a nightly keeps its baseline, an audit its series.
    """
    data = measured(config)
    out: dict[str, Any] = {}
    for dotted in FOLDER_KINDS.get(kind).measures:
        *parents, last = dotted.split(".")
        node: Any = data
        for part in parents:
            node = node.get(part) if isinstance(node, dict) else None
        if isinstance(node, dict) and last in node:
            out[dotted] = node[last]
    return out


def config_key(config: RunConfig, kind: str = "run") -> str:
    """Hash of what ``kind``'s folders measure of ``config`` (:func:`measured_config`)."""
    return canonical_hash(measured_config(config, kind))


def stored_config(run: RunFolder | Path) -> RunConfig | None:
    """A stored folder's config (None when it has none or it does not load in this version)."""
    folder = run if isinstance(run, RunFolder) else RunFolder(run.parent, run.name)
    try:
        stored = folder.read_manifest().get("config")
    except DamagedRunFile:
        return None
    if not isinstance(stored, dict):
        return None
    with contextlib.suppress(ValidationError):
        return RunConfig.model_validate(stored)
    return None


def stored_setting(run: RunFolder | Path, dotted: str = "", default: Any = None) -> Any:
    """A field of a folder's stored config as it was written (``sort.relevant_grade``).

    Read as a value, not validated: a config of another ragaudit version still gives what it
    holds, where :func:`stored_config` would give nothing. ``""`` gives the whole mapping;
    ``default`` stands for a field (or a section) it does not hold, or a damaged manifest.
    """
    folder = run if isinstance(run, RunFolder) else RunFolder(run.parent, run.name)
    try:
        node: Any = folder.read_manifest().get("config")
    except DamagedRunFile:
        return default
    for part in dotted.split(".") if dotted else ():
        node = node.get(part) if isinstance(node, dict) else None
    if node is None or (not dotted and not isinstance(node, dict)):
        return default
    return node


STORE_DIR = "judgments"
"""The judgment store's folder under a runs root."""

MANIFEST = "manifest.json"
"""Every kind's folder says what it is in this file: ``kind``, ``status``, ``config``."""


@dataclass(frozen=True)
class FolderKind:
    """One kind of folder under a runs root: a run, a tune, an audit day, the judgment store.

    Every kind but the store is a run in every respect: a folder claimed for it alone, a
    ``manifest.json`` with its ``kind`` and ``status``, one writer at a time (its ``.lock``),
    the one finished rule (:func:`run_state`), an identity (what it measures) and so a
    previous like-for-like (:meth:`RunsRoot.previous`). A kind is a registered unit
    (``ragaudit.registry.FOLDER_KINDS``), so a package adding a kind of folder registers one
    here rather than writing its own scanner, lock and finished rule.
    """

    name: str
    """The manifest's ``kind`` (a run's manifest, older than kinds, may have none)."""
    title: str
    """What the folder is, in words (``an audit day``): messages name it."""
    layout: str
    """Where its folders lie under the runs root, ``<placeholders>`` for names:
    ``<run_id>``, ``audit-<name>/<day>``. The literal prefix of the first part reserves names
    (every ``audit-…`` folder is the audits')."""
    measures: tuple[str, ...] = ()
    """The config's sections or dotted fields whose values are the kind's identity; their
    operational fields are left out (:func:`measured_config`)."""
    legacy: tuple[str, ...] = ()
    """Files marking a folder of this kind written before it had a manifest naming its kind."""
    page: str | None = None
    """The file of the folder a person opens (``report.html``), if the kind writes one."""
    run: bool = True
    """False for a folder that is no run (the judgment store): no manifest, lock or state."""

    @property
    def depth(self) -> int:
        """How many folders deep under the root its folders lie."""
        return self.layout.count("/") + 1

    @property
    def prefix(self) -> str:
        """The literal start of the layout's first part (``audit-``; "" for ``<run_id>``)."""
        first = self.layout.split("/", 1)[0]
        return first.split("<", 1)[0]

    def reserves(self, name: str) -> bool:
        """Whether a top-level folder ``name`` belongs to this kind by its name alone."""
        first = self.layout.split("/", 1)[0]
        if "<" not in first:
            return name == first
        return bool(self.prefix) and name.startswith(self.prefix)


RUN = FolderKind(
    "run",
    "a run folder",
    "<run_id>",
    measures=(
        "plugins",
        "questions",
        "limit",
        "models",
        "collect",
        "sort",
        "ground_truth",
        "score",
        "report",
        "gold",
        "conversation",
    ),
    page="report.html",
)
TUNE = FolderKind(
    "tune",
    "a tune folder",
    "<tune.name>",
    measures=(
        "plugins",
        "questions",
        "limit",
        "models",
        "collect",
        "sort.relevant_grade",
        "conversation",
        "tune",
    ),
    legacy=("tune.json", "tune.parquet"),
    page="report.html",
)
ABLATION = FolderKind(
    "ablation",
    "an ablation folder",
    "<ablate.name>",
    measures=(
        "plugins",
        "questions",
        "limit",
        "models",
        "collect",
        "sort",
        "ground_truth",
        "score",
        "conversation",
        "ablate",
    ),
    legacy=("ablation.json",),
    page="report.html",
)
BATTLES = FolderKind(
    "battles",
    "a battles folder",
    "battles-<id>",
    measures=("models.judge", "models.temperature", "models.judge_context_window"),
    legacy=("leaderboard.parquet",),
)
CALIBRATION = FolderKind(
    "calibration",
    "a calibration folder",
    "calibrate-<id>",
    measures=("plugins", "models", "score", "sort.relevant_grade"),
    legacy=("calibration.json",),
    page="calibration.html",
)
AUDIT_DAY = FolderKind(
    "audit",
    "an audit folder (the audit-<name> folders are the audit's)",
    "audit-<name>/<day>",
    measures=(
        "plugins",
        "models.judge",
        "models.embedder",
        "models.judge_context_window",
        "models.temperature",
        "models.max_output_tokens",
        "models.judge_repeats",
        "models.jury",
        "models.graders",
        "sort.relevant_grade",
        "score",
        "conversation",
        "audit",
    ),
    page="report.html",
)
JUDGMENTS = FolderKind("judgments", "the judgment store's folder", STORE_DIR, run=False)

for _kind in (RUN, TUNE, ABLATION, BATTLES, CALIBRATION, AUDIT_DAY, JUDGMENTS):
    FOLDER_KINDS.add(_kind.name, _kind, module=__name__)

AUDIT_PREFIX = AUDIT_DAY.prefix
"""Every folder named ``audit-<name>`` is an audit's (``ragaudit.audit``)."""


def folder_kinds() -> list[FolderKind]:
    """Every registered kind, the built-ins first."""
    return [FOLDER_KINDS.get(name) for name in FOLDER_KINDS.names()]


def folder_kind(name: str) -> FolderKind:
    """The registered kind ``name`` (KeyError naming the known ones)."""
    return FOLDER_KINDS.get(name)


@dataclass(frozen=True)
class RunEntry:
    """One folder of a kind under a runs root, as the scanner found it."""

    run_id: str
    """Its name relative to the runs root (``audit-shop/2026-11-20`` for an audit day)."""
    path: Path
    state: RunState
    manifest: dict[str, Any]
    """The manifest ({} when it cannot be read: the state is then ``damaged``)."""
    kind: str = RUN.name

    @property
    def name(self) -> str:
        """The folder's own name (the day, for an audit day)."""
        return self.path.name

    @property
    def group(self) -> str:
        """The folder holding it, relative to the root ("" for a top-level folder)."""
        parent = str(Path(self.run_id).parent)
        return "" if parent == "." else parent

    @property
    def started_at(self) -> str:
        """The manifest's start time ("" when it has none)."""
        return str(self.manifest.get("started_at") or "")

    @property
    def order(self) -> str:
        """What orders a kind's folders in time: a day's name, else its start."""
        return self.name if self.group else self.started_at

    @property
    def folder(self) -> RunFolder:
        """The run's :class:`RunFolder`."""
        return RunFolder(self.path.parent, self.path.name)

    @property
    def spec(self) -> FolderKind:
        """Its :class:`FolderKind`."""
        return folder_kind(self.kind)

    @functools.cached_property
    def identity(self) -> str | None:
        """What it measures, hashed from its stored config (None: no config loads).

        Computed from the stored config by today's rule rather than read from a stored hash, so
        a folder written by an older version joins its like-for-like whenever what it measured
        is unchanged. A kind that records what the config cannot say (the prompt versions an
        audit day graded with, ``manifest["instrument_extra"]``) has it hashed in as well.
        """
        config = stored_config(self.path)
        if config is None:
            return None
        extra = self.manifest.get("instrument_extra")
        return canonical_hash(
            {"measured": measured_config(config, self.kind), "extra": extra or {}}
        )


def identity_of(config: RunConfig, kind: str, extra: dict[str, Any] | None = None) -> str:
    """The identity a folder of ``kind`` written now under ``config`` gets.

    The same hash :attr:`RunEntry.identity` reads back from the folder's stored config.
    """
    return canonical_hash({"measured": measured_config(config, kind), "extra": extra or {}})


class RunsRoot:
    """Everything under one runs root: its runs, its other folders and the judgment store.

    The one scanner of the root (:meth:`entries`) for every kind of folder, the one claim of a
    folder for a kind (:meth:`claim`), and the previous like-for-like folder of any kind
    (:meth:`previous`).
    """

    def __init__(self, root: Path | str) -> None:
        self.path = Path(root)

    @property
    def judgments_dir(self) -> Path:
        """The judgment store's folder."""
        return self.path / JUDGMENTS.layout

    def kind_of(self, name: str) -> str | None:
        """The kind of the top-level folder ``name``, or the kind its name reserves (None: neither).

        A name a kind reserves (the store's, ``audit-…``) is that kind's whatever it holds;
        else its manifest's ``kind`` (a manifest without one is a run's, written before kinds),
        else a file that marked the kind before it wrote a manifest.
        """
        kinds = folder_kinds()
        for kind in kinds:
            if kind.reserves(name):
                return kind.name
        folder = self.path / name
        manifest_path = folder / MANIFEST
        if manifest_path.is_file():
            try:
                manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
            except (OSError, UnicodeDecodeError, ValueError):
                return RUN.name
            named = manifest.get("kind") if isinstance(manifest, dict) else None
            return named if isinstance(named, str) and named in FOLDER_KINDS.units else RUN.name
        for kind in kinds:
            if any((folder / marker).exists() for marker in kind.legacy):
                return kind.name
        return None

    def claim(self, name: str, kind: str, option: str = "--run-id") -> Path:
        """The top-level folder ``name`` for a ``kind``, refused when it is another kind's.

        Nothing is written.

        Raises:
            ConfigError: ``name`` is not a folder name, or names (or its folder is) another
                kind's folder.
        """
        check_run_id(name)
        found = self.kind_of(name)
        if found is not None and found != kind:
            raise ConfigError(
                f"{option}: '{clip(name)}' is {folder_kind(found).title}; give a folder of its "
                f"own (under {self.path}), nothing was written"
            )
        return self.path / name

    def _candidates(self, kind: FolderKind, group: str | None) -> list[Path]:
        """Folders at the kind's depth holding a manifest or a legacy marker, in name order.

        Below the top level only under a folder the kind reserves (an audit's days under its
        ``audit-<name>`` folder): a run's own subfolders are never taken for another kind's.
        ``group`` scans one such folder only.
        """
        base = self.path / group if group else self.path
        if not base.is_dir():
            return []
        pattern = "/".join(["*"] * (kind.depth - (1 if group else 0)))
        found = {p.parent for p in base.glob(f"{pattern}/{MANIFEST}")}
        for marker in kind.legacy:
            found.update(p.parent for p in base.glob(f"{pattern}/{marker}"))
        if kind.depth > 1:
            found = {p for p in found if kind.reserves(p.relative_to(self.path).parts[0])}
        return sorted(found)

    def entries(self, kind: str = RUN.name, group: str | None = None) -> list[RunEntry]:
        """Every folder of ``kind`` (in ``group``: one audit's days) with its state, oldest first.

        The one scan of a runs root: the runs of ``ragaudit runs``, the days of an audit's
        series, the folders the viewer lists all come from here.
        """
        spec = folder_kind(kind)
        if not spec.run or (group is not None and spec.depth == 1):
            return []
        out = []
        for path in self._candidates(spec, group):
            name = str(path.relative_to(self.path))
            if spec.depth == 1 and self.kind_of(name) != kind:
                continue
            folder = RunFolder(path.parent, path.name)
            try:
                manifest = folder.read_manifest()
            except DamagedRunFile:
                manifest = {}
            if spec.depth > 1 and manifest and manifest.get("kind", RUN.name) != kind:
                continue
            out.append(RunEntry(name, path, run_state(path, spec), manifest, kind))
        return sorted(out, key=lambda r: (r.group, r.order, r.run_id))

    def entry(self, path: Path | str, kind: str | None = None) -> RunEntry:
        """The entry of one folder: its kind (``kind``, else its manifest's, else its marker's)."""
        path = Path(path)
        folder = RunFolder(path.parent, path.name)
        try:
            manifest = folder.read_manifest()
        except DamagedRunFile:
            manifest = {}
        found = kind or manifest.get("kind")
        if not isinstance(found, str) or found not in FOLDER_KINDS.units:
            found = RunsRoot(path.parent).kind_of(path.name) or RUN.name
        try:
            name = str(path.relative_to(self.path))
        except ValueError:
            name = path.name
        return RunEntry(name, path, run_state(path, folder_kind(found)), manifest, found)

    def run_dirs(self) -> list[Path]:
        """Every run folder (kind ``run``), in name order."""
        return sorted(e.path for e in self.entries(RUN.name))

    def runs(self) -> list[RunEntry]:
        """Every run folder with its state and manifest, oldest first (by start, then id)."""
        return self.entries(RUN.name)

    def finished(
        self,
        statuses: Collection[str] = COMPLETE_STATUSES,
        kind: str = RUN.name,
        group: str | None = None,
    ) -> list[RunEntry]:
        """The folders :func:`run_state` calls complete (with one of ``statuses``), oldest first."""
        return [
            r for r in self.entries(kind, group) if r.state.complete and r.state.status in statuses
        ]

    def previous(
        self,
        run: RunFolder | RunEntry,
        like: Callable[[RunEntry], bool] | None = None,
        statuses: Collection[str] = COMPLETE_STATUSES,
        kind: str | None = None,
    ) -> RunEntry | None:
        """The newest finished folder of ``run``'s kind and group ordered before it, ``like`` it.

        The order is a kind's own (a day's name for an audit day, the start for the rest), the
        group the folder holding it (an audit's days). ``like`` defaults to the same identity
        (:meth:`RunEntry.identity`); it is asked newest first, and only of folders that qualify
        otherwise (reading a stored config is its cost).
        """
        me = run if isinstance(run, RunEntry) else self.entry(run.path, kind)
        if like is None:
            mine = me.identity
            if mine is None:
                return None

            def like(entry: RunEntry) -> bool:
                return entry.identity == mine

        order = me.order or "\uffff"
        for entry in reversed(self.finished(statuses, me.kind, me.group or None)):
            if entry.path == me.path or entry.group != me.group or entry.order >= order:
                continue
            if like(entry):
                return entry
        return None

    def previous_like(
        self, run: RunFolder, statuses: Collection[str] = COMPLETE_STATUSES
    ) -> RunEntry | None:
        """The newest earlier finished run of ``run``'s question set and configuration.

        The configuration compared is what a run measures (:func:`config_key`); a run whose
        config does not load in this version is like none.
        """
        config = stored_config(run)
        if config is None or not run.has("questions"):
            return None
        key = config_key(config)
        mine = question_set_hash(read_parquet_file(run.table_path("questions")))

        def like(entry: RunEntry) -> bool:
            if not entry.folder.has("questions"):
                return False
            then = stored_config(entry.folder)
            if then is None or config_key(then) != key:
                return False
            try:
                theirs = question_set_hash(read_parquet_file(entry.folder.table_path("questions")))
            except DamagedRunFile:
                return False
            return theirs == mine

        return self.previous(run, like, statuses, kind=RUN.name)


__all__ = [
    "ABLATION",
    "AUDIT_DAY",
    "AUDIT_PREFIX",
    "BATTLES",
    "CALIBRATION",
    "COMPLETE_STATUSES",
    "DEFAULT_RUNS_ROOT",
    "JUDGMENTS",
    "MANIFEST",
    "RUN",
    "STORE_DIR",
    "TUNE",
    "DamagedRunFile",
    "FolderKind",
    "FolderRun",
    "folder_kind",
    "folder_kinds",
    "identity_of",
    "RunEntry",
    "RunsRoot",
    "config_key",
    "measured_config",
    "question_set_hash",
    "stored_config",
    "stored_setting",
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
