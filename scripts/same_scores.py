"""Same memo, same figures: whether a change to the code changed a run's, a tune's or an audit's.

Each subcommand drives one checkout's ``python -m ragaudit`` in a subprocess, that checkout
(``--repo``, default this script's) alone on ``PYTHONPATH`` and no ``RAGAUDIT_*`` variable set:
the script never imports the code it measures, so today's script measures an old checkout too.
Every side runs the fake judge and embedder into one folder ``R`` whose memo (``R/cache``) they
share, so a later side pays no provider call when the change kept every request the same:

- ``run``: the demo questions through ``ragaudit run`` with every metric below, run from
  ``R/run/<id>/`` holding a copy of the checkout's ``data/demo`` and a config whose paths (but
  the memo's) are relative to it, into its ``runs/<id>/``;
- ``tune``: ``ragaudit tune --demo`` (the checkout's ``data/demo/tune.yaml`` as bundled), run from
  ``R/tune/<id>/`` holding a copy of the checkout's ``data/demo``: the config's relative runs
  root and index land there;
- ``audit``: ``ragaudit audit --from --to`` with the checkout's ``data/audit/audit.yaml`` as
  bundled over three consecutive days, run from ``R/audit/<id>/``, whose ``data/audit/logs``
  links to ``R/logs``. The first side writes those days from the checkout's one bundled day
  (:func:`log_days`: tail queries added to each day, so that a day is a sample and not a
  census; the third with the ``account`` collection served off-topic documents, a regression
  for ``changes.parquet`` to show), a later side checks its bundled day gives the same files;
- ``compare R A B ...``: every table of each kind of ``B ...`` against ``A``'s, row by row, and
  the provider calls of each later side (0 expected).

Each side has its own folder ``R/<kind>/<id>/``, emptied when the side starts again, and in it
its own runs root: a shared judgment store would hand the later side its grades without grading
them (a run's sort stage grades through it too), and Prefect's task cache beside a shared runs
root could hand it an earlier stage's result. A tune's and an audit's folders are found by the
files they hold (the folder holding ``tune.parquet``; each folder holding ``estimates.parquet``,
named by its day; ``series.parquet``; the ``judgments`` folder), so a change of folder layout is
compared too. Compared:

- run: ``scores``, ``verdicts``, ``ranking``, ``ground_truth``, ``nuggets``, ``summary`` (the
  report stage's means and intervals); ``judgments`` (the store's parts);
- tune: ``tune.parquet``, ``judgments``, ``tune.json``, ``best.yaml`` and every ``.txt`` (the
  pool's qrels, each variant's run);
- audit: each day's ``requests``, ``sample``, ``verdicts``, ``scores``, ``estimates``,
  ``changes``; ``series.parquet``; ``judgments``.

Left out as what differs from one invocation to the next, not a result: ``run_id`` (run
tables); ``latency_p50_s`` and ``latency_p95_s`` (``tune.parquet``: time taken by searches);
``created_at`` (``judgments``; a run's ``source`` too, ``run:<id>``); ``source`` (audit
``verdicts``: store, memo or paid, where this invocation found the grade); ``llm``
(``tune.json``: this invocation's calls, printed apart).
Manifests and HTML reports (times, folders) are not compared. A column only one side's schema
has is named and left out. Rows are compared as a multiset (their order is no figure); a
differing row is shown beside its counterpart when the table's key finds one.

The baseline against ``main`` at 1f3e7a5, then the branch (the exit code is 1 when anything
differs)::

    git worktree add /tmp/before-1f3e7a5 1f3e7a5
    python scripts/same_scores.py run --root /work/same --run-id before --repo /tmp/before-1f3e7a5
    python scripts/same_scores.py tune --root /work/same --run-id before --repo /tmp/before-1f3e7a5
    python scripts/same_scores.py audit --root /work/same --run-id before --repo /tmp/before-1f3e7a5
    python scripts/same_scores.py run --root /work/same --run-id after
    python scripts/same_scores.py tune --root /work/same --run-id after
    python scripts/same_scores.py audit --root /work/same --run-id after
    python scripts/same_scores.py compare --root /work/same before after

``run --new-syntax`` writes the metric options as ``{metric: {option: value}}`` entries rather
than the flat ``score.<metric>_<option>`` keys that configs written before the options moved to
their metrics use (which old code reads too).
"""

from __future__ import annotations

import argparse
import datetime as dt
import difflib
import json
import os
import shutil
import subprocess
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import polars as pl

REPO = Path(__file__).resolve().parents[1]
METRICS = [
    "faithfulness",
    "answer_relevancy",
    "context_precision",
    "context_precision_without_reference",
    "context_recall",
    "nonllm_context_precision",
    "nonllm_context_recall",
    "context_relevance",
    "context_entity_recall",
    "noise_sensitivity",
    "factual_correctness",
    "semantic_similarity",
    "answer_correctness",
    "aspect_coherence",
    "summarization_score",
    "rouge_l",
    "bleu",
    "nugget_recall_strict_vital",
    "nugget_recall_vital",
    "nugget_recall_all",
    "nugget_recall_strict_all",
]
LEGACY = {
    "answer_relevancy_strictness": 2,
    "aspect_strictness": 3,
    "answer_correctness_weights": [0.5, 0.5],
    "factual_correctness_atomicity": "high",
    "factual_correctness_beta": 2.0,
    "summarization_coeff": 0.3,
}
NEW = {
    "answer_relevancy": {"strictness": 2},
    "aspect_coherence": {"strictness": 3},
    "answer_correctness": {"weights": [0.5, 0.5]},
    "factual_correctness": {"atomicity": "high", "beta": 2.0},
    "summarization_score": {"coeff": 0.3},
}
FAKE = ["--judge", "fake/judge", "--embedder", "fake/embed"]
Spec = tuple[list[str], list[str]]
"""A table's columns that pair a differing row with its counterpart, and those left out."""
RUN_TABLES: dict[str, Spec] = {
    "scores": (["metric", "question_id"], ["run_id"]),
    "verdicts": (["question_id", "context_id"], ["run_id"]),
    "ranking": (["question_id"], ["run_id"]),
    "ground_truth": (["question_id"], ["run_id"]),
    "nuggets": (["question_id", "nugget_index"], ["run_id"]),
    "summary": (["kind", "metric", "breakdown", "cell"], ["run_id"]),
}
JUDGMENTS: Spec = (["source", "question_id", "context_id"], ["created_at"])
RUN_JUDGMENTS: Spec = (["question_id", "context_id"], ["created_at", "source"])
TUNE_TABLE: Spec = (["variant", "metric"], ["latency_p50_s", "latency_p95_s"])
TUNE_JSON_LEFT_OUT = ["llm"]
DAY_TABLES: dict[str, Spec] = {
    "requests": (["request_id"], []),
    "sample": (["unit"], []),
    "verdicts": (["request_id", "rank"], ["source"]),
    "scores": (["request_id", "metric"], []),
    "estimates": (["segment", "metric"], []),
    "changes": (["segment", "metric", "against"], []),
}
SERIES: Spec = (["series", "day", "segment", "metric"], [])
"""Compared after :func:`by_series`: the days each series holds, not the id's spelling."""
SHOWN = 5
"""Differing rows shown per table."""
BROKEN_SEGMENT = "account"
TAIL = (
    "on my phone",
    "as a business customer",
    "from abroad",
    "after the last update",
    "for a gift",
    "for my partner",
    "with a guest account",
    "before Friday",
    "in the app",
    "for the second time",
    "without a receipt",
)
"""Contexts that make a bundled query one asked once (a tail unit)."""


def ragaudit(repo: Path, args: list[str], cwd: Path) -> None:
    """``python -m ragaudit ARGS`` with ``repo``'s code, from ``cwd``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAGAUDIT_")}
    # The checkout alone: the editable install points at another one, and a PYTHONPATH the
    # caller set could put a third first.
    env["PYTHONPATH"] = str(repo)
    where = subprocess.run(
        [sys.executable, "-c", "import ragaudit; print(ragaudit.__file__)"],
        cwd=cwd,  # first on sys.path, as for ``-m``
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    if not Path(where).resolve().is_relative_to(repo.resolve()):
        sys.exit(f"ragaudit imports from {where}, not from {repo}")
    done = subprocess.run([sys.executable, "-m", "ragaudit", *args], cwd=cwd, env=env)
    if done.returncode:
        sys.exit(f"ragaudit {args[0]} (from {cwd}) ended with exit code {done.returncode}")


def run_config(root: Path, new_syntax: bool) -> dict[str, Any]:
    """The run's config: the demo data, the fake judge and embedder, the memo under ``root``.

    Paths but the memo's are relative to the side's folder, so every side's config is the same.
    """
    score: dict[str, Any] = {"top_k": 3}
    if new_syntax:
        score["metrics"] = [{m: NEW[m]} if m in NEW else m for m in METRICS]
    else:
        score.update(metrics=METRICS, **LEGACY)
    return {
        "questions": "data/demo/questions.jsonl",
        "runs_root": "runs",
        "cache_dir": str(root / "cache"),
        "collect": {
            "backend": "local",
            "index_path": "index",
            "corpus": "data/demo/corpus.jsonl",
            "top_n": 6,
        },
        "models": {"judge": "fake/judge", "embedder": "fake/embed", "backoff_s": 0.0},
        "score": score,
    }


def fresh(folder: Path) -> Path:
    """``folder``, emptied: a side starts from nothing but the shared memo."""
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    return folder


def with_demo(folder: Path, repo: Path) -> Path:
    """``folder`` (emptied) with a copy of ``repo``'s ``data/demo``.

    A copy: nothing a side writes can land in the measured checkout.
    """
    shutil.copytree(repo / "data" / "demo", fresh(folder) / "data" / "demo")
    return folder


def run(root: Path, run_id: str, repo: Path, new_syntax: bool) -> None:
    """One ``ragaudit run`` from ``root/run/<run_id>``, into its ``runs/<run_id>``."""
    work = with_demo(root / "run" / run_id, repo)
    path = work / "config.json"
    path.write_text(json.dumps(run_config(root, new_syntax)), encoding="utf-8")
    ragaudit(repo, ["run", "--config", str(path), "--run-id", run_id], work)


def tune(root: Path, run_id: str, repo: Path) -> None:
    """``ragaudit tune --demo`` from ``root/tune/<run_id>``, the memo ``root/cache``."""
    work = with_demo(root / "tune" / run_id, repo)
    cache = f"cache_dir={root.resolve() / 'cache'}"
    ragaudit(repo, ["tune", "--demo", *FAKE, "--set", cache], work)


def collection(row: dict[str, Any]) -> str | None:
    """The collection a logged request searched."""
    return (row["request"].get("filters") or {}).get("collection")


def log_days(repo: Path) -> dict[str, bytes]:
    """Three consecutive days of requests from the checkout's one bundled day, by day.

    The bundled day alone is a census (each stratum has no more units than its two draws), so
    every standard error would be 0. Each day therefore adds to each bundled request one asked
    once, its query with a context (``TAIL``, rotated by request and day): tail strata of about
    twenty units, of which the day draws a few. The second day lacks every fifth bundled request
    and its tail one; on the third the ``account`` collection's engine serves, in place of each
    of its own documents, one about something else that the log holds (a regression in that
    segment alone).
    """
    (bundled,) = sorted((repo / "data" / "audit" / "logs").iterdir())
    text = (bundled / "requests.jsonl").read_text(encoding="utf-8")
    rows = [json.loads(line) for line in text.splitlines() if line.strip()]
    first = dt.date.fromisoformat(bundled.name)
    collections = {collection(r) for r in rows}
    # The log names a collection's own documents after it; the others answer nothing asked.
    off_topic = sorted(
        {
            h["_id"]: h["_source"]["content"]
            for r in rows
            for h in r["retrieval"]["hits"]
            if h["_id"].split("-")[0] not in collections
        }.items()
    )

    def on(row: dict[str, Any], day: dt.date, suffix: str = "") -> dict[str, Any]:
        return {**row, "id": f"{day}-{row['id']}{suffix}", "ts": f"{day}{row['ts'][10:]}"}

    def tail(row: dict[str, Any], day: dt.date, i: int, d: int) -> dict[str, Any]:
        context = TAIL[(i + 3 * d) % len(TAIL)]
        query = f"{row['request']['q'].rstrip('?')} {context}?"
        return {**on(row, day, "-t"), "request": {**row["request"], "q": query}}

    def broken(row: dict[str, Any]) -> dict[str, Any]:
        if collection(row) != BROKEN_SEGMENT:
            return row
        served = {h["_id"] for h in row["retrieval"]["hits"]}
        spare = iter(i for i in off_topic if i[0] not in served)
        hits = []
        for h in row["retrieval"]["hits"]:
            if h["_id"].split("-")[0] == BROKEN_SEGMENT:
                doc, content = next(spare)
                h = {**h, "_id": doc, "_source": {"content": content}}
            hits.append(h)
        return {**row, "retrieval": {"hits": hits}}

    out = {}
    for d in range(3):
        day = first + dt.timedelta(days=d)
        kept = [(i, r) for i, r in enumerate(rows) if d != 1 or i % 5 != 4]
        day_rows = [x for i, r in kept for x in (on(r, day), tail(r, day, i, d))]
        if d == 2:
            day_rows = [broken(r) for r in day_rows]
        out[str(day)] = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in day_rows).encode()
    return out


def write_logs(root: Path, repo: Path) -> list[str]:
    """``root/logs/<day>/requests.jsonl`` for the three days, written once; their days."""
    days = log_days(repo)
    for day, content in days.items():
        path = root / "logs" / day / "requests.jsonl"
        if path.exists():
            if path.read_bytes() != content:
                sys.exit(f"{path} differs from what {repo}'s bundled day gives: another input")
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content)
    return sorted(days)


def audit(root: Path, run_id: str, repo: Path) -> None:
    """``ragaudit audit`` over three days from ``root/audit/<run_id>``, the memo ``root/cache``."""
    days = write_logs(root, repo)
    work = fresh(root / "audit" / run_id)
    (work / "data" / "audit").mkdir(parents=True)
    (work / "data" / "audit" / "logs").symlink_to((root / "logs").resolve())
    cache = f"cache_dir={root.resolve() / 'cache'}"
    config = str(repo / "data" / "audit" / "audit.yaml")
    args = ["audit", "-c", config, "--from", days[0], "--to", days[-1], *FAKE, "--set", cache]
    ragaudit(repo, args, work)


def canonical(row: dict[str, Any]) -> str:
    """A row as sorted JSON: equal rows give equal text, floats to the last bit."""
    return json.dumps(row, sort_keys=True, default=str, ensure_ascii=False)


def same_table(name: str, first: pl.DataFrame, other: pl.DataFrame, spec: Spec) -> bool:
    """Whether ``other`` holds ``first``'s rows; prints ``identical`` or the rows that differ."""
    keys, left_out = spec
    first, other = first.drop(left_out, strict=False), other.drop(left_out, strict=False)
    only = sorted(set(first.columns) ^ set(other.columns))
    if only:
        print(f"    {name}: columns in one side only, not compared: {', '.join(only)}")
    shared = [c for c in first.columns if c in other.columns]
    a = Counter(canonical(r) for r in first.select(shared).iter_rows(named=True))
    b = Counter(canonical(r) for r in other.select(shared).iter_rows(named=True))
    if a == b:
        print(f"    {name}: {other.height} rows, identical")
        return True
    gone, new = list((a - b).elements()), list((b - a).elements())
    print(
        f"    {name}: DIFFERS: {first.height} rows against {other.height}; {len(gone)} rows "
        f"only in the first, {len(new)} only in this one"
    )
    pairs = _paired(gone, new, [k for k in keys if k in shared])
    for key, before, after in pairs[:SHOWN]:
        changed = {c: (before[c], after[c]) for c in shared if before[c] != after[c]}
        shown = ", ".join(f"{c}: {x!r} -> {y!r}" for c, (x, y) in changed.items())
        print(f"      {key}: {shown}")
    paired = {canonical(p[1]) for p in pairs} | {canonical(p[2]) for p in pairs}
    unpaired = [("first", r) for r in gone if r not in paired] + [
        ("this", r) for r in new if r not in paired
    ]
    for side, row in unpaired[: max(0, SHOWN - len(pairs))]:
        print(f"      only in {side}: {row}")
    return False


def _paired(
    gone: list[str], new: list[str], keys: list[str]
) -> list[tuple[dict[str, Any], dict[str, Any], dict[str, Any]]]:
    """The differing rows whose key finds exactly one counterpart: (key, first's, this one's)."""
    if not keys:
        return []

    def by_key(rows: list[str]) -> dict[str, list[dict[str, Any]]]:
        out: dict[str, list[dict[str, Any]]] = {}
        for text in rows:
            row = json.loads(text)
            out.setdefault(canonical({k: row[k] for k in keys}), []).append(row)
        return out

    a, b = by_key(gone), by_key(new)
    return [
        (json.loads(k), a[k][0], b[k][0]) for k in a if k in b and len(a[k]) == 1 and len(b[k]) == 1
    ]


def same_text(name: str, first: Path, other: Path) -> bool:
    """Whether two text files are equal byte for byte; prints the first lines of the diff."""
    a = first.read_text(encoding="utf-8") if first.exists() else None
    b = other.read_text(encoding="utf-8") if other.exists() else None
    if a == b:
        print(f"    {name}: identical")
        return True
    if a is None or b is None:
        print(f"    {name}: DIFFERS: only in {'this one' if a is None else 'the first'}")
        return False
    diff = list(difflib.unified_diff(a.splitlines(), b.splitlines(), lineterm="", n=0))
    print(f"    {name}: DIFFERS")
    for line in diff[2 : 2 + 2 * SHOWN]:
        print(f"      {line}")
    return False


def same_json(name: str, first: Path, other: Path, left_out: list[str]) -> bool:
    """Whether two JSON objects agree on every key but ``left_out``; prints the keys that differ."""
    a, b = (
        {k: v for k, v in json.loads(p.read_text("utf-8")).items() if k not in left_out}
        for p in (first, other)
    )
    differ = sorted(k for k in a.keys() | b.keys() if a.get(k, "<absent>") != b.get(k, "<absent>"))
    if not differ:
        print(f"    {name}: {len(a)} keys, identical")
        return True
    print(f"    {name}: DIFFERS")
    for k in differ[:SHOWN]:
        print(f"      {k}: {a.get(k, '<absent>')!r} -> {b.get(k, '<absent>')!r}")
    return False


def read(path: Path) -> pl.DataFrame:
    """A Parquet table, or the union of a folder's parts (the judgment store)."""
    if path.is_dir():
        parts = sorted(path.glob("*.parquet"))
        return pl.concat([pl.read_parquet(p) for p in parts], how="diagonal_relaxed")
    return pl.read_parquet(path)


def by_series(frame: pl.DataFrame) -> pl.DataFrame:
    """``series.parquet`` with each series id replaced by its order of first appearance.

    The id is a hash of what a day measures, whose formula a version may change (``s1:`` to
    ``s2:``); what must stay is which days form one series and every figure of each.
    """
    first_day = frame.group_by("series").agg(pl.col("day").min().alias("_first"))
    order = first_day.sort("_first", "series").with_row_index("_n")
    return (
        frame.join(order.select("series", "_n"), on="series")
        .with_columns(pl.format("series {}", pl.col("_n") + 1).alias("series"))
        .drop("_n")
    )


def same_file(name: str, first: Path | None, other: Path | None, spec: Spec) -> bool:
    """:func:`same_table` over two files or stores; a side without one differs."""
    if first is None or other is None or not first.exists() or not other.exists():
        missing = "the first" if first is None or not first.exists() else "this one"
        print(f"    {name}: DIFFERS: none in {missing}")
        return False
    return same_table(name, read(first), read(other), spec)


def one(root: Path, pattern: str) -> Path | None:
    """The one file under ``root`` matching ``pattern`` (None when there is none)."""
    found = sorted(root.rglob(pattern))
    if len(found) > 1:
        sys.exit(f"{root}: {len(found)} files {pattern}, expected one: {found}")
    return found[0] if found else None


def calls(path: Path) -> int:
    """Provider calls a manifest or ``tune.json`` records (its ``llm`` part)."""
    return int(json.loads(path.read_text("utf-8"))["llm"]["provider_calls"])


class Side:
    """Where one side's folders of each kind are under ``R``."""

    def __init__(self, root: Path, run_id: str) -> None:
        self.id = run_id
        self.run = root / "run" / run_id / "runs" / run_id
        self.tune_root = root / "tune" / run_id / "data" / "runs"
        self.audit_root = root / "audit" / run_id / "data" / "runs"

    def tune(self) -> Path | None:
        """The folder holding the tune's ``tune.parquet``."""
        found = one(self.tune_root, "tune.parquet") if self.tune_root.is_dir() else None
        return found.parent if found else None

    def days(self) -> dict[str, Path]:
        """Each audit day's folder by its name, the day."""
        if not self.audit_root.is_dir():
            return {}
        return {p.parent.name: p.parent for p in sorted(self.audit_root.rglob("estimates.parquet"))}


def judgments(runs_root: Path) -> Path | None:
    """The runs root's judgment store folder."""
    parts = sorted(runs_root.rglob("*.parquet"))
    stores = {p.parent for p in parts if p.parent.name == "judgments"}
    return stores.pop() if len(stores) == 1 else None


def compare_run(first: Side, other: Side) -> bool:
    """The run's tables and the later run's provider calls."""
    n = calls(other.run / "manifest.json")
    print(f"  run: {n} provider calls")
    same = n == 0
    for name, spec in RUN_TABLES.items():
        file = f"{name}.parquet"
        same = same_file(name, first.run / file, other.run / file, spec) and same
    store = (judgments(first.run.parent), judgments(other.run.parent))
    return same_file("judgments", *store, RUN_JUDGMENTS) and same


def compare_tune(first: Side, other: Side) -> bool:
    """The tune's tables, decision and text files, and the later tune's provider calls."""
    a, b = first.tune(), other.tune()
    assert a is not None
    if b is None:
        print("  tune: none under this side (DIFFERS)")
        return False
    n = calls(b / "tune.json")
    print(f"  tune: {n} provider calls")
    same = n == 0
    same = same_file("tune.parquet", a / "tune.parquet", b / "tune.parquet", TUNE_TABLE) and same
    store = (judgments(first.tune_root), judgments(other.tune_root))
    same = same_file("judgments", *store, JUDGMENTS) and same
    same = same_json("tune.json", a / "tune.json", b / "tune.json", TUNE_JSON_LEFT_OUT) and same
    texts = sorted({p.name for d in (a, b) for p in (*d.glob("*.txt"), *d.glob("*.yaml"))})
    for name in texts:
        same = same_text(name, a / name, b / name) and same
    return same


def compare_audit(first: Side, other: Side) -> bool:
    """Each audit day's tables, the series and the later side's provider calls."""
    a, b = first.days(), other.days()
    if sorted(a) != sorted(b):
        print(f"  audit: days {sorted(b)} against {sorted(a)} (DIFFERS)")
        return False
    n = sum(calls(folder / "manifest.json") for folder in b.values())
    print(f"  audit: {len(b)} days, {n} provider calls")
    same = n == 0
    for day in sorted(a):
        for name, spec in DAY_TABLES.items():
            file = f"{name}.parquet"
            same = same_file(f"{day} {name}", a[day] / file, b[day] / file, spec) and same
    series = (one(first.audit_root, "series.parquet"), one(other.audit_root, "series.parquet"))
    if any(p is None or not p.exists() for p in series):
        same = same_file("series", *series, SERIES) and same
    else:
        a, b = (by_series(read(p)) for p in series)  # type: ignore[arg-type]
        same = same_table("series", a, b, SERIES) and same
    store = (judgments(first.audit_root), judgments(other.audit_root))
    return same_file("judgments", *store, JUDGMENTS) and same


KINDS: dict[str, tuple[Callable[[Side], bool], Callable[[Side, Side], bool]]] = {
    "run": (lambda s: (s.run / "manifest.json").exists(), compare_run),
    "tune": (lambda s: s.tune() is not None, compare_tune),
    "audit": (lambda s: bool(s.days()), compare_audit),
}


def compare(root: Path, run_ids: list[str]) -> bool:
    """Whether every later side's figures equal the first's; prints each table's verdict."""
    first = Side(root, run_ids[0])
    kinds = {k: c for k, (has, c) in KINDS.items() if has(first)}
    if not kinds:
        sys.exit(f"{run_ids[0]}: no run, tune or audit under {root}")
    print(f"{first.id}: " + ", ".join(kinds) + " (the first: the others compared with it)")
    same = True
    for run_id in run_ids[1:]:
        other = Side(root, run_id)
        print(f"{run_id}:")
        here = [k for k in kinds if KINDS[k][0](other)]
        for kind in kinds:
            if kind not in here:
                print(f"  {kind}: none under this side, not compared")
        if not here:
            same = False
        for kind in here:
            same = kinds[kind](first, other) and same
    print("every figure identical" if same else "something DIFFERS (above)")
    return same


def main() -> None:
    """Run, tune, audit or compare, as the arguments say."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    for name in ("run", "tune", "audit"):
        one_side = sub.add_parser(name)
        one_side.add_argument("--root", type=Path, required=True)
        one_side.add_argument("--run-id", required=True)
        one_side.add_argument(
            "--repo", type=Path, default=REPO, help="The checkout measured (default: this one)."
        )
        if name == "run":
            one_side.add_argument("--new-syntax", action="store_true")
    sides = sub.add_parser("compare")
    sides.add_argument("--root", type=Path, required=True)
    sides.add_argument("run_ids", nargs="+")
    args = parser.parse_args()
    # Absolute: the sides run from folders inside them.
    args.root = args.root.resolve()
    if args.command != "compare":
        args.repo = args.repo.resolve()
    if args.command == "run":
        run(args.root, args.run_id, args.repo, args.new_syntax)
    elif args.command == "tune":
        tune(args.root, args.run_id, args.repo)
    elif args.command == "audit":
        audit(args.root, args.run_id, args.repo)
    else:
        sys.exit(0 if compare(args.root, args.run_ids) else 1)


if __name__ == "__main__":
    main()
