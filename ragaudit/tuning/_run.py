"""A tune end to end as a library call: plan, retrieve, pool, grade, decide, write.

Explicit arguments (a config, a gateway), no Prefect: the ``tune`` flow, the CLI's dry run and
the bench call these functions.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ragaudit.cache import Gateway, items_in_flight, usage_counter
from ragaudit.config import RunConfig
from ragaudit.conversation import in_context
from ragaudit.dataset import Question, load_questions
from ragaudit.errors import ConfigError
from ragaudit.judging import (
    CountingJudge,
    Grader,
    Judge,
    JudgmentStore,
    PlannedRequest,
    import_run_grades,
    prompt_tokens,
)
from ragaudit.query_forms import SearchQuery, search_queries
from ragaudit.registry import TUNE_SEARCHES
from ragaudit.runfolder import RunsRoot
from ragaudit.tuning._plan import (
    BASELINE,
    Variant,
    check_backend,
    plan_variants,
    variant_config,
)
from ragaudit.tuning._pool import (
    GradeReport,
    Pool,
    VariantRun,
    baseline_cost,
    from_store,
    grade_pool,
    judge_for,
    retrieve,
)
from ragaudit.tuning._search import SearchStrategy
from ragaudit.tuning._stats import (
    Decision,
    TurnGain,
    Values,
    question_metrics,
    recommend,
    split_questions,
    turn_gains,
)


def tune_dir(config: RunConfig) -> Path:
    """``<runs_root>/<tune.name>/``."""
    return Path(config.runs_root) / config.tune.name


def judgment_store(config: RunConfig) -> JudgmentStore:
    """The runs root's judgment store."""
    return JudgmentStore(RunsRoot(config.runs_root).judgments_dir)


@dataclass
class TuneOutcome:
    """Everything a tune found, for its outputs and its console line."""

    config: RunConfig
    questions: dict[str, Question]
    runs: list[VariantRun]
    pool: Pool
    values: dict[str, dict[str, Values]]
    judged: dict[str, float]
    """Variant → mean judged@k over questions."""
    decision: Decision
    grading: GradeReport
    splits: list[tuple[list[str], list[str]]]
    calls: dict[str, int] = field(default_factory=dict)
    """``calls``, ``cache_hits``, ``provider_calls`` of the grading (the gateway's counts)."""
    excluded: int = 0
    """Questions left out of every test: no relevant document in their pool."""
    from_runs: int = 0
    """Grades brought into the store from earlier runs' sort stages by this tune."""
    queries: dict[str, dict[str, SearchQuery]] = field(default_factory=dict)
    """Query form → question id → what it searched (the forms the variants use)."""
    rewrite_calls: dict[str, int] = field(default_factory=dict)
    """``calls``, ``cache_hits``, ``provider_calls`` of the judge's rewrites of turns."""
    turns: list[TurnGain] = field(default_factory=list)
    """Each query-form variant's gain per turn band and turn kind (conversations only)."""


def _embed_of(config: RunConfig, gateway: Gateway) -> Callable[[list[str]], Any]:
    async def embed(texts: list[str]) -> list[list[float]]:
        return await gateway.aembed(texts, model=config.models.embedder_model)

    return embed


def _values(
    runs: list[VariantRun], pool: Pool, config: RunConfig
) -> tuple[dict[str, dict[str, Values]], dict[str, float]]:
    tune = config.tune
    values: dict[str, dict[str, Values]] = {}
    judged: dict[str, float] = {}
    for run in runs:
        if run.status != "ok":
            continue
        per: dict[str, Values] = {m: {} for m in tune.metrics}
        shares = []
        for qid, got in run.questions.items():
            got_values, share = question_metrics(
                got.ids,
                pool.grades.get(qid, {}),
                tune.depth,
                config.sort.relevant_grade,
                tune.metrics,
            )
            for m, v in got_values.items():
                per[m][qid] = v
            if math.isfinite(share):
                shares.append(share)
        values[run.variant.name] = per
        judged[run.variant.name] = float(np.mean(shares)) if shares else math.nan
    return values, judged


async def _queries(
    variants: list[Variant], questions: list[Question], config: RunConfig, judge: Judge
) -> dict[str, dict[str, SearchQuery]]:
    """Per query form the variants use, what each question searches (rewrites asked once)."""
    forms = dict.fromkeys(v.config.collect.query_form for v in variants)
    return {
        form: await search_queries(questions, form, config.conversation, judge) for form in forms
    }


async def _draw(
    config: RunConfig,
    runs: list[VariantRun],
    pool: Pool,
    questions: list[Question],
    embed: Any,
    texts: dict[tuple[str, str], str],
    grade: Callable[[], Any],
    tuning: list[str],
    queries: dict[str, dict[str, SearchQuery]],
) -> None:
    """The search strategy's drawn points, if it draws.

    Each is a pooled variant, scored on the tuning questions only.
    """
    strategy: SearchStrategy = TUNE_SEARCHES.get(config.tune.search)
    if strategy.draw is None:
        return
    tune = config.tune
    base = next(r for r in runs if r.variant.name == BASELINE).variant
    primary = tune.metrics[0]

    async def trial(n: int, changes: dict[str, Any], params: dict[str, Any]) -> float | None:
        name = f"trial-{n}"
        vconfig = variant_config(config, changes, params, f"tune trial {n}")
        variant = Variant(name, vconfig, changes, params)
        [run] = await retrieve([variant], questions, tune.depth, embed, texts, queries)
        runs.append(run)
        if run.status != "ok":
            return None
        pool.add(run, baseline=False, texts=texts)
        await grade()
        values, _ = _values([run], pool, config)
        xs = [v for q, v in values[name][primary].items() if q in tuning and math.isfinite(v)]
        return float(np.mean(xs)) if xs else 0.0

    await strategy.draw(config, dict(base.params), trial)


def shown_to_judge(
    questions: dict[str, Question], config: RunConfig, judge: Judge
) -> dict[str, Question]:
    """The questions as the judge is shown them (a turn with its history, bounded)."""
    return {
        qid: in_context(q, config.conversation, judge.model, judge.budget)
        for qid, q in questions.items()
    }


def _check_budget(
    config: RunConfig,
    pool: Pool,
    runs: list[VariantRun],
    judge: Judge,
    by_id: dict[str, Question],
) -> None:
    """Refuse a budget below the baseline's own ungraded top-k (the pool's store grades in)."""
    budget = config.tune.max_judge_tokens
    if budget is None:
        return
    need = baseline_cost(pool, runs, judge, by_id)
    if need > budget:
        raise ConfigError(
            f"tune.max_judge_tokens: {budget:,} tokens cannot grade even the baseline's own "
            f"top {config.tune.depth} ({need:,} tokens not yet in the store); raise it"
        )


async def run_tune(
    config: RunConfig, gateway: Gateway, *, yes: bool = False, source: str | None = None
) -> TuneOutcome:
    """Tune: every check first, then search, pool, grade (store first), decide.

    Raises:
        ConfigError: Any check of the ``tune`` section, a budget below the baseline's own
            pool, or every variant failing; all before the first judge call.
    """
    check_backend(config)
    variants = plan_variants(config, yes=yes)
    tune = config.tune
    questions = load_questions(config.questions, limit=config.limit)
    by_id = {q.question_id: q for q in questions}
    embed = _embed_of(config, gateway)
    texts: dict[tuple[str, str], str] = {}
    judge = judge_for(config, gateway, items_in_flight(config))
    # Each turn searched as its variant's query form says (a rewrite asked once for every
    # variant of its form); graded as the judge is shown a turn: with its history, so the
    # forms share every (history, document) pair they both retrieve.
    with gateway.scope("tune:rewrite", run_id=tune.name) as rewriting:
        queries = await _queries(variants, questions, config, judge)
    runs = await retrieve(variants, questions, tune.depth, embed, texts, queries)
    base = next(r for r in runs if r.variant.name == BASELINE)
    if base.status != "ok":
        raise ConfigError(f"tune: the baseline (the collect section) failed: {base.error}")
    pool = Pool()
    for run in runs:
        pool.add(run, baseline=run.variant.name == BASELINE, texts=texts)
    by_id = shown_to_judge(by_id, config, judge)
    store = judgment_store(config)
    from_runs = import_run_grades(RunsRoot(config.runs_root), store, Grader.of(judge))
    if tune.max_judge_tokens is not None:
        from_store(pool, store, judge, by_id)
        _check_budget(config, pool, runs, judge, by_id)
    splits = split_questions(list(by_id), tune.holdout, tune.seed, tune.folds)
    total = GradeReport()
    budget = [tune.max_judge_tokens]

    async def grade() -> None:
        got = await grade_pool(
            pool, judge, by_id, store, source=source or f"tune:{tune.name}", budget=budget[0]
        )
        total.found_in_store += got.found_in_store
        total.graded += got.graded
        total.failed += got.failed
        total.left_ungraded = got.left_ungraded
        total.estimated_tokens += got.estimated_tokens
        if budget[0] is not None:
            budget[0] = max(0, budget[0] - got.estimated_tokens)

    with gateway.scope("tune", run_id=tune.name) as counts:
        await grade()
        await _draw(config, runs, pool, questions, embed, texts, grade, splits[0][0], queries)
    values, judged = _values(runs, pool, config)
    primary = tune.metrics[0]
    defined = [q for q in by_id if math.isfinite(values[BASELINE][primary].get(q, math.nan))]
    excluded = len(by_id) - len(defined)
    splits = [
        ([q for q in t if q in set(defined)], [q for q in h if q in set(defined)])
        for t, h in splits
    ]
    decision = recommend(
        values,
        BASELINE,
        tune.metrics,
        splits,
        alpha=config.report.alpha,
        adjustment=config.report.adjustment,
        resamples=config.report.compare_resamples,
        bootstrap_samples=config.report.bootstrap_samples,
        seed=tune.seed,
    )
    turns = turn_gains(
        values,
        questions,
        BASELINE,
        {r.variant.name: r.variant.config.collect.query_form for r in runs},
        tune.metrics,
        defined,
        adjustment=config.report.adjustment,
        resamples=config.report.compare_resamples,
        seed=tune.seed,
    )
    return TuneOutcome(
        config=config,
        questions=by_id,
        runs=runs,
        pool=pool,
        values=values,
        judged=judged,
        decision=decision,
        grading=total,
        splits=splits,
        calls={
            "calls": counts.calls,
            "cache_hits": counts.cache_hits,
            "provider_calls": counts.provider_calls,
        },
        excluded=excluded,
        from_runs=from_runs,
        queries=queries,
        rewrite_calls={
            "calls": rewriting.calls,
            "cache_hits": rewriting.cache_hits,
            "provider_calls": rewriting.provider_calls,
        },
        turns=turns,
    )


@dataclass
class DryRunLine:
    """One variant's share of the pool before anything is paid."""

    variant: str
    status: str
    top_k: int
    """(question, document) pairs in its top-k."""
    new: int
    """Of those, pairs neither in the store nor in an earlier variant's top-k."""
    tokens: int
    """Prompt tokens of grading ``new``."""
    error: str | None = None
    rewrites: int = 0
    """Turns the judge rewrites for this variant's query form, not counted by an earlier
    variant of the same form (searched here in their history form, not asked)."""
    rewrite_tokens: int = 0
    """Prompt tokens of those rewrites."""


async def dry_run(
    config: RunConfig, gateway: Gateway, *, yes: bool = False
) -> tuple[list[DryRunLine], int, int, int]:
    """Per variant the pairs and judge tokens it adds to the pool; no judge call.

    Returns:
        The lines, the pool size, the pairs already in the store, the tokens of the rest.
    """
    check_backend(config)
    variants = plan_variants(config, yes=yes)
    questions = load_questions(config.questions, limit=config.limit)
    by_id = {q.question_id: q for q in questions}
    texts: dict[tuple[str, str], str] = {}
    judge = judge_for(config, gateway, items_in_flight(config))
    # The rewrites' own plan, on a judge that counts: a rewrite not asked falls back to the
    # history form, which stands in for it in the searches below.
    requests: dict[str, list[PlannedRequest]] = {}
    queries: dict[str, dict[str, SearchQuery]] = {}
    for form in dict.fromkeys(v.config.collect.query_form for v in variants):
        counting = CountingJudge.like(judge, lambda schema: None, requests.setdefault(form, []))
        queries[form] = await search_queries(questions, form, config.conversation, counting)
    embed = _embed_of(config, gateway)
    runs = await retrieve(variants, questions, config.tune.depth, embed, texts, queries)
    pool = Pool()
    for run in runs:
        pool.add(run, baseline=run.variant.name == BASELINE, texts=texts)
    by_id = shown_to_judge(by_id, config, judge)
    store = judgment_store(config)
    import_run_grades(RunsRoot(config.runs_root), store, Grader.of(judge))
    stored = from_store(pool, store, judge, by_id)
    base = next(r for r in runs if r.variant.name == BASELINE)
    if base.status == "ok":
        _check_budget(config, pool, runs, judge, by_id)
    seen: set[tuple[str, str]] = {(q, c) for q, g in pool.grades.items() for c in g}
    lines = []
    for run in runs:
        # A form's rewrites are asked once, for the first variant of that form.
        asked = requests.pop(run.variant.config.collect.query_form, [])
        rewrites = len(asked)
        rewrite_tokens = sum(usage_counter(r.model).prompt(r.messages) for r in asked)
        if run.status != "ok":
            lines.append(
                DryRunLine(run.variant.name, "failed", 0, 0, 0, run.error, rewrites, rewrite_tokens)
            )
            continue
        top = [(qid, cid) for qid, got in run.questions.items() for cid in got.ids]
        new = [p for p in top if p not in seen]
        seen.update(new)
        tokens = sum(prompt_tokens(judge, by_id[q], pool.texts[q][c]) for q, c in new)
        lines.append(
            DryRunLine(
                run.variant.name, "ok", len(top), len(new), tokens, None, rewrites, rewrite_tokens
            )
        )
    return lines, pool.size, stored, sum(line.tokens for line in lines)


__all__ = ["DryRunLine", "TuneOutcome", "dry_run", "judgment_store", "run_tune", "tune_dir"]
