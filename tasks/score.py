"""Stage 4, score: one task per metric over the batch, on the system's top-k contexts.

Each metric's rows are scored concurrently (the gateway bounds the calls in flight), each in its
own try/except, in its own item scope (the judge's raw replies kept for a failed row) and its own
trace (so the row keeps the judge's statements, verdicts and ratings).

k starts at the configured top-k and is reduced until the metric's largest judge request fits
the judge's window (the users' rule): the request is rendered with the row's own question,
answer and reference, in its language, with the gateway's schema message, and its tokens are
counted; the contexts' tokens are added as they appear in the prompt (JSON-escaped), all of
them for a prompt that joins the contexts, the largest for one that takes them one at a time.
The k used is kept on every row that reads contexts, the measurement in its ``metric_args``.

Every row ends ``ok``, ``failed`` with the error, or ``skipped`` with the reason: a judge reply
that cannot be used is never a silent NaN or 0.
"""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import Callable
from dataclasses import replace
from functools import lru_cache
from typing import Any

from ragaudit import progress
from ragaudit.cache import count_text
from ragaudit.cache import forget_counts as forget_cached_counts
from ragaudit.config import OFFLINE_EMBEDDER, RunConfig
from ragaudit.errors import ConfigError
from ragaudit.metrics import Deps, Metric, Sample, Skip, resolve, trace
from ragaudit.schemas import SCORES, to_table
from ragaudit.secrets import redact
from ragaudit.tasks._common import (
    StageContext,
    combine_parts,
    dumps,
    gather_limited,
    in_flight,
    part_name,
    split_part,
)

# Chat formatting adds a few tokens per message (role markers) that no text shows.
MESSAGE_OVERHEAD_TOKENS = 4
# Judge replies kept on a failed row, to show what could not be used.
KEEP_REPLIES = 20


def prompt_tokens(model: str, text: str) -> int:
    """Tokens of ``text`` for ``model`` (a prompt's instruction and examples counted once)."""
    return count_text(model, text)


@lru_cache(maxsize=8192)
def _context_tokens(model: str, text: str) -> int:
    # Every judged metric fits the same contexts: count each once per process.
    return prompt_tokens(model, _in_prompt(text))


def forget_counts() -> None:
    """Drop every token count this process kept (contexts, prompt lines, messages).

    What a re-run in a new process would start from; a benchmark calls it.
    """
    _context_tokens.cache_clear()
    forget_cached_counts()


def _in_prompt(text: str) -> str:
    """A context as a prompt carries it: inside a JSON string (escaped newlines and quotes)."""
    return json.dumps(text, ensure_ascii=False)[1:-1]


def fit_k(metric: Metric, sample: Sample, deps: Deps, window: int) -> tuple[int, dict[str, Any]]:
    """The largest k ≤ len(contexts) whose judge request fits ``window``, and the measurement.

    k is 0 when not even one context fits. Metrics without a window (their prompts do not hold
    the contexts) keep every context.
    """
    if metric.window is None:
        return len(sample.contexts), {}
    spec = metric.window(sample, deps)
    model = deps.judge
    fixed = sum(prompt_tokens(model, m) + MESSAGE_OVERHEAD_TOKENS for m in spec.messages)
    sizes = [_context_tokens(model, c) for c in sample.contexts]
    budget = window - deps.max_output_tokens
    k, used = 0, fixed
    for size in sizes:
        # Joined contexts add up (plus the "\n" between two); one per prompt, the largest counts.
        grown = used + size + (1 if k else 0) if spec.mode == "joined" else max(used, fixed + size)
        if grown > budget:
            break
        k, used = k + 1, grown
    info = {
        "window": window,
        "reserved_output": deps.max_output_tokens,
        "prompt_tokens": used,
        "mode": spec.mode,
        "k_max": len(sizes),
    }
    return k, info


def build_samples(ctx: StageContext) -> tuple[list[Sample], dict[str, str]]:
    """One sample per question with its top-k contexts, and why a question has no answer."""
    questions = ctx.run.questions(ctx.ids)
    answers = ctx.run.answers(ctx.ids)
    refs = ctx.run.ground_truth(ctx.ids)
    candidates = ctx.run.candidates(ids=ctx.ids)
    nuggets = question_nuggets(ctx)
    samples, no_answer = [], {}
    top_k = ctx.config.score.top_k
    for q in questions:
        answer = answers.get(q.question_id, {})
        if answer.get("status") != "ok":
            no_answer[q.question_id] = (
                f"no response (answer {answer.get('status', 'missing')}: {answer.get('error')})"
            )
        ref_row = refs.get(q.question_id)
        reference = (
            ref_row["reference"]
            if ref_row and ref_row["status"] in {"ok", "partial"}
            else q.reference
        )
        pool = candidates.get(q.question_id, [])
        cands = pool[:top_k]
        found = (nuggets or {}).get(q.question_id, ([], "no nuggets row for this question"))
        gold = q.reference_contexts
        if gold is None and any(c["gold_relevant"] is not None for c in pool):
            gold = [c["text"] for c in pool if c["gold_relevant"]]
        samples.append(
            Sample(
                question_id=q.question_id,
                question=q.question,
                language=q.language,
                response=answer.get("response"),
                reference=reference,
                contexts=[c["text"] for c in cands],
                context_ids=[c["context_id"] for c in cands],
                reference_contexts=gold,
                reference_context_ids=q.reference_context_ids,
                citation_ids=answer.get("citation_ids"),
                nuggets=None if nuggets is None else found[0],
                nuggets_note=None if nuggets is None else found[1],
            )
        )
    return samples, no_answer


def question_nuggets(
    ctx: StageContext,
) -> dict[str, tuple[list[dict[str, Any]], str | None]] | None:
    """Each question's nuggets (in rank order) and why its list is empty or incomplete.

    None when the run has no nuggets table.
    """
    if not ctx.run.has("nuggets"):
        return None
    out: dict[str, tuple[list[dict[str, Any]], str | None]] = {}
    rows = ctx.run.rows("nuggets", ctx.ids)
    for row in sorted(rows, key=lambda r: (r["question_id"], r["nugget_index"] or 0)):
        note = row["reason"] or (None if row["status"] == "ok" else row["status"])
        found, _ = out.setdefault(row["question_id"], ([], note))
        if row["text"] is not None:
            found.append(
                {
                    "text": row["text"],
                    "importance": row["importance"],
                    "context_ids": list(row["context_ids"] or []),
                }
            )
    return out


def make_deps(ctx: StageContext) -> Deps:
    """The models and options the metrics of this run use."""
    models = ctx.config.models
    return Deps(
        gateway=ctx.gateway,
        judge=ctx.judge,
        embedder=models.embedder_model,
        options=ctx.config.score.model_dump(),
        temperature=models.temperature,
        max_output_tokens=models.max_output_tokens,
        window=ctx.window(),
        english_only_embedder=models.embedder_model == OFFLINE_EMBEDDER,
    )


def _prompt_language(sample: Sample) -> str:
    return "zh" if sample.language == "zh" else "en"


async def score_one(
    m: Metric, s: Sample, deps: Deps, window: int, no_answer: str | None = None
) -> dict[str, Any]:
    """Score one sample: a row dict with status ``ok``, ``failed`` or ``skipped`` (never raises)."""
    reads_contexts = "contexts" in m.inputs
    row: dict[str, Any] = {
        "question_id": s.question_id,
        "metric": m.name,
        "judge": deps.judge if m.needs_llm else None,
        "k_used": len(s.contexts) if reads_contexts else None,
    }
    args: dict[str, Any] = {}
    if m.needs_llm:
        args["prompt_language"] = _prompt_language(s)
    steps: list[dict[str, Any]] = []
    raw: list[str] = []
    # Hundreds of rows start at once; yielding here lets the calls already in flight finish in
    # between, instead of all waiting until every row has rendered its first prompt.
    await asyncio.sleep(0)
    try:
        if no_answer is not None and "response" in m.inputs:
            raise Skip(no_answer)
        missing = m.missing(s)
        if missing:
            raise Skip(f"no {missing} for this question")
        if reads_contexts and m.needs_llm:
            k, fit = fit_k(m, s, deps, window)
            args["fit"] = fit
            row["k_used"] = k
            if k == 0:
                raise Skip(
                    f"the judge's window ({window} tokens, {deps.max_output_tokens} kept for the "
                    f"answer) cannot hold the prompt with even one context"
                )
            s = replace(s, contexts=s.contexts[:k], context_ids=s.context_ids[:k])
        with deps.gateway.item_scope(keep_raw=m.needs_llm) as raw, trace() as steps:
            outcome = await m.score(s, deps)
        args.update(outcome.args)
        reason: Any = outcome.reason
        if m.needs_llm:
            reason = {"metric": outcome.reason, "steps": steps}
        row.update(metric_args=dumps(args), reason=None if reason is None else dumps(reason))
        if outcome.value is None or math.isnan(outcome.value):
            return {
                **row,
                "status": "failed",
                "error": "the metric produced no value",
                "reason": dumps(
                    {"metric": outcome.reason, "steps": steps, "judge_replies": raw[:KEEP_REPLIES]}
                ),
            }
        return {**row, "value": float(outcome.value), "status": "ok"}
    except Skip as exc:
        return {
            **row,
            "status": "skipped",
            "error": str(exc),
            "metric_args": dumps(args),
            "reason": dumps({"steps": steps}) if steps else None,
        }
    except Exception as exc:  # a row's failure is recorded; the batch goes on
        reason = {"steps": steps, "judge_replies": raw[:KEEP_REPLIES]} if m.needs_llm else None
        return {
            **row,
            "status": "failed",
            "error": redact(f"{type(exc).__name__}: {exc}")[:2000],
            "metric_args": dumps(args),
            "reason": dumps(reason) if reason else None,
        }


async def score_rows(
    m: Metric,
    samples: list[Sample],
    deps: Deps,
    *,
    window: int,
    no_answer: dict[str, str] | None = None,
    limit: int = 32,
    on_row: Callable[[], None] | None = None,
) -> list[dict[str, Any]]:
    """Score every sample with ``m``, ``limit`` rows in flight; rows in input order."""
    no_answer = no_answer or {}

    async def one(s: Sample) -> dict[str, Any]:
        try:
            return await score_one(m, s, deps, window, no_answer.get(s.question_id))
        finally:
            if on_row is not None:
                on_row()

    return await gather_limited(samples, one, limit=limit)


def metric_for(ctx: StageContext, name: str) -> Metric:
    """The metric ``name`` of this run's config; a clear config error when there is none."""
    try:
        return resolve(name, ctx.config.score.model_dump())
    except KeyError as exc:
        raise ConfigError(f"score.metrics: {exc.args[0]}") from None


async def score_metric(ctx: StageContext, part: str) -> list[str]:
    """Score one metric on the context's questions; writes the part table ``scores/<part>``.

    ``part`` is the metric's name, or ``<metric>@<batch>`` for one batch of the questions.
    """
    name = split_part(part)[0]
    assert name is not None
    m = metric_for(ctx, name)
    samples, no_answer = build_samples(ctx)
    deps = make_deps(ctx)
    with progress.bar(f"score: {part}", len(samples)) as bar:
        rows = await score_rows(
            m,
            samples,
            deps,
            window=ctx.window(),
            no_answer=no_answer,
            limit=in_flight(ctx),
            on_row=bar.advance,
        )
    rows = [{"run_id": ctx.run.run_id, **r} for r in rows]
    out = f"scores/{part}"
    ctx.run.write(out, to_table(rows, SCORES))
    return [out]


def score_parts(config: RunConfig, batches: list[str]) -> list[str]:
    """One part per metric, and per batch when the questions are batched (metric-major)."""
    chosen: list[str | None] = list(batches) or [None]
    return [part_name(m, b) for m in config.score.metrics for b in chosen]


def combine_scores(ctx: StageContext, parts: list[str]) -> list[str]:
    """Concatenate the parts (metric × batch) into ``scores``."""
    return combine_parts(ctx, ["scores"], parts)


def reasons(row: dict[str, Any]) -> Any:
    """The decoded reason column of a score row."""
    return json.loads(row["reason"]) if row.get("reason") else None


__all__ = [
    "build_samples",
    "combine_scores",
    "fit_k",
    "forget_counts",
    "make_deps",
    "metric_for",
    "prompt_tokens",
    "reasons",
    "score_metric",
    "score_one",
    "score_parts",
    "score_rows",
]
