"""Stage 1, collect: the question set, ~N candidates per question, the system's answers."""

from __future__ import annotations

import asyncio
import importlib
import inspect
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ragaudit import progress
from ragaudit.dataset import Question, load_questions
from ragaudit.errors import ConfigError, InputError
from ragaudit.schemas import ANSWERS, CANDIDATES, QUESTIONS, to_table
from ragaudit.search import Document, Hit, make_backend
from ragaudit.secrets import redact
from ragaudit.tasks._common import StageContext, dumps, gather_limited


def read_questions(ctx: StageContext) -> list[Question]:
    """The question set as stored in the run (written by :func:`collect`)."""
    rows = ctx.run.read("questions").to_pylist()
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
        )
        for r in rows
    ]


def load_corpus(path: Path) -> list[Document]:
    """A JSONL corpus: one ``{"id", "text", "metadata"}`` object per line."""
    docs = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
            docs.append(Document(id=str(obj["id"]), text=obj["text"], metadata=obj.get("metadata") or {}))
        except (json.JSONDecodeError, KeyError, TypeError) as exc:
            raise InputError(f"{path}: line {n}: expected {{'id', 'text', 'metadata'}} ({exc})") from None
    return docs


def _backend(ctx: StageContext) -> Any:
    cfg = ctx.config.collect

    async def embed(texts: list[str]) -> list[list[float]]:
        return await ctx.gateway.aembed(texts, model=ctx.config.models.embedder_model)

    backend = make_backend(
        cfg.backend,
        path=cfg.index_path,
        table=cfg.table,
        mode=cfg.mode,
        embed=embed if cfg.mode != "bm25" else None,
    )
    if backend.count() == 0:
        if cfg.corpus is None:
            raise ConfigError(
                f"collect.index_path: the index at {cfg.index_path} is empty and collect.corpus is not set"
            )
        backend.index(load_corpus(Path(cfg.corpus)))
    return backend


def _gold(q: Question, hit_id: str, text: str) -> bool | None:
    if q.reference_context_ids is not None:
        return hit_id in set(q.reference_context_ids)
    if q.reference_contexts is not None:
        return text.strip() in {c.strip() for c in q.reference_contexts}
    return None


def _hits_from_question_set(q: Question) -> list[Hit]:
    return [
        Hit(id=f"{q.question_id}#{i}", text=t, rank=i + 1, score=float("nan"), metadata={})
        for i, t in enumerate(q.retrieved_contexts or [])
    ]


def resolve_entrypoint(spec: str) -> Callable[..., Any]:
    """``package.module:function`` → the function."""
    module_name, _, attr = spec.partition(":")
    if not module_name or not attr:
        raise ConfigError(f"collect.answers.entrypoint: '{spec}' is not 'package.module:function'")
    try:
        fn = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as exc:
        raise ConfigError(f"collect.answers.entrypoint: cannot load '{spec}' ({exc})") from None
    if not callable(fn):
        raise ConfigError(f"collect.answers.entrypoint: '{spec}' is not callable")
    return fn


async def _answer(ctx: StageContext, q: Question, fn: Callable[..., Any] | None) -> dict[str, Any]:
    cfg = ctx.config.collect.answers
    row = {"run_id": ctx.run.run_id, "question_id": q.question_id, "source": cfg.source}
    if fn is None:
        if q.response:
            return {**row, "response": q.response, "status": "ok", "latency_s": 0.0}
        return {**row, "status": "skipped", "error": "the question set has no response for this question"}
    started = time.perf_counter()
    last = ""
    for attempt in range(cfg.retries + 1):
        try:
            out = fn(q.question, q.filters)
            if inspect.isawaitable(out):
                out = await out
            if not isinstance(out, str) or not out.strip():
                raise ValueError(f"the entrypoint returned {type(out).__name__} {str(out)[:80]!r}, not an answer")
            return {**row, "response": out, "status": "ok", "latency_s": time.perf_counter() - started}
        except Exception as exc:  # one question's failure must not stop the others
            last = redact(f"{type(exc).__name__}: {exc}")[:1000]
            if attempt < cfg.retries:
                await asyncio.sleep(min(2.0**attempt * 0.5, 10.0))
    return {**row, "status": "failed", "error": f"after {cfg.retries + 1} attempts: {last}",
            "latency_s": time.perf_counter() - started}


async def collect(ctx: StageContext) -> list[str]:
    """Write ``questions``, ``candidates`` and ``answers``."""
    cfg = ctx.config
    questions = load_questions(cfg.questions, limit=cfg.limit)
    run_id = ctx.run.run_id
    ctx.run.write(
        "questions",
        to_table(
            [
                {**q.model_dump(), "run_id": run_id, "filters": dumps(q.filters), "metadata": dumps(q.metadata)}
                for q in questions
            ],
            QUESTIONS,
        ),
    )
    use_engine = cfg.collect.backend != "question_set" and not all(q.retrieved_contexts for q in questions)
    backend = _backend(ctx) if use_engine else None
    field = cfg.collect.filter_field

    async def fetch(q: Question) -> list[dict[str, Any]]:
        if backend is None or q.retrieved_contexts:
            hits = _hits_from_question_set(q)
        else:
            filters = {field: q.filters[field]} if field and field in q.filters else {}
            hits = await backend.search(q.question, filters=filters, top_n=cfg.collect.top_n)
        bar.advance()
        return [
            {
                "run_id": run_id,
                "question_id": q.question_id,
                "context_id": h.id,
                "text": h.text,
                "engine_rank": h.rank,
                "engine_score": h.score,
                "gold_relevant": _gold(q, h.id, h.text),
                "source": dumps(h.metadata),
            }
            for h in hits
        ]

    with progress.bar("collect: candidates", len(questions)) as bar:
        per_question = await gather_limited(questions, fetch, limit=8)
    ctx.run.write("candidates", to_table([r for rows in per_question for r in rows], CANDIDATES))

    answers_cfg = cfg.collect.answers
    fn = resolve_entrypoint(answers_cfg.entrypoint) if answers_cfg.source == "entrypoint" else None
    if answers_cfg.source == "entrypoint" and not answers_cfg.entrypoint:
        raise ConfigError("collect.answers.entrypoint: required when collect.answers.source is 'entrypoint'")
    with progress.bar("collect: answers", len(questions)) as abar:

        async def answer(q: Question) -> dict[str, Any]:
            row = await _answer(ctx, q, fn)
            abar.advance()
            return row

        answers = await gather_limited(questions, answer, limit=answers_cfg.concurrency)
    ctx.run.write("answers", to_table(answers, ANSWERS))
    return ["questions", "candidates", "answers"]


__all__ = ["collect", "load_corpus", "read_questions", "resolve_entrypoint"]
