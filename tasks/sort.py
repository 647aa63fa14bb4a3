"""Stage 2, sort: graded relevance of every candidate, an order where it counts, agreement.

The algorithms live in :mod:`ragaudit.judging`; this module adapts the run folder's tables to
them. Two phases per run: every candidate of every question gets a relevance grade (0–3),
under the gateway's per-model limit; then the relevant ones (grade at or above
``sort.relevant_grade``) are ordered as ``sort.order`` says (``full`` pairwise, ``head`` the
top ``head_k`` only, ``none``), several questions at once. Every call goes through the
gateway's memo, so a re-run pays for nothing it already asked.

Tables written: ``verdicts`` (one row per candidate), ``comparisons`` (one row per ordering
call or pair), ``ranking`` (one row per question) and ``agreement`` (:mod:`ragaudit.agreement`);
``grade_noise``, the agreement of the grades' samples (``models.judge_repeats``,
``models.jury``), is taken over the whole run, like the TREC files, once the batches combine.
With the judge off, :func:`gold` writes the engine's agreement with gold relevance alone,
without any LLM call.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from ragaudit.agreement import ALL_QUESTIONS, JudgeOrder, aggregate, gold_grades, question_rows
from ragaudit.dataset import Question
from ragaudit.judging import (
    Graded,
    Judge,
    JudgmentStore,
    Ordered,
    OrderOptions,
    PreviousHead,
    grade_candidates,
    grade_noise,
    grade_plan,
    grade_through_store,
    order_questions,
    ordering_baseline,
    sample_judges,
    single_judge,
)
from ragaudit.runfolder import RunsRoot
from ragaudit.schemas import AGREEMENT, COMPARISONS, GRADE_NOISE, RANKING, VERDICTS, to_table
from ragaudit.tasks._common import StageContext, combine_parts
from ragaudit.trec import export_trec

_log = logging.getLogger(__name__)


def judge_of(ctx: StageContext) -> Judge:
    """The stage's judge: the gateway, the judge model and its window, from the config."""
    return ctx.llm


def graders_of(ctx: StageContext) -> list[Judge]:
    """One judge per sample of every relevance grade: each grading model, each repeat."""
    models = ctx.config.models
    plan = grade_plan(
        models.graders,
        models.judge_repeats,
        models.temperature,
        ctx.config.score.sampling_temperature,
    )
    return sample_judges(judge_of(ctx), plan, models)


def prompt_budget(ctx: StageContext) -> int:
    """Tokens a judge prompt may use: the judge's window less the answer's ``max_tokens``."""
    return ctx.window() - judge_of(ctx).max_tokens


def order_options(ctx: StageContext) -> OrderOptions:
    """The ordering settings of the config's ``sort`` section."""
    return OrderOptions.from_sort(ctx.config.sort)


async def judge_relevance(
    ctx: StageContext, questions: dict[str, Question], candidates: dict[str, list[dict[str, Any]]]
) -> dict[str, Graded]:
    """A relevance grade per candidate, under the gateway's limit.

    The judge's own grades, one candidate per call, go through the runs root's judgment store
    (a grade a tune or an earlier run paid for is not paid again, and what this run pays is
    stored for them); a jury's or repeats' grade is an aggregate no single call gives, and a
    batch of candidates per call is graded beside the others it shared the call with: those
    are graded outside the store.
    """
    cfg, models = ctx.config.sort, ctx.config.models
    if single_judge(models.jury, models.judge_repeats, cfg.grade_batch):
        got = await grade_through_store(
            graders_of(ctx)[0],
            questions,
            candidates,
            JudgmentStore(RunsRoot(ctx.run.path.parent).judgments_dir),
            source=f"run:{ctx.run.run_id}",
            relevant_grade=cfg.relevant_grade,
            run_id=ctx.run.run_id,
        )
        return got.graded
    return await grade_candidates(
        graders_of(ctx),
        questions,
        candidates,
        relevant_grade=cfg.relevant_grade,
        per_call=cfg.grade_batch,
        run_id=ctx.run.run_id,
        aggregate=cfg.grade_aggregate,
    )


def write_grade_noise(ctx: StageContext) -> None:
    """Write ``grade_noise``: the agreement of the run's grade samples (empty with one sample)."""
    cfg = ctx.config.sort
    verdicts = ctx.run.read("verdicts").select(["grade_samples", "grade_judges"]).to_pylist()
    rows = grade_noise(verdicts, relevant_grade=cfg.relevant_grade, how=cfg.grade_aggregate)
    ctx.run.write(
        "grade_noise", to_table([{"run_id": ctx.run.run_id, **r} for r in rows], GRADE_NOISE)
    )


async def order_relevant(
    ctx: StageContext,
    questions: dict[str, Question],
    candidates: dict[str, list[dict[str, Any]]],
    relevance: dict[str, Graded],
    previous: dict[str, PreviousHead] | None = None,
) -> list[Ordered]:
    """Order each question's relevant candidates as ``sort.order`` says.

    ``previous``: the heads of the run ``sort.previous`` names, built on where still valid.
    """
    return await order_questions(
        judge_of(ctx), questions, candidates, relevance, order_options(ctx), previous
    )


def _status(rel: Graded, res: Ordered) -> tuple[str, str | None]:
    """A ranking's status: ``failed`` when it rests on nothing, ``partial`` when on part of it.

    ``partial`` only when some candidate was graded; a ranking whose every ordering call failed
    is ``failed`` (its order is the engine's, not the judge's).
    """
    problems = []
    if rel.unjudged:
        problems.append(f"{len(rel.unjudged)} relevance verdicts failed")
    if res.failed:
        problems.append(f"{res.failed} of {res.asked} ordering calls failed")
    error = "; ".join(problems) or None
    if not rel.grades and rel.unjudged:
        return "failed", error
    if res.asked and res.failed >= res.asked:
        return "failed", error
    return ("partial" if problems else "ok"), error


async def sort(ctx: StageContext, *, timings: dict[str, float] | None = None) -> list[str]:
    """Write ``verdicts``, ``comparisons``, ``ranking`` and ``agreement``.

    ``timings``, when given, receives the wall time of each phase (``relevance_s``,
    ``ordering_s``), for the benchmark.
    """
    cfg = ctx.config.sort
    run_id = ctx.run.run_id
    questions = {q.question_id: q for q in ctx.judged_questions()}
    candidates = ctx.run.candidates(cfg.max_candidates, ctx.ids)
    # Before any call: a sort.previous naming no run is refused before money is spent.
    baseline = ordering_baseline(ctx.run, ctx.config, ctx.ids)
    if cfg.order == "head" and baseline.note is not None:
        # What a night pays for its heads depends on it: said where the run's log is read.
        _log.warning("sort: heads ordered afresh: %s", baseline.note)
    for qid, why in sorted(baseline.skipped.items()):
        _log.warning("sort: question %s: its head is ordered afresh: %s", qid, why)
    started = time.perf_counter()
    relevance = await judge_relevance(ctx, questions, candidates)
    verdict_rows = [r for rel in relevance.values() for r in rel.rows]
    ctx.run.write(ctx.out("verdicts"), to_table(verdict_rows, VERDICTS))
    judged = time.perf_counter()
    results = await order_relevant(ctx, questions, candidates, relevance, baseline.heads)
    if timings is not None:
        timings["relevance_s"] = judged - started
        timings["ordering_s"] = time.perf_counter() - judged

    comparison_rows, ranking_rows, agreement_rows = [], [], []
    k = cfg.agreement_k
    options = order_options(ctx)
    for res in results:
        qid, rel = res.question_id, relevance[res.question_id]
        # Sorted, not in the order the answers came back: a re-run writes the same bytes.
        rows = sorted(
            res.rows,
            key=lambda r: (
                r["method"],
                r["first_id"],
                r["second_id"] or "",
                r.get("shown_ids") or [],
            ),
        )
        comparison_rows += [{"run_id": run_id, "question_id": qid, **r} for r in rows]
        status, error = _status(rel, res)
        ranking_rows.append(
            {
                "run_id": run_id,
                "question_id": qid,
                "ordered_ids": res.ordered,
                "tie_group": res.groups,
                "exact_k": res.exact_k,
                "irrelevant_ids": rel.irrelevant,
                "unjudged_ids": rel.unjudged,
                # The pairwise strategy only where it ran (``method`` names every mode's).
                "strategy": cfg.strategy if cfg.order == "full" else None,
                "comparisons": len(res.rows),
                "judge_calls": rel.spend.calls + res.spend.calls,
                "status": status,
                "error": error,
                "order_mode": cfg.order,
                "method": options.method,
                "relevance_calls": rel.spend.calls,
                "relevance_tokens": rel.spend.prompt_tokens,
                "ordering_calls": res.spend.calls,
                "ordering_tokens": res.spend.prompt_tokens,
                "ordering_failed": res.failed,
                "head_source": res.source,
                "head_note": (res.note or baseline.why_fresh(qid))
                if res.source == "fresh" and cfg.order == "head"
                else None,
            }
        )
        agreement_rows += question_rows(
            run_id,
            qid,
            [c["context_id"] for c in candidates[qid]],
            k,
            judge=JudgeOrder(
                res.ordered,
                res.groups,
                rel.irrelevant,
                rel.unjudged,
                grades=rel.grades,
                exact_k=res.exact_k,
                ordering_asked=res.asked,
                ordering_failed=res.failed,
            ),
            gold=gold_grades(questions[qid], candidates[qid]),
        )
    if not ctx.batched:
        # A batch's means would be a batch's: the run's are taken when the batches combine.
        agreement_rows += aggregate(run_id, agreement_rows)
    ctx.run.write(ctx.out("comparisons"), to_table(comparison_rows, COMPARISONS))
    ctx.run.write(ctx.out("ranking"), to_table(ranking_rows, RANKING))
    ctx.run.write(ctx.out("agreement"), to_table(agreement_rows, AGREEMENT))
    if not ctx.batched:
        write_grade_noise(ctx)
        export_trec(ctx.run.path)
    return [ctx.out(t) for t in SORT_TABLES]


SORT_TABLES = ("verdicts", "comparisons", "ranking", "agreement")


def combine_sort(ctx: StageContext, parts: list[str]) -> list[str]:
    """Join the batches' tables and add the run's agreement means over all their questions."""
    names = combine_parts(ctx, SORT_TABLES, parts)
    rows = ctx.run.rows("agreement")
    rows += aggregate(ctx.run.run_id, rows)
    ctx.run.write("agreement", to_table(rows, AGREEMENT))
    write_grade_noise(ctx)
    export_trec(ctx.run.path)
    return names


async def gold(ctx: StageContext) -> list[str]:
    """Write ``agreement`` with the engine's agreement with gold relevance only (no LLM call).

    The stage that runs instead of :func:`sort` when the judge stages are off.
    """
    run_id, k = ctx.run.run_id, ctx.config.sort.agreement_k
    candidates = ctx.run.candidates(ctx.config.sort.max_candidates)
    rows: list[dict[str, Any]] = []
    for q in ctx.run.questions():
        cands = candidates.get(q.question_id, [])
        rows += question_rows(
            run_id,
            q.question_id,
            [c["context_id"] for c in cands],
            k,
            judge=None,
            gold=gold_grades(q, cands),
        )
    rows += aggregate(run_id, rows)
    ctx.run.write("agreement", to_table(rows, AGREEMENT))
    export_trec(ctx.run.path)
    return ["agreement"]


__all__ = [
    "ALL_QUESTIONS",
    "SORT_TABLES",
    "combine_sort",
    "gold",
    "graders_of",
    "judge_of",
    "judge_relevance",
    "order_options",
    "order_relevant",
    "prompt_budget",
    "sort",
    "write_grade_noise",
]
