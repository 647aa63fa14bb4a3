"""Which embedded library should back the ``local`` search backend? Measure, then choose.

Corpus: every paragraph of the 100 DuReader search.dev questions (3,639 paragraphs), id
``{question_id}-{doc}-{para}``, metadata ``{"collection": str(question_id), "doc", "para"}``.
For each question we search its own collection (the metadata filter), top 200, and look up
the rank of its gold paragraphs (``most_related_para`` of each ``is_selected`` document).

Per candidate, in one run: index build time (analysis + write + index, to a persistent
folder), reopen time (a new handle on the folder + first query), mean query latency (analysis
included) and p95, MRR of the first gold paragraph, recall@5 of the gold paragraphs, MRR over
the whole corpus without the filter, a paired bootstrap of the MRR against the analyser
LocalBackend uses (100 questions are few: it tells a difference from noise), size on disk;
speed ratios are against the fastest candidate. The last rows go through
``ragaudit.search._local.LocalBackend`` itself (async API, ``asyncio.to_thread``), in bm25,
vector and hybrid mode. The vectors there come from a hashed character-bigram embedder: it is
lexical, not semantic, so its quality figures only show that the plumbing ranks sensibly;
its latency is that of 384-dimensional vectors, the size of MiniLM's.

Usage::

    python bench/bench_local_backend.py [--data PATH] [--only lance-jieba,sqlite-jieba] [--repeat 3]
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import logging
import math
import os
import random
import re
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

DATA = Path("/work/shared/data/dureader/search.dev.jsonl")
TOP = 200
REFERENCE = "lance-jieba+chars"  # the analyser LocalBackend uses, in plain LanceDB
_WORD = re.compile(r"\w")


# --------------------------------------------------------------------------- data


@dataclass
class Para:
    id: str
    text: str
    collection: str
    doc: int
    para: int


@dataclass
class Question:
    qid: str
    text: str
    gold: set[str]


def load(path: Path) -> tuple[list[Para], list[Question]]:
    paras: list[Para] = []
    questions: list[Question] = []
    with path.open(encoding="utf-8") as fh:
        for line in fh:
            row = json.loads(line)
            qid = str(row["question_id"])
            gold = set()
            for i, doc in enumerate(row["documents"]):
                for j, text in enumerate(doc["paragraphs"]):
                    paras.append(Para(f"{qid}-{i}-{j}", text, qid, i, j))
                if doc.get("is_selected"):
                    gold.add(f"{qid}-{i}-{doc['most_related_para']}")
            questions.append(Question(qid, row["question"], gold))
    return paras, questions


# --------------------------------------------------------------------------- analysis

_JIEBA: Any = None


def jieba_tok() -> Any:
    global _JIEBA
    if _JIEBA is None:
        import jieba

        jieba.setLogLevel(logging.WARNING)
        _JIEBA = jieba.Tokenizer()
        _JIEBA.initialize()
    return _JIEBA


def seg(text: str) -> list[str]:
    return [t.lower() for t in jieba_tok().lcut(text) if _WORD.search(t)]


def seg_search(text: str) -> list[str]:
    return [t.lower() for t in jieba_tok().lcut_for_search(text) if _WORD.search(t)]


_CJK = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
_RUN = re.compile(
    r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]|[^\W\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]+"
)


def cjk_chars(text: str) -> list[str]:
    return [t.lower() for t in _RUN.findall(text)]


def chosen_analyzer(text: str) -> list[str]:
    from ragaudit.search._local import analyze

    return analyze(text)


def fake_embed_sync(texts: list[str], dim: int = 384) -> list[list[float]]:
    """Hashed bag of character bigrams, L2-normalised: deterministic and lexical."""
    out = []
    for t in texts:
        v = [0.0] * dim
        chars = [c for c in t.lower() if not c.isspace()]
        for a, b in zip(chars, chars[1:] + [""], strict=True):
            h = int.from_bytes(hashlib.blake2b((a + b).encode(), digest_size=4).digest(), "little")
            v[h % dim] += 1.0
        n = math.sqrt(sum(x * x for x in v)) or 1.0
        out.append([x / n for x in v])
    return out


async def fake_embed(texts: list[str]) -> list[list[float]]:
    return fake_embed_sync(texts)


# --------------------------------------------------------------------------- candidates


class Candidate:
    """Build an index in ``folder``; reopen it; search one collection."""

    name = "?"
    note = ""

    def build(self, folder: Path, paras: list[Para]) -> None:
        raise NotImplementedError

    def open(self, folder: Path) -> None:
        raise NotImplementedError

    def search(self, query: str, collection: str | None, top: int) -> list[str]:
        raise NotImplementedError


class LanceFTS(Candidate):
    """LanceDB native FTS; ``analyzer`` None means the raw text goes to Lance's tokenizer."""

    def __init__(
        self, name: str, analyzer: Callable[[str], list[str]] | None, fts: dict, note: str = ""
    ):
        self.name, self.analyzer, self.fts, self.note = name, analyzer, fts, note

    def _rows(self, paras: list[Para]) -> list[dict]:
        rows = []
        for p in paras:
            row = {"id": p.id, "text": p.text, "collection": p.collection}
            if self.analyzer:
                row["tokens"] = " ".join(self.analyzer(p.text))
            rows.append(row)
        return rows

    def build(self, folder: Path, paras: list[Para]) -> None:
        import lancedb
        from lancedb.index import FTS

        db = lancedb.connect(folder)
        t = db.create_table("t", data=self._rows(paras))
        t.create_index("tokens" if self.analyzer else "text", config=FTS(**self.fts))

    def open(self, folder: Path) -> None:
        import lancedb

        self.t = lancedb.connect(folder).open_table("t")

    def search(self, query: str, collection: str | None, top: int) -> list[str]:
        q = " ".join(self.analyzer(query)) if self.analyzer else query
        if not q.strip():
            return []
        b = self.t.search(q, query_type="fts")
        if collection is not None:
            b = b.where(f"collection = '{collection}'", prefilter=True)
        return b.select(["id", "_score"]).limit(top).to_arrow().column("id").to_pylist()


class SqliteFTS(Candidate):
    name = "sqlite-fts5-jieba"
    note = "stdlib; jieba pre-seg; no vectors"

    def build(self, folder: Path, paras: list[Para]) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        con = sqlite3.connect(folder / "index.sqlite")
        con.executescript(
            """
            CREATE TABLE docs(rid INTEGER PRIMARY KEY, id TEXT UNIQUE, text TEXT, meta TEXT);
            CREATE TABLE labels(label TEXT, rid INTEGER);
            CREATE VIRTUAL TABLE fts USING fts5(tokens, content='', tokenize='unicode61');
            """
        )
        with con:
            for k, p in enumerate(paras, 1):
                con.execute(
                    "INSERT INTO docs VALUES (?,?,?,?)",
                    (k, p.id, p.text, json.dumps({"collection": p.collection})),
                )
                con.execute("INSERT INTO labels VALUES (?,?)", ("collection\x1f" + p.collection, k))
                con.execute(
                    "INSERT INTO fts(rowid, tokens) VALUES (?,?)", (k, " ".join(seg(p.text)))
                )
            con.execute("CREATE INDEX labels_label ON labels(label, rid)")
        con.close()

    def open(self, folder: Path) -> None:
        self.con = sqlite3.connect(folder / "index.sqlite", check_same_thread=False)

    def search(self, query: str, collection: str | None, top: int) -> list[str]:
        toks = seg(query)
        if not toks:
            return []
        match = " OR ".join('"' + t.replace('"', '""') + '"' for t in toks)
        if collection is None:
            sql = (
                "SELECT d.id FROM fts JOIN docs d ON d.rid = fts.rowid "
                "WHERE fts MATCH ? ORDER BY bm25(fts) LIMIT ?"
            )
            return [r[0] for r in self.con.execute(sql, (match, top))]
        sql = (
            "SELECT d.id FROM fts JOIN docs d ON d.rid = fts.rowid "
            "WHERE fts MATCH ? AND fts.rowid IN (SELECT rid FROM labels WHERE label = ?) "
            "ORDER BY bm25(fts) LIMIT ?"
        )
        return [r[0] for r in self.con.execute(sql, (match, "collection\x1f" + collection, top))]


class TantivyFTS(Candidate):
    name = "tantivy-jieba"
    note = "jieba pre-seg; no vectors"

    @staticmethod
    def _schema() -> Any:
        import tantivy

        sb = tantivy.SchemaBuilder()
        sb.add_text_field("id", stored=True, tokenizer_name="raw")
        sb.add_text_field("tokens", tokenizer_name="whitespace", index_option="freq")
        sb.add_text_field("labels", tokenizer_name="raw", index_option="basic")
        sb.add_text_field("text", stored=True, tokenizer_name="raw", index_option="basic")
        return sb.build()

    def build(self, folder: Path, paras: list[Para]) -> None:
        import tantivy

        folder.mkdir(parents=True, exist_ok=True)
        index = tantivy.Index(self._schema(), path=str(folder))
        w = index.writer()
        for p in paras:
            w.add_document(
                tantivy.Document(
                    id=p.id,
                    tokens=" ".join(seg(p.text)),
                    labels=["collection\x1f" + p.collection],
                    text="",  # stored text is what Lance/SQLite keep too; irrelevant to ranking
                )
            )
        w.commit()
        w.wait_merging_threads()

    def open(self, folder: Path) -> None:
        import tantivy

        self.schema = self._schema()
        self.index = tantivy.Index(self.schema, path=str(folder))
        self.index.reload()
        self.searcher = self.index.searcher()

    def search(self, query: str, collection: str | None, top: int) -> list[str]:
        import tantivy

        Q, Occ = tantivy.Query, tantivy.Occur
        toks = seg(query)
        if not toks:
            return []
        text_q = Q.boolean_query(
            [(Occ.Should, Q.term_query(self.schema, "tokens", t)) for t in toks]
        )
        q = text_q
        if collection is not None:
            filt = Q.const_score_query(
                Q.term_query(self.schema, "labels", "collection\x1f" + collection), 0.0
            )
            q = Q.boolean_query([(Occ.Must, filt), (Occ.Must, text_q)])
        res = self.searcher.search(q, limit=top)
        return [self.searcher.doc(addr)["id"][0] for _, addr in res.hits]


class Bm25sFTS(Candidate):
    name = "bm25s-jieba"
    note = "scipy; filter = weight mask; no vectors"

    def build(self, folder: Path, paras: list[Para]) -> None:
        import bm25s

        r = bm25s.BM25()
        r.index([seg(p.text) for p in paras], show_progress=False)
        r.save(folder, show_progress=False)
        (folder / "ids.json").write_text(json.dumps([[p.id, p.collection] for p in paras]))

    def open(self, folder: Path) -> None:
        import bm25s
        import numpy as np

        self.r = bm25s.BM25.load(folder, show_progress=False)
        rows = json.loads((folder / "ids.json").read_text())
        self.ids = [r[0] for r in rows]
        self.masks: dict[str, Any] = {}
        cols = np.array([r[1] for r in rows])
        self.everything = np.ones(len(rows), dtype="float32")
        for c in set(cols.tolist()):
            self.masks[c] = (cols == c).astype("float32")

    def search(self, query: str, collection: str | None, top: int) -> list[str]:
        import numpy as np

        toks = [t for t in seg(query) if t in self.r.vocab_dict]
        mask = self.masks.get(collection) if collection is not None else self.everything
        if not toks or mask is None:
            return []
        scores = self.r.get_scores(toks, weight_mask=mask)
        idx = np.flatnonzero(scores > 0)
        idx = idx[np.argsort(-scores[idx], kind="stable")][:top]
        return [self.ids[i] for i in idx]


class LocalBackendCand(Candidate):
    """The real thing: ragaudit's LocalBackend, through its async API."""

    def __init__(self, mode: str):
        self.mode = mode
        self.name = f"LocalBackend[{mode}]"
        self.note = {
            "bm25": "ragaudit API (async, to_thread)",
            "vector": "fake lexical 384-d vectors",
            "hybrid": "bm25 + fake vectors, RRF",
        }[mode]
        self.loop = asyncio.new_event_loop()

    def _make(self, folder: Path) -> Any:
        from ragaudit.search._local import LocalBackend

        embed = fake_embed if self.mode != "bm25" else None
        return LocalBackend(folder, mode=self.mode, embed=embed)

    def build(self, folder: Path, paras: list[Para]) -> None:
        from ragaudit.search._base import Document

        docs = [
            Document(p.id, p.text, {"collection": p.collection, "doc": p.doc, "para": p.para})
            for p in paras
        ]
        self._make(folder).index(docs)

    def open(self, folder: Path) -> None:
        self.b = self._make(folder)

    def search(self, query: str, collection: str | None, top: int) -> list[str]:
        hits = self.loop.run_until_complete(
            self.b.search(
                query, filters={"collection": collection} if collection else {}, top_n=top
            )
        )
        return [h.id for h in hits]


def candidates() -> list[Candidate]:
    plain = {"lower_case": True, "stem": False, "remove_stop_words": False, "ascii_folding": False}
    return [
        LanceFTS(
            "lance-ngram12",
            None,
            {"base_tokenizer": "ngram", "ngram_min_length": 1, "ngram_max_length": 2, **plain},
            "raw text, Lance char 1-2-grams",
        ),
        LanceFTS(
            "lance-ngram23",
            None,
            {"base_tokenizer": "ngram", "ngram_min_length": 2, "ngram_max_length": 3, **plain},
            "raw text, Lance char 2-3-grams",
        ),
        LanceFTS(
            "lance-jieba-native",
            None,
            {"base_tokenizer": "jieba/default", **plain},
            "Lance's Rust jieba, needs LANCE_LANGUAGE_MODEL_HOME",
        ),
        LanceFTS(
            "lance-jieba",
            seg,
            {"base_tokenizer": "whitespace", **plain},
            "python jieba pre-seg (lcut)",
        ),
        LanceFTS(
            "lance-jieba-search",
            seg_search,
            {"base_tokenizer": "whitespace", **plain},
            "python jieba pre-seg (cut_for_search)",
        ),
        LanceFTS(
            "lance-chars",
            cjk_chars,
            {"base_tokenizer": "whitespace", **plain, "stem": True},
            "CJK characters alone, Latin words whole",
        ),
        LanceFTS(
            "lance-jieba+chars",
            chosen_analyzer,
            {"base_tokenizer": "whitespace", **plain, "stem": True},
            "cut_for_search + CJK chars (the chosen analyser)",
        ),
        SqliteFTS(),
        TantivyFTS(),
        Bm25sFTS(),
        LocalBackendCand("bm25"),
        LocalBackendCand("vector"),
        LocalBackendCand("hybrid"),
    ]


# --------------------------------------------------------------------------- measuring


@dataclass
class Result:
    name: str
    note: str
    build_s: float = math.nan
    open_s: float = math.nan
    mean_ms: float = math.nan
    p95_ms: float = math.nan
    mrr: float = math.nan
    r5: float = math.nan
    found: float = math.nan  # share of questions with any gold paragraph in the results
    mrr_all: float = math.nan  # MRR searching the whole corpus, no filter
    rr: list[float] = field(default_factory=list)
    size_mb: float = math.nan
    error: str = ""


def folder_size(p: Path) -> float:
    return sum(f.stat().st_size for f in p.rglob("*") if f.is_file()) / 1e6


def reciprocal_ranks(c: Candidate, questions: list[Question], filtered: bool) -> list[float]:
    rr = []
    for q in questions:
        ids = c.search(q.text, q.qid if filtered else None, TOP)
        ranks = [i + 1 for i, d in enumerate(ids) if d in q.gold]
        rr.append(1.0 / ranks[0] if ranks else 0.0)
    return rr


def quality(c: Candidate, questions: list[Question], res: Result) -> None:
    r5, found = [], []
    for q in questions:
        ids = c.search(q.text, q.qid, TOP)
        r5.append(len({d for d in ids[:5] if d in q.gold}) / len(q.gold))
        found.append(1.0 if q.gold & set(ids) else 0.0)
    res.rr = reciprocal_ranks(c, questions, filtered=True)
    res.mrr, res.r5, res.found = (
        statistics.mean(res.rr),
        statistics.mean(r5),
        statistics.mean(found),
    )
    res.mrr_all = statistics.mean(reciprocal_ranks(c, questions, filtered=False))


def paired_bootstrap(a: list[float], b: list[float], n: int = 2000) -> tuple[float, float, float]:
    """Mean of a - b over questions, with a 95% interval from resampling the questions."""
    diffs = [x - y for x, y in zip(a, b, strict=True)]
    rng = random.Random(0)
    means = sorted(statistics.mean(rng.choices(diffs, k=len(diffs))) for _ in range(n))
    return statistics.mean(diffs), means[int(0.025 * n)], means[int(0.975 * n)]


def measure(
    c: Candidate, paras: list[Para], questions: list[Question], root: Path, repeat: int
) -> Result:
    res = Result(c.name, c.note)
    folder = root / re.sub(r"\W+", "_", c.name)
    try:
        t0 = time.perf_counter()
        c.build(folder, paras)
        res.build_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        c.open(folder)
        c.search(questions[0].text, questions[0].qid, TOP)
        res.open_s = time.perf_counter() - t0
        quality(c, questions, res)
        lat = []
        for _ in range(repeat):
            for q in questions:
                t0 = time.perf_counter()
                c.search(q.text, q.qid, TOP)
                lat.append((time.perf_counter() - t0) * 1000)
        res.mean_ms = statistics.mean(lat)
        res.p95_ms = statistics.quantiles(lat, n=20)[-1]
        res.size_mb = folder_size(folder)
    except Exception as exc:  # a candidate failing is a result too
        res.error = f"{type(exc).__name__}: {str(exc)[:150]}"
    return res


def lance_language_home(root: Path) -> None:
    """Give Lance's Rust jieba the dictionary that ships with the Python jieba package."""
    import jieba

    home = root / "lance_models"
    (home / "jieba" / "default").mkdir(parents=True, exist_ok=True)
    dst = home / "jieba" / "default" / "dict.txt"
    if not dst.exists():
        shutil.copy(Path(jieba.__file__).parent / "dict.txt", dst)
    os.environ["LANCE_LANGUAGE_MODEL_HOME"] = str(home)


def fmt(x: float, spec: str) -> str:
    return "-" if math.isnan(x) else format(x, spec)


def report(results: list[Result], n_paras: int, n_q: int, jieba_init_s: float) -> None:
    ok = [r for r in results if not r.error]
    best_build = min((r.build_s for r in ok), default=math.nan)
    best_lat = min((r.mean_ms for r in ok), default=math.nan)
    print(
        f"\n{n_paras} paragraphs, {n_q} questions, filter collection=<question>, top {TOP}; "
        f"jieba dictionary load {jieba_init_s:.2f} s (once per process, not in the figures)\n"
    )
    head = (
        f"{'candidate':<22} {'build s':>8} {'×best':>6} {'open s':>7} {'query ms':>9} "
        f"{'×best':>6} {'p95 ms':>7} {'MRR':>6} {'R@5':>6} {'found':>6} {'MRRall':>6} "
        f"{'ΔMRR vs chosen [95% CI]':>24} {'MB':>5}  note"
    )
    ref = next((r for r in ok if r.name == REFERENCE), None)

    def delta(r: Result) -> str:
        if ref is None or r is ref:
            return "-"
        d, lo, hi = paired_bootstrap(r.rr, ref.rr)
        return f"{d:+.3f} [{lo:+.3f}, {hi:+.3f}]"

    print(head)
    print("-" * len(head))
    for r in results:
        if r.error:
            print(f"{r.name:<22} FAILED {r.error}")
            continue
        print(
            f"{r.name:<22} {r.build_s:>8.2f} {r.build_s / best_build:>6.1f} {r.open_s:>7.3f} "
            f"{r.mean_ms:>9.2f} {r.mean_ms / best_lat:>6.1f} {fmt(r.p95_ms, '.2f'):>7} "
            f"{r.mrr:>6.3f} {r.r5:>6.3f} {r.found:>6.2f} {r.mrr_all:>6.3f} "
            f"{delta(r):>24} {r.size_mb:>5.1f}  {r.note}"
        )
    print(
        "\nMRR: mean reciprocal rank of the first gold paragraph; R@5: share of gold paragraphs "
        "in the top 5; found: questions with any gold paragraph in the top 200; MRRall: MRR "
        "searching all paragraphs without the filter.\nΔMRR: paired bootstrap over questions "
        f"against {REFERENCE}; an interval holding 0 means no measurable difference.\n"
        "×best: ratio to the fastest candidate of the column."
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", type=Path, default=DATA)
    ap.add_argument("--only", default="", help="comma-separated candidate names")
    ap.add_argument("--repeat", type=int, default=3, help="passes over the questions for latency")
    ap.add_argument("--keep", type=Path, default=None, help="build indexes here and keep them")
    args = ap.parse_args(argv)

    paras, questions = load(args.data)
    t0 = time.perf_counter()
    jieba_tok()
    jieba_init_s = time.perf_counter() - t0
    root = args.keep or Path(tempfile.mkdtemp(prefix="bench_local_"))
    lance_language_home(root)
    chosen = [c for c in candidates() if not args.only or c.name in args.only.split(",")]
    results = []
    for c in chosen:
        print(f"… {c.name}", file=sys.stderr, flush=True)
        results.append(measure(c, paras, questions, root, args.repeat))
    report(results, len(paras), len(questions), jieba_init_s)
    if args.keep is None:
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
