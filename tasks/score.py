"""Stage 4, score: one task per metric over the batch, on the system's top-k contexts.

k starts at the configured top-k and is reduced until the judge's prompt fits its window
(the users' rule); the k used is kept on every row. Every row ends ``ok``, ``failed`` with
the error, or ``skipped`` with the reason: a judge reply that cannot be used is never a
silent NaN or 0.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from typing import Any

import pyarrow as pa

from ragaudit import progress
from ragaudit.metrics import METRICS, Deps, Sample, Skip
from ragaudit.schemas import SCORES, to_table
from ragaudit.secrets import redact
from ragaudit.tasks._common import StageContext, count_tokens, dumps, gather_limited
from ragaudit.tasks.collect import read_questions

# ragas's metric prompts (instruction + few-shot examples) take about this many tokens.
PROMPT_OVERHEAD_TOKENS = 1500


def fit_k(ctx: StageContext, question: str, response: str, reference: str, contexts: list[str]) -> int:
    """The largest k ≤ len(contexts) whose prompt fits the judge's window (at least 1)."""
    model = ctx.judge
    budget = ctx.window() - ctx.config.models.max_output_tokens - PROMPT_OVERHEAD_TOKENS
    fixed = count_tokens(model, f"{question}\n{response}\n{reference}")
    sizes = [count_tokens(model, c) for c in contexts]
    k = len(contexts)
    while k > 1 and fixed + sum(sizes[:k]) > budget:
        k -= 1
    return k


def build_samples(ctx: StageContext) -> tuple[list[Sample], dict[str, str]]:
    """One sample per question, and why a question has no answer (question id → reason)."""
    questions = read_questions(ctx)
    answers = {r["question_id"]: r for r in ctx.run.read("answers").to_pylist()}
    refs = {r["question_id"]: r for r in ctx.run.read("ground_truth").to_pylist()} if ctx.run.has("ground_truth") else {}
    candidates: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in ctx.run.read("candidates").to_pylist():
        candidates[row["question_id"]].append(row)
    samples, no_answer = [], {}
    top_k = ctx.config.score.top_k
    for q in questions:
        answer = answers.get(q.question_id, {})
        if answer.get("status") != "ok":
            no_answer[q.question_id] = f"no response (answer {answer.get('status', 'missing')}: {answer.get('error')})"
        ref_row = refs.get(q.question_id)
        reference = ref_row["reference"] if ref_row and ref_row["status"] in {"ok", "partial"} else q.reference
        cands = sorted(candidates[q.question_id], key=lambda c: c["engine_rank"])[:top_k]
        gold = q.reference_contexts
        if gold is None and any(c["gold_relevant"] is not None for c in candidates[q.question_id]):
            gold = [c["text"] for c in candidates[q.question_id] if c["gold_relevant"]]
        k = fit_k(ctx, q.question, answer.get("response") or "", reference or "", [c["text"] for c in cands])
        samples.append(
            Sample(
                question_id=q.question_id,
                question=q.question,
                language=q.language,
                response=answer.get("response"),
                reference=reference,
                contexts=[c["text"] for c in cands[:k]],
                context_ids=[c["context_id"] for c in cands[:k]],
                reference_contexts=gold,
                reference_context_ids=q.reference_context_ids,
            )
        )
    return samples, no_answer


async def score_metric(ctx: StageContext, name: str) -> list[str]:
    """Score metric ``name`` on every question; writes the part table ``scores/<name>``."""
    m = METRICS[name]
    samples, no_answer = build_samples(ctx)
    deps = Deps(
        gateway=ctx.gateway,
        judge=ctx.judge,
        embedder=ctx.config.models.embedder_model,
        options=ctx.config.score.model_dump(),
    )
    base = {"run_id": ctx.run.run_id, "metric": name, "judge": ctx.judge if m.needs_llm else None}

    async def one(s: Sample) -> dict[str, Any]:
        row = {**base, "question_id": s.question_id, "k_used": len(s.contexts)}
        missing = m.missing(s)
        try:
            if "response" in m.inputs and s.question_id in no_answer:
                raise Skip(no_answer[s.question_id])
            if missing:
                raise Skip(f"no {missing} for this question")
            with ctx.gateway.item_scope(keep_raw=m.needs_llm) as raw:
                outcome = await m.score(s, deps)
            reason = {"metric": outcome.reason, "judge_replies": raw[:20]} if m.needs_llm else outcome.reason
            row.update(metric_args=dumps(outcome.args), reason=dumps(reason))
            if outcome.value is None or math.isnan(outcome.value):
                return {**row, "status": "failed", "error": "the metric produced no value (judge output unusable)"}
            return {**row, "value": outcome.value, "status": "ok"}
        except Skip as exc:
            return {**row, "status": "skipped", "error": str(exc)}
        except Exception as exc:  # a row's failure is recorded; the batch goes on
            return {**row, "status": "failed", "error": redact(f"{type(exc).__name__}: {exc}")[:2000]}
        finally:
            bar.advance()

    with progress.bar(f"score: {name}", len(samples)) as bar:
        rows = await gather_limited(samples, one, limit=max(4, ctx.config.models.concurrency * 2))
    part = f"scores/{name}"
    ctx.run.write(part, to_table(rows, SCORES))
    return [part]


def combine_scores(ctx: StageContext, metrics: list[str]) -> str:
    """Concatenate the per-metric parts into ``scores``."""
    parts = [ctx.run.read(f"scores/{m}") for m in metrics]
    table = pa.concat_tables(parts) if parts else SCORES.empty_table()
    ctx.run.write("scores", table.cast(SCORES))
    return "scores"


def reasons(row: dict[str, Any]) -> Any:
    """The decoded reason column of a score row."""
    return json.loads(row["reason"]) if row.get("reason") else None


__all__ = ["build_samples", "combine_scores", "fit_k", "score_metric"]
