"""What a judgment format is: a registered unit that reads a file into rows and writes rows back.

Every format reads into one frame (:data:`FRAME`: query text and id, document id and index, the
grade as written, annotator, state, rationale, time, the document's text where the source
carries it, and a JSON object of whatever else it said) and writes from the same frame. What
a format can hold besides (query, document, grade) is declared with it (:attr:`holds`), so an
export knows, before writing, what it will lose and can say so (``_export.py``). A format is a
class registered with :func:`register_format` under the name ``--format`` takes, with its own
options model (an SRW judgment's name, a ``_rank_eval`` metric), exactly as a metric or a
search backend is, so a plugin adds one by registering it in a module named in ``plugins``.
"""

from __future__ import annotations

import json
import zipfile
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Literal, TypeVar

import polars as pl
from pydantic import BaseModel, ConfigDict

from ragaudit.errors import InputError
from ragaudit.judgments._scale import RAGAUDIT, GradeScale, scale_of
from ragaudit.registry import JUDGMENT_FORMATS

FRAME: dict[str, Any] = {
    "query": pl.String,  # the query's text
    "query_id": pl.String,  # the source's id of the query (qid, request id, scenario id)
    "doc_id": pl.String,
    "doc_index": pl.String,  # ``_index``, where the source names one
    "value": pl.String,  # the grade as the source writes it
    "annotator": pl.String,
    "state": pl.String,  # graded | unrateable | later
    "reason": pl.String,  # the rater's explanation, the judge's reason
    "created_at": pl.String,
    "doc_text": pl.String,  # the document's text, where the source carries it
    "extra": pl.String,  # JSON object: anything else the source said of the row
}
"""The columns every format reads into and writes from."""

Holds = Literal[
    "query",
    "query_id",
    "doc_index",
    "annotator",
    "raters",
    "reason",
    "created_at",
    "doc_text",
    "unrateable",
    "later",
]
"""What a format can hold besides (query, document, grade): ``raters`` is several annotators'
rows of one pair, ``unrateable``/``later`` rows in those states."""


class FormatOptions(BaseModel):
    """Options of a format that takes none."""

    model_config = ConfigDict(frozen=True, extra="forbid")


@dataclass
class Read:
    """What a format read: the rows, and what the file itself says of them."""

    frame: pl.DataFrame
    scale: GradeScale | None = None
    """The scale the file declares (a Quepid book's ``scale``); None: the format's default."""
    source: str | None = None
    """The name the file gives itself (an SRW judgment's ``name``, a Quepid book's)."""
    notes: list[str] = field(default_factory=list)


@dataclass
class Written:
    """What a format wrote, and what it had to do to the rows on the way (the loss report's)."""

    data: bytes
    notes: list[dict[str, Any]] = field(default_factory=list)
    """Entries of the loss report the format alone knows (query ids it made up, a field it
    filled with another), each a JSON object with ``what`` and ``rows``."""


class JudgmentFormat:
    """A judgment format: :meth:`read` bytes into :data:`FRAME` rows, :meth:`write` them back.

    Subclasses set the class attributes and implement both methods; ``options`` is the format's
    options model, validated from ``--option key=value``.
    """

    name: ClassVar[str] = ""
    label: ClassVar[str] = ""
    """What the format is, in words (``Quepid ratings CSV``)."""
    scale: ClassVar[GradeScale] = RAGAUDIT
    """The scale its grades are read in unless the import declares another."""
    holds: ClassVar[frozenset[str]] = frozenset()
    """What it holds besides (query, document, grade): names of :data:`Holds`."""
    keeps: ClassVar[frozenset[str]] = frozenset()
    """The keys of a row's ``extra`` it writes back (a book's positions, RankLib's features)."""
    suffix: ClassVar[str] = ".txt"
    """The file name ending an export is written with."""
    options: ClassVar[type[BaseModel]] = FormatOptions

    def __init__(self, options: BaseModel | None = None, scale: GradeScale | None = None) -> None:
        self.opts = options if options is not None else self.options()
        self.grades = scale or type(self).scale
        """The scale in use: an export writes its values in it (a book names its marks)."""

    def read(self, data: bytes, where: str) -> Read:  # pragma: no cover - every format has one
        """The rows of ``data`` (a file's bytes); ``where`` names it in errors.

        Raises:
            InputError: The data is not this format; the message names where and what.
        """
        raise NotImplementedError

    def write(self, frame: pl.DataFrame) -> Written:  # pragma: no cover
        """``frame``'s rows in this format (only rows it can hold reach it)."""
        raise NotImplementedError

    def read_documents(self, docs: Iterator[tuple[str, dict[str, Any]]]) -> Read:
        """The rows of an index's documents (``where``, ``_source``), for a live import.

        Raises:
            InputError: The format is not kept in an index.
        """
        raise InputError(f"format '{self.name}' is a file format: it is not read from an index")

    def read_sources(self, docs: Iterator[tuple[str, dict[str, Any]]]) -> list[Read]:
        """An index's documents as sources: one by default.

        A format whose documents are each a list of its own (SRW's judgment lists, each of its
        own type and scale) splits them.
        """
        return [self.read_documents(docs)]


FormatT = TypeVar("FormatT", bound=type[JudgmentFormat])


def register_format(name: str) -> Callable[[FormatT], FormatT]:
    """Decorator: register a :class:`JudgmentFormat` subclass under ``name``."""

    def deco(cls: FormatT) -> FormatT:
        cls.name = JUDGMENT_FORMATS.add(name, cls, cls.options)
        return cls

    return deco


def format_names() -> list[str]:
    """Every registered format's name."""
    return JUDGMENT_FORMATS.names()


def make_format(
    name: str, options: Mapping[str, Any] | None = None, scale: str | GradeScale | None = None
) -> JudgmentFormat:
    """The format ``name`` built with ``options``, in ``scale`` (a spec; None: its default).

    Raises:
        InputError: An unknown format or option (the message lists the known ones).
    """
    try:
        cls = JUDGMENT_FORMATS.get(name)
        opts = JUDGMENT_FORMATS.build_options(name, options)
    except (KeyError, ValueError) as exc:
        raise InputError(f"--format: {exc.args[0]}") from None
    fmt: JudgmentFormat = cls(opts, scale_of(scale, cls.scale))
    return fmt


def framed(data: Mapping[str, Any] | pl.DataFrame) -> pl.DataFrame:
    """``data`` as a frame of :data:`FRAME`'s columns, in order (missing ones null)."""
    df = data if isinstance(data, pl.DataFrame) else pl.DataFrame(dict(data))
    cols = []
    for name, dtype in FRAME.items():
        if name in df.columns:
            cols.append(pl.col(name).cast(dtype))
        elif name == "state":
            cols.append(pl.lit("graded", dtype=dtype).alias(name))
        else:
            cols.append(pl.lit(None, dtype=dtype).alias(name))
    out = df.select(cols)
    return out.with_columns(pl.col("state").fill_null("graded"))


def empty_frame() -> pl.DataFrame:
    """A frame without rows."""
    return pl.DataFrame(schema=FRAME)


def file_bytes(path: Path) -> bytes:
    """A file's bytes; of a ``.zip`` (Quepid's book export), its one member's.

    Raises:
        InputError: A missing file, or an archive that is not one file.
    """
    if not path.is_file():
        raise InputError(f"{path}: file not found")
    if path.suffix.lower() != ".zip":
        return path.read_bytes()
    try:
        with zipfile.ZipFile(path) as archive:
            members = [m for m in archive.infolist() if not m.is_dir() and not _hidden(m.filename)]
            if len(members) != 1:
                raise InputError(f"{path}: an archive of {len(members)} files; expected one")
            return archive.read(members[0])
    except zipfile.BadZipFile:
        raise InputError(f"{path}: not a zip archive") from None


def _hidden(name: str) -> bool:
    """An archive member a desktop adds beside the file (``__MACOSX/``, ``.DS_Store``)."""
    return name.startswith("__MACOSX/") or name.rsplit("/", 1)[-1].startswith(".")


def parse_json(data: bytes, where: str) -> Any:
    """``data`` decoded as JSON (one clear error naming where, never a traceback)."""
    try:
        return json.loads(data.decode("utf-8-sig"))
    except UnicodeDecodeError:
        raise InputError(f"{where}: not UTF-8 text") from None
    except json.JSONDecodeError as exc:
        raise InputError(f"{where}: not JSON ({exc.msg} at line {exc.lineno})") from None


def text_of(data: bytes, where: str) -> str:
    """``data`` as UTF-8 text (a BOM dropped)."""
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise InputError(f"{where}: not UTF-8 text") from None


def json_extra(**fields: Any) -> str | None:
    """A row's ``extra`` JSON of the fields that are set (None when none is)."""
    kept = {k: v for k, v in fields.items() if v is not None}
    return json.dumps(kept, ensure_ascii=False, sort_keys=True) if kept else None


def extra_field(extra: str | None, name: str) -> Any:
    """One field of a row's ``extra`` JSON (None when absent)."""
    if not extra:
        return None
    return json.loads(extra).get(name)


def require(obj: Any, key: str, where: str, kind: type | tuple[type, ...] = str) -> Any:
    """``obj[key]`` of type ``kind``, or one error naming where and what was expected."""
    if not isinstance(obj, Mapping) or key not in obj:
        raise InputError(f"{where}: no '{key}'")
    value = obj[key]
    if not isinstance(value, kind):
        name = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
        raise InputError(f"{where}: '{key}' is {type(value).__name__}, expected {name}")
    return value


def grade_text(value: Any, where: str) -> str | None:
    """A grade value as text: numbers and numeric strings kept as written, null as None.

    Raises:
        InputError: A value that is neither a number nor a string nor null (a list, an object).
    """
    if value is None:
        return None
    if isinstance(value, bool):
        raise InputError(f"{where}: rating {value!r} is not a number")
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, str):
        return value
    raise InputError(f"{where}: rating {json.dumps(value)[:40]} is not a number")


CSV_UNSAFE = ("=", "+", "-", "@")
"""Characters a spreadsheet reads as the start of a formula: a cell beginning with one is written
after a space, as Quepid writes its CSV exports, and read back without it."""


def csv_safe(column: str) -> pl.Expr:
    """``column`` with a space before a value a spreadsheet would take for a formula."""
    col = pl.col(column)
    return (
        pl.when(col.str.contains(r"^[=+\-@]")).then(pl.lit(" ") + col).otherwise(col).alias(column)
    )


def csv_unsafe(column: str) -> pl.Expr:
    """``column`` with the space :func:`csv_safe` (or Quepid) put before a formula taken off."""
    col = pl.col(column)
    return (
        pl.when(col.str.contains(r"^ [=+\-@]")).then(col.str.slice(1)).otherwise(col).alias(column)
    )


def lines(data: bytes, where: str) -> pl.DataFrame:
    """The non-blank lines of a text file with their numbers (``n`` from 1, ``line``)."""
    text = text_of(data, where)
    df = pl.DataFrame({"line": text.splitlines()}).with_row_index("n", offset=1)
    return df.filter(pl.col("line").str.strip_chars() != "")


def first_unmatched(df: pl.DataFrame, column: str, where: str, expected: str) -> None:
    """Raise for the first line whose ``column`` is null (a line the pattern did not match).

    Raises:
        InputError: Naming the line's number and what a line should be.
    """
    bad = df.filter(pl.col(column).is_null())
    if bad.height:
        n, line = bad["n"][0], bad["line"][0]
        raise InputError(f"{where}: line {n}: expected {expected}, got {line[:80]!r}")


def query_ids(frame: pl.DataFrame) -> tuple[pl.DataFrame, list[dict[str, Any]]]:
    """``frame`` with every query given an id: its own, else ``q<n>`` by first appearance.

    For the formats that name a query by id alone (TREC, BEIR, RankLib, LTR): the loss report
    gets the ids made up and the query text each stands for, so a reader can map them back.
    """
    missing = frame.filter(pl.col("query_id").is_null())
    if missing.height == 0:
        return frame, []
    taken = set(frame["query_id"].drop_nulls().to_list())
    texts = missing["query"].unique(maintain_order=True).to_list()
    made: dict[str, str] = {}
    n = 0
    for text in texts:
        n += 1
        while f"q{n}" in taken:
            n += 1
        made[text] = f"q{n}"
    out = frame.with_columns(
        pl.col("query_id").fill_null(pl.col("query").replace_strict(made, default=None))
    )
    note = {
        "what": "query ids made up (the format names a query by id): id → query text",
        "rows": missing.height,
        "ids": {v: k for k, v in made.items()},
    }
    return out, [note]


__all__ = [
    "CSV_UNSAFE",
    "FRAME",
    "FormatOptions",
    "Holds",
    "JudgmentFormat",
    "Read",
    "Written",
    "csv_safe",
    "csv_unsafe",
    "empty_frame",
    "extra_field",
    "file_bytes",
    "first_unmatched",
    "format_names",
    "framed",
    "grade_text",
    "json_extra",
    "lines",
    "make_format",
    "parse_json",
    "query_ids",
    "register_format",
    "require",
    "text_of",
]
