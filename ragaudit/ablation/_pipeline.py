"""The reference RAG pipeline an ablation evaluates, one point at a time.

corpus → a subset of whole documents up to a size in bytes (the documents the question set
names first, then the rest in a fixed hash order, so a smaller subset is a prefix of a larger
one) → chunks sized in the generator's tokens → an index per (subset, chunking), named by its
config hash and shared by every point that differs only in top-k → the top-k chunks per
question → an answer from ``models.generator`` with a typed zh/en prompt through the gateway
→ the evaluate flow's stages in the point's own run folder.

The retrieved chunks and the answer of every question are written as the point's question set
(``pipeline.jsonl`` in its run folder), which the evaluate flow then reads as an answered
question set with retrieved contexts: what is scored is exactly what the generator saw.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ragaudit._ablate_config import AblationPoint
from ragaudit.ablation._plan import chunk_tokenizer, chunking, index_group, point_id
from ragaudit.cache import canonical_hash, gateway_for
from ragaudit.config import RunConfig, set_path
from ragaudit.dataset import Question, load_questions
from ragaudit.errors import ConfigError
from ragaudit.prompts.rag_answer import RAG_ANSWER, RagAnswer, RagAnswerInput
from ragaudit.runfolder import RunFolder, write_bytes, write_json
from ragaudit.search import (
    Document,
    IndexableBackend,
    backend_names,
    capabilities,
    index_corpus,
    make_search_backend,
    read_corpus,
)

PIPELINE_FILE = "pipeline.jsonl"
"""The point's answered question set, inside its run folder."""
GENERATION_ERROR = "generation_error"
"""Metadata key of a question whose answer the generator failed to give: the error."""
READY_FILE = "ready.json"
"""Written last into an index folder: the index is complete."""


def ablation_dir(config: RunConfig) -> Path:
    """The ablation's folder: ``<runs_root>/<ablate.name>``."""
    return Path(config.runs_root) / config.ablate.name


def points_root(config: RunConfig) -> Path:
    """Where the points' run folders live (the evaluate flow's ``runs_root``)."""
    return ablation_dir(config) / "points"


def question_set(config: RunConfig) -> Path:
    """The questions the sweep asks: ``ablate.questions``, else the run's ``questions``."""
    return Path(config.ablate.questions or config.questions)


def _file_digest(path: Path) -> str:
    h = hashlib.sha256()
    files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
    for f in files:
        h.update(f.name.encode())
        h.update(f.read_bytes())
    return h.hexdigest()


def _corpus(config: RunConfig) -> Path:
    corpus = config.ablate.corpus
    if corpus is None:
        raise ConfigError("ablate.corpus: required (the corpus the reference pipeline indexes)")
    if not Path(corpus).exists():
        raise ConfigError(f"ablate.corpus: {corpus} not found")
    return Path(corpus)


def select_subset(docs: list[Document], size: int, keep_first: set[str]) -> list[Document]:
    """Whole documents up to ``size`` UTF-8 bytes of text, deterministic and nested.

    Documents in ``keep_first`` (those holding the questions' answers) come first, in corpus
    order; the others follow in the order of the hash of their id, so that a larger subset
    adds unrelated documents rather than a block of the file, and every smaller subset is a
    prefix of a larger one.
    """
    first = [d for d in docs if d.id in keep_first]
    rest = sorted(
        (d for d in docs if d.id not in keep_first),
        key=lambda d: hashlib.sha256(d.id.encode()).hexdigest(),
    )
    out, total = [], 0
    for doc in first + rest:
        n = len(doc.text.encode("utf-8"))
        if total + n > size:
            break
        out.append(doc)
        total += n
    return out


def _keep_first(questions: list[Question], docs: list[Document]) -> set[str]:
    """Documents the question set names as reference contexts (by id or a chunk id of it)."""
    named = {i for q in questions for i in (q.reference_context_ids or [])}
    return {d.id for d in docs if d.id in named or any(n.startswith(f"{d.id}#") for n in named)}


@dataclass(frozen=True)
class IndexInfo:
    """One built index: where it is and what it holds."""

    key: str
    path: Path
    documents: int
    bytes: int
    chunks: int
    build_s: float
    built: bool
    """False when it was already complete (a re-run)."""


def index_key(config: RunConfig, p: AblationPoint) -> str:
    """The index's name: a hash of the corpus, the subset, the chunking and the backend."""
    cfg = config.collect
    return canonical_hash(
        {
            "corpus": _file_digest(_corpus(config)),
            "questions": _file_digest(question_set(config)),
            "group": index_group(p),
            "tokenizer": chunk_tokenizer(config),
            "backend": cfg.backend,
            "mode": cfg.mode,
            "embedder": config.models.embedder_model if cfg.mode != "bm25" else None,
        }
    )[:16]


def search_config(config: RunConfig, key: str) -> RunConfig:
    """``config`` pointed at the index ``key``: its own local table folder or engine index."""
    data = config.model_dump(mode="json")
    backend = config.collect.backend
    can = capabilities(backend)
    if can.indexable and can.embedded:
        set_path(data, "collect.index_path", str(ablation_dir(config) / "indexes" / key))
    elif can.indexable and can.index_setting is not None:
        set_path(data, can.index_setting, f"ragaudit-ablation-{key}")
    else:
        indexable = [n for n in backend_names() if capabilities(n).indexable]
        raise ConfigError(
            f"collect.backend: '{backend}' cannot hold the pipeline's index "
            f"(use {', '.join(indexable)})"
        )
    set_path(data, "collect.corpus", None)
    return RunConfig.model_validate(data)


def build_index(config: RunConfig, p: AblationPoint) -> IndexInfo:
    """Subset, chunk and index the corpus for ``p`` unless that index is already complete."""
    key = index_key(config, p)
    folder = ablation_dir(config) / "indexes" / key
    ready = folder / READY_FILE
    if ready.is_file():
        info = json.loads(ready.read_text(encoding="utf-8"))
        return IndexInfo(key, folder, info["documents"], info["bytes"], info["chunks"], 0.0, False)
    started = time.perf_counter()
    abl = config.ablate
    docs = list(read_corpus(_corpus(config), id_field=abl.id_field, text_field=abl.text_field))
    questions = load_questions(question_set(config), limit=config.limit)
    subset = select_subset(docs, p.file_size, _keep_first(questions, docs))
    if not subset:
        raise ConfigError(
            f"ablate: file_size {p.file_size} bytes holds no whole document of {abl.corpus}"
        )
    folder.mkdir(parents=True, exist_ok=True)
    subset_file = folder / "subset.jsonl"
    write_bytes(
        "".join(
            json.dumps({"id": d.id, "text": d.text, "metadata": d.metadata}, ensure_ascii=False)
            + "\n"
            for d in subset
        ).encode("utf-8"),
        subset_file,
    )
    cfg = search_config(config, key)
    cut = chunking(p, chunk_tokenizer(config))
    report = index_corpus(
        cfg,
        subset_file,
        cut,
        recreate=True,
        make_gateway=lambda: gateway_for(cfg),
        calls_dir=folder / "llm_calls",
    )
    size = sum(len(d.text.encode("utf-8")) for d in subset)
    info = {"documents": len(subset), "bytes": size, "chunks": report.chunks, "key": key}
    write_json({**info, "chunking": cut.__dict__, "asked_bytes": p.file_size}, ready)
    return IndexInfo(
        key, folder, len(subset), size, report.chunks, time.perf_counter() - started, True
    )


def drop_index(config: RunConfig, key: str) -> None:
    """Drop a server's index (an embedded backend's are folders inside the ablation and stay)."""
    can = capabilities(config.collect.backend)
    if can.indexable and not can.embedded:
        store = make_search_backend(search_config(config, key))
        assert isinstance(store, IndexableBackend)  # what its capabilities say it is
        store.drop()
        (ablation_dir(config) / "indexes" / key / READY_FILE).unlink(missing_ok=True)


def evaluate_config(config: RunConfig, p: AblationPoint) -> RunConfig:
    """The evaluate flow's config for point ``p``: its answered question set, its folder."""
    data = config.model_dump(mode="json")
    rid = point_id(p)
    set_path(data, "questions", str(points_root(config) / rid / PIPELINE_FILE))
    set_path(data, "runs_root", str(points_root(config)))
    set_path(data, "run_id", rid)
    set_path(data, "limit", None)
    set_path(data, "collect.backend", "question_set")
    set_path(data, "collect.corpus", None)
    set_path(data, "collect.answers.source", "column")
    set_path(data, "collect.answers.column", "response")
    set_path(data, "collect.answers.error_column", GENERATION_ERROR)
    set_path(data, "collect.top_n", p.top_k)
    set_path(data, "score.top_k", p.top_k)
    # The ablation renders one report over all points from their summaries; a report.html per
    # point (Altair charts through vl-convert) would cost more CPU than scoring the point.
    set_path(data, "report.formats", [])
    return RunConfig.model_validate(data)


async def answer_questions(
    config: RunConfig, p: AblationPoint, key: str
) -> tuple[Path, dict[str, int]]:
    """Retrieve top-k chunks and generate an answer per question; write the point's question set.

    A question whose generation failed keeps no answer and the error in its metadata: its
    ``answers`` row is then ``failed`` with that error (the system under test failed), and the
    metrics that read the answer are ``skipped`` naming it, as for any failed answer.
    """
    rid = point_id(p)
    run = RunFolder(points_root(config), rid)
    run.path.mkdir(parents=True, exist_ok=True)
    questions = load_questions(question_set(config), limit=config.limit)
    gateway = gateway_for(config)
    model = config.models.generator_model
    backend = make_search_backend(search_config(config, key))
    sem = asyncio.Semaphore(config.models.concurrency)

    async def one(q: Question) -> dict[str, Any]:
        async with sem:
            hits = await backend.search(q.question, filters={}, top_n=p.top_k)
        contexts = [h.text for h in hits]
        row: dict[str, Any] = {
            "question_id": q.question_id,
            "question": q.question,
            "language": q.language,
            "reference": q.reference,
            "reference_contexts": q.reference_contexts,
            "retrieved_contexts": contexts,
            "metadata": {**q.metadata, "chunk_ids": [h.id for h in hits]},
        }
        judged = await gateway.astructured(
            model=model,
            messages=RAG_ANSWER.messages(
                RagAnswerInput(question=q.question, contexts=contexts), q.language
            ),
            schema=RagAnswer,
            prompt_version=RAG_ANSWER.key,
            temperature=config.models.temperature,
            max_tokens=config.models.max_output_tokens,
        )
        if judged.ok and judged.value is not None:
            row["response"] = judged.value.answer
        else:
            row["metadata"][GENERATION_ERROR] = judged.error or "the generator gave no answer"
        return row

    try:
        # The scope writes the generator's call log into the point's run folder as it goes.
        with gateway.scope("generate", run_id=rid, calls_dir=run.calls_dir) as counts:
            rows = await asyncio.gather(*(one(q) for q in questions))
    finally:
        close = getattr(backend, "close", None)
        if close is not None:
            close()
    path = run.path / PIPELINE_FILE
    text = "".join(json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n" for r in rows)
    # Same bytes on a re-run (memo hits): the collect stage's cache, keyed on this file, holds.
    if not path.is_file() or path.read_bytes() != text.encode("utf-8"):
        write_bytes(text.encode("utf-8"), path)
    return path, counts.as_dict()


Evaluate = Callable[[str, str], Awaitable[dict[str, Any]]]
"""Evaluates a point: its config as JSON and its run id in, the run's manifest out."""


async def run_point(
    config: RunConfig, p: AblationPoint, key: str, evaluate: Evaluate
) -> dict[str, Any]:
    """One point end to end: answers from the pipeline, then ``evaluate`` in its folder.

    Args:
        config: the ablation's config.
        p: the point.
        key: the key of the point's index (built by :func:`build_index`).
        evaluate: runs the evaluation stages on the point's config and run id (the ablate
            flow passes the evaluate flow's body) and returns the run's manifest.

    Returns:
        The point's status, its LLM counts (generation and evaluation) and the wall seconds
        of its two halves.
    """
    started = time.perf_counter()
    _, generated = await answer_questions(config, p, key)
    generated_at = time.perf_counter()
    point_cfg = evaluate_config(config, p)
    manifest = await evaluate(point_cfg.model_dump_json(), point_id(p))
    llm = {k: v + generated.get(k, 0) for k, v in manifest.get("llm", {}).items()}
    return {
        "status": manifest.get("status"),
        "llm": llm,
        "seconds": {
            "generate": round(generated_at - started, 3),
            "evaluate": round(time.perf_counter() - generated_at, 3),
        },
    }


__all__ = [
    "PIPELINE_FILE",
    "Evaluate",
    "IndexInfo",
    "ablation_dir",
    "answer_questions",
    "build_index",
    "drop_index",
    "evaluate_config",
    "index_key",
    "points_root",
    "question_set",
    "run_point",
    "search_config",
    "select_subset",
]
