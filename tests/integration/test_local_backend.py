"""The embedded ``local`` backend: filters, ranks, idempotence, persistence, Chinese, modes."""

from __future__ import annotations

import asyncio
import hashlib
import json
import math
import subprocess
import sys
import textwrap
from pathlib import Path

import pyarrow as pa
import pytest

from ragaudit.search import Document, SearchBackend, make_backend
from ragaudit.search._local import LocalBackend, filter_sql, labels_of

DIM = 32


async def fake_embed(texts: list[str]) -> list[list[float]]:
    """Hashed bag of characters: deterministic, and similar texts get similar vectors."""
    out = []
    for text in texts:
        v = [0.0] * DIM
        for ch in text.lower():
            if not ch.isspace():
                v[hashlib.md5(ch.encode()).digest()[0] % DIM] += 1.0
        norm = math.sqrt(sum(x * x for x in v)) or 1.0
        out.append([x / norm for x in v])
    return out


CORPUS = [
    Document(
        "q1-0", "海信电视的画质很好，性价比高，适合家庭使用。", {"collection": "q1", "doc": 0}
    ),
    Document("q1-1", "小米电视系统流畅，但是广告比较多。", {"collection": "q1", "doc": 1}),
    Document("q1-2", "今天天气晴朗，适合出门散步。", {"collection": "q1", "doc": 2}),
    Document("q2-0", "截至是到某个时间为止，截止是到时候停止。", {"collection": "q2", "doc": 0}),
    Document(
        "q2-1", "Hisense televisions have good picture quality.", {"collection": "q2", "doc": 1}
    ),
    Document("en-0", "The quick brown fox jumps over the lazy dog.", {"collection": "en"}),
    Document("en-1", "Foxes are small omnivorous mammals.", {"collection": "en"}),
    Document(
        "en-2", "Dogs were domesticated from wolves.", {"collection": "en", "tags": ["a", "b"]}
    ),
]


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> LocalBackend:
    """One BM25 index for the read-only tests (building one costs ~0.3 s)."""
    backend = LocalBackend(tmp_path_factory.mktemp("shared"))
    assert backend.index(CORPUS) == len(CORPUS)
    return backend


def test_registered_and_protocol(tmp_path):
    backend = make_backend("local", path=tmp_path / "idx")
    assert isinstance(backend, SearchBackend)
    assert backend.name == "local"
    assert backend.count() == 0


async def test_filter_restricts_and_ranks_in_score_order(shared):
    hits = await shared.search("电视 画质", filters={"collection": "q1"}, top_n=10)
    assert hits, "expected matches in q1"
    assert {h.metadata["collection"] for h in hits} == {"q1"}
    assert [h.rank for h in hits] == list(range(1, len(hits) + 1))
    scores = [h.score for h in hits]
    assert scores == sorted(scores, reverse=True)
    assert hits[0].id == "q1-0"


async def test_hits_keep_text_and_metadata(shared):
    hits = await shared.search("海信电视", filters={"collection": "q1"}, top_n=1)
    source = next(d for d in CORPUS if d.id == hits[0].id)
    assert hits[0].text == source.text
    assert hits[0].metadata == source.metadata


async def test_chinese_question_finds_chinese_paragraph(shared):
    hits = await shared.search("截至和截止的区别", filters={"collection": "q2"}, top_n=5)
    assert hits[0].id == "q2-0"
    hits = await shared.search("哪个电视系统流畅", filters={}, top_n=5)
    assert hits[0].id == "q1-1"


async def test_english(shared):
    hits = await shared.search("fox jumping", filters={"collection": "en"}, top_n=5)
    assert hits[0].id in {"en-0", "en-1"}
    assert {h.id for h in hits} <= {"en-0", "en-1", "en-2"}
    hits = await shared.search("wolves", filters={}, top_n=5)
    assert [h.id for h in hits] == ["en-2"]


async def test_top_n_larger_than_matches(shared):
    hits = await shared.search("电视", filters={"collection": "q1"}, top_n=1000)
    assert 1 <= len(hits) <= 3
    assert [h.rank for h in hits] == list(range(1, len(hits) + 1))
    assert await shared.search("电视", filters={"collection": "q1"}, top_n=0) == []


async def test_filters_compare_as_text_and_and_together(shared):
    # doc is stored as the int 0; "0" and 0 both match, as with a keyword field.
    by_int = await shared.search("电视", filters={"collection": "q1", "doc": 0}, top_n=10)
    by_str = await shared.search("电视", filters={"collection": "q1", "doc": "0"}, top_n=10)
    assert [h.id for h in by_int] == [h.id for h in by_str] == ["q1-0"]
    any_of = await shared.search("电视", filters={"collection": ["q1", "q2"]}, top_n=10)
    assert {h.metadata["collection"] for h in any_of} == {"q1"}  # q2 has no 电视 in Chinese
    tagged = await shared.search("wolves", filters={"tags": "b"}, top_n=10)
    assert [h.id for h in tagged] == ["en-2"]
    assert await shared.search("电视", filters={"collection": "nope"}, top_n=10) == []


async def test_query_without_terms_returns_nothing(shared):
    assert await shared.search("？！。", filters={}, top_n=5) == []


def test_filter_values_need_no_escaping():
    sql = filter_sql({"k": 'it\'s "odd" \\ 值'})
    assert sql is not None and "it''s" in sql
    assert labels_of({"a": {"b": 1.0}, "t": [1, "x"]}) == sorted(
        ['["a.b", "1"]', '["t", "1"]', '["t", "x"]']
    )


async def test_odd_filter_values_round_trip(tmp_path):
    backend = LocalBackend(tmp_path / "idx")
    odd = 'it\'s "odd" \\ 值\x1f'
    backend.index([Document("x", "apple pie", {"k": odd}), Document("y", "apple tart", {"k": "y"})])
    hits = await backend.search("apple", filters={"k": odd}, top_n=5)
    assert [h.id for h in hits] == ["x"]


async def test_reindex_is_idempotent_and_replaces(tmp_path):
    backend = LocalBackend(tmp_path / "idx")
    docs = [Document(f"d{i}", f"文档 第{i}段 内容", {"collection": "c"}) for i in range(5)]
    assert backend.index(docs) == 5
    assert backend.index(docs) == 5
    assert backend.count() == 5
    # Same id, new text: replaced, not added; a repeated id within a batch keeps the last.
    batch = [
        Document("d0", "旧的", {"collection": "c"}),
        Document("d0", "香蕉", {"collection": "c"}),
    ]
    assert backend.index(batch) == 1
    assert backend.count() == 5
    hits = await backend.search("香蕉", filters={"collection": "c"}, top_n=5)
    assert [h.id for h in hits] == ["d0"]
    assert await backend.search("旧的", filters={}, top_n=5) == []
    assert backend.index([]) == 0


async def test_persistence_reopen_same_process(tmp_path):
    LocalBackend(tmp_path / "idx").index(CORPUS)
    reopened = LocalBackend(tmp_path / "idx")
    assert reopened.count() == len(CORPUS)
    hits = await reopened.search("海信电视", filters={"collection": "q1"}, top_n=3)
    assert hits[0].id == "q1-0"


def test_persistence_across_processes(tmp_path):
    LocalBackend(tmp_path / "idx").index(CORPUS)
    script = textwrap.dedent(
        f"""
        import asyncio
        from ragaudit.search import Document, make_backend
        b = make_backend("local", path={str(tmp_path / "idx")!r})
        hits = asyncio.run(b.search("海信电视", filters={{"collection": "q1"}}, top_n=3))
        b.index([Document("new", "新的段落", {{"collection": "q9"}})])
        print(b.count(), hits[0].id)
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True
    )
    assert out.stdout.split() == [str(len(CORPUS) + 1), "q1-0"]
    assert LocalBackend(tmp_path / "idx").count() == len(CORPUS) + 1


async def test_vector_mode(tmp_path):
    backend = LocalBackend(tmp_path / "idx", mode="vector", embed=fake_embed)
    backend.index(CORPUS)
    hits = await backend.search("海信电视的画质很好", filters={"collection": "q1"}, top_n=10)
    assert hits[0].id == "q1-0"
    assert len(hits) == 3  # vectors rank every document that passes the filter
    assert [h.rank for h in hits] == [1, 2, 3]
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    assert -1.0 <= hits[-1].score <= hits[0].score <= 1.0 + 1e-6


async def test_hybrid_mode(tmp_path):
    backend = LocalBackend(tmp_path / "idx", mode="hybrid", embed=fake_embed)
    backend.index(CORPUS)
    hits = await backend.search("截至和截止的区别", filters={"collection": "q2"}, top_n=10)
    assert hits[0].id == "q2-0"
    assert {h.metadata["collection"] for h in hits} == {"q2"}
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    # No terms at all: the vector list alone still answers.
    assert await backend.search("？", filters={"collection": "q2"}, top_n=10)
    # The same folder serves BM25 too, and vectors are kept on re-index.
    bm25 = LocalBackend(tmp_path / "idx")
    assert (await bm25.search("截止", filters={}, top_n=1))[0].id == "q2-0"
    with pytest.raises(ValueError, match="embed"):
        bm25.index([Document("z", "no vector", {})])


def test_reindex_skips_unchanged_documents(tmp_path):
    calls: list[int] = []

    async def counting_embed(texts: list[str]) -> list[list[float]]:
        calls.append(len(texts))
        return await fake_embed(texts)

    backend = LocalBackend(tmp_path / "idx", mode="vector", embed=counting_embed)
    assert backend.index(CORPUS) == len(CORPUS)
    assert backend.index(CORPUS) == len(CORPUS)
    assert sum(calls) == len(CORPUS)  # the second pass embedded nothing
    changed = Document("en-0", "A different sentence.", {"collection": "en"})
    backend.index([*CORPUS[:3], changed])
    assert sum(calls) == len(CORPUS) + 1
    assert backend.count() == len(CORPUS)


def test_modes_are_checked(tmp_path):
    with pytest.raises(ValueError, match="embed"):
        LocalBackend(tmp_path / "a", mode="hybrid")
    with pytest.raises(ValueError, match="mode"):
        LocalBackend(tmp_path / "a", mode="dense")
    LocalBackend(tmp_path / "b").index(CORPUS[:1])
    # Checked when the table is first used (so that drop() can still clear it).
    with pytest.raises(ValueError, match="no vectors"):
        LocalBackend(tmp_path / "b", mode="vector", embed=fake_embed).count()


async def test_an_index_built_by_another_embedder_is_not_reused(tmp_path):
    """The embedder's name is recorded with the vectors: another one's queries would not compare."""
    from ragaudit.errors import ConfigError

    old = LocalBackend(tmp_path / "idx", mode="vector", embed=fake_embed, embedder="old/e5")
    assert old.index(CORPUS) == len(CORPUS)
    new = LocalBackend(tmp_path / "idx", mode="vector", embed=fake_embed, embedder="new/e5")
    with pytest.raises(
        ConfigError, match="embedded by 'old/e5', not by 'new/e5'.*set models.embedder to 'old/e5'"
    ):
        new.count()
    with pytest.raises(ConfigError, match="old/e5"):
        await new.search("海信电视", filters={}, top_n=1)
    with pytest.raises(ConfigError, match="old/e5"):
        new.index(CORPUS[:1])
    # The model that built it still reads it; after a drop the new one builds its own.
    assert LocalBackend(
        tmp_path / "idx", mode="vector", embed=fake_embed, embedder="old/e5"
    ).count() == len(CORPUS)
    new.drop()
    assert new.index(CORPUS) == len(CORPUS)
    again = LocalBackend(tmp_path / "idx", mode="vector", embed=fake_embed, embedder="new/e5")
    assert (await again.search("海信电视的画质很好", filters={}, top_n=1))[0].id == "q1-0"
    # A table with vectors that records no embedder (built before it was recorded) is not
    # trusted either; BM25 alone never compares vectors, so it reads any table.
    LocalBackend(tmp_path / "unnamed", mode="vector", embed=fake_embed).index(CORPUS[:2])
    named = LocalBackend(tmp_path / "unnamed", mode="vector", embed=fake_embed, embedder="new/e5")
    with pytest.raises(ConfigError, match="records no embedder") as refused:
        named.count()
    # Which model made it is unknown, so naming one is no way out: re-indexing is.
    assert "models.embedder" not in str(refused.value)
    assert "ragaudit index --recreate" in str(refused.value)
    assert LocalBackend(tmp_path / "idx").count() == len(CORPUS)


async def test_concurrent_searches(shared):
    queries = ["电视", "截止", "fox", "天气", "wolves"] * 4
    results = await asyncio.gather(*(shared.search(q, filters={}, top_n=5) for q in queries))
    assert len(results) == 20
    for q, hits in zip(queries, results, strict=True):
        assert hits, q
    assert results[0] == results[5] == results[10]  # same query, same answer


async def test_concurrent_searches_while_indexing(tmp_path):
    backend = LocalBackend(tmp_path / "idx", mode="hybrid", embed=fake_embed)
    backend.index(CORPUS)
    before = [h.id for h in await backend.search("电视", filters={"collection": "q1"}, top_n=5)]
    extra = [Document(f"x{i}", f"额外 段落 {i}", {"collection": "x"}) for i in range(50)]
    writer = asyncio.to_thread(backend.index, extra)
    readers = [backend.search("电视", filters={"collection": "q1"}, top_n=5) for _ in range(20)]
    written, *results = await asyncio.gather(writer, *readers)
    assert written == 50
    # The new documents are in another collection: every reader sees the same ranking.
    assert all([h.id for h in r] == before for r in results)
    assert backend.count() == len(CORPUS) + 50


def test_index_command_logs_its_embedding_calls(tmp_path: Path, fake) -> None:
    """``ragaudit index`` in hybrid mode embeds through the gateway and flushes the call log."""
    import polars as pl
    from support.servers import ragaudit

    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text(
        "".join(
            json.dumps({"id": f"d{i}", "text": f"passage {i} about harbours"}) + "\n"
            for i in range(5)
        ),
        encoding="utf-8",
    )
    runs = tmp_path / "runs"
    out = ragaudit(
        "index",
        str(corpus),
        "--backend",
        "local",
        "--set",
        "collect.mode=hybrid",
        "--set",
        f"collect.index_path={tmp_path / 'idx'}",
        "--set",
        f"runs_root={runs}",
        "--set",
        f"cache_dir={tmp_path / 'cache'}",
        "--set",
        "models.embedder=fake/embed",
    )
    assert "5 written" in out
    logs = sorted((runs / "index" / "llm_calls").glob("index-*.parquet"))
    assert len(logs) == 1
    calls = pl.read_parquet(logs[0])
    assert calls.height >= 1 and fake.stats.embeddings == 5  # five texts embedded, all logged
    assert set(calls["stage"]) == {"index"} and set(calls["model"]) == {"fake/embed"}


def test_index_command_prints_progress_lines_off_a_terminal_and_its_totals(
    tmp_path: Path, fake
) -> None:
    """Piped (no terminal), ``ragaudit index`` prints plain lines, then documents, time, size."""
    from support.servers import ragaudit

    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text(
        "".join(json.dumps({"id": f"d{i}", "text": f"passage {i}"}) + "\n" for i in range(12)),
        encoding="utf-8",
    )
    out = ragaudit(
        "index",
        str(corpus),
        "--backend",
        "local",
        "--batch-size",
        "5",
        "--set",
        "collect.mode=vector",
        "--set",
        f"collect.index_path={tmp_path / 'idx'}",
        "--set",
        f"runs_root={tmp_path / 'runs'}",
        "--set",
        f"cache_dir={tmp_path / 'cache'}",
        "--set",
        "models.embedder=fake/embed",
    )
    assert "index: local: started, 0/12" in out
    assert "index: local: done, 12/12 in" in out
    final = out.strip().splitlines()[-1]
    assert final.startswith("indexed 12 documents into local table") and " s: 12 written" in final
    assert "12 in the index" in final and "MB on disk" in final


def test_an_interrupted_index_resumes_without_re_embedding_what_it_wrote(tmp_path: Path) -> None:
    """A run killed mid-corpus keeps its written batches; the next one embeds only the rest."""
    import contextlib

    from ragaudit.config import RunConfig
    from ragaudit.search import Chunking, index_corpus

    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text(
        "".join(json.dumps({"id": f"d{i}", "text": f"passage {i}"}) + "\n" for i in range(15)),
        encoding="utf-8",
    )
    cfg = RunConfig.model_validate(
        {"collect": {"backend": "local", "mode": "vector", "index_path": str(tmp_path / "idx")}}
    )

    class Embedder:
        """The gateway's embedding seam, killed (an exception) before its ``fail_at``-th call."""

        def __init__(self, fail_at: int | None) -> None:
            self.fail_at = fail_at
            self.texts: list[str] = []
            self.calls = 0

        def scope(self, *args: object, **kwargs: object) -> contextlib.AbstractContextManager:
            return contextlib.nullcontext()

        async def aembed(self, texts: list[str], *, model: str) -> list[list[float]]:
            self.calls += 1
            if self.calls == self.fail_at:
                raise KeyboardInterrupt
            self.texts.extend(texts)
            return await fake_embed(texts)

    first = Embedder(fail_at=3)
    with pytest.raises(KeyboardInterrupt):
        index_corpus(cfg, corpus, Chunking(), batch_size=5, make_gateway=lambda: first)
    assert len(first.texts) == 10  # two batches of five written before the interruption
    again = Embedder(fail_at=None)
    done: list[int] = []
    report = index_corpus(
        cfg, corpus, Chunking(), batch_size=5, make_gateway=lambda: again, on_batch=done.append
    )
    assert again.texts == ["passage 10", "passage 11", "passage 12", "passage 13", "passage 14"]
    assert (report.documents, report.total, sum(done)) == (15, 15, 15)
    assert report.size_bytes is not None and report.size_bytes > 0


def test_a_streamed_corpus_is_optimized_a_few_times_not_after_every_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Optimizing rewrites the table's small files: once per write would grow as the square."""
    backend = LocalBackend(tmp_path / "idx", mode="vector", embed=fake_embed)
    optimized: list[int] = []
    real = backend._optimize

    def counting(table: object) -> None:
        optimized.append(backend.count())
        real(table)

    monkeypatch.setattr(backend, "_optimize", counting)
    writes = 40
    for w in range(writes):
        batch = [Document(f"d{w}-{i}", f"passage {w} {i} 段落", {"w": w}) for i in range(5)]
        assert backend.index(batch) == 5
    # Each optimize waits for a quarter of the table's rows to be new: a geometric series.
    assert len(optimized) <= 12
    assert all(b >= a * 1.25 for a, b in zip(optimized, optimized[1:], strict=False))
    backend.close()
    table = backend._open_existing()
    stats = table.stats()
    assert stats["num_rows"] == writes * 5
    assert stats["fragment_stats"]["num_fragments"] <= 2  # 40 writes, compacted
    assert table.schema.field("vector").type.value_type == pa.float32()
    backend.close()  # nothing left to optimize: a no-op
    assert len(optimized) <= 13
