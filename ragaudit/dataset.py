"""Question sets: JSONL, JSON, CSV or Parquet, with ragaudit's or RAGAS's field names.

A malformed file gets one message that names the file, the row and the column; nothing is
guessed silently.
"""

from __future__ import annotations

import csv
import gzip
import io
import json
import logging
import math
import re
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Literal, cast

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
    "conversation_id",
    "turn",
    "history",
    "rewrite",
    "answerability",
    "turn_kind",
}
_LIST_FIELDS = ("reference_context_ids", "reference_contexts", "retrieved_contexts")


ROLES = {
    "user": "user",
    "human": "user",
    "assistant": "assistant",
    "agent": "assistant",
    "bot": "assistant",
    "ai": "assistant",
}
"""A turn's speaker as conversation logs name it → ``user`` or ``assistant``."""

ANSWERABILITY = ("answerable", "partial", "unanswerable", "underspecified", "conversational")
"""What a turn's answer can be, as MTRAG labels it (its ``UNANSERABLE`` spelling read too)."""

TURN_KINDS = ("standalone", "follow-up", "clarification")
"""How a turn stands to the ones before it: understood alone, a follow-up needing them, or a
clarification asked by the user."""


CONVERSATION_FIELDS = (
    "conversation_id",
    "turn",
    "history",
    "rewrite",
    "answerability",
    "turn_kind",
)
"""A question's fields that place it in a conversation (one JSON column of a run's table)."""


class Turn(BaseModel):
    """One earlier turn of a conversation: who spoke, and what."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    role: Literal["user", "assistant"]
    text: str


TURN_BANDS = ("1", "2", "3-5", "6+")
"""Turn positions as reports break them down."""


def turn_band(turn: int | None) -> str | None:
    """The turn's band: ``1``, ``2``, ``3-5`` or ``6+`` (None: not a turn of a conversation)."""
    if turn is None:
        return None
    if turn <= 2:
        return str(max(turn, 1))
    return "3-5" if turn <= 5 else "6+"


def exchanges(history: Iterable[Turn]) -> list[list[Turn]]:
    """The history cut into exchanges: each user turn with the answers after it."""
    out: list[list[Turn]] = []
    for turn in history:
        if turn.role == "user" or not out:
            out.append([turn])
        else:
            out[-1].append(turn)
    return out


class Question(BaseModel):
    """One question-set row; a turn of a conversation when it carries a history."""

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
    conversation_id: str | None = None
    """The conversation this question is a turn of (None: a question that stands alone)."""
    turn: int | None = None
    """Its position among the conversation's user turns (1: the first)."""
    history: list[Turn] | None = None
    """The conversation's earlier turns, oldest first, the assistant's answers between."""
    rewrite: str | None = None
    """The turn rewritten as a question that stands alone (given with the set)."""
    answerability: str | None = None
    """One of :data:`ANSWERABILITY`, where the set labels it."""
    turn_kind: str | None = None
    """One of :data:`TURN_KINDS`, where the set labels it."""

    @property
    def conversational(self) -> bool:
        """Whether the question is a turn with earlier turns (judged with them)."""
        return bool(self.history)


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


@dataclass(frozen=True)
class BadLine:
    """A line of a JSONL file that holds no JSON value, and why (``iter_jsonl(bad="yield")``)."""

    reason: str


_BOM = b"\xef\xbb\xbf"
_SKIP = 1 << 20  # bytes read at a time past an over-long line, which is never held whole
# What reading a file can raise part way: a read error, a truncated or corrupt gzip stream.
_READ_ERRORS = (OSError, EOFError, zlib.error)


def _open_binary(path: Path) -> IO[bytes]:
    if path.name.endswith(".gz"):
        return cast(IO[bytes], gzip.open(path, "rb"))
    return path.open("rb")


def _rest_of_line(handle: IO[bytes], start: bytes) -> int:
    """The length of a line that begins with ``start``, its rest read past a block at a time."""
    size, raw = len(start), start
    while raw and not raw.endswith(b"\n"):
        raw = handle.readline(_SKIP)
        size += len(raw)
    return size


def iter_jsonl(
    path: Path | str,
    *,
    bad: Literal["raise", "yield"] = "raise",
    max_line_bytes: int | None = None,
) -> Iterator[tuple[int, Any]]:
    r"""Each JSON value of a JSONL file with its line number, read line by line; blanks skipped.

    The one JSONL reader (question sets, labels, calibration sets, corpora, the audit's logs).
    It holds one line at a time, so a file of any size reads in bounded memory; a ``.gz`` file
    is read through gzip. Lines break at "\n" only (a trailing "\r" dropped), as
    :func:`jsonl_lines` says why. What a value must be is the caller's to say: a corpus names
    the field it misses, a question set the row.

    Args:
        path: The file.
        bad: ``raise``: a line that holds no JSON value fails the file. ``yield``: it is
            yielded as a :class:`BadLine` with its number and the reading goes on; a file that
            cannot be read to its end (a truncated gzip) ends with one :class:`BadLine` after
            the lines read (a day of logs counts them instead of failing whole).
        max_line_bytes: A longer line is not read (nor held), but refused as bad.

    Raises:
        InputError: The file cannot be opened; with ``bad="raise"`` also a line that is not
            UTF-8 or holds a NUL byte (naming the line and byte), is not valid JSON, is nested
            too deeply or is too long (naming the file and the line), or a file that cannot be
            read to its end.
    """
    path = Path(path)
    try:
        handle = _open_binary(path)
    except OSError as exc:
        raise InputError(f"{path}: cannot read ({exc})") from None
    n = 0
    with handle:
        try:
            # Binary lines split at b"\n" only, like jsonl_lines; the BOM may open line 1. With
            # a bound, a line is read at most one byte past it (then skipped, never held).
            limit = max_line_bytes
            lines = handle if limit is None else iter(lambda: handle.readline(limit + 1), b"")
            for n, raw in enumerate(lines, start=1):
                value: Any = None
                problem: str | None
                if limit is not None and len(raw) > limit and not raw.endswith(b"\n"):
                    problem = f"{_rest_of_line(handle, raw):,} bytes long, more than {limit:,}"
                    message = f"line {n}: {problem}"
                else:
                    text, problem = _utf8_text(raw.removeprefix(_BOM) if n == 1 else raw, n)
                    message = f"{problem}; re-save the file as UTF-8 text"
                    if problem is None:
                        if not text.strip():
                            continue
                        value, problem = _json_value(text)
                        message = f"line {n}: {problem}"
                if problem is None:
                    yield n, value
                    continue
                if bad == "raise":
                    raise InputError(f"{path}: {message}")
                yield n, BadLine(problem)
        except _READ_ERRORS as exc:  # a truncated gzip member, a read error
            problem = f"cannot be read past line {n} ({exc})"
            if bad == "raise":
                raise InputError(f"{path}: {problem}") from None
            yield n + 1, BadLine(problem)


def _utf8_text(data: bytes, n: int) -> tuple[str, str | None]:
    """Line ``n``'s text, or what :func:`read_utf8` says of the same byte."""
    bad = data.find(b"\x00")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        bad = exc.start if bad < 0 else min(bad, exc.start)
    if bad >= 0:
        return (
            "",
            f"not UTF-8 text (byte 0x{data[bad]:02x} at line {n}, byte {bad + 1} of the line)",
        )
    return text.removesuffix("\n").removesuffix("\r"), None


def _json_value(text: str) -> tuple[Any, str | None]:
    try:
        return json.loads(text), None
    except json.JSONDecodeError as exc:
        return None, f"not valid JSON ({exc.msg})"
    except RecursionError:  # the parser recurses per level: deep nesting is one bad line
        return None, "nested too deeply to read as JSON"


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
        if isinstance(obj, dict) and isinstance(obj.get("tasks"), list) and "documents" in obj:
            return _evaluation_tasks(obj, path), "task"
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


def _turns(value: Any, where: str) -> list[Turn]:
    """A history or a conversation's messages: ``[{role|speaker, text|content}, …]``."""
    value = _decoded(value, where, "a JSON list of turns")
    if not isinstance(value, list):
        raise InputError(f"{where}: expected a list of turns ({{role, text}}), got {value!r:.60}")
    out = []
    for n, item in enumerate(value, start=1):
        if not isinstance(item, dict):
            raise InputError(f"{where}: turn {n}: expected an object with role and text")
        role = ROLES.get(str(item.get("role") or item.get("speaker") or "").strip().lower())
        text = item.get("text", item.get("content"))
        if role is None:
            raise InputError(
                f"{where}: turn {n}: role {item.get('role') or item.get('speaker')!r:.40} is "
                f"none of {', '.join(sorted(ROLES))}"
            )
        if not isinstance(text, str):
            raise InputError(f"{where}: turn {n}: no text")
        out.append(Turn(role=role, text=text))  # type: ignore[arg-type]
    return out


def _label(value: Any, known: tuple[str, ...], where: str) -> str | None:
    """A label from a set (case and MTRAG's spellings forgiven); None when not given."""
    if isinstance(value, list):
        value = value[0] if value else None
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    text = str(value).strip().lower().replace("_", "-").replace(" ", "-")
    text = {"unanserable": "unanswerable", "followup": "follow-up", "n/a": "standalone"}.get(
        text, text
    )
    if text not in known:
        raise InputError(f"{where}: {value!r:.40} is none of {', '.join(known)}")
    return text


def _conversation_fields(rec: dict[str, Any], where: str) -> dict[str, Any]:
    """A row's conversation fields, checked (empty for a question that stands alone)."""
    out: dict[str, Any] = {}
    if rec.get("conversation_id") not in (None, ""):
        out["conversation_id"] = str(rec["conversation_id"])
    if rec.get("turn") not in (None, ""):
        try:
            out["turn"] = int(rec["turn"])
        except (TypeError, ValueError):
            raise InputError(f"{where}, column 'turn': not a whole number") from None
        if out["turn"] < 1:
            raise InputError(f"{where}, column 'turn': {out['turn']}; the first turn is 1")
    if rec.get("history") not in (None, "", []):
        out["history"] = _turns(rec["history"], f"{where}, column 'history'")
    if isinstance(rec.get("rewrite"), str) and rec["rewrite"].strip():
        out["rewrite"] = rec["rewrite"].strip()
    answerability = _label(
        rec.get("answerability"), ANSWERABILITY, f"{where}, column 'answerability'"
    )
    kind = _label(rec.get("turn_kind"), TURN_KINDS, f"{where}, column 'turn_kind'")
    if answerability is not None:
        out["answerability"] = answerability
    if kind is not None:
        out["turn_kind"] = kind
    if "history" in out and "turn" not in out:
        out["turn"] = sum(t.role == "user" for t in out["history"]) + 1
    return out


def _conversations(records: list[dict[str, Any]], unit: str, path: Path) -> list[dict[str, Any]]:
    """Records of whole conversations (``messages`` or ``turns``) as one record per user turn.

    Each user turn becomes a question whose history is every turn before it; the assistant's
    answer that follows it, when the log holds one, is the response evaluated. Records that
    are questions already pass through.
    """
    out: list[dict[str, Any]] = []
    for index, rec in enumerate(records, start=1):
        key = "messages" if "messages" in rec else "turns" if "turns" in rec else None
        if key is None or "question" in rec or "user_input" in rec:
            out.append(rec)
            continue
        pos = rec.get("__pos", index)
        where = f"{path}: {unit} {pos}"
        turns = _turns(rec[key], f"{where}, column '{key}'")
        conversation = str(rec.get("conversation_id") or rec.get("id") or f"c{index:04d}")
        shared = {
            k: v
            for k, v in rec.items()
            if k not in {key, "conversation_id", "id", "__pos"} and not k.startswith("__")
        }
        number = 0
        for at, turn in enumerate(turns):
            if turn.role != "user":
                continue
            number += 1
            answer = (
                turns[at + 1].text
                if at + 1 < len(turns) and turns[at + 1].role == "assistant"
                else None
            )
            out.append(
                {
                    **shared,
                    "__pos": f"{pos}, turn {number}",
                    "question_id": f"{conversation}::{number}",
                    "question": turn.text,
                    "conversation_id": conversation,
                    "turn": number,
                    "history": [t.model_dump() for t in turns[:at]],
                    **({"response": answer} if answer is not None else {}),
                }
            )
    return out


_MTRAG_SEPARATOR = "<::>"
"""Between a conversation's id and a turn's number in MTRAG's task and query ids."""

_QUERY_FORMS = ("lastturn", "rewrite", "questions")
_QUERY_FILE = re.compile(r"(?P<stem>.+)_(?P<form>lastturn|rewrite|questions)\.jsonl")
_USER_LINE = re.compile(r"(?:^|\n)\|user\|:[ \t]?")


def _is_beir_queries(records: list[dict[str, Any]]) -> bool:
    """Whether the records are BEIR queries (``_id``, ``text``), as MTRAG's query files are."""
    return bool(records) and all(
        isinstance(r.get("_id"), str) and isinstance(r.get("text"), str) and "question" not in r
        for r in records
    )


def _is_generation_tasks(records: list[dict[str, Any]]) -> bool:
    """Whether the records are MTRAG generation tasks (``input`` turns, ``targets``)."""
    return bool(records) and all(
        isinstance(r.get("input"), list) and ("targets" in r or "task_id" in r) for r in records
    )


def _user_turns(text: str) -> list[str]:
    """The user turns of an MTRAG query text (``|user|: …`` lines); a plain text is one turn."""
    if not _USER_LINE.match(text):
        return [text.strip()]
    return [part.strip() for part in _USER_LINE.split(text)[1:]]


def _place(qid: str, where: str) -> dict[str, Any]:
    """The conversation and turn an MTRAG id (``<conversation><::><turn>``) names."""
    if _MTRAG_SEPARATOR not in qid:
        return {}
    conversation, _, turn = qid.rpartition(_MTRAG_SEPARATOR)
    if not turn.isdigit():
        raise InputError(f"{where}: id '{clip(qid, 80)}': the turn after '<::>' is not a number")
    return {"conversation_id": conversation, "turn": int(turn)}


def _sibling_queries(path: Path) -> dict[str, str]:
    """Id → text of a BEIR query file found beside the one named."""
    texts: dict[str, str] = {}
    for n, rec in read_jsonl(path):
        if not isinstance(rec.get("_id"), str) or not isinstance(rec.get("text"), str):
            raise InputError(f"{path}: line {n}: expected a BEIR query (_id and text)")
        texts[rec["_id"]] = rec["text"]
    return texts


def _query_forms(records: list[dict[str, Any]], path: Path) -> dict[str, dict[str, str]]:
    """Query form → id → text: the file read, and its sibling forms found beside it.

    MTRAG gives a domain's queries three times: ``<domain>_lastturn.jsonl`` (the turn),
    ``<domain>_rewrite.jsonl`` (rewritten to stand alone) and ``<domain>_questions.jsonl``
    (every user turn so far). Whichever is named, the others are read from beside it; a file
    named otherwise is read alone, as every user turn so far.

    Raises:
        InputError: A sibling lacks an id the named file holds.
    """
    named = _QUERY_FILE.fullmatch(path.name)
    own = {r["_id"]: r["text"] for r in records}
    if named is None:
        return {"questions": own}
    forms: dict[str, dict[str, str]] = {}
    for form in _QUERY_FORMS:
        sibling = path.with_name(f"{named['stem']}_{form}.jsonl")
        if form == named["form"]:
            forms[form] = own
        elif sibling.is_file():
            forms[form] = texts = _sibling_queries(sibling)
            missing = [qid for qid in own if qid not in texts]
            if missing:
                raise InputError(
                    f"{sibling}: no query '{clip(missing[0], 80)}' ({len(missing)} missing) "
                    f"that {path.name} holds: a domain's query files must hold the same ids"
                )
    return forms


def _beside_qrels(path: Path, ids: Iterable[str]) -> dict[str, dict[str, int]]:
    """The BEIR qrels beside a query file (``qrels/dev.tsv``, or ``qrels/<domain>.tsv``)."""
    named = _QUERY_FILE.fullmatch(path.name)
    names = ["dev.tsv"] + ([f"{named['stem']}.tsv"] if named else [])
    found = next(
        (path.parent / "qrels" / n for n in names if (path.parent / "qrels" / n).is_file()), None
    )
    if found is None:
        return {}
    qrels = read_qrels(found)
    # Grades of queries the file does not hold (a file cut short) are said once and dropped,
    # as gold.allow_unknown_ids does: nothing reads them.
    for note in check_qrels(qrels, ids, allow_unknown_ids=True):
        _log.warning(note)
    return qrels.grades


def _beir_questions(records: list[dict[str, Any]], path: Path) -> list[dict[str, Any]]:
    """MTRAG's retrieval queries as question records, one per task, with their gold.

    A question's text is the turn (the last-turn form, else the last user turn of the
    every-turn form), its history the earlier user turns (MTRAG's query files carry no
    answers), its ``rewrite`` the rewritten form's text, its graded gold the qrels beside. The
    domain (``govt`` of ``govt_lastturn.jsonl``) is kept as metadata ``collection``.
    """
    forms = _query_forms(records, path)
    grades = _beside_qrels(path, (r["_id"] for r in records))
    named = _QUERY_FILE.fullmatch(path.name)
    out = []
    for index, rec in enumerate(records, start=1):
        pos = rec.get("__pos", index)
        qid, where = rec["_id"], f"{path}: line {pos}"
        turns = _user_turns(forms["questions"][qid]) if "questions" in forms else []
        if "lastturn" in forms:
            question = _user_turns(forms["lastturn"][qid])[-1]
        elif turns:
            question = turns[-1]
        else:
            question = _user_turns(forms["rewrite"][qid])[-1]
        row: dict[str, Any] = {"__pos": pos, "question_id": qid, "question": question}
        row.update(_place(qid, where))
        if len(turns) > 1:
            row["history"] = [{"role": "user", "text": t} for t in turns[:-1]]
        if "rewrite" in forms and ("lastturn" in forms or turns):
            row["rewrite"] = _user_turns(forms["rewrite"][qid])[-1]
        if qid in grades:
            row["reference_context_grades"] = grades[qid]
        if named is not None:
            row["collection"] = named["stem"]
        out.append(row)
    return out


def _evaluation_tasks(obj: dict[str, Any], path: Path) -> list[dict[str, Any]]:
    """An InspectorRAGet file's tasks (MTRAG's human-evaluated subset) as generation tasks.

    A task's ``contexts`` name documents of the file's ``documents`` by id: their texts are
    filled in. The responses its ``evaluations`` judge ride along by model, as metadata
    ``responses``; the people's ratings are not read.

    Raises:
        InputError: A document without id or text, or a context naming a document the file
            lacks.
    """
    documents: dict[str, dict[str, Any]] = {}
    for n, doc in enumerate(obj.get("documents") or [], start=1):
        if not isinstance(doc, dict) or not isinstance(doc.get("document_id"), str):
            raise InputError(f"{path}: documents, item {n}: no document_id")
        if not isinstance(doc.get("text"), str):
            raise InputError(f"{path}: documents, item {n}: no text")
        documents[doc["document_id"]] = doc
    responses: dict[str, dict[str, str]] = {}
    for item in obj.get("evaluations") or []:
        if isinstance(item, dict) and isinstance(item.get("model_response"), str):
            model = str(item.get("model_id"))
            responses.setdefault(str(item.get("task_id")), {})[model] = item["model_response"]
    tasks = []
    for n, task in enumerate(obj["tasks"], start=1):
        if not isinstance(task, dict):
            raise InputError(f"{path}: tasks, item {n}: expected a JSON object")
        contexts = []
        for c in task.get("contexts") or []:
            cid = c.get("document_id") if isinstance(c, dict) else None
            if isinstance(c, dict) and isinstance(c.get("text"), str):
                contexts.append(c)
            elif cid in documents:
                contexts.append({**documents[cid], **c})
            else:
                raise InputError(
                    f"{path}: tasks, item {n}: context document {clip(cid, 80)!r} is not among "
                    "the file's documents"
                )
        got = responses.get(str(task.get("task_id")))
        tasks.append(
            {**task, "contexts": contexts, "__pos": n, **({"responses": got} if got else {})}
        )
    return tasks


def _given(value: Any) -> Any:
    """A label as given; None for the NaN a pandas export writes where there is none."""
    return None if isinstance(value, float) and math.isnan(value) else value


_TASK_FIELDS = {
    "task_id",
    "conversation_id",
    "input",
    "contexts",
    "targets",
    "turn",
    "Turn",
    "answerability",
    "Answerability",
    "Multi-Turn",
    "Question Type",
    "Collection",
    "responses",
    "predictions",
    "__pos",
}
"""A generation task's fields read into the question; the rest go to its metadata as they are."""


def _task_questions(records: list[dict[str, Any]], unit: str, path: Path) -> list[dict[str, Any]]:
    """MTRAG's generation tasks as question records, one per task.

    The last of a task's ``input`` turns is the question, the earlier ones (user and agent)
    its history; its ``contexts`` are the reference passages (ids and texts), its first
    ``targets`` answer the reference answer, its first ``predictions`` answer (MTRAGEval's
    response files) the response evaluated; ``answerability``, ``Multi-Turn`` (the turn's
    kind) and ``turn`` are read into their fields, ``Question Type`` and ``Collection`` kept
    as metadata ``question_type`` and ``collection``.

    Raises:
        InputError: A task whose last input turn is not the user's, or a context without
            ``document_id`` or text.
    """
    out = []
    for index, rec in enumerate(records, start=1):
        pos = rec.get("__pos", index)
        where = f"{path}: {unit} {pos}"
        turns = _turns(rec["input"], f"{where}, column 'input'")
        if not turns or turns[-1].role != "user":
            raise InputError(f"{where}, column 'input': the last turn is not the user's")
        qid = str(rec.get("task_id") or "").strip()
        place = _place(qid, where) if qid else {}
        contexts = rec.get("contexts") or []
        for n, c in enumerate(contexts, start=1):
            if not isinstance(c, dict) or not isinstance(c.get("document_id"), str):
                raise InputError(f"{where}, column 'contexts': context {n} has no document_id")
            if not isinstance(c.get("text"), str):
                raise InputError(f"{where}, column 'contexts': context {n} has no text")
        targets = [
            t.get("text")
            for t in rec.get("targets") or []
            if isinstance(t, dict) and isinstance(t.get("text"), str)
        ]
        row: dict[str, Any] = {
            **{k: v for k, v in rec.items() if k not in _TASK_FIELDS},
            "__pos": pos,
            "question": turns[-1].text,
            "history": [t.model_dump() for t in turns[:-1]],
            "answerability": _given(rec.get("answerability", rec.get("Answerability"))),
            "turn_kind": _given(rec.get("Multi-Turn")),
        }
        if qid:
            row["question_id"] = qid
        conversation = rec.get("conversation_id") or place.get("conversation_id")
        if conversation:
            row["conversation_id"] = conversation
        turn = rec.get("turn", rec.get("Turn"))
        if turn not in (None, ""):
            row["turn"] = turn
        elif "turn" in place:
            row["turn"] = place["turn"]
        if contexts:
            row["reference_context_ids"] = [c["document_id"] for c in contexts]
            row["reference_contexts"] = [c["text"] for c in contexts]
        if targets:
            row["reference"] = targets[0]
        for key, name in (("Question Type", "question_type"), ("Collection", "collection")):
            if key in rec:
                row[name] = rec[key]
        if rec.get("responses"):
            row["responses"] = rec["responses"]
        predicted = [p.get("text") for p in rec.get("predictions") or [] if isinstance(p, dict)]
        if predicted and isinstance(predicted[0], str):
            row["response"] = predicted[0]
        out.append(row)
    return out


def _mtrag(records: list[dict[str, Any]], unit: str, path: Path) -> list[dict[str, Any]]:
    """MTRAG's released files as question records; other records pass through unchanged."""
    if _is_beir_queries(records):
        return _beir_questions(records, path)
    if _is_generation_tasks(records):
        return _task_questions(records, unit, path)
    return records


def load_questions(path: Path | str, limit: int | None = None) -> list[Question]:
    """Read and validate a question set; raises InputError naming row and column.

    A row may be a turn of a conversation (``conversation_id``, ``turn``, its ``history``);
    a file of whole conversations (``messages`` or ``turns`` per record) gives one question
    per user turn, each with the turns before it. MTRAG's released files are read as they are:
    a retrieval query file (``*_lastturn.jsonl``, ``*_rewrite.jsonl`` or ``*_questions.jsonl``,
    its sibling forms and ``qrels/dev.tsv`` found beside it), generation tasks (``input``
    turns, ``contexts``, ``targets``) and the human-evaluated subset (an InspectorRAGet file:
    ``documents``, ``tasks``, ``evaluations``).
    """
    path = Path(path)
    if not path.is_file():
        raise InputError(f"question set {path}: file not found")
    records, unit = _records(path)
    records = _conversations(_mtrag(records, unit, path), unit, path)
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
        lists: dict[str, Any] = {
            f: _as_list(rec.get(f), f"{where}, column '{f}'") for f in _LIST_FIELDS
        }
        reference = rec.get("reference")
        response = rec.get("response")
        turns = _conversation_fields(rec, where)
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
                **turns,
            )
        )
        if limit and len(questions) >= limit:
            break
    return questions


__all__ = [
    "read_jsonl",
    "ALIASES",
    "ANSWERABILITY",
    "CONVERSATION_FIELDS",
    "ROLES",
    "TURN_BANDS",
    "TURN_KINDS",
    "Turn",
    "exchanges",
    "turn_band",
    "BadLine",
    "MAX_GRADE",
    "Qrels",
    "Question",
    "check_gold",
    "check_qrels",
    "iter_jsonl",
    "jsonl_lines",
    "load_qrels",
    "load_questions",
    "read_qrels",
    "with_qrels",
]
