"""Stage 1, collect: the question set, ~N candidates per question, the system's answers.

Candidates come from the configured search backend (``local``, ``elasticsearch``,
``opensearch``) or from the question set's own ``retrieved_contexts``; answers from an
answer source (``column``, ``entrypoint``, ``http``). Every question gets a ``retrieval``
row (``ok``, ``empty`` or ``failed`` with the reason) and an ``answers`` row (``ok``,
``skipped`` or ``failed``): one question's trouble never stops the others.

What a turn of a conversation searches is its query form (``collect.query_form``,
:mod:`ragaudit.query_forms`): the utterance, its conversation's user turns, or a rewrite that
stands alone (the set's, or the judge's, asked here and logged as this stage's calls). The
``retrieval`` row keeps the text searched and where it came from.

Two kinds of search failure stop the stage instead, because every other question would fail
the same way: an engine that cannot be reached, that refuses the credentials, or that has
no such index. The stage then fails with one message naming the question it happened on and
the config field to check. So does a run in which no question got a single candidate.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from ragaudit import progress
from ragaudit.answers import answer_one, make_source, resolve_entrypoint
from ragaudit.config import RunConfig
from ragaudit.dataset import CONVERSATION_FIELDS, Question, check_gold, load_questions, with_qrels
from ragaudit.errors import ConfigError, StageError
from ragaudit.query_forms import SearchQuery, needs_judge, search_queries
from ragaudit.schemas import ANSWERS, CANDIDATES, QUESTIONS, RETRIEVAL, to_table
from ragaudit.search import (
    Hit,
    SearchBackend,
    SearchError,
    capabilities,
    ready_backend,
)
from ragaudit.secrets import redact
from ragaudit.tasks._common import StageContext, dumps, gather_limited

log = logging.getLogger(__name__)

_LOCAL_CONCURRENCY = 8


def _backend(ctx: StageContext) -> SearchBackend:
    async def embed(texts: list[str]) -> list[list[float]]:
        return await ctx.gateway.aembed(texts, model=ctx.config.models.embedder_model)

    return ready_backend(ctx.config, embed=embed)


def _gold(q: Question, hit_id: str, text: str) -> bool | None:
    if q.reference_context_grades is not None:
        # Graded gold: a context the grades leave out is not relevant, as trec_eval counts it.
        grade = q.reference_context_grades.get(hit_id, 0)
        return grade > 0 or hit_id in set(q.reference_context_ids or [])
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


def question_row(q: Question, run_id: str, history_cut: int) -> dict[str, Any]:
    """A question as the ``questions`` table holds it (its conversation as one JSON value)."""
    row = q.model_dump(exclude=set(CONVERSATION_FIELDS))
    conversation = q.model_dump(include=set(CONVERSATION_FIELDS), exclude_none=True)
    if conversation:
        conversation["history_cut"] = history_cut
    return {
        **row,
        "run_id": run_id,
        "filters": dumps(q.filters),
        "metadata": dumps(q.metadata),
        "reference_context_grades": None
        if q.reference_context_grades is None
        else dumps(q.reference_context_grades),
        "conversation": dumps(conversation) if conversation else None,
    }


def _named(q: Question) -> str:
    text = q.question if len(q.question) <= 60 else q.question[:57] + "..."
    return f"question '{q.question_id}' ({text})"


def _searched(questions: list[Question], backend: SearchBackend | None) -> list[Question]:
    """The questions the backend is asked (the others bring their own contexts)."""
    return [] if backend is None else [q for q in questions if not q.retrieved_contexts]


async def _queries(
    ctx: StageContext, questions: list[Question], backend: SearchBackend | None
) -> dict[str, SearchQuery]:
    """What each searched question sends, under ``collect.query_form``.

    The judge is built only when a turn needs its rewrite; a rewrite it cannot give is
    searched in the history form, said on the question's row and in the log.
    """
    form = ctx.config.collect.query_form
    searched = _searched(questions, backend)
    asked = sum(1 for q in searched if needs_judge(q, form))
    if not asked:
        queries = await search_queries(searched, form, ctx.config.conversation, None)
    else:
        with progress.bar("collect: rewrites", asked) as bar:
            queries = await search_queries(
                searched, form, ctx.config.conversation, ctx.llm, bar.advance
            )
    for q in searched:
        if queries[q.question_id].error:
            log.warning("collect: %s: %s", _named(q), queries[q.question_id].error)
    return queries


async def _search_all(
    ctx: StageContext,
    questions: list[Question],
    backend: SearchBackend | None,
    queries: dict[str, SearchQuery] | None = None,
) -> tuple[list[list[dict[str, Any]]], list[dict[str, Any]]]:
    """Candidate rows and a retrieval row per question; raises on a stage-stopping failure.

    ``queries`` says what each question searches (default: its text).
    """
    cfg = ctx.config.collect
    queries = queries or {}
    run_id = ctx.run.run_id
    field = cfg.filter_field
    # A backend that limits its own searches in flight says how many (the engines' setting).
    limit = getattr(backend, "concurrency", _LOCAL_CONCURRENCY)
    candidates: list[list[dict[str, Any]]] = [[] for _ in questions]
    retrieval: list[dict[str, Any]] = [{} for _ in questions]
    sem = asyncio.Semaphore(limit)

    async def fetch(i: int, q: Question, bar: progress.Bar) -> None:
        row: dict[str, Any] = {"run_id": run_id, "question_id": q.question_id, "top_n": cfg.top_n}
        started = time.perf_counter()
        hits: list[Hit] = []
        if backend is None or q.retrieved_contexts:
            hits = _hits_from_question_set(q)
            row.update(backend="question_set", status="ok")
        else:
            row["backend"] = cfg.backend
            query = queries.get(q.question_id) or SearchQuery(
                q.question, cfg.query_form, "utterance"
            )
            row.update(
                query=query.text,
                query_form=query.form,
                query_source=query.source,
                query_error=query.error,
            )
            filters = {field: q.filters[field]} if field and field in q.filters else {}
            try:
                async with sem:
                    hits = await backend.search(query.text, filters=filters, top_n=cfg.top_n)
                row["status"] = "ok" if hits else "empty"
                if not hits:
                    row["error"] = (
                        f"collect: {_named(q)}: the search returned no candidates "
                        f"(filters {dumps(filters)})"
                    )
            except SearchError as exc:
                message = redact(f"collect: {_named(q)}: {exc}")
                if exc.fatal:
                    raise ConfigError(message) from None
                row.update(status="failed", error=message)
            except Exception as exc:  # e.g. the local backend's own errors: this question only
                row.update(
                    status="failed",
                    error=redact(f"collect: {_named(q)}: {type(exc).__name__}: {exc}"),
                )
            if row["status"] != "ok":
                log.warning("%s", row["error"])
        row.update(n_candidates=len(hits), latency_s=time.perf_counter() - started)
        retrieval[i] = row
        candidates[i] = [
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
        bar.advance()

    with progress.bar("collect: candidates", len(questions)) as bar:
        # A TaskGroup, not gather: a stage-stopping error cancels the searches still running.
        try:
            async with asyncio.TaskGroup() as group:
                for i, q in enumerate(questions):
                    group.create_task(fetch(i, q, bar))
        except* ConfigError as group_error:
            raise group_error.exceptions[0] from None

    searched = [r for r in retrieval if r["backend"] != "question_set"]
    if searched and all(r["status"] != "ok" for r in searched):
        first = searched[0]["error"]
        more = f"; {len(searched) - 1} other questions too" if len(searched) > 1 else ""
        raise StageError(f"no question got any candidate: {first}{more}")
    return candidates, retrieval


def check_inputs(config: RunConfig) -> list[Question]:
    """The question set, read, and the corpus path, checked: the stage's inputs, before any work.

    A corpus that is set but missing is an error even when the index is already filled (and
    the corpus would not be read): a moved or mistyped path must not pass unnoticed.
    """
    corpus = config.collect.corpus
    searches = capabilities(config.collect.backend).searches
    if corpus is not None and searches and not corpus.exists():
        raise ConfigError(f"collect.corpus: no such file or folder: {corpus}")
    questions = load_questions(config.questions, limit=config.limit)
    qrels = check_gold(config, questions)
    return questions if qrels is None else with_qrels(questions, qrels)


async def collect(ctx: StageContext) -> list[str]:
    """Write ``questions``, ``candidates``, ``retrieval`` and ``answers``."""
    cfg = ctx.config
    questions = check_inputs(cfg)
    run_id = ctx.run.run_id
    ctx.run.write(
        "questions",
        to_table([question_row(q, run_id, ctx.history_cut(q)) for q in questions], QUESTIONS),
    )
    # Built before any search, so a bad answer-source setting fails before the engine is asked.
    source = make_source(cfg.collect.answers)
    use_engine = capabilities(cfg.collect.backend).searches and not all(
        q.retrieved_contexts for q in questions
    )
    backend = _backend(ctx) if use_engine else None
    try:
        queries = await _queries(ctx, questions, backend)
        per_question, retrieval = await _search_all(ctx, questions, backend, queries)
    finally:
        if backend is not None and hasattr(backend, "aclose"):
            await backend.aclose()
    ctx.run.write("candidates", to_table([r for rows in per_question for r in rows], CANDIDATES))
    ctx.run.write("retrieval", to_table(retrieval, RETRIEVAL))

    answers_cfg = cfg.collect.answers
    try:
        with progress.bar("collect: answers", len(questions)) as abar:

            async def answer(q: Question) -> dict[str, Any]:
                row = await answer_one(source, q, answers_cfg, run_id)
                abar.advance()
                return row

            answers = await gather_limited(questions, answer, limit=answers_cfg.concurrency)
    finally:
        await source.aclose()
    ctx.run.write("answers", to_table(answers, ANSWERS))
    return ["questions", "candidates", "retrieval", "answers"]


__all__ = [
    "check_inputs",
    "collect",
    "resolve_entrypoint",
]
