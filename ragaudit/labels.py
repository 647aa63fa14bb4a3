"""The labels store: what people said about a run's items, one Parquet file beside its tables.

``<run>/labels/`` (schema ``schemas.LABELS``) holds one row per label, appended: a
:class:`~ragaudit.partstore.PartStore`, the one append-only design of the judgment store and
the audit, so each answer is one part file written atomically under the store's lock. A killed
server loses at most the label being written, two writers (two annotators' tabs, two servers)
never lose each other's rows, and an append costs its own row only. Any folder holds one: a
run's, or an audit day's (``<runs_root>/audit-<name>/<day>/labels/``).

Runs labelled before kept every row in one file, ``<run>/labels.parquet``: it is still read
(its rows first) and never rewritten; new labels go to the part files beside it.

``<run>/labels.sample.parquet`` (schema ``schemas.LABEL_SAMPLE``) holds the items to label:
drawn once, in one order every annotator follows, each with its chance of being drawn. Grades
are drawn in two stages (ADR 0020): questions at random, then inside each drawn question its
engine's top ten and a sample of the rest of its pool by the judge's grade, so that every
figure the report corrects (the relevant share, NDCG@10, agreement) is reachable and weighted
back; answer verdicts are stratified by the judge's score. What a person is shown of an item
(:func:`item_texts`) is the run's texts, never the verdict.
"""

from __future__ import annotations

import csv
import datetime as dt
import hashlib
import io
import json
import math
import random
import threading
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
from cachetools import LRUCache

from ragaudit import atomic, schemas
from ragaudit.errors import InputError
from ragaudit.partstore import PartStore
from ragaudit.runfolder import DamagedRunFile, RunFolder, read_parquet_file, stored_setting
from ragaudit.runlock import file_lock
from ragaudit.trec import qrels_text

FILE = "labels.parquet"
"""The single labels file of runs labelled before the part store: read, never written."""
STORE = "labels"
"""The labels store's folder inside a run (or audit day) folder: its part files and lock."""
_LOCK = ".labels.lock"


def item_id(kind: str, question_id: str, candidate_id: str | None = None) -> str:
    """The id of a labelled item: a candidate's grade or an answer's metric verdict."""
    return f"{kind}:{question_id}" + (f":{candidate_id}" if candidate_id is not None else "")


def _store(run_dir: Path) -> PartStore:
    return PartStore(Path(run_dir) / STORE, schemas.LABELS, prefix="labels")


class _Reader:
    """One store's rows as read so far: a later read opens only the parts written since.

    A store holds a part per answer, and the labelling page reads every label at each item:
    opening a thousand parts each time would cost seconds.
    """

    def __init__(self, run_dir: Path) -> None:
        self.store = _store(run_dir)
        self.names: set[str] = set()
        self.tables: list[pa.Table] = []
        self.lock = threading.Lock()

    def read(self) -> pa.Table:
        with self.lock:
            if not self.names <= {p.name for p in self.store.parts()}:
                # A part went away (the store moved aside, cleaned by hand): read it anew.
                self.store, self.names, self.tables = _store(self.store.folder.parent), set(), []
            for path, table in self.store.read_new():
                self.names.add(path.name)
                self.tables.append(table)
            if len(self.tables) > 1:
                self.tables = [pa.concat_tables(self.tables)]
            return self.tables[0] if self.tables else schemas.LABELS.empty_table()


_readers: LRUCache[Path, _Reader] = LRUCache(64)
_readers_lock = threading.Lock()


def _parts_table(run_dir: Path) -> pa.Table:
    key = (Path(run_dir) / STORE).resolve()
    with _readers_lock:
        reader = _readers.get(key)
        if reader is None:
            reader = _readers[key] = _Reader(Path(run_dir))
    return reader.read()


def has_labels(run_dir: Path | str) -> bool:
    """Whether the folder holds any label (the cheap test before anything is read)."""
    run_dir = Path(run_dir)
    return (run_dir / FILE).is_file() or bool(_store(run_dir).parts())


def _legacy(run_dir: Path) -> pa.Table | None:
    """The rows of the single file of older runs, or None when there is none."""
    path = run_dir / FILE
    if not path.is_file():
        return None
    return _of_schema(read_parquet_file(path), schemas.LABELS, path)


def read_labels(run_dir: Path) -> pa.Table:
    """Every label row of the folder, oldest first (an empty table of the schema when none).

    Raises:
        DamagedRunFile: the older single file cannot be read or holds other columns.
        ForeignPart: a part file holds other columns (a damaged part is skipped and logged).
    """
    run_dir = Path(run_dir)
    legacy = _legacy(run_dir)
    parts = _parts_table(run_dir)
    return parts if legacy is None else pa.concat_tables([legacy, parts])


def _of_schema(table: pa.Table, schema: pa.Schema, path: Path) -> pa.Table:
    """``table`` cast to ``schema``; a file of other columns is refused in one line.

    A file copied in from elsewhere would otherwise fail later inside a sort or a concat.
    """
    missing = [name for name in schema.names if name not in table.column_names]
    try:
        if missing:
            raise pa.ArrowInvalid(f"no column {', '.join(missing)}")
        return table.select(schema.names).cast(schema)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        raise DamagedRunFile(
            f"{path}: not a ragaudit {path.name} ({exc}); move it away to start it anew"
        ) from None


def append_labels(run_dir: Path, rows: list[dict[str, Any]]) -> None:
    """Append label rows (``time`` defaults to now, UTC) to the folder's store as one part.

    Raises:
        DamagedRunFile: the older single file beside the store cannot be read: a label saved
            now could not be read back with it, so none is saved until it is moved away.
    """
    run_dir = Path(run_dir)
    now = dt.datetime.now(dt.UTC)
    new = schemas.to_table([{"time": now, **row} for row in rows], schemas.LABELS)
    _legacy(run_dir)
    _store(run_dir).append(new)


def latest_labels(table: pa.Table) -> pa.Table:
    """One row per (item, annotator): the latest label each person gave each item."""
    frame = pl.from_arrow(table)
    assert isinstance(frame, pl.DataFrame)
    latest = frame.sort("time").unique(subset=["item_id", "annotator"], keep="last")
    return latest.sort(["item_id", "annotator"]).to_arrow().cast(schemas.LABELS)


# --- The sample people label -------------------------------------------------------------

SAMPLE_FILE = "labels.sample.parquet"
GRADE = "grade"
"""The kind of a (question, candidate) item: a relevance grade 0-3."""
ANSWER_KINDS = ("faithfulness", "answer_relevancy")
"""Judged answer metrics a person labels yes/no: their score is a share a person can call."""
# A metric's score split in thirds: a stratum per region of the judge's scale, so that the
# items the judge calls bad, unsure and good are all checked.
_SCORE_BINS = ((1 / 3, "low [0, 1/3)"), (2 / 3, "mid [1/3, 2/3)"), (math.inf, "high [2/3, 1]"))


# What a person is asked of each kind, and the keys that answer it (the grade scale is the
# one the relevance judge is given, ``prompts/relevance.py``).
INSTRUCTIONS = {
    GRADE: "How well does the passage answer the question?",
    "faithfulness": "Is every claim of the answer supported by the contexts shown?",
    "answer_relevancy": "Does the answer address the question that was asked?",
}
_GRADE_CHOICES = (
    ("0", 0.0, "nothing to do with the question"),
    ("1", 1.0, "on its topic, does not answer it"),
    ("2", 2.0, "answers it in part, or unclearly"),
    ("3", 3.0, "about this question and contains its answer"),
)
_YES_NO_CHOICES = (("y", 1.0, "yes"), ("n", 0.0, "no"))


def choices(kind: str) -> list[dict[str, Any]]:
    """The answers to an item of ``kind``: the key that gives each, its label and its text."""
    given = _GRADE_CHOICES if kind == GRADE else _YES_NO_CHOICES
    return [{"key": key, "label": label, "text": text} for key, label, text in given]


def allowed_values(kind: str) -> tuple[float, ...]:
    """The labels a person may give an item of ``kind`` (besides null, skipped)."""
    return tuple(c["label"] for c in choices(kind))


def _grade_stratum(row: dict[str, Any]) -> str | None:
    if row.get("status") != "ok":
        return None  # a failed verdict has no judge grade to check
    if row.get("grade") is not None:
        return str(row["grade"])
    if row.get("relevant") is not None:
        # A run from before graded verdicts: only the relevant cut is known.
        return "relevant" if row["relevant"] else "not relevant"
    return None


def _score_stratum(value: float) -> str:
    return next(name for edge, name in _SCORE_BINS if value < edge)


Population = dict[str, list[tuple[str, str | None]]]
"""Per stratum, its items as (question_id, candidate_id) in a stable order."""


def populations(run_dir: Path) -> dict[str, Population]:
    """Every item a person could label, per kind and per stratum of the judge's verdict.

    Grade items: each (question, candidate) pair the judge graded, by its grade. Answer items:
    each question whose faithfulness / answer relevancy the judge scored, by a third of the
    score scale. Failed verdicts and unscored rows are left out: there is nothing to check.
    """
    run = RunFolder(Path(run_dir).parent, Path(run_dir).name)
    out: dict[str, Population] = {}
    if run.has("verdicts"):
        strata: Population = {}
        verdicts = run.read("verdicts").select(
            ["question_id", "context_id", "grade", "relevant", "status"]
        )
        for row in verdicts.to_pylist():
            stratum = _grade_stratum(row)
            if stratum is not None:
                strata.setdefault(stratum, []).append((row["question_id"], row["context_id"]))
        if strata:
            out[GRADE] = strata
    if run.has("scores"):
        scores = run.read("scores").select(["question_id", "metric", "value", "status"])
        for kind in ANSWER_KINDS:
            strata = {}
            for row in scores.filter(pc.equal(scores["metric"], kind)).to_pylist():
                if row["status"] == "ok" and row["value"] is not None:
                    strata.setdefault(_score_stratum(row["value"]), []).append(
                        (row["question_id"], None)
                    )
            if strata:
                out[kind] = strata
    for strata in out.values():
        for items in strata.values():
            items.sort(key=lambda it: (it[0], it[1] or ""))
    return out


def allocate(sizes: dict[str, int], n: int) -> dict[str, int]:
    """``n`` draws spread evenly over the strata, none given more than it holds.

    Even rather than proportional: a rare grade (the judge's few 3s) still gets enough items
    for its row of the confusion table; the stratum sizes kept with the sample undo the
    over-weighting when a mean is estimated.
    """
    taken = dict.fromkeys(sizes, 0)
    left = min(n, sum(sizes.values()))
    while left:
        open_ = [s for s in sorted(sizes) if taken[s] < sizes[s]]
        share, extra = divmod(left, len(open_))
        for i, s in enumerate(open_):
            give = min(share + (i < extra), sizes[s] - taken[s])
            taken[s] += give
            left -= give
    return taken


TOP_K = 10
"""The engine's top that NDCG@10 scores: its own stratum inside each drawn question."""
PER_QUESTION = 20
"""Grade items drawn from each drawn question (fewer when its pool is smaller): the top ten
whole and ten of the rest of the pool."""
TWO_STAGE = "two-stage"
STRATIFIED = "stratified"


def grade_frame(run_dir: Path) -> dict[str, list[tuple[str, str, int | None]]]:
    """Per question, its judged candidates as (candidate id, judge-grade stratum, engine rank).

    The first stage's frame: every question with a candidate the judge graded, in id order.
    """
    run = RunFolder(Path(run_dir).parent, Path(run_dir).name)
    if not run.has("verdicts"):
        return {}
    rank: dict[tuple[str, str], int | None] = {}
    if run.has("candidates"):
        cands = run.read("candidates").select(["question_id", "context_id", "engine_rank"])
        for r in cands.to_pylist():
            rank[(r["question_id"], r["context_id"])] = r["engine_rank"]
    frame: dict[str, list[tuple[str, str, int | None]]] = {}
    verdicts = run.read("verdicts").select(
        ["question_id", "context_id", "grade", "relevant", "status"]
    )
    for row in verdicts.to_pylist():
        stratum = _grade_stratum(row)
        if stratum is not None:
            key = (row["question_id"], row["context_id"])
            frame.setdefault(row["question_id"], []).append(
                (row["context_id"], stratum, rank.get(key))
            )
    for items in frame.values():
        items.sort()
    return dict(sorted(frame.items()))


def question_strata(items: list[tuple[str, str, int | None]]) -> dict[str, list[str]]:
    """One question's judged candidates in the second stage's strata.

    ``top 10``: the engine's first ten (every gain NDCG@10's numerator reads); ``rest, judge
    g``: the rest of the pool by the judge's grade, where the ideal order's gains hide (the
    judge's grade sorts them: its 0s seldom hold a person's 3).
    """
    strata: dict[str, list[str]] = {}
    for cid, stratum, rank in items:
        name = f"top {TOP_K}" if rank is not None and rank <= TOP_K else f"rest, judge {stratum}"
        strata.setdefault(name, []).append(cid)
    return strata


def allocate_question(sizes: dict[str, int], n: int) -> dict[str, int]:
    """``n`` draws inside one question: half to its top ten, the rest over the pool's strata.

    With the default budget the top ten is taken whole, so NDCG@10's numerator is known
    exactly; the pool's strata get one draw each, the rest in proportion to their sizes (the
    ideal order's counts are estimated per stratum, and a big stratum's count is the most
    uncertain). What the top cannot take goes to the pool and back.
    """
    top = f"top {TOP_K}"
    rest = {s: k for s, k in sizes.items() if s != top}
    to_top = min(sizes.get(top, 0), -(-n // 2) if rest else n)
    taken = _proportional(rest, n - to_top)
    spare = n - to_top - sum(taken.values())
    if top in sizes:
        taken[top] = min(sizes[top], to_top + spare)
    return taken


def _proportional(sizes: dict[str, int], n: int) -> dict[str, int]:
    """``n`` draws: one per stratum first, then each to the stratum of most items per draw."""
    taken = {s: 0 for s in sizes}
    for s in sorted(sizes, key=lambda s: (-sizes[s], s)):
        if n - sum(taken.values()) > 0 and sizes[s] > 0:
            taken[s] = 1
    while n - sum(taken.values()) > 0:
        open_ = [s for s in sorted(sizes) if taken[s] < sizes[s]]
        if not open_:
            break
        best = max(open_, key=lambda s: sizes[s] / (taken[s] + 1))
        taken[best] += 1
    return taken


def _signature(pops: dict[str, Population], frame: dict[str, Any]) -> str:
    """A digest of the items a sample is drawn from: labels drawn for other items are refused."""
    body = json.dumps({"frame": frame, "answers": pops}, sort_keys=True, separators=(",", ":"))
    return "s1:" + hashlib.sha256(body.encode("utf-8")).hexdigest()[:20]


def run_signature(run_dir: Path) -> str:
    """The signature of the run's judged items, as its sample records it."""
    pops = populations(run_dir)
    return _signature({k: v for k, v in pops.items() if k != GRADE}, grade_frame(run_dir))


def draw_sample(run_dir: Path, n: int, *, seed: int = 0) -> pa.Table:
    """About ``n`` items of each kind to label, with each item's chance of being drawn.

    Grades (a two-stage design): ``m`` questions drawn at random from those with a judged
    candidate (m = n over the items a question gives, at most every question), then inside
    each drawn question up to :data:`PER_QUESTION` candidates: half from the engine's top ten,
    the rest from the pool by the judge's grade (:func:`allocate_question`). A drawn question
    thus yields every figure: its relevant share, its NDCG@10's gains (top ten) and ideal
    (the pool). The items come question after question, the questions in random order: a
    session stopped early has labelled fewer whole questions, a smaller sample of the same
    design. Answer metrics: each question's verdict, stratified by a third of the score scale.

    Raises:
        InputError: ``n`` below 1, or a run with no judged item to label.
    """
    if n < 1:
        raise InputError(f"--sample {n}: give at least 1 item per kind")
    rng = random.Random(seed)
    pops = populations(run_dir)
    frame = grade_frame(run_dir)
    if not pops:
        raise InputError(
            f"run {Path(run_dir).name}: nothing to label: no verdict graded and no "
            f"{' / '.join(ANSWER_KINDS)} score (run the sort or score stage first)"
        )
    common = {
        "seed": seed,
        "run_signature": _signature({k: v for k, v in pops.items() if k != GRADE}, frame),
        "sample_id": f"{Path(run_dir).name}:{seed}:{dt.datetime.now(dt.UTC).isoformat()}",
        "drawn_at": dt.datetime.now(dt.UTC),
    }
    rows: list[dict[str, Any]] = []
    if frame:
        per_question = min(PER_QUESTION, math.ceil(sum(map(len, frame.values())) / len(frame)))
        m = min(len(frame), math.ceil(n / per_question))
        for qid in rng.sample(sorted(frame), m):
            strata = question_strata(frame[qid])
            counts = allocate_question({s: len(c) for s, c in strata.items()}, per_question)
            drawn = []
            for stratum in sorted(strata):
                for cid in rng.sample(strata[stratum], counts.get(stratum, 0)):
                    size, taken = len(strata[stratum]), counts[stratum]
                    drawn.append(
                        {
                            "item_id": item_id(GRADE, qid, cid),
                            "kind": GRADE,
                            "question_id": qid,
                            "candidate_id": cid,
                            "stratum": stratum,
                            "stratum_size": size,
                            "stratum_sampled": taken,
                            "design": TWO_STAGE,
                            "psu_size": len(frame),
                            "psu_sampled": m,
                            "inclusion": (m / len(frame)) * (taken / size),
                            **common,
                        }
                    )
            rng.shuffle(drawn)
            rows += drawn
    for kind in ANSWER_KINDS:
        bins = pops.get(kind)
        if not bins:
            continue
        counts = allocate({s: len(items) for s, items in bins.items()}, n)
        drawn = []
        for stratum in sorted(bins):
            for qid, answer_cid in rng.sample(bins[stratum], counts[stratum]):
                drawn.append(
                    {
                        "item_id": item_id(kind, qid, answer_cid),
                        "kind": kind,
                        "question_id": qid,
                        "candidate_id": answer_cid,
                        "stratum": stratum,
                        "stratum_size": len(bins[stratum]),
                        "stratum_sampled": counts[stratum],
                        "design": STRATIFIED,
                        "inclusion": counts[stratum] / len(bins[stratum]),
                        **common,
                    }
                )
        rng.shuffle(drawn)
        rows += drawn
    for position, row in enumerate(rows):
        row["position"] = position
    return schemas.to_table(rows, schemas.LABEL_SAMPLE)


def read_sample(run_dir: Path) -> pa.Table | None:
    """The run's sample, in labelling order (None when none was drawn).

    A sample drawn before the design columns (schema version 1) is read with them null.
    """
    path = Path(run_dir) / SAMPLE_FILE
    if not path.is_file():
        return None
    table = read_parquet_file(path)
    for field in schemas.LABEL_SAMPLE:
        if field.name not in table.column_names and field.name in _SAMPLE_V2:
            table = table.append_column(field.name, pa.nulls(table.num_rows, field.type))
    return _of_schema(table, schemas.LABEL_SAMPLE, path).sort_by("position")


_SAMPLE_V2 = (
    "design",
    "psu_size",
    "psu_sampled",
    "inclusion",
    "run_signature",
    "sample_id",
    "drawn_at",
)


def ensure_sample(run_dir: Path, n: int, *, seed: int = 0) -> tuple[pa.Table, bool]:
    """The run's sample, drawn and written first when there is none; and whether it was drawn.

    A sample once written is kept whatever ``n`` says: every annotator must get the same items.
    """
    run_dir = Path(run_dir)
    with file_lock(run_dir / _LOCK):
        kept = read_sample(run_dir)
        if kept is not None:
            return kept, False
        table = draw_sample(run_dir, n, seed=seed)
        atomic.write_table(table, run_dir / SAMPLE_FILE)
        return table, True


# --- The texts of an item, and what a person said ----------------------------------------


def item_texts(run_dir: Path, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What a person sees of each item: never the judge's verdict, only the run's texts.

    Each item (a dict with ``kind``, ``question_id``, ``candidate_id``) gets ``question``; a
    grade item ``candidate`` (its text) and ``rank`` (the engine's); an answer item ``answer``
    and, for a metric that reads them, ``contexts``: the first ``k_used`` candidates in engine
    order, the ones its judge read.
    """
    # Imported here: the metric registry costs a second of start-up that the viewer's first
    # page must not wait for; only an answer item needs to know which metrics read contexts.
    from ragaudit.metrics import METRICS

    run = RunFolder(Path(run_dir).parent, Path(run_dir).name)
    ids = {it["question_id"] for it in items}
    questions = {r["question_id"]: r["question"] for r in run.rows("questions", ids)}
    candidates = run.candidates(ids=ids) if run.has("candidates") else {}
    answers = run.answers(ids) if run.has("answers") else {}
    k_used: dict[tuple[str, str], int | None] = {}
    if any(it["kind"] != GRADE for it in items) and run.has("scores"):
        for r in run.rows("scores", ids):
            k_used[(r["question_id"], r["metric"])] = r["k_used"]
    top_k = stored_setting(run, "score.top_k")
    out = []
    for it in items:
        qid, kind = it["question_id"], it["kind"]
        pool = candidates.get(qid, [])
        shown: dict[str, Any] = {
            "kind": kind,
            "question_id": qid,
            "candidate_id": it["candidate_id"],
            "question": questions.get(qid),
        }
        if kind == GRADE:
            cand = next((c for c in pool if c["context_id"] == it["candidate_id"]), None)
            shown["candidate"] = cand["text"] if cand else None
            shown["rank"] = cand["engine_rank"] if cand else None
        else:
            shown["answer"] = (answers.get(qid) or {}).get("response")
            if "contexts" in METRICS[kind].inputs:
                k = k_used.get((qid, kind)) or top_k or len(pool)
                shown["contexts"] = [c["text"] for c in pool[:k]]
        out.append(shown)
    return out


def store_dir(path: Path) -> Path | None:
    """The folder whose labels ``path`` names (it, its ``labels/`` or its ``labels.parquet``).

    None when ``path`` is none of these (a labels file of another format).

    Raises:
        InputError: a folder without labels.
    """
    path = Path(path)
    if path.is_dir():
        if path.name == STORE and has_labels(path.parent):
            return path.parent
        if not has_labels(path):
            raise InputError(f"{path}: no labels in this folder (label the run first)")
        return path
    if path.name == FILE and path.is_file():
        return path.parent
    return None


def labelled_items(run_dir: Path, kinds: tuple[str, ...]) -> list[dict[str, Any]]:
    """Each person's latest non-skipped label of the items of ``kinds``, with the items' texts.

    Rows: the label row's fields plus what :func:`item_texts` gives (question, candidate and
    rank, or answer and contexts), in item then annotator order.
    """
    latest = latest_labels(read_labels(run_dir))
    latest = latest.filter(
        pc.and_(
            pc.is_in(latest["kind"], pa.array(kinds, pa.string())), pc.is_valid(latest["label"])
        )
    )
    rows = latest.to_pylist()
    texts = item_texts(run_dir, rows) if rows else []
    return [{**row, **shown} for row, shown in zip(rows, texts, strict=True)]


def labelled_positions(
    sample: pa.Table, labels: pa.Table, annotator: str
) -> dict[int, float | None]:
    """The positions of the sample ``annotator`` has labelled, with their latest label."""
    mine = latest_labels(labels.filter(pc.equal(labels["annotator"], annotator)))
    given = dict(zip(mine["item_id"].to_pylist(), mine["label"].to_pylist(), strict=True))
    return {
        pos: given[iid]
        for pos, iid in zip(
            sample["position"].to_pylist(), sample["item_id"].to_pylist(), strict=True
        )
        if iid in given
    }


def grade_qrels(labels: pa.Table, annotator: str | None = None) -> str:
    """A person's grades as TREC qrels (``qid 0 docid grade``); skipped items left out.

    Raises:
        InputError: no annotator named while several people graded, or an unknown one.
    """
    latest = latest_labels(labels)
    latest = latest.filter(pc.equal(latest["kind"], GRADE))
    people = sorted(set(latest["annotator"].to_pylist()))
    if annotator is None:
        if len(people) > 1:
            raise InputError(
                f"{len(people)} people graded ({', '.join(people)}): name one annotator "
                "(qrels hold one grade per document)"
            )
    elif annotator not in people:
        raise InputError(
            f"annotator {annotator!r} graded nothing (graders: {', '.join(people) or 'none'})"
        )
    if annotator is not None:
        latest = latest.filter(pc.equal(latest["annotator"], annotator))
    by_question: dict[str, dict[str, int]] = {}
    for row in latest.sort_by(
        [("question_id", "ascending"), ("candidate_id", "ascending")]
    ).to_pylist():
        if row["label"] is not None:
            by_question.setdefault(row["question_id"], {})[row["candidate_id"]] = int(row["label"])
    return qrels_text(by_question)


# A spreadsheet opens a CSV cell starting with one of these as a formula: the cell gets a
# leading quote, so a question id like ``=HYPERLINK(...)`` stays text.
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def _cell(value: Any) -> Any:
    if isinstance(value, str) and value.startswith(_FORMULA_START):
        return "'" + value
    return value


def labels_csv(labels: pa.Table) -> str:
    """Each person's latest label of each item as CSV (``label`` empty: skipped)."""
    latest = latest_labels(labels)
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(latest.column_names)
    for row in latest.to_pylist():
        row["time"] = row["time"].isoformat() if row["time"] is not None else None
        writer.writerow([_cell(row[c]) for c in latest.column_names])
    return out.getvalue()
