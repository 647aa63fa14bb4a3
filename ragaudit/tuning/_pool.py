"""Pooling: every variant's top ``depth`` per question, their union graded once per document.

Variants and questions are searched concurrently, bounded per engine; the pool of a question
is the union of its variants' top-k. Each pooled document is looked up in the judgment store
and only the missing ones are graded, one candidate per call with the sort stage's graded
prompt, through :func:`ragaudit.judging.grade_through_store` (the one place a tune, a run's
sort stage and an audit grade through the store).
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ragaudit.cache import Gateway
from ragaudit.config import RunConfig
from ragaudit.dataset import Question
from ragaudit.errors import RagauditError
from ragaudit.judging import (
    Judge,
    JudgmentStore,
    grade_through_store,
    lookup_pairs,
    prompt_tokens,
)
from ragaudit.query_forms import SearchQuery, search_queries
from ragaudit.search import SearchBackend, capabilities, make_search_backend, read_corpus
from ragaudit.secrets import redact
from ragaudit.tuning._plan import BASELINE, Variant

Embed = Callable[[list[str]], Awaitable[list[list[float]]]]

_LOCAL_CONCURRENCY = 8
_GRADE_BATCH = 128
"""Grades per store part and per hold of its lock: a killed tune loses at most this many (and
the memo holds those); another tune on the store waits at most this many grades."""


@dataclass
class Retrieved:
    """One variant's top-k for one question."""

    ids: list[str] = field(default_factory=list)
    latency_s: float = 0.0
    query: str = ""
    """The text searched (the variant's ``collect.query_form``)."""


@dataclass
class VariantRun:
    """What one variant retrieved, or why it failed."""

    variant: Variant
    questions: dict[str, Retrieved] = field(default_factory=dict)
    status: str = "ok"
    error: str | None = None


@dataclass
class Pool:
    """The pooled documents of every question and their grades."""

    texts: dict[str, dict[str, str]] = field(default_factory=dict)
    """Question id → document id → text, in pooling priority (baseline's ranks first)."""
    priority: dict[tuple[str, str], tuple[int, int]] = field(default_factory=dict)
    grades: dict[str, dict[str, int]] = field(default_factory=dict)
    """Question id → document id → grade, for the documents graded (stored or now)."""
    reasons: dict[tuple[str, str], str] = field(default_factory=dict)

    @property
    def size(self) -> int:
        """Pooled (question, document) pairs."""
        return sum(len(d) for d in self.texts.values())

    def add(self, run: VariantRun, *, baseline: bool, texts: Mapping[tuple[str, str], str]) -> None:
        """Pool ``run``'s documents (the baseline's get the first places in the grading order)."""
        if run.status != "ok":
            return
        for qid, got in run.questions.items():
            docs = self.texts.setdefault(qid, {})
            for rank, cid in enumerate(got.ids, start=1):
                docs.setdefault(cid, texts[(qid, cid)])
                place = (0 if baseline else 1, rank)
                old = self.priority.get((qid, cid))
                self.priority[(qid, cid)] = place if old is None else min(old, place)

    def ungraded(self) -> list[tuple[str, str]]:
        """Pairs without a grade, in grading order: the baseline's, then by best rank."""
        todo = [
            (qid, cid)
            for qid, docs in self.texts.items()
            for cid in docs
            if cid not in self.grades.get(qid, {})
        ]
        return sorted(todo, key=lambda p: self.priority[p])


async def _close(backend: Any) -> None:
    # An engine's async client belongs to this loop: ``aclose`` closes it (and the sync one).
    close = getattr(backend, "aclose", None) or getattr(backend, "close", None)
    if close is not None:
        out = close()
        if inspect.isawaitable(out):
            await out


def _fill_local(config: RunConfig, embed: Embed) -> None:
    """Index ``collect.corpus`` into an empty embedded index (as the collect stage does)."""
    cfg = config.collect
    if not capabilities(cfg.backend).embedded or cfg.corpus is None:
        return
    backend = make_search_backend(config, embed=embed)
    if backend.count() == 0:
        backend.index(read_corpus(Path(cfg.corpus)))


async def retrieve(
    variants: Sequence[Variant],
    questions: Sequence[Question],
    depth: int,
    embed: Embed,
    texts: dict[tuple[str, str], str],
    queries: Mapping[str, Mapping[str, SearchQuery]] | None = None,
) -> list[VariantRun]:
    """Each variant's top ``depth`` for every question, searched concurrently.

    A variant whose backend cannot be built (a template that does not compile), or whose
    search fails for a question (a template that does not render for it, a query the engine
    rejects), is ``failed`` with that message; the others go on. Texts land in ``texts``.
    Each variant searches what its ``collect.query_form`` sends (``queries``: form →
    question id → query, :func:`ragaudit.query_forms.search_queries`); without ``queries``,
    what each variant's form sends without a judge (a turn's history, the set's ``rewrite``).

    Raises:
        ValueError: ``queries`` lacks the form of a variant, or, without ``queries``, a turn
            of a ``rewrite`` variant needs the judge's rewrite.
    """
    if queries is not None:
        missing = {v.config.collect.query_form for v in variants} - set(queries)
        if missing:
            raise ValueError(f"retrieve: no queries of form {', '.join(sorted(missing))}")
    # Without ``queries`` a variant's form is still honoured: searching every turn's utterance
    # whatever the form would score three forms as one and report no gain.
    sent = [
        queries[v.config.collect.query_form]
        if queries is not None
        else await search_queries(
            questions, v.config.collect.query_form, v.config.conversation, None
        )
        for v in variants
    ]
    # The one variant that embeds (if any) fills an empty local index, so its vectors exist.
    filler = next((v for v in variants if v.config.collect.mode != "bm25"), variants[0])
    try:
        await asyncio.to_thread(_fill_local, filler.config, embed)
    except (RagauditError, ValueError, OSError) as exc:
        raise RagauditError(f"collect.corpus: indexing failed: {redact(str(exc))}") from None
    runs = [VariantRun(v) for v in variants]
    backends: list[SearchBackend | None] = []
    for run in runs:
        try:
            backends.append(make_search_backend(run.variant.config, embed=embed))
        except (RagauditError, ValueError) as exc:
            run.status, run.error = "failed", redact(str(exc))
            backends.append(None)
    limits: dict[str, asyncio.Semaphore] = {}
    jobs: list[tuple[int, Question]] = []
    for i, backend in enumerate(backends):
        if backend is None:
            continue
        engine = runs[i].variant.config.collect.backend
        limit = getattr(backend, "concurrency", _LOCAL_CONCURRENCY)
        limits.setdefault(engine, asyncio.Semaphore(limit))
        jobs += [(i, q) for q in questions]

    async def one(i: int, q: Question) -> None:
        run, backend = runs[i], backends[i]
        if run.status != "ok" or backend is None:
            return
        cfg = run.variant.config.collect
        field_ = cfg.filter_field
        filters = {field_: q.filters[field_]} if field_ and field_ in q.filters else {}
        text = sent[i][q.question_id].text
        try:
            async with limits[cfg.backend]:
                # Timed once a slot is held: the wait for one is the tune's queue, not the
                # engine's latency (a variant later in the config would wait longest).
                started = time.perf_counter()
                # ``top_n`` as the run asks it, cut to ``depth`` after: a hybrid variant fuses
                # lists as deep as the ones ``run`` fuses, so what is tuned is what is served.
                hits = await backend.search(text, filters=filters, top_n=cfg.top_n)
                took = time.perf_counter() - started
        except Exception as exc:  # one variant's failure must not stop the others
            if run.status == "ok":
                run.status = "failed"
                run.error = redact(f"question '{q.question_id}': {type(exc).__name__}: {exc}")
            return
        run.questions[q.question_id] = Retrieved([h.id for h in hits[:depth]], took, text)
        for h in hits[:depth]:
            texts[(q.question_id, h.id)] = h.text

    try:
        await asyncio.gather(*(one(i, q) for i, q in jobs))
    finally:
        for backend in backends:
            if backend is not None:
                await _close(backend)
    return runs


def from_store(
    pool: Pool, store: JudgmentStore, judge: Judge, questions: Mapping[str, Question]
) -> int:
    """Fill the pool's grades from the store; returns how many were found."""
    asked = {
        qid: [{"context_id": cid, "text": t} for cid, t in docs.items()]
        for qid, docs in pool.texts.items()
    }
    found = 0
    for (qid, cid), stored in lookup_pairs(judge, questions, asked, store).items():
        if cid not in pool.grades.get(qid, {}):
            pool.grades.setdefault(qid, {})[cid] = stored.grade
            pool.reasons[(qid, cid)] = stored.reason
            found += 1
    return found


@dataclass
class GradeReport:
    """What grading the pool did."""

    found_in_store: int = 0
    graded: int = 0
    failed: int = 0
    left_ungraded: int = 0
    """Pairs the budget left without a grade."""
    estimated_tokens: int = 0
    """Prompt tokens of the pairs sent, as counted before sending."""


async def grade_pool(
    pool: Pool,
    judge: Judge,
    questions: Mapping[str, Question],
    store: JudgmentStore,
    *,
    source: str,
    budget: int | None = None,
) -> GradeReport:
    """Grade the pool's ungraded pairs (store first), the baseline's first, within ``budget``.

    Each batch of grades is written to the store before the next is asked, so a killed tune
    re-pays nothing: finished batches are in the store, the batch in flight in the memo. A
    grade another tune stored meanwhile is found under the store's lock, not paid again.
    """
    report = GradeReport(found_in_store=from_store(pool, store, judge, questions))
    todo = pool.ungraded()
    if budget is not None:
        kept, spent = [], 0
        for qid, cid in todo:
            cost = prompt_tokens(judge, questions[qid], pool.texts[qid][cid])
            if spent + cost > budget:
                break
            kept.append((qid, cid))
            spent += cost
        report.left_ungraded = len(todo) - len(kept)
        report.estimated_tokens = spent
        todo = kept
    # A text pooled under two ids (or two questions of one text) is asked once: the store's
    # grading fans one grade out to every pair of its key.
    asked: dict[str, list[dict[str, str]]] = {}
    for qid, cid in todo:
        asked.setdefault(qid, []).append({"context_id": cid, "text": pool.texts[qid][cid]})
    got = await grade_through_store(
        judge, questions, asked, store, source=source, batch=_GRADE_BATCH
    )
    report.found_in_store += got.found
    report.graded += got.paid
    report.failed += got.failed
    for g in got.graded.values():
        for row in g.rows:
            if row["grade"] is None:
                continue
            qid, cid = row["question_id"], row["context_id"]
            pool.grades.setdefault(qid, {})[cid] = int(row["grade"])
            pool.reasons[(qid, cid)] = row.get("reason") or ""
    return report


def baseline_cost(
    pool: Pool, runs: Sequence[VariantRun], judge: Judge, questions: Mapping[str, Question]
) -> int:
    """Prompt tokens of the baseline's own ungraded top-k (what any budget must cover)."""
    base = next(r for r in runs if r.variant.name == BASELINE)
    total = 0
    for qid, got in base.questions.items():
        for cid in got.ids:
            if cid not in pool.grades.get(qid, {}):
                total += prompt_tokens(judge, questions[qid], pool.texts[qid][cid])
    return total


def judge_for(config: RunConfig, gateway: Gateway, in_flight: int) -> Judge:
    """The judge a tune grades with: the run's judge, as the sort stage builds it."""
    return Judge.from_config(config.models, gateway, in_flight)


__all__ = [
    "GradeReport",
    "Pool",
    "Retrieved",
    "VariantRun",
    "baseline_cost",
    "from_store",
    "grade_pool",
    "judge_for",
    "retrieve",
]
