"""Scoring: metrics over samples, each row ``ok``, ``failed`` with the error or ``skipped``.

Each metric's rows are scored concurrently (the gateway bounds the calls in flight), each in its
own try/except, in its own item scope (the judge's raw replies kept for a failed row) and its own
trace (so the row keeps the judge's statements, verdicts and ratings).

k starts at the configured top-k and is reduced until the metric's largest judge request fits
the judge's window: the request is rendered with the row's own question, answer and reference,
in its language, with the gateway's schema message, and its tokens are counted; the contexts'
tokens are added as they appear in the prompt (JSON-escaped), all of them for a prompt that
joins the contexts, the largest for one that takes them one at a time. The k used is kept on
every row that reads contexts, the measurement in its ``metric_args``.

A judge reply that cannot be used is never a silent NaN or 0. The score stage, calibration and
the dry run call these functions with explicit arguments; none reads a stage's context.

With judge repeats or a jury (:class:`Panel`), a judged metric scores each row once per
(judge, repeat): each repeat's calls are independent samples with their own memo keys
(:func:`ragaudit.cache.judge_repeat`). The row keeps every sample and its judge, and its value
is their aggregate (mean, median or majority); it fails only when every sample failed.

On a turn labelled with its answerability, a metric declared ``conditioned`` is scored by
MTRAG's rule (:func:`ragaudit.metrics.answerability_rule`), here, once for every such metric: the
judge's refusal check of the answer first, then the rule's value (the metric not asked) or the
metric's own. The row keeps the label (``answerability``), the check's verdicts (its
``metric_args``) and, when the rule set its value, why (``conditioned``). A set without labels
is scored exactly as before.
"""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Any, Literal

from ragaudit import noise
from ragaudit.cache import KeyRejected, count_text, judge_repeat
from ragaudit.cache import forget_counts as forget_cached_counts
from ragaudit.concurrency import gather_limited
from ragaudit.config import ENGLISH_ONLY_EMBEDDERS, SAMPLING_TEMPERATURE, RunConfig
from ragaudit.dataset import Question
from ragaudit.judging import Judge
from ragaudit.metrics import (
    Deps,
    Metric,
    Outcome,
    Sample,
    Skip,
    condition_on_answerability,
    is_conditioned,
    trace,
)
from ragaudit.schemas import dumps
from ragaudit.secrets import redact

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


def build_samples(
    questions: Sequence[Question],
    answers: Mapping[str, dict[str, Any]],
    references: Mapping[str, dict[str, Any]],
    candidates: Mapping[str, list[dict[str, Any]]],
    top_k: int,
    nuggets: Mapping[str, tuple[list[dict[str, Any]], str | None]] | None = None,
) -> tuple[list[Sample], dict[str, str]]:
    """One sample per question with its top-k contexts, and why a question has no answer.

    ``answers`` and ``references`` are the answer and ground-truth rows by question id;
    ``candidates`` each question's ordered candidate rows; ``nuggets`` each question's nuggets
    and why its list is empty or incomplete (None: the run has no nuggets table).
    """
    samples, no_answer = [], {}
    for q in questions:
        answer = answers.get(q.question_id, {})
        if answer.get("status") != "ok":
            no_answer[q.question_id] = (
                f"no response (answer {answer.get('status', 'missing')}: {answer.get('error')})"
            )
        ref_row = references.get(q.question_id)
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
        label, source, label_error = answerability_of(q, ref_row)
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
                answerability=label,
                answerability_source=source,
                answerability_error=label_error,
            )
        )
    return samples, no_answer


def answerability_of(
    q: Question, ground_truth: Mapping[str, Any] | None
) -> tuple[str | None, str | None, str | None]:
    """The turn's answerability label, its source and why the judge gave none.

    The ground_truth row's (given or judged, written by that stage), else the question set's
    own label; ``(None, None, None)`` for a question that has neither (never conditioned).
    """
    source = (ground_truth or {}).get("answerability_source")
    if source is not None:
        assert ground_truth is not None
        label = ground_truth.get("answerability")
        error = None if label is not None else ground_truth.get("answerability_reason")
        return label, source, error
    if q.answerability is not None:
        return q.answerability, "given", None
    return None, None, None


def make_deps(config: RunConfig, judge: Judge) -> Deps:
    """The models and options the metrics of a run of ``config`` use, asking ``judge``.

    The judge's gateway is None for a dry run, which calls nothing.
    """
    embedder = config.models.embedder_model
    return Deps(
        llm=judge,
        embedder=embedder,
        options=config.score.model_dump(),
        english_only_embedder=embedder in ENGLISH_ONLY_EMBEDDERS,
    )


Aggregate = Literal["mean", "median", "majority"]


@dataclass(frozen=True)
class Panel:
    """Who judges a metric's rows, and how often: each judge's deps and window, the repeats."""

    judges: tuple[tuple[Deps, int], ...]
    """Each grading model's deps and its context window (one: the judge alone)."""
    repeats: int = 1
    """Independent samples of every judge request per judge."""
    temperature: float = SAMPLING_TEMPERATURE
    """Temperature of the repeats after the first."""
    aggregate: Aggregate = "mean"
    """How a row's samples become its value."""

    @property
    def samples(self) -> int:
        """Samples per judged row: judges × repeats."""
        return len(self.judges) * self.repeats


def make_panel(config: RunConfig, judge: Judge, metric: str, repeats: int | None = None) -> Panel:
    """The panel of ``metric`` in a run of ``config``: every grader, its repeats, its aggregate.

    ``judge`` is the run's judge; a jury's other members are asked with its gateway and limits
    and their own windows. ``repeats`` overrides the config's.
    """
    graders = [judge.member(config.models, model) for model in config.models.graders]
    judges = tuple((make_deps(config, g), g.window) for g in graders)
    return Panel(
        judges=judges,  # type: ignore[arg-type]  # a run's judges always have their window
        repeats=config.models.judge_repeats if repeats is None else repeats,
        temperature=config.score.sampling_temperature,
        aggregate=config.score.aggregate.get(metric, "mean"),
    )


def combine_samples(parts: Sequence[dict[str, Any]], how: Aggregate = "mean") -> dict[str, Any]:
    """One score row from a row's (judge, repeat) sample rows, in panel order.

    The value aggregates the samples scored ``ok``; the row fails only when every sample
    failed (a failed sample is null in ``samples`` and counted in ``error``), and is skipped
    when every sample was (a skip depends on the row, not on the judge's answer). The reasons,
    k and arguments shown are those of the first sample scored ``ok``.
    """
    if len(parts) == 1:
        return dict(parts[0])
    ok = [p for p in parts if p["status"] == "ok"]
    failed = [p for p in parts if p["status"] == "failed"]
    if not ok and not failed:
        return dict(parts[0])
    first = dict(ok[0] if ok else failed[0])
    judges = [p["judge"] for p in parts]
    args = json.loads(first.get("metric_args") or "{}")
    args["samples"] = {
        "judges": list(dict.fromkeys(judges)),
        "samples": len(parts),
        "aggregate": how,
        "failed": len(failed),
        "skipped": len(parts) - len(ok) - len(failed),
    }
    first.update(
        judge=", ".join(dict.fromkeys(judges)),
        metric_args=dumps(args),
        samples=[p.get("value") if p["status"] == "ok" else None for p in parts],
        sample_judges=judges,
    )
    if not ok:
        first["error"] = f"every judge sample failed ({len(failed)}); the first: {first['error']}"
        return first
    value = float(noise.aggregate([[p["value"]] for p in ok], how)[0])
    note = None
    if len(ok) < len(parts):
        # Honest about what the value rests on: ok, but on fewer samples than asked.
        note = f"{len(parts) - len(ok)} of {len(parts)} judge samples not scored"
        if failed:
            note += f"; the first failure: {failed[0]['error']}"
    first.update(value=value, status="ok", error=note)
    return first


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
    gated = False
    # Hundreds of rows start at once; yielding here lets the calls already in flight finish in
    # between, instead of all waiting until every row has rendered its first prompt.
    await asyncio.sleep(0)
    try:
        if no_answer is not None and "response" in m.inputs:
            raise Skip(no_answer)
        gated = is_conditioned(m, s, deps)
        # One scope and trace for the row: the refusal check's step and replies sit with the
        # metric's own.
        with deps.gateway.item_scope(keep_raw=m.needs_llm or gated) as raw, trace() as steps:
            outcome = None
            if gated:
                row.update(answerability=s.answerability, conditioned=None, judge=deps.judge)
                ruled = await condition_on_answerability(s, deps)
                args["answerability"] = ruled.args
                if ruled.value is not None:
                    # The rule settles the row: the metric's own value would not count.
                    row["conditioned"] = ruled.why
                    outcome = Outcome(ruled.value)
            if outcome is None:
                outcome = await _own_score(m, s, deps, window, row, args)
        args.update(outcome.args)
        reason: Any = outcome.reason
        if m.needs_llm or gated:
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
    except KeyRejected:
        raise  # every row would be refused: the stage ends at the first
    except Exception as exc:  # a row's failure is recorded; the batch goes on
        judged = m.needs_llm or gated
        reason = {"steps": steps, "judge_replies": raw[:KEEP_REPLIES]} if judged else None
        return {
            **row,
            "status": "failed",
            "error": redact(f"{type(exc).__name__}: {exc}")[:2000],
            "metric_args": dumps(args),
            "reason": dumps(reason) if reason else None,
        }


async def _own_score(
    m: Metric, s: Sample, deps: Deps, window: int, row: dict[str, Any], args: dict[str, Any]
) -> Outcome:
    """The metric's own score of ``s``, its contexts fitted to the window (k kept on the row).

    Raises:
        Skip: a required input is missing, or not even one context fits.
    """
    missing = m.missing(s)
    if missing:
        raise Skip(f"no {missing} for this question")
    if "contexts" in m.inputs and m.needs_llm:
        k, fit = fit_k(m, s, deps, window)
        args["fit"] = fit
        row["k_used"] = k
        if k == 0:
            raise Skip(
                f"the judge's window ({window} tokens, {deps.max_output_tokens} kept for the "
                f"answer) cannot hold the prompt with even one context"
            )
        s = replace(s, contexts=s.contexts[:k], context_ids=s.context_ids[:k])
    return await m.score(s, deps)


async def score_rows(
    m: Metric,
    samples: list[Sample],
    deps: Deps,
    *,
    window: int,
    no_answer: dict[str, str] | None = None,
    limit: int = 32,
    on_row: Callable[[], None] | None = None,
    panel: Panel | None = None,
) -> list[dict[str, Any]]:
    """Score every sample with ``m``, ``limit`` rows in flight; rows in input order.

    With a ``panel`` (judges and repeats), a judged metric's row is scored once per (judge,
    repeat) and combined (:func:`combine_samples`); ``deps`` and ``window`` then serve only a
    metric that needs no judge, which is scored once.
    """
    no_answer = no_answer or {}
    # A panel of one sample still names the model: a jury of one is not the judge.
    judged = panel is not None and m.needs_llm

    async def repeat(s: Sample, judge: Deps, fits: int, r: int) -> dict[str, Any]:
        # Set inside the sample's own task: the repeat reaches only this sample's calls.
        assert panel is not None
        with judge_repeat(r, panel.temperature):
            return await score_one(m, s, judge, fits, no_answer.get(s.question_id))

    async def scored(s: Sample) -> dict[str, Any]:
        if not judged:
            return await score_one(m, s, deps, window, no_answer.get(s.question_id))
        assert panel is not None
        parts = await asyncio.gather(
            *(
                repeat(s, judge, fits, r)
                for judge, fits in panel.judges
                for r in range(panel.repeats)
            )
        )
        return combine_samples(parts, panel.aggregate)

    async def one(s: Sample) -> dict[str, Any]:
        row = await scored(s)
        # Counted once it has a row: a row cancelled by a signal was never scored, and a bar
        # counting it would read "5/5" over a stage that wrote nothing.
        if on_row is not None:
            on_row()
        return row

    return await gather_limited(samples, one, limit=limit)


__all__ = [
    "KEEP_REPLIES",
    "MESSAGE_OVERHEAD_TOKENS",
    "Aggregate",
    "Panel",
    "build_samples",
    "combine_samples",
    "fit_k",
    "forget_counts",
    "make_deps",
    "make_panel",
    "prompt_tokens",
    "score_one",
    "score_rows",
]
