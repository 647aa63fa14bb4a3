"""Question sets: JSONL, JSON, CSV or Parquet, with ragaudit's or RAGAS's field names.

A malformed file gets one message that names the file, the row and the column; nothing is
guessed silently.
"""

from __future__ import annotations

import csv
import io
import json
import logging
import math
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field

from ragaudit.errors import InputError, clip
from ragaudit.lang import detect_language

if TYPE_CHECKING:
    from ragaudit.config import RunConfig

_log = logging.getLogger(__name__)

# RAGAS EvaluationDataset names → ours, so a RAGAS user brings data as it is.
ALIASES = {
    "user_input": "question",
    "query": "question",
    "id": "question_id",
    "qid": "question_id",
    "ground_truth": "reference",
    "answer": "response",
    "contexts": "retrieved_contexts",
}
KNOWN = {
    "question_id",
    "question",
    "filters",
    "reference",
    "reference_context_ids",
    "reference_contexts",
    "response",
    "retrieved_contexts",
    "metadata",
    "language",
    "reference_context_grades",
}
_LIST_FIELDS = ("reference_context_ids", "reference_contexts", "retrieved_contexts")


class Question(BaseModel):
    """One question-set row."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    question_id: str
    question: str
    language: str = "en"
    filters: dict[str, Any] = Field(default_factory=dict)
    reference: str | None = None
    reference_context_ids: list[str] | None = None
    reference_contexts: list[str] | None = None
    response: str | None = None
    retrieved_contexts: list[str] | None = None
    reference_context_grades: dict[str, int] | None = None
    """Graded gold relevance: context id → grade (0: judged not relevant; NDCG's gain)."""
    metadata: dict[str, Any] = Field(default_factory=dict)


def read_utf8(path: Path) -> str:
    """A text input file's content; binary junk is one InputError naming its line and byte.

    Raises:
        InputError: The file is not UTF-8, or holds a NUL byte (a binary file, not text).
    """
    data = path.read_bytes()
    bad: int | None = None
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        bad = exc.start
    else:
        nul = data.find(b"\x00")
        bad = nul if nul >= 0 else None
    if bad is not None:
        line = data[:bad].count(b"\n") + 1
        column = bad - (data.rfind(b"\n", 0, bad) + 1) + 1
        raise InputError(
            f"{path}: not UTF-8 text (byte 0x{data[bad]:02x} at line {line}, byte {column} of "
            "the line); re-save the file as UTF-8 text"
        )
    return text


_decode = read_utf8


def jsonl_lines(text: str) -> list[str]:
    r"""The lines of a JSONL text: split at "\n" only, a trailing "\r" dropped.

    ``str.splitlines`` also breaks at U+2028, U+2029 and U+0085, which JSON leaves unescaped
    inside strings, so it would cut a valid record in two.
    """
    return [line.removesuffix("\r") for line in text.split("\n")]


def iter_jsonl(path: Path | str) -> Iterator[tuple[int, Any]]:
    r"""Each JSON value of a JSONL file with its line number, read line by line; blanks skipped.

    The one JSONL reader of input files (question sets, labels, calibration sets, corpora). It
    holds one line at a time, so a corpus of any size reads in bounded memory. Lines break at
    "\n" only (a trailing "\r" dropped), as :func:`jsonl_lines` says why. What a value must be
    is the caller's to say: a corpus names the field it misses, a question set the row.

    Raises:
        InputError: The file cannot be read, a line is not UTF-8 or holds a NUL byte (naming
            the line and byte), or a line is not valid JSON (naming the file and the line).
    """
    path = Path(path)
    try:
        handle = path.open("rb")
    except OSError as exc:
        raise InputError(f"{path}: cannot read ({exc})") from None
    with handle:
        # Binary iteration splits at b"\n" only, like jsonl_lines; the BOM may open line 1.
        for n, raw in enumerate(handle, start=1):
            data = raw.removeprefix(b"\xef\xbb\xbf") if n == 1 else raw
            line = _utf8_line(path, data, n)
            if not line.strip():
                continue
            try:
                yield n, json.loads(line)
            except json.JSONDecodeError as exc:
                raise InputError(f"{path}: line {n}: not valid JSON ({exc.msg})") from None


def _utf8_line(path: Path, data: bytes, n: int) -> str:
    """One line's text, or the InputError :func:`read_utf8` gives for the same byte."""
    bad = data.find(b"\x00")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        bad = exc.start if bad < 0 else min(bad, exc.start)
    if bad >= 0:
        raise InputError(
            f"{path}: not UTF-8 text (byte 0x{data[bad]:02x} at line {n}, byte {bad + 1} of "
            "the line); re-save the file as UTF-8 text"
        )
    return text.removesuffix("\n").removesuffix("\r")


def read_jsonl(path: Path | str) -> list[tuple[int, dict[str, Any]]]:
    """Each JSON object of a JSONL file with its line number; blank lines skipped.

    Raises:
        InputError: As :func:`iter_jsonl`, or a line is not a JSON object.
    """
    rows = []
    for n, obj in iter_jsonl(path):
        if not isinstance(obj, dict):
            raise InputError(f"{path}: line {n}: expected a JSON object, got {type(obj).__name__}")
        rows.append((n, obj))
    return rows


def _records(path: Path) -> tuple[list[dict[str, Any]], str]:
    """Raw records and the word for a record's position ('line' or 'row')."""
    suffix = path.suffix.lower()
    if suffix == ".parquet":
        import polars as pl

        try:
            return pl.read_parquet(path).to_dicts(), "row"
        except Exception as exc:
            raise InputError(f"{path}: not a readable Parquet file ({exc})") from None
    if suffix == ".jsonl":
        return [{**obj, "__pos": n} for n, obj in read_jsonl(path)], "line"
    text = _decode(path)
    if suffix == ".json":
        try:
            obj = json.loads(text)
        except json.JSONDecodeError as exc:
            raise InputError(f"{path}: not valid JSON (line {exc.lineno}: {exc.msg})") from None
        if isinstance(obj, dict) and isinstance(obj.get("samples"), list):
            obj = obj["samples"]  # RAGAS EvaluationDataset.to_dict() shape
        if not isinstance(obj, list):
            raise InputError(f"{path}: expected a JSON list of objects")
        for n, item in enumerate(obj, start=1):
            if not isinstance(item, dict):
                kind = type(item).__name__
                raise InputError(f"{path}: item {n}: expected a JSON object, got {kind}")
        return obj, "item"
    if suffix == ".csv":
        reader = csv.DictReader(io.StringIO(text))
        # csv rows: the header is line 1, so data row n is on line n + 1 (no multi-line cells).
        return [{**r, "__pos": i + 2} for i, r in enumerate(reader)], "line"
    raise InputError(
        f"{path}: unsupported question-set format '{suffix}' (use .jsonl, .json, .csv or .parquet)"
    )


def _decoded(value: Any, where: str, expected: str) -> Any:
    """A field's value as Python data: JSON text (CSV cells) parsed, arrays (Parquet) listed."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            raise InputError(f"{where}: expected {expected}") from None
    return value.tolist() if hasattr(value, "tolist") else value


def _as_list(value: Any, where: str) -> list[str] | None:
    if value is None or value == "":
        return None
    value = _decoded(value, where, "a list (JSON array of strings)")
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise InputError(f"{where}: expected a list of strings")
    return value


def _as_dict(value: Any, where: str) -> dict[str, Any]:
    if value is None or value == "":
        return {}
    value = _decoded(value, where, "a JSON object")
    if not isinstance(value, dict):
        raise InputError(f"{where}: expected an object (mapping)")
    return value


def _as_grades(value: Any, where: str) -> dict[str, int] | None:
    """Context id → integer grade, from a mapping, JSON text or Parquet's key/value list."""
    if value is None or value == "":
        return None
    value = _decoded(value, where, "a JSON object of context id → grade")
    if isinstance(value, list) and all(
        isinstance(v, dict) and set(v) == {"key", "value"} for v in value
    ):
        value = {v["key"]: v["value"] for v in value}  # a Parquet map column
    if not isinstance(value, dict):
        raise InputError(f"{where}: expected an object of context id → grade")
    grades: dict[str, int] = {}
    for cid, grade in value.items():
        if grade is None:  # a Parquet struct column lists every key of every row
            continue
        # NaN and Infinity parse as JSON numbers; int() of them raises, so test them first.
        if (
            isinstance(grade, bool)
            or not isinstance(grade, int | float)
            or (isinstance(grade, float) and not math.isfinite(grade))
            or grade != int(grade)
        ):
            raise InputError(
                f"{where}: grade of '{clip(cid)}' is {clip(grade)}, expected an integer"
            )
        if grade < 0:
            raise InputError(f"{where}: grade of '{cid}' is {grade}, expected 0 or more")
        grades[str(cid)] = int(grade)
    return grades


MAX_GRADE = 10
"""Highest gold grade a qrels file may hold: TREC and BEIR grade 0–3 or 0–4; a grade far above
(``1e23``, ``2**63 - 1``) is a broken file, and one such grade dominates every NDCG."""

_INTEGER = re.compile(r"-?[0-9]+")
"""A qrels grade: ASCII digits only (``int()`` also takes ``1_0``, `` 7`` and Arabic digits)."""

_LAYOUTS = {4: "TREC 'qid iteration docid grade'", 3: "BEIR 'query-id corpus-id score'"}


@dataclass(frozen=True)
class Qrels:
    """A qrels file's grades and the conflicts found reading it."""

    path: Path
    grades: dict[str, dict[str, int]]
    conflicts: dict[tuple[str, str], list[int]]
    """(qid, docid) graded more than once with different grades → those grades, in file order
    (the last one is kept when they are allowed)."""


def read_qrels(path: Path | str) -> Qrels:
    """Gold grades from a qrels file, with the (qid, docid) pairs graded differently twice.

    Two layouts: TREC's ``qid iteration docid grade`` and BEIR's ``query-id corpus-id score``
    (tab- or whitespace-separated, with an optional header line ``query-id corpus-id score``).
    The first line decides the layout for the whole file: a TREC line missing a field must not
    be read as a BEIR line with another meaning (``q 0 2``: docid ``0``).

    Raises:
        InputError: The file is missing or holds no grade, a line has the other layout's field
            count, a grade is not a plain integer or lies outside 0–``MAX_GRADE`` (naming the
            line).
    """
    path = Path(path)
    if not path.is_file():
        raise InputError(f"gold.qrels {path}: file not found")
    out: dict[str, dict[str, int]] = {}
    seen: dict[tuple[str, str], list[int]] = {}
    fields: int | None = None
    for n, line in enumerate(_decode(path).splitlines(), start=1):
        if not line.strip():
            continue
        parts = line.split()
        if fields is None and len(parts) == 3 and _is_beir_header(parts):
            continue
        if fields is None:
            if len(parts) not in _LAYOUTS:
                raise InputError(
                    f"{path}: line {n}: expected 'qid iteration docid grade' (TREC) or "
                    f"'query-id corpus-id score' (BEIR), got {len(parts)} fields"
                )
            fields = len(parts)
        elif len(parts) != fields:
            raise InputError(
                f"{path}: line {n}: {len(parts)} fields, but the file is {_LAYOUTS[fields]} "
                f"({fields} fields, decided by its first line): a field is missing or extra"
            )
        if fields == 4:
            qid, _, docid, grade = parts
        else:
            qid, docid, grade = parts
        if not _INTEGER.fullmatch(grade):
            raise InputError(f"{path}: line {n}: grade '{clip(grade, 40)}' is not an integer")
        # Compared as text first: a 5,000-digit grade never becomes an int.
        value = int(grade) if len(grade) <= 3 else MAX_GRADE + 1
        if not 0 <= value <= MAX_GRADE:
            raise InputError(f"{path}: line {n}: grade {clip(grade, 40)} is outside 0–{MAX_GRADE}")
        seen.setdefault((qid, docid), []).append(value)
        out.setdefault(qid, {})[docid] = value
    if not out:
        raise InputError(f"gold.qrels {path}: no grade in it (empty, or a header only)")
    conflicts = {k: v for k, v in seen.items() if len(set(v)) > 1}
    return Qrels(path, out, conflicts)


def load_qrels(path: Path | str) -> dict[str, dict[str, int]]:
    """Gold grades from a qrels file → qid → {docid: grade} (see :func:`read_qrels`)."""
    return read_qrels(path).grades


def check_qrels(
    qrels: Qrels, question_ids: Iterable[str], *, allow_unknown_ids: bool = False
) -> list[str]:
    """Refuse gold that does not fit the question set; returns the notes of what was allowed.

    Ids the question set does not have are gold nobody reads (a qrels of another set, ids
    cut by a tool); a pair graded twice differently is a merge gone wrong. Each is counted
    and named, and refused unless ``gold.allow_unknown_ids`` lets them pass (then said once).

    Raises:
        InputError: Unknown question ids or conflicting grades, not allowed.
    """
    known = set(question_ids)
    unknown = [q for q in qrels.grades if q not in known]
    problems = []
    if unknown:
        problems.append(
            f"{len(unknown)} question id(s) not in the question set "
            f"({', '.join(clip(q, 40) for q in unknown[:5])}{', …' if len(unknown) > 5 else ''})"
        )
    if qrels.conflicts:
        named = ", ".join(
            f"{clip(q, 40)}/{clip(d, 40)} {'→'.join(map(str, g))}"
            for (q, d), g in list(qrels.conflicts.items())[:5]
        )
        problems.append(
            f"{len(qrels.conflicts)} (question, document) pair(s) graded twice with different "
            f"grades ({named}{', …' if len(qrels.conflicts) > 5 else ''})"
        )
    if problems and not allow_unknown_ids:
        raise InputError(
            f"gold.qrels {qrels.path}: {'; '.join(problems)}; fix the file, or set "
            "gold.allow_unknown_ids: true to drop unknown ids and keep the last grade"
        )
    return [
        f"gold.qrels {qrels.path}: {p} (allowed: unknown ids dropped, last grade kept)"
        for p in problems
    ]


def check_gold(
    config: RunConfig, questions: list[Question] | None = None
) -> dict[str, dict[str, int]] | None:
    """The gold qrels of ``config`` read and checked against the question set (None: none).

    Checked against the whole set even under ``limit``: a qrels id of a question the limit
    left out is not unknown. The dry run calls this too, so bad gold shows before money.

    Raises:
        InputError: The qrels file is malformed, empty, or does not fit the question set.
    """
    if config.gold.qrels is None:
        return None
    qrels = read_qrels(config.gold.qrels)
    if questions is None or config.limit is not None:
        questions = load_questions(config.questions)
    for note in check_qrels(
        qrels, (q.question_id for q in questions), allow_unknown_ids=config.gold.allow_unknown_ids
    ):
        _log.warning(note)
    return qrels.grades


def _is_beir_header(parts: list[str]) -> bool:
    """Whether a 3-field first line is BEIR's header (``query-id corpus-id score``)."""
    return parts[0].lower() in ("query-id", "query_id", "qid") and parts[2].lower() in (
        "score",
        "grade",
        "relevance",
        "label",
    )


def with_qrels(questions: list[Question], qrels: dict[str, dict[str, int]]) -> list[Question]:
    """``questions`` with the qrels' grades merged over their own (the qrels file wins)."""
    return [
        q.model_copy(
            update={
                "reference_context_grades": {
                    **(q.reference_context_grades or {}),
                    **qrels[q.question_id],
                }
            }
        )
        if q.question_id in qrels
        else q
        for q in questions
    ]


def load_questions(path: Path | str, limit: int | None = None) -> list[Question]:
    """Read and validate a question set; raises InputError naming row and column."""
    path = Path(path)
    if not path.is_file():
        raise InputError(f"question set {path}: file not found")
    records, unit = _records(path)
    if not records:
        raise InputError(f"{path}: the question set is empty")
    columns: set[str] = set()
    for rec in records:
        columns.update(ALIASES.get(k, k) for k in rec if k != "__pos")
    if "question" not in columns:
        raise InputError(f"{path}: column 'question' (or 'user_input') is missing")
    questions: list[Question] = []
    first_row_of: dict[str, int] = {}
    for index, raw in enumerate(records, start=1):
        pos = raw.get("__pos", index)
        rec = {ALIASES.get(k, k): v for k, v in raw.items() if k != "__pos"}
        where = f"{path}: {unit} {pos}"
        question = rec.get("question")
        if not isinstance(question, str) or not question.strip():
            raise InputError(f"{where}, column 'question': empty or missing")
        qid = rec.get("question_id")
        if qid is None or (isinstance(qid, str) and not qid.strip()):
            if "question_id" in columns:
                raise InputError(f"{where}, column 'question_id': empty")
            qid = f"q{index:04d}"
        qid = str(qid).strip()
        if qid in first_row_of:
            raise InputError(
                f"{where}, column 'question_id': duplicate id '{qid}' "
                f"(first at {unit} {first_row_of[qid]})"
            )
        first_row_of[qid] = pos
        extra = {k: v for k, v in rec.items() if k not in KNOWN}
        metadata = {**_as_dict(rec.get("metadata"), f"{where}, column 'metadata'"), **extra}
        lists = {f: _as_list(rec.get(f), f"{where}, column '{f}'") for f in _LIST_FIELDS}
        reference = rec.get("reference")
        response = rec.get("response")
        questions.append(
            Question(
                question_id=qid,
                question=question.strip(),
                language=str(rec.get("language") or detect_language(question)),
                filters=_as_dict(rec.get("filters"), f"{where}, column 'filters'"),
                reference=reference if isinstance(reference, str) and reference.strip() else None,
                response=response if isinstance(response, str) and response.strip() else None,
                metadata=json.loads(json.dumps(metadata, default=str)),
                reference_context_grades=_as_grades(
                    rec.get("reference_context_grades"),
                    f"{where}, column 'reference_context_grades'",
                ),
                **lists,
            )
        )
        if limit and len(questions) >= limit:
            break
    return questions


__all__ = [
    "read_jsonl",
    "ALIASES",
    "MAX_GRADE",
    "Qrels",
    "Question",
    "check_gold",
    "check_qrels",
    "jsonl_lines",
    "load_qrels",
    "load_questions",
    "read_qrels",
    "with_qrels",
]
