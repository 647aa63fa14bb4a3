"""Corpora for the search backends: reading JSONL, Parquet or a folder of text, and chunking.

``ragaudit index``, the collect stage (``collect.corpus``), the reference pipeline of the
ablation sweeps, ``ragaudit testset`` and the calibration's scenario sets read corpora through
here, so a corpus means the same thing everywhere.

Chunking (the factors an ablation sweeps: chunk size, overlap, "keep paragraph context"):
windows of ``size`` units (characters; tokens of a model's tokenizer, counted by litellm; or
ragaudit's own tokens, a CJK character or a Latin word each) overlapping by ``overlap`` units.
Counted in a model's tokens, a chunk as written (its context line included) never holds more
than ``size`` of them. A window that does not reach the end of its document is
cut back to the last paragraph break, line break or sentence end in its final third, so a
chunk rarely stops mid-sentence. With ``keep_context`` every chunk starts with a line naming
where it comes from, the document's title and the headings above it (``Title › Section ›
Subsection``), and no chunk runs across a heading: a paragraph cut out of its document keeps
the context that says what it is about. Chunk ids are ``<document id>#<n>``, so indexing the
same corpus with the same options again writes the same documents: indexing is idempotent.
"""

from __future__ import annotations

import bisect
import codecs
import itertools
import json
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ragaudit.dataset import iter_jsonl, read_utf8
from ragaudit.errors import InputError
from ragaudit.search._base import Document, SearchBackend

TEXT_SUFFIXES = (".txt", ".md", ".markdown")
_TOKEN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]|[A-Za-z0-9]+(?:['’][A-Za-z]+)?")
_HEADING = re.compile(r"^(#{1,6})[ \t]+(.+?)[ \t#]*$", re.MULTILINE)
_ONLY_HEADINGS = re.compile(r"(?:\s*#{1,6}[ \t]+[^\n]*)*\s*")
_SENTENCE_END = re.compile(r"[。！？!?；;]|[.](?=\s)")


# ---------------------------------------------------------------------------- reading


def _metadata_from(
    obj: Mapping[str, Any], id_field: str, text_field: str, where: str
) -> dict[str, Any]:
    meta = obj.get("metadata")
    if isinstance(meta, str):
        try:
            meta = json.loads(meta) if meta.strip() else {}
        except json.JSONDecodeError:
            raise InputError(f"{where}: 'metadata' is text but not a JSON object") from None
    if meta is None:
        meta = {}
    if not isinstance(meta, Mapping):
        raise InputError(f"{where}: 'metadata' must be an object, got {type(meta).__name__}")
    # Other columns (title, url, collection …) are metadata too: nothing the corpus says is lost.
    extra = {
        k: v
        for k, v in obj.items()
        if k not in {id_field, text_field, "metadata"} and v is not None
    }
    return {**extra, **meta}


def _document(obj: Any, n: int, stem: str, id_field: str, text_field: str, where: str) -> Document:
    if not isinstance(obj, Mapping):
        raise InputError(
            f"{where}: expected an object with '{text_field}', got {type(obj).__name__}"
        )
    text = obj.get(text_field)
    if not isinstance(text, str):
        raise InputError(f"{where}: '{text_field}' is missing or not text")
    raw_id = obj.get(id_field)
    doc_id = f"{stem}-{n}" if raw_id is None or raw_id == "" else str(raw_id)
    return Document(id=doc_id, text=text, metadata=_metadata_from(obj, id_field, text_field, where))


def _read_jsonl(path: Path, id_field: str, text_field: str) -> Iterator[tuple[str, Document]]:
    # A .json file may be one array (read whole: JSON has no streaming form of it) or JSONL.
    content = read_utf8(path) if path.suffix.lower() == ".json" else ""
    if content.lstrip().startswith("["):
        try:
            items = json.loads(content)
        except json.JSONDecodeError as exc:
            raise InputError(f"{path}: not JSON ({exc.msg} at line {exc.lineno})") from None
        for n, obj in enumerate(items, start=1):
            where = f"{path}: item {n}"
            yield where, _document(obj, n, path.stem, id_field, text_field, where)
        return
    for n, obj in iter_jsonl(path):
        where = f"{path}: line {n}"
        yield where, _document(obj, n, path.stem, id_field, text_field, where)


def _read_parquet(path: Path, id_field: str, text_field: str) -> Iterator[tuple[str, Document]]:
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(path)
    except Exception as exc:  # pyarrow raises several types for a file that is not Parquet
        raise InputError(f"{path}: not a readable Parquet file ({exc})") from None
    if text_field not in table.column_names:
        raise InputError(
            f"{path}: no '{text_field}' column (columns: {', '.join(table.column_names)})"
        )
    for n, row in enumerate(table.to_pylist(), start=1):
        if isinstance(row.get("metadata"), list):  # a Parquet map arrives as key/value pairs
            row["metadata"] = dict(row["metadata"])
        where = f"{path}: row {n}"
        yield where, _document(row, n, path.stem, id_field, text_field, where)


def _title_of(text: str) -> str | None:
    m = _HEADING.search(text)
    if m and len(m.group(1)) == 1:
        return m.group(2).strip()
    return None


def _read_folder(path: Path) -> Iterator[tuple[str, Document]]:
    files = sorted(p for p in path.rglob("*") if p.is_file() and p.suffix.lower() in TEXT_SUFFIXES)
    if not files:
        raise InputError(f"{path}: no {', '.join(TEXT_SUFFIXES)} files in this folder")
    for file in files:
        rel = file.relative_to(path).as_posix()
        text = read_utf8(file)
        title = _title_of(text) or file.stem
        yield str(file), Document(id=rel, text=text, metadata={"path": rel, "title": title})


def _check_text_file(path: Path, block: int = 1 << 20) -> None:
    """Raise the InputError :func:`read_utf8` would, reading ``path`` in blocks (any size)."""
    decoder = codecs.getincrementaldecoder("utf-8")()
    line, line_start, offset = 1, 0, 0
    with path.open("rb") as fh:
        while chunk := fh.read(block):
            bad = chunk.find(b"\x00")
            try:
                decoder.decode(chunk if bad < 0 else chunk[:bad], final=False)
            except UnicodeDecodeError as exc:
                bad = exc.start
            if bad >= 0:
                line += chunk.count(b"\n", 0, bad)
                nl = chunk.rfind(b"\n", 0, bad)
                column = bad - nl if nl >= 0 else offset + bad - line_start + 1
                raise InputError(
                    f"{path}: not UTF-8 text (byte 0x{chunk[bad]:02x} at line {line}, byte "
                    f"{column} of the line); re-save the file as UTF-8 text"
                )
            line += chunk.count(b"\n")
            nl = chunk.rfind(b"\n")
            if nl >= 0:
                line_start = offset + nl + 1
            offset += len(chunk)
        try:
            decoder.decode(b"", final=True)
        except UnicodeDecodeError:
            raise InputError(f"{path}: not UTF-8 text (its last character is cut off)") from None


def check_corpus(path: Path | str) -> None:
    """Check that a corpus exists and that its text files are text, before any work.

    Read in blocks, so a corpus of any size costs one pass and no memory; Parquet files are
    left to their reader. A corpus with binary junk fails here, naming the line and the byte,
    rather than once the run has started.

    Raises:
        InputError: The corpus is missing, or a text file of it is not UTF-8 text.
    """
    path = Path(path)
    if not path.exists():
        raise InputError(f"{path}: not found")
    if path.is_dir():
        files = sorted(p for p in path.rglob("*") if p.suffix.lower() in TEXT_SUFFIXES)
    elif path.suffix.lower() in {".parquet", ".pq"}:
        files = []
    else:
        files = [path]
    for file in files:
        if file.is_file():
            _check_text_file(file)


def read_corpus(
    path: Path | str, *, id_field: str = "id", text_field: str = "text"
) -> list[Document]:
    """The documents of a corpus, as a list (see :func:`iter_corpus`)."""
    return list(iter_corpus(path, id_field=id_field, text_field=text_field))


def iter_corpus(
    path: Path | str, *, id_field: str = "id", text_field: str = "text"
) -> Iterator[Document]:
    """The documents of a corpus, one at a time: a large corpus is indexed in bounded memory.

    Args:
        path: A ``.jsonl`` file (one object per line), a ``.parquet`` file, or a folder of
            ``.txt``/``.md`` files (searched recursively; the id is the relative path).
        id_field: Field or column holding the id; when absent, ``<file stem>-<line/row>``.
        text_field: Field or column holding the text.

    Yields:
        Documents; a ``metadata`` object and every other field become the metadata.

    Raises:
        InputError: One message naming the file, the line or row, and what is wrong
            (including an id that appears twice).
    """
    path = Path(path)
    if not path.exists():
        raise InputError(f"{path}: not found")
    if path.is_dir():
        rows: Iterable[tuple[str, Document]] = _read_folder(path)
    elif path.suffix.lower() in {".jsonl", ".ndjson", ".json"}:
        rows = _read_jsonl(path, id_field, text_field)
    elif path.suffix.lower() in {".parquet", ".pq"}:
        rows = _read_parquet(path, id_field, text_field)
    elif path.suffix.lower() in TEXT_SUFFIXES:
        rows = (
            (
                str(path),
                Document(
                    id=path.name,
                    text=read_utf8(path),
                    metadata={"path": path.name, "title": path.stem},
                ),
            ),
        )
    else:
        raise InputError(f"{path}: use a .jsonl or .parquet file, or a folder of .txt/.md files")
    first_seen: dict[str, str] = {}
    for where, doc in rows:
        if doc.id in first_seen:
            raise InputError(f"{where}: id '{doc.id}' already used at {first_seen[doc.id]}")
        first_seen[doc.id] = where.rsplit(": ", 1)[-1]
        yield doc


# ---------------------------------------------------------------------------- chunking


@dataclass(frozen=True)
class Chunking:
    """How documents are cut before indexing.

    Attributes:
        size: Units per chunk; None or 0 keeps documents whole.
        overlap: Units shared by consecutive chunks of a document.
        unit: ``chars``, or ``tokens``: of ``tokenizer``'s tokenizer, or without one a CJK
            character or a Latin word each.
        keep_context: Start every chunk with its title and heading path.
        tokenizer: With ``unit="tokens"``, the model (a litellm model name) whose tokens
            are counted (:func:`ragaudit.cache.count_tokens`; cl100k for our fake and local
            models).
    """

    size: int | None = None
    overlap: int = 0
    unit: str = "chars"
    keep_context: bool = False
    tokenizer: str | None = None

    def __post_init__(self) -> None:
        if self.unit not in ("chars", "tokens"):
            raise ValueError(f"chunk unit must be 'chars' or 'tokens', not '{self.unit}'")
        if self.size is not None and self.size < 0:
            raise ValueError(f"chunk size must be positive, got {self.size}")
        if self.tokenizer is not None and self.unit != "tokens":
            raise ValueError("a chunk tokenizer counts tokens: use unit 'tokens' with it")
        if self.size and not 0 <= self.overlap < self.size:
            raise ValueError(
                f"chunk overlap must be >= 0 and below the size {self.size}, got {self.overlap}"
            )


class _Units:
    """Unit boundaries of a text: unit i spans ``text[start(i):end(i)]``."""

    def __init__(self, text: str, unit: str) -> None:
        self.chars = unit == "chars"
        if self.chars:
            self.n = len(text)
        else:
            spans = [m.span() for m in _TOKEN.finditer(text)]
            self.starts = [s for s, _ in spans]
            self.ends = [e for _, e in spans]
            self.n = len(spans)

    def start(self, i: int) -> int:
        return i if self.chars else self.starts[i]

    def end(self, i: int) -> int:
        return i + 1 if self.chars else self.ends[i]

    def units_before(self, offset: int) -> int:
        """How many units end at or before character ``offset``."""
        return offset if self.chars else bisect.bisect_right(self.ends, offset)


def _cut_back(text: str, lo: int, hi: int) -> int | None:
    """The best place to end a chunk within ``text[lo:hi]``, or None."""
    for sep in ("\n\n", "\n"):
        at = text.rfind(sep, lo, hi)
        if at > lo:
            return at
    last = None
    for m in _SENTENCE_END.finditer(text, lo, hi):
        last = m.end()
    if last is None:
        space = max(text.rfind(" ", lo, hi), text.rfind("\t", lo, hi))
        last = space if space > lo else None
    return last


def _headings(text: str) -> list[tuple[int, int, str]]:
    return [(m.start(), len(m.group(1)), m.group(2).strip()) for m in _HEADING.finditer(text)]


def _next_heading(text: str, heads: list[tuple[int, int, str]], start: int, end: int) -> int | None:
    """The first heading inside ``(start, end)`` that has text before it in the chunk."""
    for at, _, _ in heads:
        # Headings straight after headings stay with the text they introduce.
        if start < at < end and not _ONLY_HEADINGS.fullmatch(text, start, at):
            return at
    return None


def _context(title: str | None, heads: list[tuple[int, int, str]], offset: int) -> str:
    path: list[tuple[int, str]] = []
    for at, level, name in heads:
        if at > offset:
            break
        path = [p for p in path if p[0] < level] + [(level, name)]
    names = [name for _, name in path]
    if title and (not names or names[0] != title):
        names.insert(0, title)
    return " › ".join(names)


class _ModelTokens:
    """Counts a chunk's text in a model's tokens; finds the windows that fit a budget."""

    def __init__(self, model: str) -> None:
        from ragaudit.cache import count_tokens

        self.model = model
        self._count = count_tokens

    def count(self, text: str) -> int:
        return self._count(self.model, text)

    def last_fitting(self, lo: int, hi: int, fits: Callable[[int], bool]) -> int:
        """The largest ``j`` in ``[lo, hi]`` with ``fits(j)`` (assumed monotone), or ``lo``."""
        if fits(hi):
            return hi
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if fits(mid):
                lo = mid
            else:
                hi = mid
        return lo


def _render(
    text: str,
    start: int,
    end: int,
    title: str | None,
    heads: list[tuple[int, int, str]],
    keep_context: bool,
) -> tuple[str, str | None]:
    """The chunk's text for ``text[start:end]`` and its context line (None when off or empty)."""
    body = text[start:end].strip()
    if not (keep_context and body):
        return body, None
    context = _context(title, heads, start) or None
    if context:
        # A chunk that opens with its own heading already says where it is.
        opening = _HEADING.match(body)
        if not (opening and context.endswith(opening.group(2).strip())):
            body = f"{context}\n{body}"
    return body, context


def chunk_document(doc: Document, chunking: Chunking) -> list[Document]:
    """The chunks of one document (the document itself when chunking is off)."""
    if not chunking.size:
        return [doc]
    text = doc.text
    units = _Units(text, chunking.unit)
    if units.n == 0:
        return []
    title = doc.metadata.get("title") if isinstance(doc.metadata.get("title"), str) else None
    heads = _headings(text) if chunking.keep_context else []
    size, overlap = chunking.size, chunking.overlap
    model = _ModelTokens(chunking.tokenizer) if chunking.tokenizer else None

    def render(i: int, j: int) -> tuple[str, str | None]:
        return _render(text, units.start(i), units.end(j - 1), title, heads, chunking.keep_context)

    out: list[Document] = []
    i = 0
    while i < units.n:
        # A ragaudit token (a CJK character, a word) is at least one model token, so ``size``
        # of them bound the window in either count.
        j = min(i + size, units.n)
        if model is not None:

            def fits(e: int, i: int = i) -> bool:
                return model.count(render(i, e)[0]) <= size

            j = model.last_fitting(i + 1, j, fits)
        next_head = _next_heading(text, heads, units.start(i), units.end(j - 1))
        if next_head is not None:
            # With context on, a chunk stays inside one section, so its context line is true
            # for all of it.
            j = max(units.units_before(next_head), i + 1)
        elif j < units.n:
            # Cut back within the window's final third (its length in units: model tokens may
            # fill the budget in fewer units than ``size``).
            lo = units.start(i + (2 * (j - i)) // 3)
            cut = _cut_back(text, lo, units.end(j - 1))
            if cut is not None:
                # A heading belongs to the text after it: never end a chunk with one.
                line_start = text.rfind("\n", units.start(i), cut) + 1
                if line_start > units.start(i) and _HEADING.match(text, line_start, cut):
                    cut = line_start
                j = max(units.units_before(cut), i + 1)
        start, end = units.start(i), units.end(j - 1)
        body, context = render(i, j)
        if model is not None and model.count(body) > size:
            # One unit that alone overflows (a long token-less string, or a context line longer
            # than the budget): keep the text without its context line, cut to the budget.
            body = text[start:end].strip()

            def fits_text(e: int, b: str = body) -> bool:
                return model.count(b[:e]) <= size

            keep = model.last_fitting(1, len(body), fits_text)
            body, context = body[:keep], None
        if body:
            meta = {**doc.metadata, "doc_id": doc.id, "chunk": len(out), "start": start, "end": end}
            if context:
                meta["context"] = context
            out.append(Document(id=f"{doc.id}#{len(out)}", text=body, metadata=meta))
        if j >= units.n:
            break
        if model is not None:
            # The overlap: the last units of this chunk that hold at most ``overlap`` tokens, and
            # at most half of its text, so a long context line never leaves a chunk that is
            # nearly all overlap.
            share = min(overlap, model.count(text[start:end]) // 2)

            def fits_tail(n: int, j: int = j, end: int = end, share: int = share) -> bool:
                return model.count(text[units.start(j - n) : end]) <= share

            tail = model.last_fitting(0, j - i - 1, fits_tail)
            nxt = max(j - tail, i + 1) if overlap else j
        else:
            nxt = max(j - overlap, i + 1)
        if units.chars:
            # Start the overlap at a word, not inside one (Latin words; CJK characters are words).
            while nxt < j and _mid_word(text, nxt):
                nxt += 1
        i = nxt
    return out


def _mid_word(text: str, at: int) -> bool:
    return 0 < at < len(text) and _is_latin_word(text[at - 1]) and _is_latin_word(text[at])


def _is_latin_word(ch: str) -> bool:
    return ch.isascii() and ch.isalnum()


def chunk_documents(
    docs: Iterable[Document], chunking: Chunking, metadata: Mapping[str, Any] | None = None
) -> list[Document]:
    """Every document's chunks, with ``metadata`` added to each (it wins over the corpus's)."""
    extra = dict(metadata or {})
    out: list[Document] = []
    for doc in docs:
        if extra:
            doc = Document(id=doc.id, text=doc.text, metadata={**doc.metadata, **extra})
        out.extend(chunk_document(doc, chunking))
    return out


def batches(items: Iterable[Document], size: int) -> Iterator[list[Document]]:
    """``items`` in lists of ``size`` (the last one shorter), read as they are needed."""
    it = iter(items)
    while batch := list(itertools.islice(it, size)):
        yield batch


def index_documents(
    backend: SearchBackend,
    docs: Iterable[Document],
    *,
    batch_size: int = 500,
    on_batch: Callable[[int], None] | None = None,
) -> int:
    """Write ``docs`` into ``backend`` in batches; returns how many were written."""
    written = 0
    for batch in batches(docs, batch_size):
        written += backend.index(batch)
        if on_batch is not None:
            on_batch(len(batch))
    return written


__all__ = [
    "TEXT_SUFFIXES",
    "Chunking",
    "batches",
    "chunk_document",
    "chunk_documents",
    "index_documents",
    "iter_corpus",
    "read_corpus",
]
